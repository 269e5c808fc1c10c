"""Regular expressions compiled once and kept across processes.

Python compiles every pattern anew in every process: a one-line `kb lookup` compiles about 25
(its modules' own, textwrap's, the data files' wordings), 2-3 ms of CPU, a tenth of what the
interpreter itself takes to start. `re` keeps what it compiled in `re._cache`, keyed by
(type, pattern, flags), and a compiled pattern is `_sre.compile(...)` of the code that
`re._compiler` works out: that code is kept here, for the exact interpreter that made it, and
put back into `re._cache` before kb's modules are imported, so their `re.compile` finds it.
A table is only ever read from kb's own caches (the MAC'd state folder, or the wheel's shipped
files, trusted like its code), and each pattern it made equals what re.compile makes (Pattern
equality compares the compiled code): checked when the table is made.

Anything unexpected (another Python, a `re` without these internals) and nothing is seeded:
patterns compile as usual. Only speed depends on it.
"""

from __future__ import annotations

import re
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

MAX_PATTERNS = 200  # a table is loaded whole by every cold lookup: only what start-up needs


def _engine() -> Any:
    """The regex engine `re` compiles for (typeshed has no stubs for it)."""
    import _sre  # type: ignore[import-not-found]

    return _sre


def tag() -> str:
    """The interpreter and regex engine a table's code is for."""
    sre = _engine()
    return f"{sys.version}|{sre.MAGIC}|{sre.CODESIZE}|{sys.maxunicode}"


def file_name() -> str:
    from zlib import crc32

    return f"regex-{crc32(tag().encode()):08x}.pickle"


def compiled_now() -> list[tuple[str, int]]:
    """(pattern, flags) of every str pattern `re` holds compiled in this process."""
    cache = getattr(re, "_cache", None)
    if not isinstance(cache, dict):
        return []
    return [
        (key[1], key[2])
        for key in list(cache)
        if isinstance(key, tuple) and len(key) == 3 and key[0] is str and isinstance(key[2], int)
    ]


def make_table(patterns: Iterable[tuple[str, int]]) -> dict[str, Any]:
    """The code of each pattern, checked against re.compile's own result."""
    sre = _engine()
    out = []
    for pattern, flags in patterns:
        try:
            item = _compiled_code(pattern, flags)
            if sre.compile(pattern, *item) != re.compile(pattern, flags):
                continue
        except Exception:  # an internal that is not there or not as expected: not kept
            continue
        out.append((pattern, flags, *item))
        if len(out) >= MAX_PATTERNS:
            break
    return {"tag": tag(), "table": out}


def _compiled_code(pattern: str, flags: int) -> tuple[Any, ...]:
    """What re._compiler.compile hands to _sre.compile: final flags, code, groups, group index,
    index group."""
    from re import _compiler, _parser  # type: ignore[attr-defined]

    parsed = _parser.parse(pattern, flags)
    code = [int(c) for c in _compiler._code(parsed, flags)]
    groupindex = dict(parsed.state.groupdict)
    indexgroup: list[str | None] = [None] * parsed.state.groups
    for name, i in groupindex.items():
        indexgroup[i] = name
    return (
        int(flags | parsed.state.flags),
        code,
        parsed.state.groups - 1,
        groupindex,
        tuple(indexgroup),
    )


def seed(doc: object) -> int | None:
    """Put a table's patterns into `re`'s cache; how many, or None when it is no table for
    this interpreter (another Python's, or anything unexpected)."""
    cache = getattr(re, "_cache", None)
    if not isinstance(doc, dict) or not isinstance(cache, dict):
        return None
    table = doc.get("table")
    if doc.get("tag") != tag() or not isinstance(table, list):
        return None
    sre = _engine()
    done = 0
    for item in table:
        try:
            pattern, flags, final, code, groups, groupindex, indexgroup = item
            key = (str, pattern, flags)
            if key not in cache:
                cache[key] = sre.compile(pattern, final, code, groups, groupindex, indexgroup)
                done += 1
        except Exception:  # a damaged item: that pattern compiles as usual
            continue
    return done
