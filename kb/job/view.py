"""The job view's public shapes: typed, frozen records and the enums of their fixed words.

A job's verdict (kb.lookup_job(...).job) is a JobView: every rank's RankVerdict, the root cause
(`root`), every root rank (`roots`, a RootRank each), what each process group's Flight Recorder
dumps show (`groups`), and what could not be read (`problems`). The enums are str-valued, so a
role compares equal to its word ("root") and JSON carries the same words as before.
"""

from __future__ import annotations

from enum import Enum

from kb.job.collectives import GroupFinding
from kb.job.parsers.error_file import ErrorFile
from kb.job.parsers.flight_recorder import Dump
from kb.job.parsers.torchrun import Summary
from kb.job.parsers.watchdog import Desync, names_other_collective
from kb.model.entry import Match
from kb.model.record import record

TYPE_CHECKING = False  # typing stays unimported at run time (kb lookup's cold start)
if TYPE_CHECKING:
    from typing import Any


class _Words(str, Enum):
    """An enum whose members are their words: str(), format() and JSON give the word (as
    enum.StrEnum does from Python 3.11; kb runs on 3.10)."""

    def __str__(self) -> str:
        return str.__str__(self)

    def __format__(self, spec: str) -> str:
        return str.__format__(str.__str__(self), spec)


class Role(_Words):
    """A rank's role in the JSON: a root of the failure, a consequence of one, or neither."""

    ROOT = "root"
    CONSEQUENCE = "consequence"
    UNKNOWN = "unknown"


class Part(_Words):
    """A rank's part in the job, as people read it."""

    ROOT_CAUSE = "root cause"  # the job's root (JobView.root)
    ROOT_TOO = "root too"  # another root: the same error, or another fault the collectives show
    CONSEQUENCE = "consequence"  # failed because another rank did (timed out, was stopped...)
    WAITED = "waited"  # no failure of its own: the collectives show it waiting for a root
    ALSO_FAILED = "also failed"  # a failure of its own that is not a root
    NO_FAILURE = "no failure seen"


# Where a rank goes after the root cause (JobView.in_order).
PART_ORDER = {
    Part.ROOT_CAUSE: 0,
    Part.ROOT_TOO: 1,
    Part.ALSO_FAILED: 2,
    Part.CONSEQUENCE: 3,
    Part.WAITED: 4,
    Part.NO_FAILURE: 5,
}


class JobKind(_Words):
    """How the job failed: by its root's own failure, or as a desync (ranks waiting for one
    that never came), or it was stopped from outside, or nothing shows."""

    ERROR = "error"  # a known entry
    EXCEPTION = "exception"  # an exception no entry knows
    SIGNAL = "signal"  # killed by a signal nobody in the job sent
    EXIT = "exit"  # a non-zero exit with no error in the logs
    DESYNC = "desync"
    TERMINATED = "terminated"
    NONE = "none"


class FaultKind(_Words):
    """Why a rank is a root: its own failure, or what the collectives show of it."""

    ERROR = "error"
    EXCEPTION = "exception"
    SIGNAL = "signal"
    EXIT = "exit"
    STALLED = "stalled"  # no new collective after its peers entered one (a hang, a held GIL)
    STOPPED_SHORT = "stopped-short"  # skipped the collective its peers waited in, went on
    STUCK = "stuck"  # in a collective its peers got through (or never started it on its GPU)
    MISMATCH = "mismatch"  # ran a collective with another op, other sizes or dtypes
    MISSING = "missing"  # left no dump while its group's other members waited
    STRAGGLER = "straggler"  # did not reach the collective (by the logs: watchdog, barrier)


# The causes of a rank's own failure (RankVerdict.cause); other causes are consequence classes
# (kb.job.consequences) or "none".
OWN_FAILURES = ("error", "exception", "signal", "exit")


@record(frozen=True)
class Surfaced:
    """The error a rank's failure surfaced as, when that error only carried it: a communicator
    error or the watchdog's teardown that names a CUDA failure."""

    id: str | None  # its entry (nccl-error), or None for a consequence class
    what: str  # its entry's id or the consequence class
    line: str
    line_number: int = 0
    path: str | None = None

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "what": self.what,
            "line": self.line,
            "line_number": self.line_number,
            "path": self.path,
        }


@record(frozen=True)
class RankVerdict:
    """One rank's verdict: its role, what happened to it (cause, the entry it names, the line
    that shows it) and how its process ended."""

    rank: int | None
    host: str | None = None
    role: Role = Role.UNKNOWN
    cause: str = "none"  # error | exception | signal | exit | <consequence class> | none
    id: str | None = None  # the entry its failure is (the carried failure's, when carried)
    title: str | None = None
    line: str = ""
    line_number: int = 0
    path: str | None = None
    time: str | None = None
    exitcode: int | None = None
    signal: str | None = None
    reason: str = ""
    evidence_from: str | None = None  # log | error-file | torchrun-summary | launcher
    match: Match | None = None  # the Match behind id
    part: Part = Part.NO_FAILURE
    surfaced_as: Surfaced | None = None
    root_kind: FaultKind | None = None  # why it is a root (roots only)
    group: str | None = None  # the process group its root (or its wait) was found in
    collective: str | None = None  # "#2 (nccl:all_reduce)"

    @property
    def _match(self) -> Match | None:
        """The earlier name of `match` (read by code written before it was public)."""
        return self.match

    @property
    def failed_of_its_own(self) -> bool:
        return self.cause in OWN_FAILURES

    @property
    def who(self) -> str:
        if self.rank is not None:
            return f"rank {self.rank}"
        return f"host {self.host}" if self.host else "the launcher"

    def to_dict(self) -> dict:
        d: dict[str, Any] = {
            "rank": self.rank,
            "id": self.id,
            "role": str(self.role),
            "cause": self.cause,
            "line": self.line,
            "line_number": self.line_number,
            "path": self.path,
        }
        for k in ("host", "title", "time", "exitcode", "signal", "evidence_from"):
            v = getattr(self, k)
            if v is not None:
                d[k] = v
        d["reason"] = self.reason
        d["part"] = str(self.part)
        if self.surfaced_as is not None:
            d["surfaced_as"] = self.surfaced_as.to_dict()
        if self.root_kind is not None:
            d["root_kind"] = str(self.root_kind)
        if self.group is not None:
            d["group"] = self.group
            d["collective"] = self.collective
        return d


@record(frozen=True)
class RootRank:
    """One root rank: where it was found (group, collective), why (kind) and its entry."""

    rank: int | None
    kind: FaultKind
    entry: str | None = None
    group: str | None = None
    collective: str | None = None
    seq: int | None = None
    op: str | None = None
    reason: str = ""
    host: str | None = None

    def to_dict(self) -> dict:
        d: dict[str, Any] = {
            "rank": self.rank,
            "group": self.group,
            "collective": self.collective,
            "kind": str(self.kind),
            "entry": self.entry,
            "seq": self.seq,
            "op": self.op,
            "reason": self.reason,
        }
        if self.host is not None:
            d["host"] = self.host
        return d


@record(frozen=True)
class JobView:
    """A job's verdict: every rank's, the root cause and every root, and the evidence read."""

    ranks: tuple[RankVerdict, ...]
    root: RankVerdict | None
    kind: JobKind
    summary: str
    desync: Desync | None = None
    torchrun: Summary | None = None
    error_files: tuple[ErrorFile, ...] = ()
    dumps: tuple[Dump, ...] = ()
    notes: tuple[str, ...] = ()
    evidence: RankVerdict | None = None  # for a desync: the waiting rank whose line shows it
    roots: tuple[RootRank, ...] = ()
    groups: tuple[GroupFinding, ...] = ()  # what each process group's dumps show
    problems: tuple[str, ...] = ()  # inputs that could not be read, or were left out, and why

    def root_evidence(self) -> RankVerdict | None:
        return self.evidence or self.root

    def in_order(self) -> tuple[RankVerdict, ...]:
        """The ranks in the one order text, JSON and the TUI show them (docs/ordering.md): the
        root cause, the other roots, ranks with a failure of their own, those that failed
        because another did, those that only waited, the rest; by rank number within each."""
        return tuple(
            sorted(
                self.ranks,
                key=lambda v: (
                    v is not self.root,
                    PART_ORDER.get(v.part, len(PART_ORDER)),
                    v.rank is None,
                    v.rank if v.rank is not None else 0,
                    v.host or "",
                ),
            )
        )

    def evidence_of(self, v: RankVerdict) -> RankVerdict:
        """The verdict whose line shows a rank's part: its own, or for a root that failed of
        nothing of its own (a straggler), the line of a rank the dumps show waiting for it: one
        that waited in that very collective first, then one whose own timeout is not about
        another collective (a rank waiting in two groups timed out in one of them)."""
        if v is self.root and self.evidence is not None:
            return self.evidence
        if v.role != Role.ROOT or v.failed_of_its_own or not v.collective:
            return v
        here = (v.group, v.collective)
        waiting = next(
            (
                f.waiting
                for f in self.groups
                if (f.group, f.collective) == here and v.rank in f.faulty
            ),
            (),
        )
        seq = next((r.seq for r in self.roots if r.rank == v.rank), None)
        cands = [
            w
            for w in self.ranks
            if w.role != Role.ROOT
            and w.line
            and ((w.group, w.collective) == here or w.rank in waiting)
        ]
        cands.sort(
            key=lambda w: ((w.group, w.collective) != here, names_other_collective(w.line, seq))
        )
        return cands[0] if cands else v

    def rank(self, r: int) -> RankVerdict | None:
        return next((v for v in self.ranks if v.rank == r), None)

    def to_dict(self) -> dict:
        root = None
        if self.root is not None:
            ev = self.evidence or self.root
            root = {
                "rank": self.root.rank,
                "id": self.root.id,
                "line": ev.line,
                "line_number": ev.line_number,
                "path": ev.path,
                "kind": str(self.kind),
                "reason": self.root.reason,
            }
            if self.root.host is not None:
                root["host"] = self.root.host
            if self.evidence is not None:
                root["evidence_rank"] = self.evidence.rank
        elif self.kind != JobKind.NONE:
            root = {
                "rank": None,
                "id": None,
                "line": "",
                "line_number": 0,
                "path": None,
                "kind": str(self.kind),
                "reason": self.summary,
            }
        d: dict[str, Any] = {
            "root": root,
            "roots": [r.to_dict() for r in self.roots],
            "kind": str(self.kind),
            "summary": self.summary,
            "ranks": [r.to_dict() for r in self.in_order()],
            "desync": self.desync.to_dict() if self.desync else None,
        }
        if self.groups:
            d["groups"] = [g.to_dict() for g in self.groups]
        if self.torchrun and self.torchrun.failures:
            tr_root = self.torchrun.root
            d["torchrun"] = {
                "root_rank": tr_root.rank if tr_root else None,
                "failures": [f.to_dict() for f in self.torchrun.failures],
            }
        if self.error_files:
            d["error_files"] = [e.to_dict() for e in self.error_files]
        if self.dumps:
            d["flight_recorder"] = [x.to_dict() for x in self.dumps]
        if self.notes:
            d["notes"] = list(self.notes)
        if self.problems:
            d["problems"] = list(self.problems)
        return d
