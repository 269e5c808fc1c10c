"""CUDA error codes: every meaning a number, name or message text can have.

A bare number in a log is ambiguous: `cuda runtime error (4)` meant cudaErrorLaunchFailure before
CUDA 10.1 renumbered cudaError_t, and means cudaErrorCudartUnloading now; the driver API's
CUresult 4 is CUDA_ERROR_DEINITIALIZED. So lookups by value return every interpretation and let
the caller weigh them with other evidence (the era of the wording, the API named in the log).

The table is kb/data/cuda_codes.json: "runtime" and "driver" were read from the libraries on a
GPU by scripts/dump_cuda_codes.py; "runtime_legacy" is the CUDA <= 10.0 numbering. The table
comes with the entry cache when a knowledge base is loaded (kb.knowledge.data), else the file is
read once, on first use, so `import kb` stays cheap.
"""

from __future__ import annotations

import os
from functools import lru_cache

from kb.model.record import record

_TABLE = os.path.join(
    os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "data", "cuda_codes.json"
)

# api name used in CodeInfo -> section of the JSON, in the order by_value reports them.
_SECTIONS = {"runtime": "runtime", "runtime-legacy": "runtime_legacy", "driver": "driver"}


@record(frozen=True)
class CodeInfo:
    api: str  # "runtime" | "runtime-legacy" | "driver"
    value: int
    name: str
    text: str


_LOADED: list[dict] = []  # the table, once read or registered


def register(table: dict) -> None:
    """The table as the entry cache holds it (read from the same file when the cache was made)."""
    if not _LOADED:
        _LOADED.append(table)


def table() -> dict:
    """The raw JSON (shared, cached: do not mutate it)."""
    if not _LOADED:
        import json

        with open(_TABLE, encoding="utf-8") as f:
            _LOADED.append(json.load(f))
    return _LOADED[0]


@lru_cache(maxsize=1)
def _all() -> tuple[CodeInfo, ...]:
    t = table()
    return tuple(
        CodeInfo(api, int(value), entry["name"], entry["text"])
        for api, section in _SECTIONS.items()
        for value, entry in t[section].items()
    )


@lru_cache(maxsize=1)
def _by_name() -> dict[str, CodeInfo]:
    out: dict[str, CodeInfo] = {}
    # First writer wins; runtime comes before runtime-legacy in _all(), so a name present in
    # both numberings resolves to the modern value.
    for info in _all():
        out.setdefault(info.name, info)
    return out


@lru_cache(maxsize=1)
def _by_text() -> dict[str, tuple[CodeInfo, ...]]:
    out: dict[str, list[CodeInfo]] = {}
    for info in _all():
        out.setdefault(info.text.casefold(), []).append(info)
    return {k: tuple(v) for k, v in out.items()}


def get(api: str, value: int) -> CodeInfo | None:
    """The code `value` in one numbering ("runtime", "runtime-legacy" or "driver")."""
    section = _SECTIONS.get(api)
    if section is None:
        raise ValueError(f"unknown api {api!r}; expected one of {sorted(_SECTIONS)}")
    entry = table()[section].get(str(value))
    return CodeInfo(api, value, entry["name"], entry["text"]) if entry else None


def by_value(value: int) -> list[CodeInfo]:
    """Every interpretation of a bare number: runtime, then runtime-legacy, then driver."""
    return [info for api in _SECTIONS if (info := get(api, value)) is not None]


def by_name(name: str) -> CodeInfo | None:
    """cudaError* or CUDA_ERROR_* name -> code (the modern runtime one when both numberings
    have it). Exact, case-sensitive: the names are identifiers."""
    return _by_name().get(name.strip())


def by_text(text: str) -> list[CodeInfo]:
    """Exact message text (case-insensitive, surrounding whitespace ignored) -> every code that
    prints it, across the three numberings, e.g. "an illegal memory access was encountered" ->
    runtime 700, runtime-legacy 77, driver 700."""
    return list(_by_text().get(text.strip().casefold(), ()))


def by_name_all(name: str) -> list[CodeInfo]:
    """Every numbering that has this name (a name can carry different values across eras)."""
    name = name.strip()
    return [info for info in _all() if info.name == name]
