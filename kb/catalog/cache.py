"""The catalog built once and kept: a compact index for lookups and the coverage figures, cached
in kb's state folder (KB_HOME) under a key made from what they are built from.

Building costs seconds (reading 37,000 templates, mapping each through families.yaml, indexing
their words); a lookup that needs the catalog must pay milliseconds. So the build is pickled in
two files per configuration:

- `catalog-<key>.index.pickle`: the matcher's word index as a dict of packed template numbers,
  and every template (its text, where it comes from, its mapping) as one string with offsets.
  Unpickling makes a few thousand objects, not a few hundred thousand; a template becomes an
  object only when a line's words pick it (`CatalogReader`).
- `catalog-<key>.coverage.pickle`: `kb coverage`'s figures (coverage.Coverage).

The key is what stat says of the data files and families.yaml, and the CUDA codes the entries
own (the `codes: true` family maps by them): any change builds both again (`<key>` in the names
is its CRC; each file holds the key whole). An unwritable state folder still works, built in
memory for the process. The slowest part of a build, mapping every template through
families.yaml, is kept beside the data (data/mapping.json.gz, written by
`scripts/mine_catalog.py --mapping`) and used when its fingerprint fits the inputs.
"""

from __future__ import annotations

import json
import os
from array import array
from collections.abc import Callable, Iterable, Sequence

from . import families as families_mod
from .families import FAMILIES_FILE, Families, Mapping
from .matcher import _STOP, _TOKEN, Matcher, _keyable
from .store import Catalog, SourceInfo, data_files
from .template import Template

FORMAT = 2  # the pickled shapes: change it when they change (2: kb.model.record records)
MAPPING_FORMAT = 2  # data/mapping.json.gz's shape and what its fingerprint covers
BY_CODE = -2  # in data/mapping.json.gz: mapped when read, by the codes the entries own now
STALE_S = 30 * 86400  # other configurations' cache files unused this long are removed

Codes = dict[tuple[str, int], str]


def codes_of(entries: Iterable[object]) -> Codes:
    """(api, value) -> entry id, from loaded entries (kb.model.Entry: `id`, `codes`), first
    owner wins as in the engine."""
    out: Codes = {}
    for e in entries:
        for c in getattr(e, "codes", ()):
            out.setdefault((str(c.api), int(c.value)), str(getattr(e, "id", "")))
    return out


def cache_key(codes: Codes, data_dir: str | None = None, families_file: str | None = None) -> str:
    """What this configuration is built from: stat of every input file, and the codes. The
    cache files are named by its CRC and hold it whole, which must match to the byte."""
    lines = [f"format {FORMAT}"]
    for path in [*data_files(data_dir), families_file or FAMILIES_FILE, FREQUENCY_FILE]:
        try:
            st = os.stat(path)
        except OSError:
            lines.append(f"missing {path}")
            continue
        lines.append(f"{st.st_size} {st.st_mtime_ns} {st.st_ino} {path}")
    lines += [f"{api} {value} {entry}" for (api, value), entry in sorted(codes.items())]
    return "\n".join(lines)


def _name(key: str) -> str:
    from zlib import crc32  # hashlib costs a cold start more than this needs

    return f"{crc32(key.encode('utf-8', 'surrogateescape')):08x}"


# ---------------------------------------------------------------- the compact index
def _mapping_json(m: Mapping | None) -> dict[str, object]:
    if m is None:
        return {}
    return {
        "entry": m.entry or "",
        "family": m.family,
        "confidence": m.confidence,
        "claims": m.claims,
    }


def _record(t: Template, m: Mapping | None) -> str:
    d = t.to_json()
    d["source"] = t.source
    d["version"] = t.version
    d["map"] = _mapping_json(m)
    return json.dumps(d, ensure_ascii=False, separators=(",", ":"))


class CompactIndex:
    """What CatalogReader needs, in few objects (unpickled in a few milliseconds): the index
    words ("\n"-joined `keys`; word k's template numbers are `postings[starts[k]:starts[k+1]]`)
    and the templates (template i is `blob[offsets[i]:offsets[i+1]]`, UTF-8, "need<TAB>head
    words<TAB>json"). The arrays are array('I') bytes."""

    def __init__(
        self,
        keys: str,
        starts: bytes,
        postings: bytes,
        offsets: bytes,
        blob: bytes,
        sources: tuple[dict[str, object], ...],
    ) -> None:
        self.keys = keys
        self.starts = starts
        self.postings = postings
        self.offsets = offsets
        self.blob = blob
        self.sources = sources

    @classmethod
    def build(
        cls,
        templates: Sequence[Template],
        mapping: Sequence[Mapping | None],
        sources: Iterable[SourceInfo],
    ) -> CompactIndex:
        """The same filing as Matcher.__init__ (each template under its two rarest head words
        and its rarest word overall; a candidate must show most of its head words)."""
        words_of: list[list[str]] = []
        df: dict[str, int] = {}
        for t in templates:
            words, _ = _keyable(t)
            words_of.append(words)
            for w in set(words):
                df[w] = df.get(w, 0) + 1

        def rank(w: str) -> tuple[int, int, int]:
            return (w in _STOP, df.get(w, 0), -len(w))

        index: dict[str, list[int]] = {}
        parts: list[bytes] = []
        offsets = array("I", [0])
        size = 0
        for i, (t, words) in enumerate(zip(templates, words_of)):
            head = words[:6]
            keys = sorted(set(head), key=rank)[:2] + sorted(set(words), key=rank)[:1]
            for k in set(keys):
                index.setdefault(k, []).append(i)
            head_set = sorted({w for w in head[:5] if w not in _STOP})
            need = max(1, min(3, len(head_set)))
            rec = f"{need}\t{' '.join(head_set)}\t{_record(t, mapping[i])}".encode()
            parts.append(rec)
            size += len(rec)
            offsets.append(size)
        names = sorted(index)
        starts = array("I", [0])
        postings = array("I")
        for k in names:
            postings.extend(index[k])
            starts.append(len(postings))
        return cls(
            "\n".join(names),
            starts.tobytes(),
            postings.tobytes(),
            offsets.tobytes(),
            b"".join(parts),
            tuple(s.to_json() for s in sources),
        )

    def __len__(self) -> int:
        return len(self.offsets) // 4 - 1


class _Templates(list):
    """The templates of a CompactIndex as Matcher reads them (`templates[i]`), each made on
    first use; the list itself stays empty."""

    def __init__(self, ix: CompactIndex) -> None:
        super().__init__()
        self.ix = ix
        self.offs = array("I")
        self.offs.frombytes(ix.offsets)
        self.made: dict[int, Template] = {}
        self.mapping: dict[int, Mapping | None] = {}  # id(template) -> its mapping
        # Heads read once: a warm engine meets the same common words' templates on most lines.
        self.heads: dict[int, tuple[int, list[str]]] = {}

    def head(self, i: int) -> tuple[int, list[str]]:
        """How many of its head words a line must show, and those words."""
        got = self.heads.get(i)
        if got is None:
            a = self.offs[i]
            rec = self.ix.blob[a : self.offs[i + 1]]
            t1 = rec.index(b"\t")
            t2 = rec.index(b"\t", t1 + 1)
            got = self.heads[i] = (int(rec[:t1]), rec[t1 + 1 : t2].decode().split())
        return got

    def __getitem__(self, i):
        t = self.made.get(i)
        if t is None:
            rec = self.ix.blob[self.offs[i] : self.offs[i + 1]]
            d = json.loads(rec[rec.index(b"\t", rec.index(b"\t") + 1) + 1 :])
            code = d.get("code")
            t = Template(
                source=str(d["source"]),
                version=str(d["version"]),
                text=str(d["text"]),
                file=str(d.get("file", "")),
                line=int(d.get("line", 0) or 0),
                func=str(d.get("func", "")),
                op=str(d.get("op", "")),
                exc=str(d.get("exc", "")),
                kind=str(d.get("kind", "")),
                n=int(d.get("n", 1) or 1),
                code=code if isinstance(code, int) else None,
                api=str(d.get("api", "")),
            )
            m = d.get("map") or {}
            self.mapping[id(t)] = (
                Mapping(
                    m["entry"] or None, str(m["family"]), str(m["confidence"]), bool(m["claims"])
                )
                if m
                else None
            )
            self.made[i] = t
        return t

    def __len__(self) -> int:
        return len(self.offs) - 1


class CatalogReader(Matcher):
    """A Matcher over a CompactIndex: the same matching (kb.catalog.matcher), read from the
    cached index, with each template's mapping at hand."""

    def __init__(self, ix: CompactIndex) -> None:  # no super().__init__: nothing to build
        self.ix = ix
        self._lazy = _Templates(ix)
        self.templates = self._lazy
        self._compiled = {}
        self._word = {k: n for n, k in enumerate(ix.keys.split("\n"))} if ix.keys else {}
        self._starts = array("I")
        self._starts.frombytes(ix.starts)
        self._postings = array("I")
        self._postings.frombytes(ix.postings)

    def __len__(self) -> int:
        return len(self._lazy)

    def candidates(self, text: str) -> list[int]:
        toks = set(_TOKEN.findall(text.lower()))
        seen: set[int] = set()
        out: list[int] = []
        for tok in toks:
            k = self._word.get(tok)
            if k is None:
                continue
            for i in self._postings[self._starts[k] : self._starts[k + 1]]:
                if i in seen:
                    continue
                seen.add(i)
                need, head = self._lazy.head(i)
                if sum(w in toks for w in head) >= need:
                    out.append(i)
        return out

    def mapping(self, t: Template) -> Mapping | None:
        """families.yaml's answer for a template this reader made."""
        return self._lazy.mapping.get(id(t))


# ---------------------------------------------------------------- building and caching
class _Mapped(Families):
    """Families answered from a mapping already worked out (coverage counts the same answers
    the lookup uses, without mapping every template twice)."""

    def __init__(self, by_template: dict[int, Mapping | None]) -> None:
        self._by = by_template

    def map(self, t: Template) -> Mapping | None:
        return self._by.get(id(t))


MAPPING_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "mapping.json.gz")
# coverage.FREQUENCY_FILE (not imported here: a lookup that reads the cache needs no coverage code)
FREQUENCY_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "frequency.json")


def fingerprint(data_dir: str | None = None, families_file: str | None = None) -> str:
    """What a mapping is worked out from, by content: the data files and families.yaml. The
    templates that carry a code (CUDA's) are kept out of it and mapped when read, so an entry
    that claims a code changes no committed file."""
    from hashlib import sha1

    h = sha1(f"mapping {MAPPING_FORMAT}".encode())
    for path in [*data_files(data_dir), families_file or FAMILIES_FILE]:
        with open(path, "rb") as fh:
            h.update(os.path.basename(path).encode() + b"\0" + fh.read())
    return h.hexdigest()


def map_all(cat: Catalog, codes: Codes, families_file: str | None = None) -> list[Mapping | None]:
    """families.yaml's answer for every template (seconds: every rule on every template)."""
    fams = families_mod.load(families_file, codes=codes)
    return [fams.map(t) for t in cat.templates]


def write_mapping(
    path: str | None = None, data_dir: str | None = None, families_file: str | None = None
) -> str:
    """Work out the mapping of every template with kb's own entries' codes and keep it beside
    the data (scripts/mine_catalog.py does, after mining or with --mapping): a first lookup
    that needs the catalog then skips the slowest part of building it. Same inputs, same bytes."""
    import gzip

    from . import store

    codes = families_mod.entry_codes()
    cat = store.load(data_dir)
    mapping = map_all(cat, codes, families_file)
    table: dict[tuple[str, str, str, bool], int] = {}
    of: list[int] = []
    for t, m in zip(cat.templates, mapping):
        if t.code is not None:
            of.append(BY_CODE)
            continue
        if m is None:
            of.append(-1)
            continue
        key = (m.entry or "", m.family, m.confidence, m.claims)
        of.append(table.setdefault(key, len(table)))
    doc = {
        "fingerprint": fingerprint(data_dir, families_file),
        "table": [list(k) for k in table],
        "of": of,
    }
    raw = json.dumps(doc, separators=(",", ":")).encode()
    out = path or MAPPING_FILE
    with open(out, "wb") as fh, gzip.GzipFile(filename="", mode="wb", fileobj=fh, mtime=0) as gz:
        gz.write(raw)
    return out


def shipped_mapping(
    cat: Catalog,
    codes: Codes,
    path: str | None = None,
    data_dir: str | None = None,
    families_file: str | None = None,
) -> list[Mapping | None] | None:
    """The mapping kept beside the data, when it was worked out from exactly these inputs; the
    templates that carry a code are mapped here, by the codes the entries own now."""
    import gzip

    try:
        with gzip.open(path or MAPPING_FILE, "rb") as fh:
            doc = json.loads(fh.read())
        if doc.get("fingerprint") != fingerprint(data_dir, families_file):
            return None
        table = [Mapping(e or None, str(f), str(c), bool(cl)) for e, f, c, cl in doc["table"]]
        of = doc["of"]
    except (OSError, EOFError, ValueError, KeyError, TypeError):
        return None
    if len(of) != len(cat.templates):
        return None
    out: list[Mapping | None] = []
    fams: Families | None = None
    for t, i in zip(cat.templates, of):
        if i == BY_CODE:
            if fams is None:
                fams = families_mod.load(families_file, codes=codes)
            out.append(fams.map(t))
        else:
            out.append(table[i] if i >= 0 else None)
    return out


def mapped(cat: Catalog, codes: Codes | None = None) -> Families:
    """families.yaml's answers for this catalog's templates (kb's own data and families), from
    the mapping kept beside the data when it is fresh (milliseconds), else worked out (seconds)."""
    if codes is None:
        codes = families_mod.entry_codes()
    mapping = shipped_mapping(cat, codes)
    if mapping is None:
        mapping = map_all(cat, codes)
    return _Mapped({id(t): m for t, m in zip(cat.templates, mapping)})


def build(
    codes: Codes, data_dir: str | None = None, families_file: str | None = None
) -> tuple[CompactIndex, object]:
    """The compact index and the coverage figures, from the data files and families.yaml."""
    from . import coverage, store

    cat: Catalog = store.load(data_dir)
    mapping = shipped_mapping(cat, codes, None, data_dir, families_file)
    if mapping is None:
        mapping = map_all(cat, codes, families_file)
    ix = CompactIndex.build(cat.templates, mapping, cat.sources)
    by = {id(t): m for t, m in zip(cat.templates, mapping)}
    cov = coverage.compute(cat, _Mapped(by), coverage.load_frequency())
    return ix, cov


def _read(path: str, key: str) -> object | None:
    from kb.knowledge import pickle_file

    data = pickle_file.read(path)
    if isinstance(data, dict) and data.get("key") == key and data.get("format") == FORMAT:
        return data.get("value")
    return None


def _write(path: str, key: str, value: object) -> bool:
    from kb.knowledge import pickle_file

    return pickle_file.write(path, {"format": FORMAT, "key": key, "value": value}) is None


def _clean(state: str, keep: str) -> None:
    """Remove other configurations' catalog caches nobody used for STALE_S."""
    import time

    try:
        names = os.listdir(state)
    except OSError:
        return
    cutoff = time.time() - STALE_S
    for name in names:
        if name.startswith("catalog-") and not name.startswith(f"catalog-{keep}."):
            path = os.path.join(state, name)
            try:
                if os.stat(path).st_mtime < cutoff:
                    os.unlink(path)
            except OSError:
                pass


_MEMO: dict[str, tuple[CompactIndex, object]] = {}


def shipped_tag(codes: Codes) -> str:
    """What a catalog file shipped in the wheel (kb.knowledge.shipped) was built for: this
    format and the CUDA codes the bundled entries own (the data files and families.yaml are in
    the installed package, which an install replaces together with it). A CRC of the codes:
    the header is one line."""
    from zlib import crc32

    text = "\n".join(f"{api} {value} {entry}" for (api, value), entry in sorted(codes.items()))
    return f"catalog {FORMAT} {crc32(text.encode()):08x}-{len(codes)}"


_SHIPPED_NAMES = {"index": "catalog.index.pickle", "coverage": "catalog.coverage.pickle"}


def _shipped(codes: Codes, part: str) -> object | None:
    """The part shipped in the wheel, when it was built for these codes (the bundled entries'
    own: a user's entry that claims a code makes a catalog of its own, in the state folder)."""
    from kb.knowledge import shipped

    return shipped.read(_SHIPPED_NAMES[part], shipped_tag(codes))


def write_shipped(folder: str, codes: Codes) -> list[str]:
    """Build both parts for these codes and write them as the wheel ships them (hatch_build.py);
    the names written."""
    from kb.knowledge import shipped

    ix, cov = build(codes)
    tag = shipped_tag(codes)
    roots = {"package": os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}
    for part, value in (("index", ix), ("coverage", cov)):
        shipped.write(os.path.join(folder, _SHIPPED_NAMES[part]), tag, value, roots)
    return list(_SHIPPED_NAMES.values())


def _built(
    state: str,
    codes: Codes,
    part: str,
    builder: Callable[[], tuple[CompactIndex, object]] | None = None,
) -> object:
    if builder is None:
        got = _shipped(codes, part)
        if got is not None:
            return got
    key = cache_key(codes)
    name = _name(key)
    got = _read(os.path.join(state, f"catalog-{name}.{part}.pickle"), key)
    if got is not None:
        return got
    memo = _MEMO.get(key)
    if memo is None:
        memo = _MEMO[key] = (builder or (lambda: build(codes)))()
    ix, cov = memo
    if _write(os.path.join(state, f"catalog-{name}.index.pickle"), key, ix):
        _write(os.path.join(state, f"catalog-{name}.coverage.pickle"), key, cov)
        _clean(state, name)
    return ix if part == "index" else cov


def index(state: str, codes: Codes) -> CompactIndex:
    """The compact index for these entries' codes: from the cache, else built (and cached)."""
    got = _built(state, codes, "index")
    assert isinstance(got, CompactIndex)
    return got


def coverage_figures(state: str, codes: Codes) -> object:
    """coverage.Coverage for these entries' codes: from the cache, else built (and cached)."""
    return _built(state, codes, "coverage")


__all__ = [
    "CatalogReader",
    "CompactIndex",
    "build",
    "cache_key",
    "codes_of",
    "coverage_figures",
    "index",
]
