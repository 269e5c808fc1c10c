"""`kb verify`: run entries' repros in isolated processes and judge them with the user's lookup.

A repro proves its entry only when its output, fed through the very lookup a user runs
(`kb.Engine.lookup`), ranks the entry first and the expected signatures are among the ones
that matched (every hit of the entry's match, the one matcher). Its fix_check must then exit 0 with the
entry no longer matched.

Isolation, because a repro is meant to crash, hang or fill the GPU: each program runs in a fresh
interpreter (`--python`, torch lives only there), in its own process group and temporary folder,
with an explicit environment, a timeout and capped output. A timeout or a cancel kills the whole
group (SIGTERM, then SIGKILL after a grace period), and the group is killed again when the program
ends, so nothing it started outlives it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass
from datetime import date

from . import gpu as gpu_mod
from .gpu import GpuInfo
from .model import Entry, Evidence

# Verdicts.
REPRODUCED, NOT_REPRODUCED, TIMEOUT, ERROR, SKIPPED, CANCELLED = (
    "reproduced",
    "not-reproduced",
    "timeout",
    "error",
    "skipped",
    "cancelled",
)
FIX_VERIFIED, FIX_FAILED = "fix-verified", "fix-failed"
FLAKY = "flaky"  # --repeat: the runs did not agree
# Outcomes that mean "the hardware said something": the only ones --record writes.
RECORDED = (REPRODUCED, NOT_REPRODUCED, TIMEOUT, FLAKY)

DEFAULT_TIMEOUT = 120.0
KILL_GRACE = 3.0  # seconds between SIGTERM and SIGKILL to a process group
MAX_OUTPUT = 256 << 10  # characters of a program's output kept...
HEAD_KEEP = 32 << 10  # ...of which the first ones (the root error is early), the rest from the end
MAX_LINE = 16 << 10  # a longer line is read in pieces
SHOWN_LINE = 200  # matched lines are kept this short in outcomes and evidence

# Passed through from kb's own environment when set; everything else a repro sees is explicit.
PASS_EXACT = (
    "PATH",
    "HOME",
    "LANG",
    "TMPDIR",
    "CUDA_VISIBLE_DEVICES",
    "LD_LIBRARY_PATH",
    "PYTHONPATH",
)
PASS_PREFIX = ("NCCL_", "TORCH_", "NVSHMEM_")

PROBE_CODE = (
    "import json, torch; "
    'print(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda}))'
)


# ---------------------------------------------------------------- results
@dataclass
class ProgramResult:
    rc: int | None  # None: never started (see error)
    output: str  # stdout and stderr interleaved, as a terminal shows them; capped
    timed_out: bool = False
    cancelled: bool = False
    duration: float = 0.0
    error: str = ""
    cut: int = 0  # characters dropped from the middle of the output


@dataclass
class Outcome:
    entry_id: str
    status: str
    fix_status: str = ""
    duration_s: float = 0.0
    output: str = ""  # what the repro printed (capped: head and tail)
    matched: tuple[str, ...] = ()  # this entry's signature ids found in the output
    matched_instead: tuple[str, ...] = ()  # other entries the lookup ranked, best first
    detail: str = ""
    lines: tuple[str, ...] = ()  # the output lines the signatures matched, short
    exit_code: int | None = None
    fix_output: str = ""
    fix_exit_code: int | None = None
    fix_detail: str = ""  # why the fix_check passed or failed (also the end of detail)
    started: float = 0.0  # time.time() when the repro started; 0 when it never ran
    finished: float = 0.0

    @property
    def failed(self) -> bool:
        """Something that should reproduce did not (skipped and cancelled are not failures)."""
        return self.status in (NOT_REPRODUCED, TIMEOUT, ERROR, FLAKY) or self.fix_status in (
            FIX_FAILED,
            FLAKY,
        )

    def to_dict(self, output_limit: int = 8192) -> dict:
        d = asdict(self)
        for k in ("matched", "matched_instead", "lines"):
            d[k] = list(d[k])
        for k in ("output", "fix_output"):
            if output_limit and len(d[k]) > output_limit:
                d[k] = d[k][-output_limit:]
        d["duration_s"] = round(self.duration_s, 3)
        return d


@dataclass(frozen=True)
class Environment:
    """Where repros run: the GPUs (from NVML, in this process) and torch (from the child)."""

    python: str = sys.executable
    gpu: GpuInfo | None = None
    gpu_reason: str = ""  # why gpu is None
    torch: str = ""  # "" when the interpreter cannot import torch
    cuda: str = ""  # torch.version.cuda; "" for a CPU build
    torch_error: str = ""


# ---------------------------------------------------------------- versions
_RELEASE = re.compile(r"\s*v?(\d+(?:\.\d+)*)")
_CLAUSE = re.compile(r"^\s*(~=|==|!=|<=|>=|<|>)?\s*v?(\d+(?:\.\d+)*)(\.\*)?\s*$")


def _release(v: str) -> tuple[int, ...] | None:
    m = _RELEASE.match(v)
    return tuple(int(x) for x in m.group(1).split(".")) if m else None


def _cmp(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    n = max(len(a), len(b))
    a, b = a + (0,) * (n - len(a)), b + (0,) * (n - len(b))
    return (a > b) - (a < b)


def version_matches(version: str, spec: str) -> bool | None:
    """Does a version ("2.11.0+cu130", "9.0") meet a PEP 440-style specifier (">=2.1,<2.6",
    "==2.4.*", "~=8.0", bare "9.0" meaning ==)? Release numbers only: pre-release and local
    tags count as their release. None when either cannot be read."""
    have = _release(version)
    if have is None:
        return None
    for clause in (c for c in spec.split(",") if c.strip()):
        m = _CLAUSE.match(clause)
        if not m:
            return None
        op, want, star = (
            m.group(1) or "==",
            tuple(int(x) for x in m.group(2).split(".")),
            m.group(3),
        )
        if star:
            if op not in ("==", "!="):
                return None
            ok = have[: len(want)] + (0,) * max(0, len(want) - len(have)) == want
            ok = ok if op == "==" else not ok
        elif op == "~=":
            if len(want) < 2:
                return None
            ok = _cmp(have, want) >= 0 and have[: len(want) - 1] == want[:-1]
        else:
            c = _cmp(have, want)
            ok = {"==": c == 0, "!=": c != 0, "<=": c <= 0, ">=": c >= 0, "<": c < 0, ">": c > 0}[
                op
            ]
        if not ok:
            return False
    return True


# ---------------------------------------------------------------- requirements
# A repro that imports torch needs it whether or not it names a version range.
_IMPORTS_TORCH = re.compile(
    r"^[ \t]*(?:from[ \t]+torch\b|import[ \t]+(?:[\w.]+[ \t]*,[ \t]*)*torch\b)", re.MULTILINE
)


def check_requirements(entry: Entry, env: Environment, trust: bool = False) -> str | None:
    """None when the entry's repro can run here; otherwise the unmet requirement, in words."""
    if entry.repro is None:
        return "no repro"
    if entry.local and not trust:
        return "local entry: pass --trust"
    req = entry.repro.requires
    g = env.gpu
    if req.gpu:
        if g is None:
            return f"no GPU: {env.gpu_reason}" if env.gpu_reason else "no GPU"
        if g.count < req.gpus:
            return f"needs {req.gpus} GPUs, {g.count} visible"
        if req.free_memory_gb and g.memory_free_mib < req.free_memory_gb * 1024:
            return (
                f"needs {req.free_memory_gb:g} GiB free GPU memory, "
                f"{g.memory_free_mib / 1024:.1f} GiB free on {g.name}"
            )
        if req.compute_capability:
            if not g.compute_capability:
                return f"needs compute capability {req.compute_capability}, NVML cannot tell {g.name}'s"
            ok = version_matches(g.compute_capability, req.compute_capability)
            if ok is None:
                return f"cannot read the compute_capability requirement {req.compute_capability!r}"
            if not ok:
                return f"needs compute capability {req.compute_capability}, {g.name} is {g.compute_capability}"
    if not req.torch and not env.torch and _IMPORTS_TORCH.search(entry.repro.code):
        why = f" ({env.torch_error})" if env.torch_error else ""
        return f"needs torch, {env.python} cannot import torch{why}"
    if req.torch:
        if not env.torch:
            why = f" ({env.torch_error})" if env.torch_error else ""
            return f"needs torch {req.torch}, {env.python} cannot import torch{why}"
        ok = version_matches(env.torch, req.torch)
        if ok is None:
            return f"cannot read the torch requirement {req.torch!r}"
        if not ok:
            return f"needs torch {req.torch}, found {env.torch}"
    return None


# ---------------------------------------------------------------- running one program
def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The whole environment a repro gets: a minimal base, chosen pass-throughs, its own env."""
    env = {k: v for k, v in os.environ.items() if k in PASS_EXACT or k.startswith(PASS_PREFIX)}
    env.setdefault("PATH", os.defpath)
    env.setdefault("LANG", "C.UTF-8")
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONIOENCODING"] = "utf-8:backslashreplace"
    for k, v in (extra or {}).items():
        env[str(k)] = str(v)
    return env


class _Output:
    """The first HEAD_KEEP characters and the last ones up to MAX_OUTPUT; the middle is counted."""

    def __init__(self, limit: int = MAX_OUTPUT, head: int = HEAD_KEEP):
        self.limit, self.head_limit = limit, head
        self.head: list[str] = []
        self.head_size = 0
        self.tail: deque[str] = deque()
        self.tail_size = 0
        self.cut = 0
        self.lock = threading.Lock()

    def add(self, line: str) -> None:
        n = len(line) + 1
        with self.lock:
            if not self.tail and self.head_size + n <= self.head_limit:
                self.head.append(line)
                self.head_size += n
                return
            self.tail.append(line)
            self.tail_size += n
            while self.tail_size > self.limit - self.head_size and len(self.tail) > 1:
                dropped = self.tail.popleft()
                self.tail_size -= len(dropped) + 1
                self.cut += len(dropped) + 1

    def text(self) -> str:
        with self.lock:
            mid = [f"[... kb verify cut {self.cut} characters here ...]"] if self.cut else []
            return "\n".join(self.head + mid + list(self.tail))


def _pump(stream, out: _Output, on_line: Callable[[str], None] | None) -> None:
    try:
        for raw in iter(lambda: stream.readline(MAX_LINE), b""):
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            out.add(line)
            if on_line is not None:
                try:
                    on_line(line)
                except Exception:
                    pass
    except (OSError, ValueError):
        pass
    finally:
        try:
            stream.close()
        except OSError:
            pass


def _exited(proc: subprocess.Popen) -> bool:
    """Has the child exited? Without reaping it: while it is an unreaped zombie its process
    group id cannot be reused, so killing the group afterwards can hit nobody else."""
    if proc.returncode is not None:
        return True
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True
    except AttributeError:  # pragma: no cover - no waitid on this platform
        return proc.poll() is not None


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _stop(proc: subprocess.Popen, grace: float) -> None:
    """SIGTERM to the group; SIGKILL follows in run_program's cleanup after the grace period."""
    _signal_group(proc.pid, signal.SIGTERM)
    end = time.monotonic() + grace
    while not _exited(proc) and time.monotonic() < end:
        time.sleep(0.02)


def run_program(
    code: str,
    env: dict | None,
    timeout: float,
    python: str = sys.executable,
    on_line: Callable[[str], None] | None = None,
    cancel: threading.Event | None = None,
) -> ProgramResult:
    """Run `code` as a script in a fresh interpreter, isolated (see the module doc).

    env is the program's own variables, added to the explicit base (child_env). on_line gets each
    output line as it arrives, from a reader thread. Setting `cancel` stops the program like a
    timeout does. Never raises for the program's sake; an interrupt of the caller (Ctrl-C) kills
    the group before it propagates.
    """
    tmp = tempfile.mkdtemp(prefix="kb-verify-")
    try:
        script = os.path.join(tmp, "repro.py")
        with open(script, "w", encoding="utf-8") as fh:
            fh.write(code)
        t0 = time.monotonic()
        try:
            proc = subprocess.Popen(
                [python, script],
                cwd=tmp,
                env=child_env(env),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as e:
            return ProgramResult(None, "", error=f"cannot start {python}: {e.strerror or e}")
        out = _Output()
        reader = threading.Thread(target=_pump, args=(proc.stdout, out, on_line), daemon=True)
        reader.start()
        timed_out = cancelled = finished = False
        deadline = t0 + timeout
        try:
            while not _exited(proc):
                if cancel is not None and cancel.is_set():
                    cancelled = True
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    timed_out = True
                    break
                step = min(0.05, left)
                if cancel is not None:
                    cancel.wait(step)
                else:
                    time.sleep(step)
            finished = True
        finally:
            try:
                if timed_out or cancelled or not finished:
                    _stop(proc, KILL_GRACE)
            finally:  # a second Ctrl-C during the grace period still ends the group
                # Always, also after a clean exit: whatever the program left running in its
                # group (a daemonised helper, a stuck worker) dies with it.
                _signal_group(proc.pid, signal.SIGKILL)
                rc = proc.wait()
            duration = time.monotonic() - t0
            reader.join(timeout=5.0)
        detail = ""
        if reader.is_alive():  # something escaped the group (setsid) and holds the pipe open
            detail = "output pipe still held open by a process outside the repro's group"
        return ProgramResult(rc, out.text(), timed_out, cancelled, duration, detail, out.cut)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ---------------------------------------------------------------- environment
def probe_torch(python: str = sys.executable, timeout: float = 120.0) -> tuple[str, str, str]:
    """(torch version, CUDA runtime, error) as the given interpreter sees them."""
    res = run_program(PROBE_CODE, {}, timeout, python)
    if res.error:
        return "", "", res.error
    if res.timed_out:
        return "", "", f"`import torch` took over {timeout:g}s"
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    if res.rc == 0 and lines:
        try:
            data = json.loads(lines[-1])
            return str(data.get("torch") or ""), str(data.get("cuda") or ""), ""
        except (ValueError, AttributeError):
            pass
    return "", "", (lines[-1] if lines else f"exit code {res.rc}")[:200]


def probe_environment(python: str = sys.executable) -> Environment:
    info, reason = gpu_mod.inspect()
    torch, cuda, err = probe_torch(python)
    return Environment(
        python=python, gpu=info, gpu_reason=reason, torch=torch, cuda=cuda, torch_error=err
    )


# ---------------------------------------------------------------- judging output
@dataclass(frozen=True)
class Judgement:
    ranked: tuple[str, ...]  # entry ids, as the lookup ranked them
    matched: tuple[str, ...]  # this entry's signature ids that matched, in order of appearance
    lines: tuple[str, ...]  # the lines they matched
    missing: tuple[str, ...]  # expected signature ids that did not match

    @property
    def first(self) -> str | None:
        return self.ranked[0] if self.ranked else None


def judge(entry: Entry, kb, output: str) -> Judgement:
    """What the user's lookup makes of a program's output: one scan, whose match for this entry
    carries every signature and line that fired."""
    from .engine import engine_for

    result = engine_for(kb).lookup(output, top=len(kb.entries) or 1)
    mine = next((m for m in result.matches if m.id == entry.id), None)
    matched: list[str] = []
    lines: list[str] = []
    own = {s.id for s in entry.signatures}  # not the code sightings: a repro proves wordings
    for h in mine.hits if mine else ():
        if h.signature not in own:
            continue
        if h.signature not in matched:
            matched.append(h.signature)
        short = h.line.strip()
        short = short if len(short) <= SHOWN_LINE else short[: SHOWN_LINE - 3] + "..."
        if short not in lines and len(lines) < 5:
            lines.append(short)
    expect = entry.repro.expect if entry.repro else ()
    return Judgement(
        tuple(m.id for m in result.matches[:5]),
        tuple(matched),
        tuple(lines),
        tuple(s for s in expect if s not in matched),
    )


def _why_not(entry: Entry, j: Judgement, rc: int | None) -> str:
    parts = []
    if j.first is None:
        parts.append("the lookup matched no entry")
    elif j.first != entry.id:
        parts.append(f"the lookup ranked {j.first} first")
    if j.missing:
        parts.append("expected signature(s) not in the output: " + ", ".join(j.missing))
    parts.append(f"exit code {rc}")
    return "; ".join(parts)


# ---------------------------------------------------------------- one entry
def verify_entry(
    entry: Entry,
    kb,
    env: Environment,
    python: str = sys.executable,
    timeout: float | None = None,
    on_line: Callable[[str], None] | None = None,
    cancel: threading.Event | None = None,
    trust: bool = False,
    run_fix: bool = True,
) -> Outcome:
    reason = check_requirements(entry, env, trust)
    if reason is not None:
        return Outcome(entry.id, SKIPPED, detail=reason)
    repro = entry.repro
    started = time.time()
    res = run_program(repro.code, repro.env, timeout or repro.timeout, python, on_line, cancel)
    base = {
        "entry_id": entry.id,
        "duration_s": res.duration,
        "output": res.output,
        "exit_code": res.rc,
        "started": started,
        "finished": time.time(),
    }
    if res.rc is None:
        return Outcome(status=ERROR, detail=res.error, **base)
    if res.cancelled:
        return Outcome(status=CANCELLED, detail="cancelled; process group killed", **base)
    if res.timed_out:
        return Outcome(
            status=TIMEOUT,
            detail=f"still running after {timeout or repro.timeout:g}s; process group killed",
            **base,
        )
    j = judge(entry, kb, res.output)
    others = tuple(i for i in j.ranked if i != entry.id)
    if j.first != entry.id or j.missing:
        return Outcome(
            status=NOT_REPRODUCED,
            matched=j.matched,
            matched_instead=others,
            lines=j.lines,
            detail=_why_not(entry, j, res.rc),
            **base,
        )
    out = Outcome(
        status=REPRODUCED,
        matched=j.matched,
        matched_instead=others,
        lines=j.lines,
        detail=f"matched {', '.join(j.matched)}; exit code {res.rc}",
        **base,
    )
    if not run_fix or entry.fix_check is None:
        return out
    if cancel is not None and cancel.is_set():
        out.fix_status, out.fix_detail = CANCELLED, "cancelled before the fix_check ran"
        return out
    fix = entry.fix_check
    fres = run_program(fix.code, fix.env, timeout or fix.timeout, python, on_line, cancel)
    out.duration_s += fres.duration
    out.finished = time.time()
    out.fix_output, out.fix_exit_code = fres.output, fres.rc
    if fres.rc is None:
        out.fix_status, why = FIX_FAILED, f"fix_check could not start: {fres.error}"
    elif fres.cancelled:
        out.fix_status, why = CANCELLED, "fix_check cancelled"
    elif fres.timed_out:
        out.fix_status, why = (
            FIX_FAILED,
            f"fix_check still running after {timeout or fix.timeout:g}s",
        )
    else:
        fj = judge(entry, kb, fres.output)
        still = fj.matched or entry.id in fj.ranked
        if fres.rc != 0:
            out.fix_status, why = FIX_FAILED, f"fix_check exit code {fres.rc}"
            if still:
                why += ", and the entry still matches"
        elif still:
            out.fix_status = FIX_FAILED
            why = "fix_check output still matches the entry" + (
                f" ({', '.join(fj.matched)})" if fj.matched else ""
            )
        else:
            out.fix_status, why = FIX_VERIFIED, "fix_check exit code 0, entry no longer matched"
    out.fix_detail = why
    out.detail += "; " + why
    return out


# ---------------------------------------------------------------- many entries
def verify_many(
    entries: Iterable[Entry],
    kb,
    env: Environment,
    jobs: int = 1,
    python: str = sys.executable,
    timeout: float | None = None,
    trust: bool = False,
    on_done: Callable[[Outcome], None] | None = None,
    cancel: threading.Event | None = None,
    on_start: Callable[[Entry], None] | None = None,
    run_fix: bool = True,
) -> list[Outcome]:
    """Outcomes in the order of `entries`. Up to `jobs` repros run at once; an exclusive one
    (it fills the GPU) runs with nothing beside it. on_done is called in the calling thread,
    on_start in a worker thread. A KeyboardInterrupt sets cancel, waits for every running group
    to be killed, then propagates."""
    entries = list(entries)
    results: list[Outcome | None] = [None] * len(entries)
    cancel = cancel if cancel is not None else threading.Event()

    def finish(i: int, o: Outcome) -> None:
        results[i] = o
        if on_done is not None:
            on_done(o)

    shared: list[int] = []
    exclusive: list[int] = []
    for i, e in enumerate(entries):
        reason = check_requirements(e, env, trust)
        if reason is not None:
            finish(i, Outcome(e.id, SKIPPED, detail=reason))
        else:
            (exclusive if e.repro.requires.exclusive else shared).append(i)

    def task(i: int) -> Outcome:
        e = entries[i]
        if cancel.is_set():
            return Outcome(e.id, CANCELLED, detail="cancelled before it started")
        if on_start is not None:
            on_start(e)
        try:
            return verify_entry(e, kb, env, python, timeout, None, cancel, trust, run_fix)
        except Exception as ex:
            return Outcome(e.id, ERROR, detail=f"kb verify failed: {type(ex).__name__}: {ex}")

    pending: dict[Future, int] = {}

    def collect(block: bool) -> None:
        done, _ = wait(list(pending), timeout=0.2 if block else 0, return_when=FIRST_COMPLETED)
        for f in done:
            finish(pending.pop(f), f.result())

    with ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="kb-verify") as pool:
        try:
            for i in shared:
                pending[pool.submit(task, i)] = i
            while pending:
                collect(True)
            for i in exclusive:  # one at a time, after everything else has finished
                pending[pool.submit(task, i)] = i
                while pending:
                    collect(True)
        except BaseException:
            cancel.set()
            while pending:
                done, _ = wait(list(pending))
                for f in done:
                    finish(pending.pop(f), f.result())
            raise
    return [o for o in results if o is not None]


# ---------------------------------------------------------------- evidence
def evidence_for(outcome: Outcome, env: Environment, today: str | None = None) -> Evidence:
    g = env.gpu
    return Evidence(
        entry=outcome.entry_id,
        status=outcome.status,
        fix_status=outcome.fix_status,
        gpu=g.name if g else "no GPU",
        gpu_memory_mib=g.memory_total_mib if g else 0,
        driver=g.driver if g else "",
        cuda=env.cuda,
        torch=env.torch or "none",
        date=today or date.today().isoformat(),
        duration_s=round(outcome.duration_s, 2),
        matched=outcome.lines,
        detail=outcome.detail[:500],
    )


def combine_runs(runs: list[Outcome]) -> Outcome:
    """One verdict from the same entry run N times (`kb verify --repeat N`): the common verdict
    when every run agrees, else FLAKY with the counts and each run's exit codes, so a proof that
    holds only sometimes says so."""
    from collections import Counter
    from dataclasses import replace

    first = runs[0]
    if len(runs) == 1:
        return first
    statuses = Counter(o.status for o in runs)
    fixes = Counter(o.fix_status for o in runs)
    codes = ", ".join(
        f"{o.exit_code}" + (f"/{o.fix_exit_code}" if o.fix_exit_code is not None else "")
        for o in runs
    )
    counts = "; ".join(f"{s} {n}/{len(runs)}" for s, n in statuses.items())
    if len(fixes) > 1:
        counts += "; fix: " + ", ".join(
            f"{s or 'not run'} {n}/{len(runs)}" for s, n in fixes.items()
        )
    took = sum(o.duration_s for o in runs) / len(runs)
    if len(statuses) == 1 and len(fixes) == 1:
        return replace(
            first,
            duration_s=took,
            detail=(first.detail + " " if first.detail else "")
            + f"(all {len(runs)} runs agree; exit codes {codes})",
        )
    odd = next(o for o in runs if (o.status, o.fix_status) != (first.status, first.fix_status))
    return replace(
        first,
        status=FLAKY,
        fix_status=FLAKY if len(fixes) > 1 else first.fix_status,
        duration_s=took,
        detail=f"runs disagree: {counts}; exit codes (repro/fix) {codes}; "
        f"one run: {odd.detail or first.detail}",
    )
