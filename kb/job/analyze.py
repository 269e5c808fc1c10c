"""The job view: one verdict per rank, and every rank whose failure caused the others'.

A distributed job that dies prints a dozen errors; the one that matters is rarely the last or
the loudest. Every rank's lines are looked up on their own. A rank whose earliest strong error is
a known consequence (a timeout while waiting for a peer, the watchdog's teardown, an aborted
communicator, a peer's closed socket, the launcher's SIGTERM: kb.job.consequences) is a
consequence. An error that only carries another one (NCCL's "unhandled cuda error ... Last error:
Cuda failure '<text>'", the watchdog's exception naming a CUDA error) is read as the failure it
carries, found by the knowledge base's own signatures and CUDA codes, with the carrier kept as
the way it surfaced.

The root cause is the rank whose earliest strong error is not a consequence:

  1. earliest by the time its lines carry, when every candidate's line has a time on one clock;
  2. else by evidence: a known entry before an unknown exception, before a death by a signal
     nobody else sent, before a bare non-zero exit; then torchrun's "first observed failure";
     then the lowest rank.

Ranks with the root's entry are roots too (a collective mismatch is reported by every rank).
The Flight Recorder dumps are compared within every process group (kb.job.collectives): each
rank they show at fault (stalled, stopped short, stuck in a collective, mismatched, missing while
its peers waited) is a root as well; when ranks also failed of their own, a fault the dumps show
counts only where it is not a snapshot of a job being torn down (a mismatch, or a collective
whose waiters timed out). When no rank has an error of its own, the job is a desync: its roots
are the ranks the dumps name, else the ones the watchdog's sequence numbers name ("last enqueued
work" below the timed-out SeqNum), else a monitoredBarrier report's, else the ranks that never
timed out themselves while others did.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import kb.job.consequences as consequences
import kb.job.parsers.torchrun as torchrun_summary
from kb.diagnosis.engine import Engine, LookupResult
from kb.job.collectives import Collectives, Fault
from kb.job.collectives import analyze as compare_groups
from kb.job.parsers.error_file import ErrorFile
from kb.job.parsers.flight_recorder import Dump
from kb.job.parsers.watchdog import Desync, desync_from_progress, names_other_collective, progress
from kb.job.view import (
    OWN_FAILURES,
    FaultKind,
    JobKind,
    JobView,
    Part,
    RankVerdict,
    Role,
    RootRank,
    Surfaced,
)
from kb.model.entry import Match
from kb.model.record import field, record, replace
from kb.scan.extract import Line, Scan, scan_text
from kb.scan.prefixes import host_of, rank_in_text, time_of

TYPE_CHECKING = False  # typing stays unimported at run time (kb lookup's cold start)
if TYPE_CHECKING:
    pass

LAUNCHER = None  # the key of lines no rank printed (torchrun's agent, the shell)
# A rank's input, keyed by its rank, "host:<name>" for a job whose lines carry only hosts, or
# LAUNCHER.
RankKey = int | str | None
# A line and the file it came from (None: read from an error file's or torchrun's traceback).
SourcedLine = tuple[Line, str | None]

_EXCEPTION = re.compile(
    r"^(?:[\w.]+\.)?(?P<exc>[A-Z]\w*(?:Error|Exception|Interrupt|Exit))(?::\s|\s*$)"
)
# Where one error's message ends and another's starts: a failure carried by an error is in the
# error's own message (its next few lines), never past the next traceback.
_NEW_MESSAGE = re.compile(
    r"^Traceback \(most recent call last\)|^During handling of|^The above exception"
)
CARRY_LINES = 12  # NCCL's message: the error, its ncclResult_t, "Last error:", the CUDA failure
# Consequence classes whose line may carry the failure behind them (the watchdog's teardown
# naming a CUDA error, an abort after one); a timeout or a dead peer never does.
_CARRYING = ("teardown", "abort")

# Evidence levels of a rank's own failure (lower is stronger evidence that it came first).
LEVEL = {"error": 1, "exception": 2, "signal": 3, "exit": 4}


@record
class RankInput:
    """Everything read about one rank before any verdict."""

    rank: int | None
    host: str | None = None
    lines: list[tuple[Line, str]] = field(default_factory=list)  # (line, path it came from)
    error_file: ErrorFile | None = None
    failure: torchrun_summary.Failure | None = None
    dump: Dump | None = None


@record
class _Event:
    """The earliest strong event in a rank's lines."""

    cause: str  # error | exception | consequence
    cls: str | None  # the consequence class
    match: Match | None
    line: SourcedLine
    surfaced: tuple[str | None, str, SourcedLine] | None = None  # (entry id, what, its line)


@record
class _Working:
    """A rank's verdict while the job is decided (RankVerdict is its frozen, public form)."""

    rank: int | None
    host: str | None = None
    role: str = "unknown"
    cause: str = "none"
    forced: bool = False  # SIGKILLed by the launcher after it did not answer SIGTERM
    id: str | None = None
    title: str | None = None
    line: str = ""
    line_number: int = 0
    path: str | None = None
    time: str | None = None
    exitcode: int | None = None
    signal: str | None = None
    reason: str = ""
    evidence_from: str | None = None
    match: Match | None = None
    sort_time: tuple[float, str] | None = None
    surfaced: Surfaced | None = None
    part: str | None = None
    root_kind: str | None = None
    group: str | None = None
    collective: str | None = None

    def freeze(self) -> RankVerdict:
        part = self.part or (
            Part.CONSEQUENCE
            if self.role == "consequence"
            else Part.ALSO_FAILED
            if self.cause in OWN_FAILURES
            else Part.NO_FAILURE
        )
        return RankVerdict(
            self.rank,
            self.host,
            Role(self.role),
            self.cause,
            self.id,
            self.title,
            self.line,
            self.line_number,
            self.path,
            self.time,
            self.exitcode,
            self.signal,
            self.reason,
            self.evidence_from,
            self.match,
            Part(part),
            self.surfaced,
            FaultKind(self.root_kind) if self.root_kind else None,
            self.group,
            self.collective,
        )


# ---------------------------------------------------------------- grouping lines into ranks
def group(lines: list[tuple[Line, str, int | None]]) -> dict[RankKey, RankInput]:
    """Lines (with their path and the rank the path names) -> one RankInput per rank. A line's
    own launcher prefix wins over its file's name; ProcessGroupNCCL's "[Rank N]" in the text
    places lines that carry neither; "node-7: " host prefixes key a job with no ranks at all."""
    hosts = {
        h[0] for ln, _, r in lines if ln.rank is None and r is None for h in [host_of(ln.text)] if h
    }
    # pdsh / clush put "host: " before every line, ProcessGroupNCCL's own "[Rank N]" included
    use_hosts = len(hosts) >= 2
    out: dict[RankKey, RankInput] = {}
    for ln, path, path_rank in lines:
        rank = ln.rank if ln.rank is not None else path_rank
        host = None
        if rank is None and use_hosts:
            h = host_of(ln.text)
            if h:
                host = h[0]
                ln = replace(ln, text=h[1])
        if rank is None:
            rank = rank_in_text(ln.text)
        key: RankKey = rank if rank is not None else (f"host:{host}" if host else LAUNCHER)
        ri = out.get(key)
        if ri is None:
            ri = out[key] = RankInput(rank, host)
        elif ri.host is None and host is not None:
            ri.host = host
        ri.lines.append((ln, path))
    return out


# ---------------------------------------------------------------- per-rank verdicts
def _rank_scan(lines: Sequence[SourcedLine]) -> tuple[Scan, Sequence[SourcedLine]]:
    """The rank's lines renumbered in reading order (its files do not share line numbers)."""
    renum = [replace(ln, number=i + 1) for i, (ln, _) in enumerate(lines)]
    return Scan(renum, len(renum), 0, 0, False), lines


def _is_consequence_entry(m: Match) -> bool:
    """The match's entry (or signature) says its wording is a consequence (`consequence:`)."""
    return consequences.of_match(m) is not None


def _carries_cuda(m: Match) -> bool:
    """A match on an entry that owns a CUDA error code: a failure an NCCL or watchdog message
    can carry (found through the entry's signatures or its codes, never by its id)."""
    return bool(m.entry.codes) and not _is_consequence_entry(m)


def _first_event(
    engine: Engine, lines: Sequence[SourcedLine], levels: tuple[str, ...] = ("high",)
) -> tuple[_Event | None, LookupResult | None]:
    """The earliest strong event in a rank's lines (None when there is none), and the lookup
    of those lines (None when there are no lines). `levels`: the confidences that count as
    strong."""
    if not lines:
        return None, None
    s, orig = _rank_scan(lines)
    result = engine.lookup_scan(s, top=50, fulltext=False)
    strong: dict[int, list[Match]] = {}  # line number -> the strong matches on it, best first
    for found in result.matches:
        if found.confidence not in levels:
            continue
        numbers = {found.line_number} | {h.line_number for h in found.hits}
        for n in numbers:
            if n:
                strong.setdefault(n, []).append(found)
    last_exc = None
    for i, ln in enumerate(s.lines):
        text = ln.text
        if consequences.neutral(text):
            continue
        cls = consequences.classify(text)
        ms = strong.get(ln.number, [])
        m = ms[0] if ms else None
        if cls:
            if cls in _CARRYING:
                carried = _carried(s.lines, i, strong, None)
                if carried is not None:
                    j, cm = carried
                    return _Event("error", None, cm, orig[j], (None, cls, orig[i])), result
            return _root_event(result, s.lines, orig, i) or _Event(
                "consequence", cls, m, orig[i]
            ), result
        if m is not None:
            if _is_consequence_entry(m):
                return _root_event(result, s.lines, orig, i) or _Event(
                    "consequence", consequences.of_match(m), m, orig[i]
                ), result
            carried = _carried(s.lines, i, strong, m) if not _carries_cuda(m) else None
            if carried is not None:
                j, cm = carried
                return _Event("error", None, cm, orig[j], (m.id, m.id, orig[i])), result
            return _Event("error", None, m, orig[i]), result
        if _EXCEPTION.match(text) and "Warning" not in text:
            last_exc = i
    if last_exc is not None:
        return _root_event(result, s.lines, orig) or _Event(
            "exception", None, None, orig[last_exc]
        ), result
    return None, result


def _root_event(
    result: LookupResult,
    lines: list[Line],
    orig: Sequence[SourcedLine],
    before: int | None = None,
) -> _Event | None:
    """The rank's own root failure (kb.diagnosis.root, the reading a one-log lookup gives), when
    it is an initiating one (printed before line index `before`, a consequence's, when given):
    answered by whichever entry matched its line, generic entries included (a KeyError is
    python-key-error here as in a lookup of the line alone)."""
    root = result.root
    if root is None or root.role != "initiating" or not root.line_number:
        return None
    at = next(
        (i for i, ln in enumerate(lines) if ln.number == root.line_number and ln.text == root.line),
        None,
    )
    if at is None or (before is not None and at >= before):
        return None
    n = root.line_number
    m = next(
        (
            m
            for m in result.matches
            if n == m.line_number or any(h.line_number == n for h in m.hits)
        ),
        None,
    )
    return _Event("error" if m is not None else "exception", None, m, orig[at])


def _carried(
    lines: list[Line], i: int, strong: dict[int, list[Match]], carrier: Match | None
) -> tuple[int, Match] | None:
    """The CUDA failure an error's message carries: a strong match, on this line or the next
    few of the same message, on an entry that owns a CUDA error code."""
    for j in range(i, min(i + CARRY_LINES, len(lines))):
        text = lines[j].text
        if j > i and (
            _NEW_MESSAGE.search(text)
            or consequences.classify(text) in ("timeout", "peer-gone", "sigterm")
        ):
            break
        for m in strong.get(lines[j].number, ()):
            if m is carrier or (carrier is not None and m.id == carrier.id):
                continue
            if _carries_cuda(m):
                return j, m
    return None


def _verdict(engine: Engine, ri: RankInput) -> _Working:
    v = _Working(ri.rank, ri.host)
    f = ri.failure
    if f is not None:
        v.exitcode, v.signal = f.exitcode, f.signal
    event, _ = _first_event(engine, ri.lines)
    v.evidence_from = "log" if event is not None else None
    if event is None:
        # Its own output did not say: the error file (@record) or torchrun's copy of it does.
        for text, path, kind in (
            (
                ri.error_file.text if ri.error_file else "",
                ri.error_file.path if ri.error_file else None,
                "error-file",
            ),
            (f.traceback if f else "", None, "torchrun-summary"),
        ):
            if text:
                lines = [(ln, path) for ln in scan_text(text).lines]
                event, _ = _first_event(engine, lines)
                if event is not None:
                    v.evidence_from = kind
                    break
    if event is not None:
        m = event.match
        ln, path = event.line
        v.cause = event.cls or event.cause
        v.line, v.line_number, v.path = ln.text, ln.number, path
        t = time_of(ln.prefix, ln.text)
        if t:
            v.sort_time = t
        if m is not None:
            v.id, v.title, v.match = m.id, m.entry.title, m
        if event.cls:
            v.role = "consequence"
            v.reason = consequences.CLASSES[event.cls]
        else:
            v.reason = f"{m.id}: {m.entry.title}" if m is not None else "an error no entry knows"
        if event.surfaced is not None:
            sid, what, (sln, spath) = event.surfaced
            v.surfaced = Surfaced(sid, what, sln.text, sln.number, spath)
            v.reason += f" (surfaced as {what}: {sln.text[:160]})"
            st = time_of(sln.prefix, sln.text)
            if st and (v.sort_time is None or st[0] < v.sort_time[0]):
                v.sort_time = st
    elif f is not None and f.signum is not None:
        # torchrun's own line for it ("Signal 9 (SIGKILL) received by PID 4367") is the evidence,
        # or the launcher line that reported it when there is no summary.
        v.line, v.line_number, v.evidence_from = (
            f.line or (f.traceback.splitlines()[0] if f.traceback else ""),
            0,
            "launcher" if f.line else "torchrun-summary",
        )
        sig = f.signal or f"signal {f.signum}"
        if f.signum in consequences.STOPPED_BY_OTHERS:
            v.role, v.cause = "consequence", "sigterm"
            v.reason = f"stopped by {sig} (the launcher stops the other ranks when one fails)"
        else:
            v.cause = "signal"
            v.reason = f"killed by {sig}, with no error of its own in the logs"
    elif f is not None and f.exitcode:
        if f.line:
            v.line, v.evidence_from = f.line, "launcher"
        else:
            v.line, v.evidence_from = f"exitcode  : {f.exitcode} (pid: {f.pid})", "torchrun-summary"
        v.cause = "exit"
        v.reason = f"exited with code {f.exitcode}, with no error in the logs"
    else:
        v.reason = "no failure in its output"
    # When it failed: its line's own time, else the error file's, else when torchrun saw it.
    if v.sort_time is not None:
        v.time = _fmt_time(ri, v)
    elif ri.error_file is not None and ri.error_file.timestamp:
        v.sort_time = (float(ri.error_file.timestamp), "epoch")
    elif f is not None and f.time:
        v.sort_time = _torchrun_time(f.time)
    if v.time is None and f is not None and f.time:
        v.time = f.time
    return v


def _torchrun_time(s: str) -> tuple[float, str] | None:
    t = time_of("", s.replace("_", " ", 1))
    return (t[0], "torchrun") if t else None


def _fmt_time(ri: RankInput, v: _Working) -> str | None:
    for ln, _ in ri.lines:
        if ln.text == v.line:
            m = re.search(
                r"\d{4}-\d\d-\d\d[T _]\d\d:\d\d:\d\d(?:[.,]\d+)?|[EWIF]\d{4} \d\d:\d\d:\d\d(?:\.\d+)?",
                ln.prefix + " " + ln.text[:64],
            )
            return m.group(0) if m else None
    return None


# ---------------------------------------------------------------- the job
def analyze(
    engine: Engine,
    lines: list[tuple[Line, str, int | None]],
    *,
    error_files: Sequence[tuple[ErrorFile, int | None, bool]] = (),
    dumps: Sequence[Dump] = (),
    several: bool = False,
    problems: Sequence[str] = (),
) -> JobView | None:
    """The job view of these lines (each with its path and the rank the path names), or None
    when the input is not a job (one process, no launcher summary, nothing else). Error files
    come with the rank their path names and whether it is a local rank (torchrun's folders are
    numbered by local rank; its summary maps them to global ranks). `problems` are what the
    caller could not read, said in the view."""
    ranks = group(lines)
    launcher = ranks.pop(LAUNCHER, None)
    summary = _torchrun(launcher)
    efs = [e for e, _, _ in error_files]
    global_of: dict[int, set[int]] = {}  # torchrun's local rank -> the global ranks it names
    for fl in summary.failures:
        if fl.local_rank is not None:
            global_of.setdefault(fl.local_rank, set()).add(fl.rank)
    for ef, r, local in error_files:
        if r is not None and local and len(global_of.get(r, ())) == 1:
            r = next(iter(global_of[r]))
        if r is not None:
            ranks.setdefault(r, RankInput(r)).error_file = ef
    if summary:
        for fl in summary.failures:
            ranks.setdefault(fl.rank, RankInput(fl.rank)).failure = fl
    for d in dumps:
        if d.rank is not None:
            ranks.setdefault(d.rank, RankInput(d.rank)).dump = d
    if not ranks or (
        len(ranks) < 2 and not summary.failures and not efs and not dumps and not several
    ):
        return None  # one process (a `kb run` of plain `python train.py`, one log): no job to tell
    forced = (
        torchrun_summary.forced_kills((ln.text for ln, _ in launcher.lines), summary.failures)
        if launcher
        else set()
    )
    verdicts = []
    for key in sorted(ranks, key=lambda k: (isinstance(k, str), k)):
        ri = ranks[key]
        v = _verdict(engine, ri)
        if v.cause == "signal" and ri.failure and ri.failure.pid in forced:
            v.role, v.cause, v.forced = "consequence", "sigterm", True
            v.reason = "killed by the launcher after it ignored SIGTERM"
        verdicts.append(v)
    job_ranks = {k for k in ranks if isinstance(k, int)}
    coll = compare_groups(list(dumps), job_ranks) if dumps else Collectives()
    dec = _decide(verdicts, ranks, summary, coll)
    notes = list(dec.notes) + list(coll.notes)
    if summary.source in ("agent", "deepspeed") and summary.failures:
        said = "its agent's local_rank: R" if summary.source == "agent" else "--local_rank=R"
        notes.append(
            f"the ranks {summary.launcher} names are local ranks ({said}); on one node they "
            "are the ranks"
        )
    if launcher is not None:
        _attribute_unprefixed(engine, dec, launcher, notes)
    if (
        summary.source == "summary"
        and summary.root is not None
        and dec.root is not None
        and summary.root.rank != dec.root.rank
    ):
        rv = next((v for v in dec.verdicts if v.rank == summary.root.rank), None)
        if rv is not None and rv.role == "consequence":
            notes.append(
                f'torchrun\'s "Root Cause (first observed failure)" names rank {summary.root.rank}, '
                f"which only {rv.reason}: it failed first, it did not fail of its own."
            )
    frozen = {id(v): v.freeze() for v in dec.verdicts}
    root = frozen[id(dec.root)] if dec.root is not None else None
    evidence = frozen[id(dec.evidence)] if dec.evidence is not None else None
    return JobView(
        tuple(frozen[id(v)] for v in dec.verdicts),
        root,
        JobKind(dec.kind),
        dec.summary,
        desync=dec.desync,
        torchrun=summary if summary.failures else None,
        error_files=tuple(efs),
        dumps=tuple(dumps),
        notes=tuple(notes),
        evidence=evidence,
        roots=tuple(_root_record(v) for v in dec.roots),
        groups=coll.findings,
        problems=tuple(problems),
    )


def _root_record(v: _Working) -> RootRank:
    kind = v.root_kind or (v.cause if v.cause in OWN_FAILURES else "straggler")
    seq = op = None
    if v.collective:
        m = re.match(r"#(-?\d+)(?: \((.*)\))?$", v.collective)
        if m:
            seq, op = int(m.group(1)), m.group(2)
    return RootRank(v.rank, FaultKind(kind), v.id, v.group, v.collective, seq, op, v.reason, v.host)


# A Python warning ("UserWarning: Failed to initialize NumPy ..."): printed, not raised.
_WARNING = re.compile(r"\b[A-Z]\w*Warning: ")


def _attribute_unprefixed(
    engine: Engine, d: _Decision, launcher: RankInput, notes: list[str]
) -> None:
    """A root rank with no error of its own in the logs (an exit code, a signal) while an error
    was printed without any rank prefix (a kernel's assertion printf, a rank's stderr before
    torch 2.2 prefixed tracebacks, C++ code writing to stderr): with one root, that error is
    most likely its, and said to be a guess."""
    root = d.root
    if root is None or root.id is not None or d.kind not in ("exit", "signal", "exception"):
        return
    if sum(1 for v in d.verdicts if v.role == "root") != 1:
        return
    # The launcher's own lines (its agent's log, ChildFailedError) are about ranks, not by one.
    own = ("ChildFailedError", "torch/distributed/elastic", "torch.distributed.elastic", "torchrun")
    lines = [(ln, p) for ln, p in launcher.lines if not any(w in ln.text for w in own)]
    event, found = _first_event(engine, lines)
    if event is None or event.cause not in ("error", "exception"):
        # No strong one: an error an entry knows at medium confidence (a usage error such as
        # argparse's "unrecognized arguments: --local-rank=0" the launcher's argument caused)
        # still says more than an exit code alone.
        lines = [(ln, p) for ln, p in lines if not _WARNING.search(ln.text)]
        event, found = _first_event(engine, lines, ("high", "medium"))
        if event is None or event.cause != "error" or event.match is None:
            return
    ln, path = event.line
    m = event.match
    if m is None and found is not None:
        # an exception no entry claims strongly: a generic entry's answer on it, if any
        m = next((x for x in found.matches if x.line == ln.text), None)
    if not root.line or d.kind != "exception":
        root.line, root.line_number, root.path = ln.text, ln.number, path
        root.evidence_from = "log"
    what = m.id if m is not None else "an exception"
    if m is not None:
        root.id, root.title, root.match = m.id, m.entry.title, m
    if root.reason.endswith(", with no error in the logs"):
        root.reason = root.reason[: -len(", with no error in the logs")]
    root.reason += f"; the error printed without a rank prefix is most likely its: {what}"
    notes.append(
        f"{_who(root)} is taken to have printed line {ln.number} ({what}): no rank prefix "
        "says who did, and it is the only rank that failed of its own"
    )


def _torchrun(launcher: RankInput | None) -> torchrun_summary.Summary:
    best = torchrun_summary.Summary()
    if launcher is None:
        return best
    for ln, _ in launcher.lines:
        if ln.block and "ChildFailedError" in ln.text:
            s = torchrun_summary.parse(ln.block)
            if s.failures:
                best = s  # the last attempt's summary is the one that ended the job
    if not best.failures:
        # only the summary's Root Cause part was pasted (no ChildFailedError line above it)
        for ln, _ in launcher.lines:
            if ln.block and "Root Cause (first observed failure)" in ln.text:
                s = torchrun_summary.parse(ln.block)
                if s.failures:
                    best = s
    if not best.failures:
        best = torchrun_summary.from_agent_lines(ln.text for ln, _ in launcher.lines)
    if not best.failures:
        best = torchrun_summary.from_spawn_lines(ln.text for ln, _ in launcher.lines)
    if not best.failures:
        best = torchrun_summary.from_deepspeed_lines(ln.text for ln, _ in launcher.lines)
    return best


# ---------------------------------------------------------------- deciding
@record
class _Decision:
    verdicts: list[_Working]
    root: _Working | None
    kind: str
    summary: str
    roots: list[_Working] = field(default_factory=list)
    desync: Desync | None = None
    evidence: _Working | None = None
    notes: list[str] = field(default_factory=list)


_WAITED_CAUSES = ("timeout", "told")  # a rank that waited long enough for its timeout


def _decide(
    verdicts: list[_Working], ranks: dict[RankKey, RankInput], summary, coll: Collectives
) -> _Decision:
    by_rank = {v.rank: v for v in verdicts if v.rank is not None}
    received = _received_mismatch(coll, by_rank)
    own = [v for v in verdicts if v.role != "consequence" and v.cause in LEVEL]
    faults = _admitted(coll, by_rank, hang=not own, received=received)
    for r in faults:
        if r not in by_rank:  # named by the others' dumps only: it printed nothing we were given
            v = by_rank[r] = _Working(r, reason="no output of its own in these logs")
            verdicts.append(v)
    verdicts.sort(key=_rank_key)
    if own:
        root = _earliest(own, summary)
        roots = [root] + [v for v in own if v is not root and _same_error(v, root)]
        for r in sorted(faults):
            v = by_rank[r]
            if v not in roots:
                roots.append(v)
        for v in roots:
            fault = faults.get(v.rank) if v.rank is not None else None
            if v.cause in LEVEL:
                v.root_kind = v.cause
                if fault is not None:
                    v.group, v.collective = fault.finding.group, fault.finding.collective
            elif fault is not None:
                _from_fault(v, fault)
            else:
                v.root_kind = "straggler"
        _mark(verdicts, roots, root, coll)
        d = _Decision(verdicts, root, root.cause, _summary(root, roots, verdicts), roots)
        if len(roots) > 1 and any(v.cause not in LEVEL for v in roots):
            d.summary = _multi_summary(root, roots, verdicts, coll)
        return d
    if faults:
        return _fr_desync(verdicts, by_rank, faults, coll)
    return _log_desync(verdicts, ranks, coll)


def _received_mismatch(coll: Collectives, by_rank: dict[int, _Working]) -> dict[int, list[Fault]]:
    """The ranks that died of an abort (SIGABRT, no dump) on the other side of a mismatch the
    dumps show (gloo's size check aborts the rank that receives the other size, not the one that
    sent it): consequences of that mismatch, marked so here. rank -> the faults of the ranks whose
    mismatch it may have received (gloo does not say from whom)."""
    out: dict[int, list[Fault]] = {}
    for fault in coll.faults.values():
        for u in coll.unseen_peers(fault.rank):
            v = by_rank.get(u)
            own = coll.faults.get(u)  # left no dump: at most "missing" from another group
            if v is not None and v.signal == "SIGABRT" and (own is None or own.kind == "missing"):
                out.setdefault(u, []).append(fault)
    for u, faults in out.items():
        v = by_rank[u]
        v.role, v.cause = "consequence", "abort"
        f = faults[0]
        who = ", ".join(str(x.rank) for x in faults)
        v.reason = (
            f"aborted by the collective mismatch of rank{'s' if len(faults) > 1 else ''} {who} "
            f"({f.finding.collective} of group {f.finding.group}): gloo's size check aborts the "
            "rank that receives the other size, so it left no dump"
        )
    return out


def _admitted(
    coll: Collectives,
    by_rank: dict[int, _Working],
    hang: bool,
    received: dict[int, list[Fault]] | None = None,
) -> dict[int, Fault]:
    """The faults the dumps show that count as roots. In a hang, all of them. When ranks also
    failed of their own, the job was being torn down as the dumps were written, and a rank
    behind its peers may only have been slower: a fault counts when it is a mismatch, when the
    rank failed of its own too, or when the ranks waiting for it timed out (a wait long enough
    to be no snapshot). A mismatch seen on one side only (the other side left no dump) counts
    when the other side died of it (`received`)."""
    out: dict[int, Fault] = {}
    for r, fault in coll.faults.items():
        v = by_rank.get(r)
        if fault.finding.one_sided and not any(
            fault in (received or {}).get(u, ()) for u in fault.finding.unseen
        ):
            continue  # its own past alone does not make a mismatch
        if r in (received or {}):
            continue  # it left no dump because the mismatch aborted it
        if fault.kind == "missing" and v is not None and v.cause == "sigterm" and not v.forced:
            continue  # stopped by the launcher: that is why it left no dump
        if hang or fault.kind == "mismatch" or (v is not None and v.cause in LEVEL):
            out[r] = fault
            continue
        waited = [by_rank.get(w) for w in fault.finding.waiting]
        if any(w is not None and w.cause in _WAITED_CAUSES for w in waited):
            out[r] = fault
    return out


def _from_fault(v: _Working, fault: Fault) -> None:
    """A root the collectives name: why, where. A rank that also ignored the launcher's SIGTERM
    until it was SIGKILLed was stuck where Python could not run (a held GIL, a hang in C code),
    which is why it left no dump."""
    v.root_kind, v.reason = fault.kind, fault.reason
    if v.forced and fault.kind == "missing":
        v.root_kind = "stalled"
        v.reason = (
            "did not answer the launcher's SIGTERM (it was SIGKILLed) and "
            + fault.reason
            + ": its main thread was stuck where Python could not run (a held GIL, a hang)"
        )
    v.group, v.collective = fault.finding.group, fault.finding.collective


def _mark(
    verdicts: list[_Working], roots: list[_Working], root: _Working, coll: Collectives
) -> None:
    """Roles and parts: the roots; the ranks the dumps show waiting for one; the rest as their
    own lines say."""
    for v in roots:
        if v.cause not in LEVEL and v.id is not None:
            # a straggler's own line is a consequence's wording (it heard of the timeout): that
            # entry is not what it is
            v.id = v.title = v.match = None
        v.role = "root"
        v.part = Part.ROOT_CAUSE if v is root else Part.ROOT_TOO
    is_root = {id(v) for v in roots}
    root_ranks = {v.rank for v in roots}
    for v in verdicts:
        if id(v) in is_root or v.rank is None:
            continue
        f = coll.waited.get(v.rank)
        if f is None:
            continue
        v.group, v.collective = f.group, f.collective
        if v.role == "consequence":
            continue
        if v.cause == "none" and root_ranks and f.kind != "waiting":
            # it waited for a root, or for a rank that itself waited for one
            v.role, v.part = "consequence", Part.WAITED
            named = sorted(set(f.faulty) & root_ranks) or sorted(f.faulty)
            who = ", ".join(str(r) for r in named)
            v.reason = (
                f"waited in collective {f.collective} of group {f.group} for "
                f"rank{'s' if ',' in who else ''} {who}"
            )


def _fr_desync(verdicts, by_rank, faults: dict[int, Fault], coll: Collectives) -> _Decision:
    roots = [by_rank[r] for r in sorted(faults)]
    for v in roots:
        _from_fault(v, faults[v.rank])
    # The root cause: the fault its group's waiters ran into first.
    first = min(
        faults.values(),
        key=lambda f: (
            f.finding.since_ns or float("inf"),
            ("mismatch", "stuck", "stalled", "stopped-short", "missing").index(f.kind),
            f.rank,
        ),
    )
    root = by_rank[first.rank]
    _mark(verdicts, roots, root, coll)
    f = first.finding
    missing = sorted(r for r in f.faulty if r in faults)
    desync = Desync(
        f.seq,
        f.op,
        missing,
        list(f.waiting),
        "flight-recorder",
        f.pg,
        f.detail if f.kind == "mismatch" else "",
    )
    # The line that shows it: a waiter's, one that waited in this very collective first (a rank
    # waiting in two groups at once printed the other group's timeout, about another root).
    waiters = sorted(
        (v for v in verdicts if v.rank in f.waiting),
        key=lambda v: (coll.waited.get(v.rank) is not f, names_other_collective(v.line, f.seq)),
    )
    victim = next((v for v in waiters if v.id and v.role == "consequence"), None) or next(
        (v for v in waiters if v.line), None
    )
    if len(roots) == 1:
        verb = {"stuck": "was stuck in", "stopped-short": "did not enqueue"}.get(first.kind)
        summary = _desync_summary(desync, verdicts, verb=verb or "did not reach")
    else:
        summary = _multi_summary(root, roots, verdicts, coll)
    return _Decision(verdicts, root, "desync", summary, roots, desync, victim)


def _log_desync(verdicts: list[_Working], ranks, coll: Collectives) -> _Decision:
    """No rank failed of its own and the dumps name none: the watchdog's figures, a
    monitoredBarrier report, or who never timed out."""
    found = None
    prog = {
        v.rank: progress(ln.text for ln, _ in ranks[v.rank].lines)
        for v in verdicts
        if v.rank is not None and v.rank in ranks
    }
    found = desync_from_progress(prog)
    timed = [v for v in verdicts if v.cause == "timeout"]
    if (found is None or not found.missing) and timed:
        quiet = [
            v.rank
            for v in verdicts
            if v.rank is not None and v.cause in ("none", "told", "sigterm")
        ]
        if quiet:
            found = Desync(
                found.seq if found else None,
                found.op if found else None,
                sorted(quiet),
                sorted(v.rank for v in timed if v.rank is not None),
                "no-timeout",
            )
    if found is None and coll.findings:
        w = next((f for f in coll.findings if f.kind == "waiting"), None)
        if w is not None:
            found = Desync(w.seq, w.op, [], list(w.waiting), "flight-recorder", w.pg)
    if found is not None and found.missing:
        victim = next((v for v in verdicts if v.rank in found.waiting and v.id), None) or next(
            (v for v in verdicts if v.rank in found.waiting), None
        )
        known = {v.rank for v in verdicts}
        for r in found.missing:
            if r not in known:  # named by the others only: it printed nothing we were given
                verdicts.append(_Working(r, reason="no output of its own in these logs"))
        verdicts.sort(key=_rank_key)
        roots = [v for v in verdicts if v.rank in found.missing]
        for v in roots:
            v.reason = _missing_reason(found, v)
            v.root_kind = "straggler"
            if found.seq is not None:
                v.collective = f"#{found.seq}" + (f" ({found.op})" if found.op else "")
            v.group = found.pg
        root = roots[0]
        _mark(verdicts, roots, root, coll)
        for v in verdicts:
            # a rank the evidence shows waiting for the missing ones, with no failure of its own
            if v.rank in found.waiting and v.role == "unknown" and v.cause == "none":
                v.role, v.part = "consequence", Part.WAITED
                v.reason = f"waited for {ranks_text(found.missing)}"
        return _Decision(
            verdicts, root, "desync", _desync_summary(found, verdicts), roots, found, victim
        )
    if timed or (found is not None and found.waiting):
        return _Decision(
            verdicts, None, "desync", _desync_summary(found, verdicts, all_waiting=True), [], found
        )
    if (
        verdicts
        and all(v.cause == "sigterm" for v in verdicts if v.exitcode is not None)
        and any(v.cause == "sigterm" for v in verdicts)
    ):
        return _Decision(
            verdicts,
            None,
            "terminated",
            "every rank was stopped by a signal from outside (SIGTERM/SIGINT): the job was "
            "cancelled, hit a time limit, or its launcher was stopped",
        )
    cons = [v for v in verdicts if v.role == "consequence"]
    if cons:
        return _Decision(
            verdicts,
            None,
            "none",
            "only consequences of another failure are in the logs "
            "("
            + ", ".join(sorted({v.cause for v in cons}))
            + "); the failing rank's own output is missing",
        )
    return _Decision(verdicts, None, "none", "no rank shows a failure")


def _same_error(a: _Working, b: _Working) -> bool:
    if a.id is not None or b.id is not None:
        return a.id == b.id
    if a.cause != "exception" or b.cause != "exception":
        return False
    norm = lambda v: re.sub(r"\d+", "N", v.line)[:60]  # noqa: E731 - rank numbers differ
    return norm(a) == norm(b)


def _earliest(cands: list[_Working], summary) -> _Working:
    # Times decide only when every candidate has one, all on the same clock.
    timed = [(v.sort_time, v) for v in cands if v.sort_time is not None]
    if len(cands) > 1 and len(timed) == len(cands) and len({t[1] for t, _ in timed}) == 1:
        return min(timed, key=lambda tv: (tv[0][0], LEVEL[tv[1].cause], _rank_key(tv[1])))[1]
    tr_root = summary.root.rank if summary and summary.root else None
    return min(cands, key=lambda v: (LEVEL[v.cause], v.rank != tr_root, _rank_key(v)))


def _rank_key(v: _Working):
    return (v.rank is None, v.rank if v.rank is not None else 0, v.host or "")


def _who(v: _Working) -> str:
    return (
        f"rank {v.rank}" if v.rank is not None else (f"host {v.host}" if v.host else "the launcher")
    )


def ranks_text(rs: list[int]) -> str:
    """ "rank 3", or "ranks 0-6, 9" (spans, counted past a few)."""
    if not rs:
        return "no other rank"
    return f"rank {rs[0]}" if len(rs) == 1 else "ranks " + ranges(rs)


RANGES_SHOWN = 8  # spans named in a line; past it, how many more (a summary stays one line)


def ranges(ranks: list[int], cap: int | None = RANGES_SHOWN) -> str:
    """Consecutive ranks as spans: [0, 1, 2, 3, 9] -> "0-3, 9" (a 1,024-rank job in a line).
    Past `cap` spans (every other rank of a large job), the rest are counted, not listed:
    "0, 2, 4, ... and 509 more (512 ranks)"."""
    spans: list[list[int]] = []  # [first, last] of each run
    for r in sorted(set(ranks)):
        if spans and r == spans[-1][1] + 1:
            spans[-1][1] = r
        else:
            spans.append([r, r])
    shown = spans if cap is None or len(spans) <= cap else spans[:cap]
    text = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in shown)
    if len(shown) < len(spans):
        rest = sum(b - a + 1 for a, b in spans[len(shown) :])
        text += f" and {rest:,} more ({sum(b - a + 1 for a, b in spans):,} ranks)"
    return text


def _summary(root: _Working, roots: list[_Working], verdicts: list[_Working]) -> str:
    what = (
        f"{root.id}"
        if root.id
        else {
            "exception": "an error no entry knows",
            "signal": f"death by {root.signal or 'a signal'}",
            "exit": f"exit code {root.exitcode}",
        }.get(root.cause, root.cause)
    )
    others = [v for v in verdicts if v is not root and v.role == "consequence"]
    s = f"{_who(root)} failed first: {what}"
    if others:
        s += "; " + ", ".join(f"{_who(v)} {v.reason.split(' (')[0]}" for v in others[:4])
        if len(others) > 4:
            s += f" and {len(others) - 4} more"
    return s


_KIND_WORDS = {
    "stalled": "stalled",
    "stopped-short": "stopped short",
    "stuck": "stuck in a collective",
    "mismatch": "ran a mismatched collective",
    "missing": "left no dump",
    "straggler": "did not reach the collective",
}


def _multi_summary(
    root: _Working, roots: list[_Working], verdicts: list[_Working], coll: Collectives
) -> str:
    """Several roots: each with what it did and where, then who only waited."""
    parts = []
    for v in roots:
        if v.cause in LEVEL and v.root_kind in LEVEL:
            what = v.id or {
                "exception": "an error no entry knows",
                "signal": f"death by {v.signal}",
                "exit": f"exit code {v.exitcode}",
            }.get(v.cause, v.cause)
        else:
            what = _KIND_WORDS.get(v.root_kind or "", v.root_kind or "")
        where = (
            f" at collective {v.collective} of group {v.group}" if v.collective and v.group else ""
        )
        parts.append(f"{_who(v)} {what}{where}")
    s = f"{len(roots)} roots: " + "; ".join(parts)
    waited = sorted(v.rank for v in verdicts if v.rank is not None and v.role == "consequence")
    if waited:
        s += f"; {ranks_text(waited)} only waited or were stopped"
    return s


def _missing_reason(d: Desync, v: _Working) -> str:
    coll = f"collective #{d.seq}" if d.seq is not None else "the collective"
    if d.op:
        coll += f" ({d.op})"
    how = {
        "flight-recorder": "its Flight Recorder dump stops before it",
        "watchdog": "its last enqueued work is below the SeqNum the others timed out on",
        "monitored-barrier": "monitoredBarrier named it",
        "store-barrier": "it never said it was waiting in the store-based barrier, as the others did",
        "no-timeout": "it never timed out itself while the others waited",
    }[d.by]
    if d.by == "store-barrier":
        return f"never joined the process group: {how}"
    return f"did not reach {coll}: {how}"


def _desync_summary(
    d: Desync | None,
    verdicts: list[_Working],
    all_waiting: bool = False,
    verb: str = "did not reach",
) -> str:
    if d is None:
        return (
            "desync: every rank that reported timed out waiting in a collective; no rank shows an "
            "error of its own. Look for a rank that is missing from the logs, or a network fault"
        )
    coll = f"collective #{d.seq}" if d.seq is not None else "a collective"
    if d.op:
        coll += f" ({d.op})"
    if d.pg is not None and d.by == "flight-recorder" and d.pg != "0":
        coll += f" of group {d.pg}"
    if d.detail:
        return f"desync at {coll}: {d.detail}"
    if all_waiting or not d.missing:
        return (
            f"desync: {ranks_text(d.waiting)} all timed out in {coll}; no rank is "
            "missing from it, which points at the interconnect or at ranks outside these logs"
        )
    by = {
        "flight-recorder": "the Flight Recorder dumps",
        "watchdog": "the watchdog's sequence numbers",
        "monitored-barrier": "monitoredBarrier's report",
        "store-barrier": "the store-based barrier's waiting lines",
        "no-timeout": "the ranks that never timed out while the others did",
    }[d.by]
    if d.by == "store-barrier":
        return (
            f"desync: {ranks_text(d.missing)} "
            f"never joined the process group; {ranks_text(d.waiting)} waited in "
            f"init_process_group's store-based barrier (by {by})"
        )
    timed = {v.rank for v in verdicts if v.cause == "timeout"}
    waited = "timed out waiting" if set(d.waiting) <= timed or not d.waiting else "waited"
    return (
        f"desync: {ranks_text(d.missing)} {verb} {coll}; {ranks_text(d.waiting)} {waited} (by {by})"
    )
