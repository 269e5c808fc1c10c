"""`kb verify`: run entries' repros in isolated processes and judge them with the user's lookup.

A repro proves its entry only when its output, fed through the very lookup a user runs
(`kb.Engine.lookup`), ranks the entry first and the expected signatures are among the ones
that matched (every hit of the entry's match, the one matcher). Its fix_check must then exit 0
with the entry no longer matched.

This module is the verdict for one entry and for many; the parts live beside it, each with one
job, and their public names are re-exported here:

- verify_outcome:      the verdict words and the Outcome record
- verify_sandbox:      one program in its own interpreter, process group, environment, time limit
- verify_probe:        the torch the repros will see (Environment; the GPUs are added here)
- verify_requirements: what an entry needs, and why it is skipped when the machine lacks it
- verify_judge:        the lookup's reading of the output; --repeat runs combined
- verify_schedule:     parallel runs, memory-hungry repros alone
"""

from __future__ import annotations

import re
import sys
import threading
import time
from collections.abc import Callable, Iterable
from datetime import date

import kb.verify.gpu as gpu_mod
from kb.knowledge.evidence_output import output_excerpt
from kb.model.entry import Entry, Evidence
from kb.verify.judge import SHOWN_LINE, Judgement, combine_runs, judge, why_not
from kb.verify.outcome import (
    CANCELLED,
    ERROR,
    FIX_FAILED,
    FIX_VERIFIED,
    FLAKY,
    NOT_REPRODUCED,
    RECORDED,
    REPRODUCED,
    SKIPPED,
    TIMEOUT,
    Outcome,
)
from kb.verify.probe import PROBE_CODE, Environment, probe_torch
from kb.verify.requirements import check_requirements, missing_dependency, version_matches
from kb.verify.sandbox import (
    DEFAULT_TIMEOUT,
    HEAD_KEEP,
    KILL_GRACE,
    MAX_LINE,
    MAX_OUTPUT,
    PASS_EXACT,
    PASS_PREFIX,
    ProgramResult,
    child_env,
    run_program,
)
from kb.verify.schedule import run_scheduled

TYPE_CHECKING = False  # typing stays unimported at run time (kb lookup's cold start)

if TYPE_CHECKING:
    from kb.knowledge.base import KnowledgeBase

__all__ = [
    "CANCELLED",
    "DEFAULT_TIMEOUT",
    "ERROR",
    "FIX_FAILED",
    "FIX_VERIFIED",
    "FLAKY",
    "HEAD_KEEP",
    "KILL_GRACE",
    "MAX_LINE",
    "MAX_OUTPUT",
    "NOT_REPRODUCED",
    "PASS_EXACT",
    "PASS_PREFIX",
    "PROBE_CODE",
    "RECORDED",
    "REPRODUCED",
    "SHOWN_LINE",
    "SKIPPED",
    "TIMEOUT",
    "Environment",
    "Judgement",
    "Outcome",
    "ProgramResult",
    "check_requirements",
    "child_env",
    "combine_runs",
    "evidence_for",
    "judge",
    "probe_environment",
    "probe_torch",
    "run_program",
    "verify_entry",
    "verify_many",
    "version_matches",
]


def probe_environment(python: str = sys.executable) -> Environment:
    """The GPUs (NVML, in this process) and torch (from `python`) that repros will see."""
    info, reason = gpu_mod.inspect()
    torch, cuda, err = probe_torch(python)
    return Environment(
        python=python, gpu=info, gpu_reason=reason, torch=torch, cuda=cuda, torch_error=err
    )


def verify_entry(
    entry: Entry,
    kb: KnowledgeBase,
    env: Environment,
    python: str = sys.executable,
    timeout: float | None = None,
    on_line: Callable[[str], None] | None = None,
    cancel: threading.Event | None = None,
    trust: bool = False,
    run_fix: bool = True,
) -> Outcome:
    reason = check_requirements(entry, env, trust)
    repro = entry.repro
    if reason is None and repro is not None and repro.requires.packages:
        reason = missing_packages(repro.requires.packages, python)
    if reason is not None or repro is None:
        return Outcome(entry.id, SKIPPED, detail=reason or "no repro")
    limit = timeout or repro.timeout
    started = time.time()
    res = run_program(repro.code, repro.env, limit, python, on_line, cancel)

    def ran(status: str, detail: str, j: Judgement | None = None) -> Outcome:
        return Outcome(
            entry.id,
            status,
            duration_s=res.duration,
            output=res.output,
            exit_code=res.rc,
            started=started,
            finished=time.time(),
            detail=detail,
            matched=j.matched if j else (),
            matched_instead=tuple(i for i in j.ranked if i != entry.id) if j else (),
            lines=j.lines if j else (),
        )

    if res.rc is None:
        return ran(ERROR, res.error)
    if res.cancelled:
        return ran(CANCELLED, "cancelled; process group killed")
    if res.timed_out:
        return ran(TIMEOUT, f"still running after {limit:g}s; process group killed")
    # Looked up through this module, so a test can stand a failing judge in for the real one.
    j = judge(entry, kb, res.output)
    if j.first != entry.id or j.missing:
        need = missing_dependency(res.output, env, lambda m: _importable(python, m))
        if need is not None:
            return _unmet(entry, need, res.output, res.duration)
        return ran(NOT_REPRODUCED, why_not(entry, j, res.rc), j)
    out = ran(REPRODUCED, f"matched {', '.join(j.matched)}; exit code {res.rc}", j)
    if not run_fix or entry.fix_check is None:
        return out
    if cancel is not None and cancel.is_set():
        out.fix_status, out.fix_detail = CANCELLED, "cancelled before the fix_check ran"
        return out
    _check_fix(entry, kb, out, python, timeout, cancel, on_line)
    if out.fix_status == FIX_FAILED:
        need = missing_dependency(out.fix_output, env, lambda m: _importable(python, m))
        if need is not None:
            return _unmet(entry, need, out.fix_output, out.duration_s)
    return out


def _unmet(entry: Entry, need: str, output: str, duration: float) -> Outcome:
    """A run that stopped at importing a module the interpreter lacks: skipped, with the reason
    (its output kept); not started, so a machine where every repro ends so verified nothing."""
    return Outcome(entry.id, SKIPPED, detail=need, output=output, duration_s=duration)


_DIST_VERSIONS: dict[tuple[str, str], str] = {}
_SPEC = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(.*)$")


def missing_packages(packages: tuple[str, ...], python: str) -> str | None:
    """The first of the repro's required distributions ("transformers>=4.40") the interpreter
    lacks or has at a version outside the range, in words; None when all are there."""
    for spec in packages:
        m = _SPEC.match(spec)
        if m is None:
            return f"cannot read the package requirement {spec!r}"
        name, want = m.group(1), m.group(2).strip()
        have = _dist_version(python, name)
        if not have:
            return f"needs {spec}, {python} does not have {name}"
        if want:
            ok = version_matches(have, want)
            if ok is None:
                return f"cannot read the package requirement {spec!r}"
            if not ok:
                return f"needs {spec}, found {name} {have}"
    return None


def _dist_version(python: str, name: str) -> str:
    """The installed version of a distribution as the interpreter sees it ("" if absent)."""
    key = (python, name)
    with _IMPORTABLE_LOCK:
        if key not in _DIST_VERSIONS:
            code = (
                "import importlib.metadata as m\n"
                f"try: print(m.version({name!r}))\n"
                "except m.PackageNotFoundError: print('')\n"
            )
            res = run_program(code, {}, 120.0, python)
            lines = [ln.strip() for ln in res.output.splitlines() if ln.strip()]
            ok = res.rc == 0 and not res.timed_out and lines
            _DIST_VERSIONS[key] = lines[-1] if ok else ""
        return _DIST_VERSIONS[key]


_IMPORTABLE: dict[tuple[str, str], bool] = {}
_IMPORTABLE_LOCK = threading.Lock()


def _importable(python: str, module: str) -> bool:
    """Whether the interpreter can import the module (asked once per interpreter and module)."""
    key = (python, module)
    with _IMPORTABLE_LOCK:
        if key not in _IMPORTABLE:
            res = run_program(f"import {module}", {}, 120.0, python)
            _IMPORTABLE[key] = res.rc == 0 and not res.timed_out
        return _IMPORTABLE[key]


def _check_fix(
    entry: Entry,
    kb: KnowledgeBase,
    out: Outcome,
    python: str,
    timeout: float | None,
    cancel: threading.Event | None,
    on_line: Callable[[str], None] | None,
) -> None:
    """Run the entry's fix_check after a reproduced repro and record its verdict in `out`."""
    fix = entry.fix_check
    assert fix is not None  # verify_entry checked
    limit = timeout or fix.timeout
    fres = run_program(fix.code, fix.env, limit, python, on_line, cancel)
    out.duration_s += fres.duration
    out.finished = time.time()
    out.fix_output, out.fix_exit_code = fres.output, fres.rc
    if fres.rc is None:
        out.fix_status, why = FIX_FAILED, f"fix_check could not start: {fres.error}"
    elif fres.cancelled:
        out.fix_status, why = CANCELLED, "fix_check cancelled"
    elif fres.timed_out:
        out.fix_status, why = FIX_FAILED, f"fix_check still running after {limit:g}s"
    else:
        fj = judge(entry, kb, fres.output)
        still = bool(fj.matched) or entry.id in fj.ranked
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


def verify_many(
    entries: Iterable[Entry],
    kb: KnowledgeBase,
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
    todo = list(entries)
    results: list[Outcome | None] = [None] * len(todo)
    stop = cancel if cancel is not None else threading.Event()

    def finish(i: int, o: Outcome) -> None:
        results[i] = o
        if on_done is not None:
            on_done(o)

    shared: list[int] = []
    exclusive: list[int] = []
    for i, e in enumerate(todo):
        reason = check_requirements(e, env, trust)
        if reason is not None or e.repro is None:
            finish(i, Outcome(e.id, SKIPPED, detail=reason or "no repro"))
        else:
            (exclusive if e.repro.requires.exclusive else shared).append(i)

    def task(i: int) -> Outcome:
        e = todo[i]
        if stop.is_set():
            return Outcome(e.id, CANCELLED, detail="cancelled before it started")
        if on_start is not None:
            on_start(e)
        try:
            return verify_entry(e, kb, env, python, timeout, None, stop, trust, run_fix)
        except Exception as ex:
            return Outcome(e.id, ERROR, detail=f"kb verify failed: {type(ex).__name__}: {ex}")

    run_scheduled(shared, exclusive, task, finish, jobs, stop)
    return [o for o in results if o is not None]


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
        runs=outcome.runs,
        reproduced_runs=outcome.reproduced_runs,
        output=output_excerpt(outcome.output, outcome.lines),
    )
