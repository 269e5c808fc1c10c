"""A job's ranks as the TUI lists them: one row per rank, the root cause first, each row with the
lookup of its own line (the entry it names and the diagnosis of that line's numbers).

Built from kb's typed job view (kb.lookup_job(...).job: a JobView of RankVerdicts, their Role
and Part): a folder of per-rank logs, torchrun's --log-dir, a `kb run` folder, or one log whose
lines carry rank prefixes. Blocking, since every rank's line is looked up, so the app calls
`job_of` from a background thread. Nothing here imports Textual.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kb import (
    Engine,
    FaultKind,
    JobKind,
    JobLookup,
    JobView,
    LookupResult,
    Match,
    Part,
    RankVerdict,
    Role,
    replace,
)

# A root found by the collectives, not by an error of its own: named by what it did.
COLLECTIVE_FAULTS = (
    FaultKind.STALLED,
    FaultKind.STOPPED_SHORT,
    FaultKind.STUCK,
    FaultKind.MISMATCH,
    FaultKind.MISSING,
    FaultKind.STRAGGLER,
)


@dataclass(frozen=True)
class RankRow:
    """One rank's verdict, in words the list and the detail pane can show as they are."""

    rank: int | None
    host: str | None
    role: Role
    part: Part
    cause: str  # error | exception | signal | exit | a consequence class | none
    reason: str  # what happened to it, one line (kb's words)
    is_root: bool  # the root cause; other roots are Part.ROOT_TOO
    fault: FaultKind | None = None  # why a root is one (roots only)
    own_failure: bool = False  # it failed of its own (an error, a signal, an exit)
    exitcode: int | None = None
    signal: str | None = None
    time: str | None = None
    # The line that shows its failure; for a rank found by the collectives, the line of the
    # rank that waited for it.
    line: str = ""
    line_number: int = 0
    path: str | None = None
    evidence_from: str | None = None  # log | error-file | torchrun-summary | launcher
    line_of: str | None = None  # whose line it is, when not this rank's own
    match: Match | None = None  # the entry the job's verdict names, else the one its line matched
    lookup: LookupResult | None = None  # of `line` alone: the diagnosis of its numbers

    @property
    def who(self) -> str:
        if self.rank is not None:
            return f"rank {self.rank}"
        return f"host {self.host}" if self.host else "launcher"

    @property
    def what(self) -> str:
        """What happened to it, one line. kb says "<id>: <title>" for a rank with an entry;
        the id is on the entry's own line below, so the title says it here."""
        if self.match is not None and self.reason.startswith(self.match.id + ": "):
            return self.reason[len(self.match.id) + 2 :]
        return self.reason

    @property
    def label(self) -> str:
        """Its part in the job, in kb's words ("root cause", "consequence"...)."""
        return str(self.part)

    @property
    def straggler(self) -> bool:
        """A root found by what the collectives show (it stalled, never arrived...), whose line
        is another rank's: the one that waited for it."""
        return self.is_root and self.fault in COLLECTIVE_FAULTS

    @property
    def status(self) -> str:
        """How its process ended, when the launcher said: "exit -9 (SIGKILL)", "exit 1"."""
        if self.exitcode is None:
            return ""
        return f"exit {self.exitcode}" + (f" ({self.signal})" if self.signal else "")

    @property
    def verdict(self) -> str:
        """The entry it names, else what happened, in a few words."""
        if self.straggler and self.fault is not None:
            # the entry named is the waiting ranks'; this rank is the one they waited for
            return str(self.fault)
        if self.match is not None:
            return self.match.id
        if self.role == Role.CONSEQUENCE:
            return self.reason.split(" (")[0]
        return {
            "exception": "an error no entry knows",
            "signal": f"killed by {self.signal or 'a signal'}",
            "exit": f"exit code {self.exitcode}",
            "none": "no error in its output",
        }.get(self.cause, self.cause)

    @property
    def source(self) -> str:
        """Where its line was read, in words."""
        if self.evidence_from == "torchrun-summary":
            return "torchrun's summary"
        if self.evidence_from == "launcher":
            return "the launcher's report"
        where = shorter(self.path) if self.path else ""
        if where and self.line_number:
            where += f":{self.line_number}"
        if self.evidence_from == "error-file":
            where = f"error file {where}" if where else "its error file"
        return where


@dataclass(frozen=True)
class JobInfo:
    """What the job view shows: the ranks (root cause first) and the job's verdict."""

    kind: JobKind
    summary: str
    rows: tuple[RankRow, ...]
    notes: tuple[str, ...] = ()  # kb's notes on the verdict, and the inputs it could not read
    files: tuple[str, ...] = ()

    @property
    def root(self) -> RankRow | None:
        return next((r for r in self.rows if r.is_root), None)


def shorter(path: str) -> str:
    """A path as its last two parts: enough to tell a rank's file at 80 columns."""
    parts = Path(path).parts
    return str(Path(*parts[-2:])) if len(parts) > 2 else path


def job_of(engine: Engine, looked: JobLookup, top: int) -> JobInfo | None:
    """The job view of a kb.lookup_job result; None when the input is one process's log.
    Looks up each rank's line on its own (once per distinct line)."""
    job: JobView | None = looked.job
    if job is None:
        return None
    by_line: dict[str, LookupResult] = {}
    rows = [_row(engine, job, v, by_line, top) for v in job.in_order()]
    left_out = tuple(f"not read: {p}" for p in job.problems)
    return JobInfo(
        kind=job.kind,
        summary=" ".join(job.summary.split()),
        rows=tuple(rows),
        notes=tuple(" ".join(n.split()) for n in job.notes) + left_out,
        files=tuple(looked.paths),
    )


def _row(
    engine: Engine, job: JobView, v: RankVerdict, by_line: dict[str, LookupResult], top: int
) -> RankRow:
    is_root = job.root is not None and v is job.root
    ev = job.evidence_of(v)
    line = ev.line or ""
    # A number in torchrun's summary counts lines of the traceback it quotes, not of any file.
    number = 0 if ev.evidence_from == "torchrun-summary" else ev.line_number
    lookup = None
    if line.strip():
        lookup = by_line.get(line)
        if lookup is None:
            # one line: signatures only, since a full-text guess from a single line says little
            lookup = by_line[line] = engine.lookup(line, top=top, fulltext=False)
    match = v.match
    if match is None and lookup is not None and lookup.matches:
        match = lookup.matches[0]
    if match is not None and line:
        # Shown with the rank's own line and its number in its file; the hits' numbers counted
        # lines of another text (the rank's lines, or this one line), so they are left out.
        match = replace(match, line=line, line_number=number, hits=())
    return RankRow(
        rank=v.rank,
        host=v.host,
        role=v.role,
        part=v.part,
        cause=v.cause,
        reason=" ".join(v.reason.split()),
        is_root=is_root,
        fault=v.root_kind,
        own_failure=v.failed_of_its_own,
        exitcode=v.exitcode,
        signal=v.signal,
        time=v.time,
        line=line,
        line_number=number,
        path=ev.path,
        evidence_from=ev.evidence_from,
        line_of=None if ev is v else ev.who,
        match=match,
        lookup=lookup,
    )
