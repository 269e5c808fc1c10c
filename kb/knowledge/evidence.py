"""Verification evidence: one small YAML file per entry and environment, under evidence/<id>/.

Diff-friendly on purpose: re-running `kb verify --record` on the same GPU and torch rewrites the
same file, so a change in the record is a change in what the hardware said.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import yaml

from kb.model.entry import Evidence
from kb.model.record import asdict, fields
from kb.paths import evidence_files

_FIELDS = set(fields(Evidence))


def load_evidence(root: Path) -> dict[str, list[Evidence]]:
    out: dict[str, list[Evidence]] = {}
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    for f in evidence_files(root):
        try:
            data = yaml.load(f.read_text(encoding="utf-8"), Loader=loader)
            data = {k: v for k, v in data.items() if k in _FIELDS}
            data["matched"] = tuple(data.get("matched") or ())
            data["date"] = str(data.get("date", ""))
            ev = Evidence(**data)
        except Exception:  # a damaged record is skipped, never fatal to a lookup
            continue
        out.setdefault(ev.entry, []).append(ev)
    for evs in out.values():
        evs.sort(key=lambda e: e.date, reverse=True)
    return out


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-")


def record_path(root: Path, ev: Evidence) -> Path:
    return root / ev.entry / f"{slug(ev.gpu)}--torch-{slug(ev.torch)}.yaml"


class _Dumper(yaml.SafeDumper):
    """safe_dump, with a many-line text (a repro's output) as a literal block: read and diffed
    line by line, as it was printed."""


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _text)


def write_evidence(root: Path, ev: Evidence) -> Path:
    path = record_path(root, ev)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = asdict(ev)
    data["matched"] = list(ev.matched)
    if not ev.output:
        del data["output"]  # a record without output reads as before
    text = yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".ev-")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)  # never a half-written record
    return path
