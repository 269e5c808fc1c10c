"""The job view: one verdict per rank, and the rank whose failure caused the others'.

A distributed job that dies prints a dozen errors; the one that matters is rarely the last or
the loudest. Every rank's lines are looked up on their own. A rank whose earliest strong error is
a known consequence (a timeout while waiting for a peer, the watchdog's teardown, an aborted
communicator, a peer's closed socket, the launcher's SIGTERM: kb.consequences) is a consequence.
The root is the rank whose earliest strong error is not:

  1. earliest by the time its lines carry, when every candidate's line has a time on one clock;
  2. else by evidence: a known entry before an unknown exception, before a death by a signal
     nobody else sent, before a bare non-zero exit; then torchrun's "first observed failure";
     then the lowest rank.

Ranks with the root's entry are roots too (a collective mismatch is reported by every rank). When
no rank has an error of its own, the job is a desync: the ranks that did not reach the collective
the others timed out in are named from the Flight Recorder dumps, else from the watchdog's
sequence numbers ("last enqueued work" below the timed-out SeqNum), else from a monitoredBarrier
report, else as the ranks that never timed out themselves while others did.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import kb.job.consequences as consequences
import kb.job.parsers.torchrun as torchrun_summary
from kb.diagnosis.engine import Engine, LookupResult
from kb.job.parsers.error_file import ErrorFile
from kb.job.parsers.flight_recorder import Dump
from kb.job.parsers.flight_recorder import desync as fr_desync
from kb.job.parsers.watchdog import Desync, desync_from_progress, progress
from kb.model.entry import Match
from kb.model.record import field, record, replace
from kb.scan.extract import Line, Scan, scan_text
from kb.scan.prefixes import host_of, rank_in_text, time_of

TYPE_CHECKING = False  # typing stays unimported at run time (kb lookup's cold start)
if TYPE_CHECKING:
    from typing import Any

LAUNCHER = None  # the key of lines no rank printed (torchrun's agent, the shell)
# A rank's input, keyed by its rank, "host:<name>" for a job whose lines carry only hosts, or
# LAUNCHER.
RankKey = int | str | None
# A line and the file it came from (None: read from an error file's or torchrun's traceback).
SourcedLine = tuple[Line, str | None]
# The earliest strong event in a rank's lines: (cause, consequence class or None, the Match
# behind it or None, the line).
Event = tuple[str, str | None, Match | None, SourcedLine]

_EXCEPTION = re.compile(
    r"^(?:[\w.]+\.)?(?P<exc>[A-Z]\w*(?:Error|Exception|Interrupt|Exit))(?::\s|\s*$)"
)

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
class RankVerdict:
    rank: int | None
    host: str | None = None
    role: str = "unknown"  # root | consequence | unknown
    cause: str = "none"  # error | exception | signal | exit | <consequence class> | none
    id: str | None = None
    title: str | None = None
    line: str = ""
    line_number: int = 0
    path: str | None = None
    time: str | None = None
    exitcode: int | None = None
    signal: str | None = None
    reason: str = ""
    evidence_from: str | None = None  # log | error-file | torchrun-summary
    _sort_time: tuple[float, str] | None = None
    _match: object = None  # the Match behind id, for rendering

    def to_dict(self) -> dict:
        d = {
            "rank": self.rank,
            "id": self.id,
            "role": self.role,
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
        return d


@record
class JobView:
    ranks: list[RankVerdict]
    root: RankVerdict | None
    kind: str  # error | exception | signal | exit | desync | terminated | none
    summary: str
    desync: Desync | None = None
    torchrun: torchrun_summary.Summary | None = None
    error_files: list[ErrorFile] = field(default_factory=list)
    dumps: list[Dump] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    evidence: RankVerdict | None = None  # for a desync: the waiting rank whose line shows it

    def root_evidence(self) -> RankVerdict | None:
        return self.evidence or self.root

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
                "kind": self.kind,
                "reason": self.root.reason,
            }
            if self.root.host is not None:
                root["host"] = self.root.host
            if self.evidence is not None:
                root["evidence_rank"] = self.evidence.rank
        elif self.kind != "none":
            root = {
                "rank": None,
                "id": None,
                "line": "",
                "line_number": 0,
                "path": None,
                "kind": self.kind,
                "reason": self.summary,
            }
        d: dict[str, Any] = {
            "root": root,
            "kind": self.kind,
            "summary": self.summary,
            "ranks": [r.to_dict() for r in self.ranks],
            "desync": self.desync.to_dict() if self.desync else None,
        }
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
        return d


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


def _first_event(
    engine: Engine, lines: Sequence[SourcedLine]
) -> tuple[Event | None, LookupResult | None]:
    """The earliest strong event in a rank's lines (None when there is none), and the lookup
    of those lines (None when there are no lines)."""
    if not lines:
        return None, None
    s, orig = _rank_scan(lines)
    result = engine.lookup_scan(s, top=50, fulltext=False)
    strong: dict[int, Match] = {}  # line number -> the first strong match on it
    for found in result.matches:
        if found.confidence == "high" and found.line_number:
            strong.setdefault(found.line_number, found)
    last_exc = None
    for i, ln in enumerate(s.lines):
        text = ln.text
        if consequences.neutral(text):
            continue
        cls = consequences.classify(text)
        m = strong.get(ln.number)
        if cls:
            return ("consequence", cls, m, orig[i]), result
        if m is not None:
            if m.id in consequences.CONSEQUENCE_IDS:
                return ("consequence", "timeout", m, orig[i]), result
            return ("error", None, m, orig[i]), result
        if _EXCEPTION.match(text) and "Warning" not in text:
            last_exc = i
    if last_exc is not None:
        return ("exception", None, None, orig[last_exc]), result
    return None, result


def _verdict(engine: Engine, ri: RankInput) -> RankVerdict:
    v = RankVerdict(ri.rank, ri.host)
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
        cause, cls, m, (ln, path) = event
        v.cause = cls or cause
        v.line, v.line_number, v.path = ln.text, ln.number, path
        t = time_of(ln.prefix, ln.text)
        if t:
            v._sort_time = t
        if m is not None:
            v.id, v.title, v._match = m.id, m.entry.title, m
        if cls:
            v.role = "consequence"
            v.reason = consequences.CLASSES[cls]
        else:
            v.reason = f"{m.id}: {m.entry.title}" if m is not None else "an error no entry knows"
    elif f is not None and f.signum is not None:
        # torchrun's own line for it ("Signal 9 (SIGKILL) received by PID 4367") is the evidence.
        v.line, v.line_number, v.evidence_from = (
            f.traceback.splitlines()[0] if f.traceback else "",
            0,
            "torchrun-summary",
        )
        sig = f.signal or f"signal {f.signum}"
        if f.signum in consequences.STOPPED_BY_OTHERS:
            v.role, v.cause = "consequence", "sigterm"
            v.reason = f"stopped by {sig} (the launcher stops the other ranks when one fails)"
        else:
            v.cause = "signal"
            v.reason = f"killed by {sig}, with no error of its own in the logs"
    elif f is not None and f.exitcode:
        v.line, v.evidence_from = f"exitcode  : {f.exitcode} (pid: {f.pid})", "torchrun-summary"
        v.cause = "exit"
        v.reason = f"exited with code {f.exitcode}, with no error in the logs"
    else:
        v.reason = "no failure in its output"
    # When it failed: its line's own time, else the error file's, else when torchrun saw it.
    if v._sort_time is not None:
        v.time = _fmt_time(ri, v)
    elif ri.error_file is not None and ri.error_file.timestamp:
        v._sort_time = (float(ri.error_file.timestamp), "epoch")
    elif f is not None and f.time:
        v._sort_time = _torchrun_time(f.time)
    if v.time is None and f is not None and f.time:
        v.time = f.time
    return v


def _torchrun_time(s: str) -> tuple[float, str] | None:
    t = time_of("", s.replace("_", " ", 1))
    return (t[0], "torchrun") if t else None


def _fmt_time(ri: RankInput, v: RankVerdict) -> str | None:
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
) -> JobView | None:
    """The job view of these lines (each with its path and the rank the path names), or None
    when the input is not a job (one process, no launcher summary, nothing else). Error files
    come with the rank their path names and whether it is a local rank (torchrun's folders are
    numbered by local rank; its summary maps them to global ranks)."""
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
        torchrun_summary.forced_kills(ln.text for ln, _ in launcher.lines) if launcher else set()
    )
    verdicts = []
    for key in sorted(ranks, key=lambda k: (isinstance(k, str), k)):
        ri = ranks[key]
        v = _verdict(engine, ri)
        if v.cause == "signal" and ri.failure and ri.failure.pid in forced:
            v.role, v.cause = "consequence", "sigterm"
            v.reason = "killed by the launcher after it ignored SIGTERM"
        verdicts.append(v)
    view = _decide(verdicts, ranks, summary, list(dumps))
    if launcher is not None:
        _attribute_unprefixed(engine, view, launcher)
    view.torchrun = summary if summary.failures else None
    view.error_files, view.dumps = efs, list(dumps)
    if summary.root is not None and view.root is not None and summary.root.rank != view.root.rank:
        rv = next((v for v in verdicts if v.rank == summary.root.rank), None)
        if rv is not None and rv.role == "consequence":
            view.notes.append(
                f'torchrun\'s "Root Cause (first observed failure)" names rank {summary.root.rank}, '
                f"which only {rv.reason}: it failed first, it did not fail of its own."
            )
    return view


def _attribute_unprefixed(engine: Engine, view: JobView, launcher: RankInput) -> None:
    """A root rank with no error of its own in the logs (an exit code, a signal) while an error
    was printed without any rank prefix (a kernel's assertion printf, a rank's stderr before
    torch 2.2 prefixed tracebacks, C++ code writing to stderr): with one root, that error is
    most likely its, and said to be a guess."""
    root = view.root
    if root is None or root.id is not None or view.kind not in ("exit", "signal", "exception"):
        return
    if sum(1 for v in view.ranks if v.role == "root") != 1:
        return
    # The launcher's own lines (its agent's log, ChildFailedError) are about ranks, not by one.
    own = ("ChildFailedError", "torch/distributed/elastic", "torch.distributed.elastic", "torchrun")
    lines = [(ln, p) for ln, p in launcher.lines if not any(w in ln.text for w in own)]
    event, _ = _first_event(engine, lines)
    if event is None:
        return
    cause, _, m, (ln, path) = event
    if cause != "error" or m is None:  # "error" events always carry their match
        return
    root.id, root.title, root._match = m.id, m.entry.title, m
    if not root.line or view.kind != "exception":
        root.line, root.line_number, root.path = ln.text, ln.number, path
    root.reason += f"; the error printed without a rank prefix is most likely its: {m.id}"
    view.notes.append(
        f"{_who(root)} is taken to have printed line {ln.number} ({m.id}): no rank prefix "
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
    return best


def _decide(verdicts: list[RankVerdict], ranks, summary, dumps: list[Dump]) -> JobView:
    own = [v for v in verdicts if v.role != "consequence" and v.cause in LEVEL]
    if own:
        root = _earliest(own, summary)
        root.role = "root"
        for v in own:
            if v is not root and _same_error(v, root):
                v.role = "root"  # the same error on several ranks (a collective mismatch, bad data)
        kind = root.cause
        return JobView(verdicts, root, kind, _summary(root, verdicts))
    # No rank failed of its own: who did not reach the collective the others waited in?
    found = fr_desync(dumps)
    if found is None or not found.missing:
        prog = {
            v.rank: progress(ln.text for ln, _ in ranks[v.rank].lines)
            for v in verdicts
            if v.rank is not None and v.rank in ranks
        }
        from_logs = desync_from_progress(prog)
        if from_logs is not None and (found is None or from_logs.missing):
            found = from_logs
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
    if found is not None and found.missing:
        victim = next((v for v in verdicts if v.rank in found.waiting and v.id), None) or next(
            (v for v in verdicts if v.rank in found.waiting), None
        )
        known = {v.rank for v in verdicts}
        for r in found.missing:
            if r not in known:  # named by the others only: it printed nothing we were given
                verdicts.append(RankVerdict(r, reason="no output of its own in these logs"))
        verdicts.sort(key=_rank_key)
        roots = [v for v in verdicts if v.rank in found.missing]
        for v in roots:
            v.role = "root"
            v.reason = _missing_reason(found, v)
        root = roots[0]
        if victim is not None:
            root.id, root.title, root._match = victim.id, victim.title, victim._match
        return JobView(
            verdicts, root, "desync", _desync_summary(found), desync=found, evidence=victim
        )
    if timed:
        return JobView(
            verdicts, None, "desync", _desync_summary(found, all_waiting=True), desync=found
        )
    if (
        verdicts
        and all(v.cause == "sigterm" for v in verdicts if v.exitcode is not None)
        and any(v.cause == "sigterm" for v in verdicts)
    ):
        return JobView(
            verdicts,
            None,
            "terminated",
            "every rank was stopped by a signal from outside (SIGTERM/SIGINT): the job was "
            "cancelled, hit a time limit, or its launcher was stopped",
        )
    cons = [v for v in verdicts if v.role == "consequence"]
    if cons:
        return JobView(
            verdicts,
            None,
            "none",
            "only consequences of another failure are in the logs "
            "("
            + ", ".join(sorted({v.cause for v in cons}))
            + "); the failing rank's own output is missing",
        )
    return JobView(verdicts, None, "none", "no rank shows a failure")


def _same_error(a: RankVerdict, b: RankVerdict) -> bool:
    if a.id is not None or b.id is not None:
        return a.id == b.id
    if a.cause != "exception" or b.cause != "exception":
        return False
    norm = lambda v: re.sub(r"\d+", "N", v.line)[:60]  # noqa: E731 - rank numbers differ
    return norm(a) == norm(b)


def _earliest(cands: list[RankVerdict], summary) -> RankVerdict:
    # Times decide only when every candidate has one, all on the same clock.
    timed = [(v._sort_time, v) for v in cands if v._sort_time is not None]
    if len(cands) > 1 and len(timed) == len(cands) and len({t[1] for t, _ in timed}) == 1:
        return min(timed, key=lambda tv: (tv[0][0], LEVEL[tv[1].cause], _rank_key(tv[1])))[1]
    tr_root = summary.root.rank if summary and summary.root else None
    return min(cands, key=lambda v: (LEVEL[v.cause], v.rank != tr_root, _rank_key(v)))


def _rank_key(v: RankVerdict):
    return (v.rank is None, v.rank if v.rank is not None else 0, v.host or "")


def _who(v: RankVerdict) -> str:
    return (
        f"rank {v.rank}" if v.rank is not None else (f"host {v.host}" if v.host else "the launcher")
    )


def _summary(root: RankVerdict, verdicts: list[RankVerdict]) -> str:
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


def _missing_reason(d: Desync, v: RankVerdict) -> str:
    coll = f"collective #{d.seq}" if d.seq is not None else "the collective"
    if d.op:
        coll += f" ({d.op})"
    how = {
        "flight-recorder": "its Flight Recorder dump stops before it",
        "watchdog": "its last enqueued work is below the SeqNum the others timed out on",
        "monitored-barrier": "monitoredBarrier named it",
        "no-timeout": "it never timed out itself while the others waited",
    }[d.by]
    return f"did not reach {coll}: {how}"


def _desync_summary(d: Desync | None, all_waiting: bool = False) -> str:
    if d is None:
        return (
            "desync: every rank that reported timed out waiting in a collective; no rank shows an "
            "error of its own. Look for a rank that is missing from the logs, or a network fault"
        )
    coll = f"collective #{d.seq}" if d.seq is not None else "a collective"
    if d.op:
        coll += f" ({d.op})"
    if d.detail:
        return f"desync at {coll}: {d.detail}"
    if all_waiting or not d.missing:
        return (
            f"desync: ranks {', '.join(map(str, d.waiting))} all timed out in {coll}; no rank is "
            "missing from it, which points at the interconnect or at ranks outside these logs"
        )
    by = {
        "flight-recorder": "the Flight Recorder dumps",
        "watchdog": "the watchdog's sequence numbers",
        "monitored-barrier": "monitoredBarrier's report",
        "no-timeout": "it never timed out itself while the others did",
    }[d.by]
    return (
        f"desync: rank{'s' if len(d.missing) > 1 else ''} {', '.join(map(str, d.missing))} did not reach "
        f"{coll}; rank{'s' if len(d.waiting) > 1 else ''} {', '.join(map(str, d.waiting))} timed out waiting "
        f"(by {by})"
    )
