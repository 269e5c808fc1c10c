"""The shapes kb works with. Frozen dataclasses, no I/O: every other module passes these around."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Code:
    api: str  # runtime | runtime-legacy | driver
    value: int
    name: str = ""


@dataclass(frozen=True)
class Signature:
    id: str
    pattern: str
    ignore_case: bool = False
    weight: float = 1.0
    era: str = ""
    versions: dict[str, str] = field(default_factory=dict)
    # The longest literal every match must contain (lowercased when ignore_case): lines without it
    # are never handed to the regex. Empty when the pattern has no such literal.
    literal: str = ""
    # The literal the pattern starts with, lowercased: a line cut off inside it is a partial hit.
    head: str = ""


@dataclass(frozen=True)
class Program:
    code: str
    env: dict[str, str] = field(default_factory=dict)
    timeout: float = 120.0


@dataclass(frozen=True)
class NearMiss:
    """A no_match example: text that must not name its entry, and the entry (or "none") that a
    lookup must put first instead."""

    text: str
    belongs: str


@dataclass(frozen=True)
class Requirements:
    gpu: bool = True
    gpus: int = 1
    free_memory_gb: float = 0.0
    compute_capability: str = ""
    torch: str = ""
    exclusive: bool = False


@dataclass(frozen=True)
class Repro:
    code: str
    expect: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    timeout: float = 120.0
    requires: Requirements = field(default_factory=Requirements)


@dataclass(frozen=True)
class Entry:
    id: str
    area: str
    path: str
    title: str
    summary: str
    tags: tuple[str, ...]
    codes: tuple[Code, ...]
    signatures: tuple[Signature, ...]
    causes: tuple[dict[str, Any], ...]
    diagnostics: tuple[dict[str, Any], ...]
    fixes: tuple[dict[str, Any], ...]
    examples_match: tuple[str, ...]
    examples_no_match: tuple[NearMiss, ...]
    references: tuple[dict[str, Any], ...]
    repro: Repro | None = None
    fix_check: Program | None = None
    not_reproducible: tuple[dict[str, Any], ...] = ()
    local: bool = False  # from a user's own folder, not the bundled knowledge base

    def signature(self, sig_id: str) -> Signature | None:
        for s in self.signatures:
            if s.id == sig_id:
                return s
        return None


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an entry file, as lint reports it."""

    path: str
    line: int
    column: int
    code: str  # KB001...
    message: str
    hint: str = ""

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}:{self.column}"
        text = f"{where}: {self.code} {self.message}"
        return f"{text} ({self.hint})" if self.hint else text


@dataclass(frozen=True)
class HitRef:
    """One line that fired for a match: which signature, where, and the line itself."""

    signature: str
    line_number: int
    line: str


@dataclass(frozen=True)
class Match:
    """One entry found in the input, with the evidence for it."""

    entry: Entry
    score: float
    confidence: str  # high | medium | low
    source: str  # signature | fulltext
    signature: str | None = None
    line: str = ""
    line_number: int = 0
    captures: dict[str, str] = field(default_factory=dict)
    hits: tuple[HitRef, ...] = ()  # every line and signature of this entry that fired

    @property
    def id(self) -> str:
        return self.entry.id


@dataclass(frozen=True)
class Evidence:
    """What one `kb verify --record` run saw for one entry in one environment."""

    entry: str
    status: str
    fix_status: str
    gpu: str
    gpu_memory_mib: int
    driver: str
    cuda: str
    torch: str
    date: str
    duration_s: float
    matched: tuple[str, ...] = ()
    detail: str = ""

    def summary(self) -> str:
        fix = {"fix-verified": ", fix verified", "fix-failed": ", fix FAILED"}.get(
            self.fix_status, ""
        )
        return (
            f"{self.status}{fix} on {self.gpu}, driver {self.driver}, torch {self.torch}, "
            f"CUDA {self.cuda}, {self.date}"
        )
