"""torchrun's own account of a failed job: the Failures / Root Cause summary of ChildFailedError,
and its agent's log lines. Facts (rank, exit code, signal, error file, time), not verdicts: the
"Root Cause (first observed failure)" is the rank torchrun saw fail first, which is often the
victim of a timeout rather than its cause.

The formats, from torch/distributed/elastic/multiprocessing/errors/__init__.py
(_FAILURE_FORMAT_TEMPLATE, _MSG_FORMAT_TEMPLATE):

    Failures:
    [1]:
      time      : 2026-11-23_02:59:05
      host      : node-1
      rank      : 1 (local_rank: 1)
      exitcode  : -15 (pid: 1825)  (SIGTERM)
      error_file: <N/A>
      traceback : Signal 15 (SIGTERM) received by PID 1825
    ------------------------------------------------------------
    Root Cause (first observed failure):
    [0]:
      ...
      traceback : Traceback (most recent call last):
        File "train.py", line 12, in main
      RuntimeError: ...

and from torch/distributed/elastic/multiprocessing/api.py:
    "failed (exitcode: -9) local_rank: 1 (pid: 4367) of binary: /usr/bin/python3"
    "Sending process 4366 closing signal SIGTERM"
    "Unable to shutdown process 4366 via Signals.SIGTERM, forcefully exiting via Signals.SIGKILL"
"""

from __future__ import annotations

import re
import signal

from kb.model.record import field, record

_INDEX = re.compile(r"^\s*\[(\d+)\]:\s*$")
_FIELD = re.compile(r"^\s{1,4}(time|host|rank|exitcode|error_file|traceback)\s*:\s?(.*)$")
_RANK = re.compile(r"(-?\d+)\s*\(local_rank:\s*(-?\d+)\)")
_EXIT = re.compile(r"(-?\d+)\s*\(pid:\s*(\d+)\)\s*(?:\((SIG\w+)\))?")
_BORDER = re.compile(r"^\s*(?:-{8,}|={8,})\s*$")
_LABEL = re.compile(r"^\d{1,5}: ")  # srun --label on every line
# What launchers print about their workers is data: kb/data/failure-events.yaml (`launchers`,
# and the `torchrun-failed` line rule for the agent's report), read once per process.
_FORMS: dict[str, tuple[str, re.Pattern]] = {}


def _form(name: str) -> tuple[str, re.Pattern]:
    """(key, compiled pattern) of a launcher wording in failure-events.yaml."""
    got = _FORMS.get(name)
    if got is None:
        from kb.knowledge.data import bundled, load_data

        events = getattr(bundled(), "events", None) or load_data().events
        if events is None:
            raise RuntimeError("kb/data/failure-events.yaml could not be read (`kb lint` says why)")
        if name == "agent-failed":
            rule = next(r for r in events.lines if r.id == "torchrun-failed")
            key, pattern = rule.keys[0], rule.pattern
        else:
            key, pattern = events.launchers[name]
        got = _FORMS[name] = (key, re.compile(pattern))
    return got


@record
class Failure:
    rank: int
    local_rank: int | None = None
    host: str | None = None
    time: str | None = None  # as torchrun printed it: 2026-11-23_02:59:05 (local time)
    exitcode: int | None = None
    pid: int | None = None
    signal: str | None = None  # SIGTERM, SIGKILL... when the exit code is a signal
    error_file: str | None = None  # None for <N/A>
    traceback: str = ""
    root: bool = False  # torchrun's "Root Cause (first observed failure)"
    # The launcher's own line that reported it, when not read from a summary (the agent's
    # "failed (exitcode: ...)", mp.spawn's, DeepSpeed's): shown as that rank's evidence.
    line: str = ""

    def to_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v not in (None, "")}

    @property
    def signum(self) -> int | None:
        return -self.exitcode if self.exitcode is not None and self.exitcode < 0 else None


@record
class Summary:
    failures: list[Failure] = field(default_factory=list)
    # Where the failures were read: torchrun's ChildFailedError summary ("summary"), only its
    # agent's "failed (exitcode: N) local_rank: R" lines ("agent", which name local ranks), or
    # torch.multiprocessing.spawn's reports ("mp.spawn", which name process indexes), or
    # DeepSpeed's launcher ("deepspeed", which names local ranks).
    source: str = "summary"

    @property
    def launcher(self) -> str:
        return self.source if self.source in ("mp.spawn", "deepspeed") else "torchrun"

    @property
    def root(self) -> Failure | None:
        return next((f for f in self.failures if f.root), None)

    def by_rank(self) -> dict[int, Failure]:
        return {f.rank: f for f in self.failures}


def parse(block: str) -> Summary:
    """The failures in the text after "ChildFailedError:"; an empty Summary when there are none."""
    out = Summary()
    cur: Failure | None = None
    in_root = False
    in_tb = False
    for raw in block.splitlines():
        line = _LABEL.sub("", raw.rstrip("\r"), count=1)
        if "Root Cause (first observed failure)" in line:
            in_root, cur, in_tb = True, None, False
            continue
        if _BORDER.match(line):
            cur, in_tb = None, False
            continue
        m = _INDEX.match(line)
        if m:
            cur = Failure(rank=-1, root=in_root)
            out.failures.append(cur)
            in_tb = False
            continue
        if cur is None:
            continue
        if in_tb:
            # traceback is the template's last field; its lines were indented by two more spaces.
            cur.traceback += "\n" + (line[2:] if line.startswith("  ") else line)
            continue
        m = _FIELD.match(line)
        if m:
            key, val = m.group(1), m.group(2).strip()
            in_tb = key == "traceback"
            if key == "rank":
                r = _RANK.search(val)
                if r:
                    cur.rank, cur.local_rank = int(r.group(1)), int(r.group(2))
            elif key == "exitcode":
                e = _EXIT.search(val)
                if e:
                    cur.exitcode, cur.pid = int(e.group(1)), int(e.group(2))
                    cur.signal = e.group(3) or _signal_name(cur.exitcode)
            elif key == "error_file":
                cur.error_file = None if val in ("<N/A>", "") else val
            elif key == "traceback":
                cur.traceback = val
            elif key == "time":
                cur.time = val
            elif key == "host":
                cur.host = val
    out.failures = [f for f in out.failures if f.rank >= 0]
    for f in out.failures:
        f.traceback = f.traceback.strip()
    return out


def from_agent_lines(texts) -> Summary:
    """The failures torchrun's agent logged, for a log that has no ChildFailedError summary (cut
    off, or the job's output only up to the agent's line). The agent names local ranks, and the
    first one it logged is the first it saw fail."""
    out = Summary(source="agent")
    seen: set[int] = set()
    key, rx = _form("agent-failed")
    for t in texts:
        if key not in t:
            continue
        m = rx.search(t)
        if m is None or int(m.group("lr")) in seen:
            continue
        local = int(m.group("lr"))
        seen.add(local)
        code = int(m.group("code"))
        out.failures.append(
            Failure(
                rank=local,
                local_rank=local,
                exitcode=code,
                pid=int(m.group("pid")),
                signal=_signal_name(code),
                root=not out.failures,
                line=t,
            )
        )
    return out


def _first(texts, name: str) -> tuple[str, re.Match] | None:
    """The first line that a launcher wording (failure-events.yaml) matches, with its match:
    launchers report the first worker that failed, then stop the others."""
    needle, rx = _form(name)
    for t in texts:
        if needle in t:
            m = rx.search(t)
            if m is not None:
                return t, m
    return None


def from_spawn_lines(texts) -> Summary:
    """The process torch.multiprocessing.spawn reports as failed: "-- Process 1 terminated with
    the following error:" (an exception, shown after it) or ProcessExitedException's "process 1
    terminated with exit code 1" / "... with signal SIGKILL"."""
    out = Summary(source="mp.spawn")
    found = _first(texts, "spawn")
    if found is None:
        return out
    t, m = found
    n = int(m.group("n") or m.group("n2"))
    # "with the following error": spawn's _wrap sent the traceback and called sys.exit(1)
    code = int(m.group("code")) if m.group("code") else (1 if m.group("n") else None)
    if m.group("sig"):
        num = getattr(signal.Signals, m.group("sig"), None)
        code = -int(num) if num is not None else None
    sig = m.group("sig") or _signal_name(code)
    out.failures.append(Failure(rank=n, exitcode=code, signal=sig, root=True, line=t))
    return out


def from_deepspeed_lines(texts) -> Summary:
    """The worker DeepSpeed's launcher reports as failed first (it then kills the others)."""
    out = Summary(source="deepspeed")
    found = _first(texts, "deepspeed-worker")
    if found is None:
        return out
    t, m = found
    code = int(m.group("code")) if m.group("code") else None
    local = int(m.group("local"))
    out.failures.append(
        Failure(
            rank=local,
            local_rank=local,
            exitcode=code,
            signal=_signal_name(code),
            root=True,
            line=t,
        )
    )
    return out


def _signal_name(exitcode: int | None) -> str | None:
    if exitcode is None or exitcode >= 0:
        return None
    try:
        return signal.Signals(-exitcode).name
    except ValueError:
        return None


def forced_kills(texts, failures: list[Failure] | None = None) -> set[int]:
    """PIDs the agent SIGKILLed after they ignored its SIGTERM: their SIGKILL is its doing. Said
    by its "forcefully exiting" line; or, when that line was not kept, by a process it sent
    SIGTERM ("Sending process N closing signal SIGTERM") that then died of SIGKILL: the agent
    escalates only when SIGTERM did not end it."""
    out = set()
    asked = set()
    forced_key, forced = _form("agent-forced")
    closing_key, closing = _form("agent-closing")
    for t in texts:
        if forced_key in t:
            m = forced.search(t)
            if m:
                out.add(int(m.group("pid")))
        elif closing_key in t:
            m = closing.search(t)
            if m:
                asked.add(int(m.group("pid")))
    for f in failures or ():
        if f.pid in asked and f.signal == "SIGKILL":
            out.add(f.pid)
    return out
