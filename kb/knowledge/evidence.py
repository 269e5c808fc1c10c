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

from kb.model.entry import Evidence, Problem
from kb.model.record import asdict, fields
from kb.paths import evidence_files

_FIELDS = set(fields(Evidence))


def load_evidence(root: Path) -> dict[str, list[Evidence]]:
    """The records under root, by entry, newest first (damaged ones left out: see read_evidence)."""
    return read_evidence(root)[0]


def read_evidence(
    root: Path, with_output: bool = True
) -> tuple[dict[str, list[Evidence]], list[Problem]]:
    """The records under root, by entry, newest first, and a Problem for each record that cannot
    be read or breaks kb/knowledge/evidence.schema.json. A damaged record never stops a lookup,
    and is never skipped in silence: lint and every command report it. with_output=False leaves
    out the repros' outputs (a loaded knowledge base needs only the verdicts: the outputs are
    most of the records' bytes, and every lookup would unpickle them)."""
    out: dict[str, list[Evidence]] = {}
    problems: list[Problem] = []
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    validator = None
    for f in evidence_files(root):
        try:
            data = yaml.load(f.read_text(encoding="utf-8"), Loader=loader)
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
            mark = getattr(e, "problem_mark", None)
            line = mark.line + 1 if mark is not None else 1
            problems.append(_problem(f, line, f"cannot be read: {_one_line(e)}"))
            continue
        if validator is None:
            validator = _validator()
        errors = sorted(validator.iter_errors(data), key=lambda err: list(err.path))
        if errors:
            first = errors[0]
            where = ".".join(str(p) for p in first.path) or "top level"
            problems.append(_problem(f, 1, f"{where}: {first.message}"))
            continue
        if data["entry"] != f.parent.name:
            problems.append(
                _problem(f, 1, f"entry '{data['entry']}' in the folder of '{f.parent.name}'")
            )
            continue
        data = {k: v for k, v in data.items() if k in _FIELDS}
        data["matched"] = tuple(data.get("matched") or ())
        if not with_output:
            data.pop("output", None)
        out.setdefault(data["entry"], []).append(Evidence(**data))
    for evs in out.values():
        evs.sort(key=lambda e: e.date, reverse=True)
    return out, problems


def _validator():
    import json

    import jsonschema

    schema = json.loads((Path(__file__).parent / "evidence.schema.json").read_text())
    return jsonschema.Draft202012Validator(schema)


def _problem(f: Path, line: int, message: str) -> Problem:
    return Problem(
        str(f),
        line,
        1,
        "KB022",
        f"damaged evidence record: {message}",
        "re-run `kb verify ID --record` on that GPU, or delete the file",
    )


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())[:200]


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
