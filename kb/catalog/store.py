"""The mined templates on disk: one gzip'd JSON Lines file per source and version.

The first line of each file describes the source ({"meta": {...}}: project, version, where the
text was read, commit); every other line is one template (Template.to_json()). Files are
written sorted, with fixed gzip headers, so mining the same sources twice gives the same bytes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator

from kb.model.record import record

from .template import Template

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


@record(frozen=True)
class SourceInfo:
    """One mined source: `origin` says what was read (a repository snapshot, a wheel), `commit`
    its commit where there is one, `note` anything a reader of the figures must know."""

    source: str
    version: str
    origin: str = ""
    commit: str = ""
    note: str = ""
    count: int = 0
    file: str = ""

    def to_json(self) -> dict[str, object]:
        return {
            k: v
            for k, v in (
                ("source", self.source),
                ("version", self.version),
                ("origin", self.origin),
                ("commit", self.commit),
                ("note", self.note),
                ("count", self.count),
            )
            if v != ""
        }


@record(frozen=True)
class Catalog:
    sources: tuple[SourceInfo, ...]
    templates: tuple[Template, ...]

    def __repr__(self) -> str:  # not 37,000 templates
        return f"Catalog(sources={self.sources!r}, templates=<{len(self.templates)}>)"

    def of(self, source: str, version: str | None = None) -> list[Template]:
        return [
            t
            for t in self.templates
            if t.source == source and (version is None or t.version == version)
        ]


class CatalogError(Exception):
    """A data file that cannot be read: says which and why."""


def _record(d: dict[str, object], source: str, version: str) -> Template:
    code = d.get("code")
    return Template(
        source=source,
        version=version,
        text=str(d["text"]),
        file=str(d.get("file", "")),
        line=int(d.get("line", 0) or 0),  # type: ignore[call-overload]
        func=str(d.get("func", "")),
        op=str(d.get("op", "")),
        exc=str(d.get("exc", "")),
        kind=str(d.get("kind", "")),
        n=int(d.get("n", 1) or 1),  # type: ignore[call-overload]
        code=int(code) if isinstance(code, int) else None,
        api=str(d.get("api", "")),
    )


def read_file(path: str) -> tuple[SourceInfo, list[Template]]:
    try:
        import gzip  # only where the data files are read: a lookup reads the cached index

        with gzip.open(path, "rt", encoding="utf-8") as fh:
            first = fh.readline()
            meta = json.loads(first).get("meta") if first else None
            if not isinstance(meta, dict) or "source" not in meta or "version" not in meta:
                raise CatalogError(f"{path}: the first line is not a source description")
            src, ver = str(meta["source"]), str(meta["version"])
            templates = [_record(json.loads(line), src, ver) for line in fh if line.strip()]
    except (OSError, EOFError, json.JSONDecodeError, KeyError, ValueError, TypeError) as exc:
        raise CatalogError(f"{path}: {exc}") from None
    info = SourceInfo(
        source=src,
        version=ver,
        origin=str(meta.get("origin", "")),
        commit=str(meta.get("commit", "")),
        note=str(meta.get("note", "")),
        count=len(templates),
        file=os.path.basename(path),
    )
    return info, templates


def data_files(data_dir: str | None = None) -> list[str]:
    folder = data_dir or DATA_DIR
    if not os.path.isdir(folder):
        return []
    return sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".jsonl.gz"))


_CACHE: dict[str, Catalog] = {}


def load(data_dir: str | None = None) -> Catalog:
    """Every source in the data folder (kb/catalog/data unless given), read once per process."""
    folder = data_dir or DATA_DIR
    if folder in _CACHE:
        return _CACHE[folder]
    infos: list[SourceInfo] = []
    templates: list[Template] = []
    for path in data_files(folder):
        info, recs = read_file(path)
        infos.append(info)
        templates.extend(recs)
    cat = Catalog(sources=tuple(infos), templates=tuple(templates))
    _CACHE[folder] = cat
    return cat


def _sort_key(t: Template) -> tuple[str, int, str, str, str]:
    return (t.file, t.line, t.text, t.exc, t.kind)


def dumps(info: SourceInfo, templates: Iterable[Template]) -> bytes:
    """The file's bytes: the same templates always give the same bytes (sorted, mtime 0)."""
    recs = sorted(templates, key=_sort_key)
    meta = {"meta": dict(info.to_json(), count=len(recs))}
    lines = [json.dumps(meta, sort_keys=True, ensure_ascii=False, separators=(",", ":"))]
    lines.extend(
        json.dumps(t.to_json(), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        for t in recs
    )
    raw = ("\n".join(lines) + "\n").encode("utf-8")
    import gzip
    import io

    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as gz:
        gz.write(raw)
    return buf.getvalue()


def file_name(source: str, version: str) -> str:
    safe = "".join(c if c.isalnum() or c in ".-_" else "_" for c in f"{source}-{version}")
    return safe + ".jsonl.gz"


def write(info: SourceInfo, templates: Iterable[Template], data_dir: str | None = None) -> str:
    folder = data_dir or DATA_DIR
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, file_name(info.source, info.version))
    with open(path, "wb") as fh:
        fh.write(dumps(info, templates))
    _CACHE.pop(folder, None)
    return path


def iter_all(data_dir: str | None = None) -> Iterator[Template]:
    yield from load(data_dir).templates
