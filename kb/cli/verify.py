"""`kb verify` on the command line: pick entries, show progress, print a summary, record evidence.

Exit codes: 0 every repro that ran did what its entry says (skipped ones are not failures),
1 something that should reproduce did not (not-reproduced, fix-failed, timeout, error),
2 usage (unknown id, nothing selected), 130 interrupted.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

from kb import paths
from kb.exit_codes import INTERRUPTED as EXIT_INTERRUPTED
from kb.exit_codes import NOT_FOUND as EXIT_FAILED
from kb.exit_codes import NOTHING_VERIFIED as EXIT_NOTHING
from kb.exit_codes import OK as EXIT_OK
from kb.exit_codes import USAGE as EXIT_USAGE
from kb.model.entry import Entry
from kb.verify.verifier import (
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
    Environment,
    Outcome,
    combine_runs,
    evidence_for,
    probe_environment,
    verify_many,
)

_COLORS = {
    REPRODUCED: "green",
    FIX_VERIFIED: "green",
    SKIPPED: "dim",
    CANCELLED: "yellow",
    NOT_REPRODUCED: "red",
    FIX_FAILED: "red",
    TIMEOUT: "red",
    ERROR: "red",
}


def _err(msg: str) -> None:
    print(f"kb: {msg}", file=sys.stderr)


def select_entries(
    kb, ids: list[str], areas: list[str], tags: list[str]
) -> tuple[list[Entry], str]:
    """(entries, error). Named ids are taken as given (one without a repro is reported as
    skipped); with none named, every entry that has a repro. --area/--tag filter both."""
    if ids:
        unknown = [i for i in ids if kb.get(i) is None]
        if unknown:
            hints = []
            for i in unknown:
                close = kb.closest_ids(i)
                hints.append(f"'{i}'" + (f" (did you mean {', '.join(close)}?)" if close else ""))
            return [], "no entry " + ", ".join(hints) + "; see `kb list`"
        picked = [kb.get(i) for i in dict.fromkeys(ids)]
    else:
        picked = sorted(
            (e for e in kb.entries if e.repro is not None), key=lambda e: (e.area, e.id)
        )
    if areas:
        picked = [e for e in picked if e.area in areas]
    if tags:
        picked = [e for e in picked if set(tags) & set(e.tags)]
    if not picked:
        what = (
            " matching " + " ".join([f"--area {a}" for a in areas] + [f"--tag {t}" for t in tags])
            if (areas or tags)
            else ""
        )
        return [], f"no entries with a repro{what}"
    return picked, ""


def _resolve_python(python: str) -> str | None:
    if os.sep in python:
        return python if os.path.isfile(python) and os.access(python, os.X_OK) else None
    return shutil.which(python)


def describe_environment(env: Environment) -> str:
    g = env.gpu
    if g:
        more = f" x{g.count}" if g.count > 1 else ""
        cc = f", sm {g.compute_capability}" if g.compute_capability else ""
        gpu = (
            f"{g.name}{more} ({g.memory_total_mib} MiB, {g.memory_free_mib} MiB free, "
            f"driver {g.driver}{cc})"
        )
    else:
        gpu = f"no GPU ({env.gpu_reason})" if env.gpu_reason else "no GPU"
    if env.torch:
        torch = f"torch {env.torch}, CUDA {env.cuda or 'none (CPU build)'}"
    else:
        torch = f"no torch ({env.torch_error})" if env.torch_error else "no torch"
    return f"{gpu}; {torch}; python {env.python}"


def _short_detail(o: Outcome) -> str:
    """The table's words: what matched when it worked, what went wrong when it did not."""
    if o.status == REPRODUCED:
        if o.fix_status not in ("", FIX_VERIFIED):
            return o.fix_detail
        return ", ".join(o.matched)
    detail = o.detail
    if o.status in (NOT_REPRODUCED, TIMEOUT) and o.output:
        tail = [ln for ln in o.output.splitlines() if ln.strip()][-1:]
        if tail:
            detail += f"\nlast line: {tail[0][:160]}"
    return detail


def skip_reasons(outcomes: list[Outcome]) -> dict[str, list[str]]:
    """Each reason a repro was skipped, once, with the entries it applies to (in order)."""
    out: dict[str, list[str]] = {}
    for o in outcomes:
        if o.status == SKIPPED:
            out.setdefault(o.detail or "no reason given", []).append(o.entry_id)
    return out


def _skipped_lines(outcomes: list[Outcome], console) -> None:
    import textwrap

    from rich.markup import escape

    for reason, ids in skip_reasons(outcomes).items():
        n = len(ids)
        console.print(f"[dim]skipped[/dim] {n} entr{'y' if n == 1 else 'ies'}: {escape(reason)}")
        listed = textwrap.fill(
            ", ".join(ids),
            width=max(console.width, 40),
            initial_indent="  ",
            subsequent_indent="  ",
            break_on_hyphens=False,  # entry ids are hyphenated: never split one
        )
        console.print(escape(listed), style="dim", soft_wrap=True)


def _summary_table(outcomes: list[Outcome], console) -> None:
    """One row per repro that ran (or was cancelled or failed to start); skipped ones are
    listed after it, grouped by reason: a reason shared by many entries is said once."""
    from rich.table import Table
    from rich.text import Text

    ran = [o for o in outcomes if o.status != SKIPPED]
    if not ran:
        _skipped_lines(outcomes, console)
        return

    t = Table(box=None, pad_edge=False, header_style="bold")
    for col, kw in (
        ("entry", {"no_wrap": True}),
        ("status", {"no_wrap": True}),
        ("fix", {"no_wrap": True}),
        ("time", {"justify": "right", "no_wrap": True}),
        ("detail", {"overflow": "fold"}),
    ):
        t.add_column(col, **kw)
    for o in ran:
        fix = f"[{_COLORS.get(o.fix_status, 'white')}]{o.fix_status}[/]" if o.fix_status else ""
        # A passing row's detail is only the signatures it matched: one line, cut to fit. A row
        # that needs attention keeps all of its detail, wrapped.
        passed = o.status == REPRODUCED and o.fix_status in (None, "", "fix-verified")
        detail = Text(
            _short_detail(o),
            no_wrap=passed,
            overflow="ellipsis" if passed else "fold",
        )
        t.add_row(
            o.entry_id,
            f"[{_COLORS.get(o.status, 'white')}]{o.status}[/]",
            fix,
            f"{o.duration_s:.1f}s" if o.started else "",
            detail,
        )
    console.print(t)
    _skipped_lines(outcomes, console)


def _counts(outcomes: list[Outcome]) -> str:
    n = {
        s: sum(o.status == s for o in outcomes)
        for s in (REPRODUCED, NOT_REPRODUCED, FLAKY, TIMEOUT, ERROR, SKIPPED, CANCELLED)
    }
    fixed = sum(o.fix_status == FIX_VERIFIED for o in outcomes)
    fix_failed = sum(o.fix_status == FIX_FAILED for o in outcomes)
    parts = [
        f"{n[REPRODUCED]} reproduced ({fixed} fix verified"
        + (f", {fix_failed} fix failed)" if fix_failed else ")")
    ]
    parts += [f"{v} {k}" for k, v in n.items() if k != REPRODUCED and v]
    return ", ".join(parts)


class _Signals:
    """First Ctrl-C (or SIGTERM): stop cleanly, killing every running repro's process group and
    keeping what finished. A second one: stop now (KeyboardInterrupt; groups are still killed)."""

    def __init__(self, cancel: threading.Event):
        self.cancel = cancel
        self.saved: dict[int, object] = {}

    def _handler(self, signum, frame):
        if self.cancel.is_set():
            raise KeyboardInterrupt
        self.cancel.set()
        _err("stopping: killing the running repros (again to force)")

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for s in (signal.SIGINT, signal.SIGTERM):
                self.saved[s] = signal.signal(s, self._handler)
        return self

    def __exit__(self, *exc):
        for s, h in self.saved.items():
            signal.signal(s, h)
        return False


def default_jobs(cpus: int | None = None) -> int:
    """Repros are small and mostly wait on process start-up and the GPU: half the cores keeps
    the machine responsive, and 8 keeps the GPU's memory well clear of the exclusive repros'."""
    cpus = cpus if cpus is not None else (os.cpu_count() or 2)
    return max(1, min(8, cpus // 2))


def run_verify(args) -> int:
    from kb.knowledge.base import load
    from kb.knowledge.evidence import write_evidence

    if args.jobs is None:
        args.jobs = default_jobs()
    if args.jobs < 1:
        _err("-j must be at least 1")
        return EXIT_USAGE
    if args.timeout is not None and args.timeout <= 0:
        _err("--timeout must be positive")
        return EXIT_USAGE
    python = _resolve_python(args.python)
    if python is None:
        _err(f"no Python interpreter at {args.python!r} (--python)")
        return EXIT_USAGE
    record_root: Path | None = None
    if args.record:
        record_root = Path(args.evidence_dir) if args.evidence_dir else paths.repo_evidence_dir()
        if record_root is None:
            # An installed kb (`pip install .`) has no checkout of its own to record into: the
            # records go to ./evidence, the checkout's own folder when run from a clone's root.
            record_root = Path("evidence")
            _err(
                f"records go to {record_root.resolve()} (kb runs from an installed package; "
                "--evidence-dir DIR puts them elsewhere)"
            )

    kb = load(args.kb_dir)
    entries, problem = select_entries(kb, args.ids, args.area, args.tag)
    if problem:
        _err(problem)
        # An unknown id is "not found", as in `kb show`; a filter that selects nothing is usage.
        return EXIT_FAILED if problem.startswith("no entry ") else EXIT_USAGE

    env = probe_environment(python)
    print(
        f"kb verify: {len(entries)} entr{'y' if len(entries) == 1 else 'ies'} on "
        f"{describe_environment(env)}",
        file=sys.stderr,
    )
    if not env.torch and any(e.repro and e.repro.requires.gpu for e in entries):
        _err(f"warning: {python} cannot import torch; GPU repros will fail (--python PATH?)")

    from rich.console import Console

    err_console = Console(stderr=True)
    recorded: list[Path] = []
    total = len(entries)
    done_count = [0]
    progress = None
    running: set[str] = set()
    lock = threading.Lock()

    def on_start(e: Entry) -> None:
        if progress is not None:
            with lock:
                running.add(e.id)
                progress.update(task_id, description=", ".join(sorted(running))[:60])

    def on_done(o: Outcome) -> None:
        done_count[0] += 1
        if progress is not None:
            with lock:
                running.discard(o.entry_id)
                progress.update(task_id, advance=1, description=", ".join(sorted(running))[:60])
        else:
            fix = f", {o.fix_status}" if o.fix_status else ""
            # A skip's reason is said once, in the summary, not once per entry here.
            why = "" if o.status == SKIPPED else f" ({o.detail})"
            print(
                f"[{done_count[0]}/{total}] {o.entry_id}: {o.status}{fix}"
                + (f" ({o.duration_s:.1f}s)" if o.started else why),
                file=sys.stderr,
                flush=True,
            )

    cancel = threading.Event()
    repeat = max(1, args.repeat)
    total *= repeat
    t_start = time.perf_counter()

    def run_all(on_done):
        rounds = []
        for _ in range(repeat):
            rounds.append(
                verify_many(
                    entries,
                    kb,
                    env,
                    jobs=args.jobs,
                    python=python,
                    timeout=args.timeout,
                    trust=args.trust,
                    on_done=on_done,
                    cancel=cancel,
                    on_start=on_start,
                )
            )
            if cancel.is_set():
                break
        return [combine_runs([r[i] for r in rounds]) for i in range(len(rounds[0]))]

    with _Signals(cancel):
        if sys.stderr.isatty():
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                SpinnerColumn,
                TextColumn,
                TimeElapsedColumn,
            )

            with Progress(
                SpinnerColumn(),
                TextColumn("verify"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("[dim]{task.description}"),
                console=err_console,
                transient=True,
            ) as progress:
                task_id = progress.add_task("", total=total)
                outcomes = run_all(on_done)
        else:
            task_id = None
            outcomes = run_all(on_done)
    if record_root is not None:
        recorded = [
            write_evidence(record_root, evidence_for(o, env))
            for o in outcomes
            if o.status in RECORDED
        ]
    wall = time.perf_counter() - t_start

    # The verdict is settled before anything is printed: a reader that goes away early
    # (`kb verify | head -1`) must not turn a failure into success.
    if cancel.is_set():
        rc = EXIT_INTERRUPTED
    elif any(o.failed for o in outcomes):
        rc = EXIT_FAILED
    elif not any(o.started for o in outcomes):
        rc = EXIT_NOTHING
    else:
        rc = EXIT_OK
    try:
        if args.json:
            json.dump([o.to_dict() for o in outcomes], sys.stdout, indent=2, ensure_ascii=False)
            sys.stdout.write("\n")
        else:
            import kb.render.style as render

            con = render.console(sys.stdout)
            _summary_table(outcomes, con)
            con.print(
                _counts(outcomes)
                + (f", {repeat} runs each" if repeat > 1 else "")
                + f"; wall time {wall:.1f} s"
            )
        sys.stdout.flush()
    except BrokenPipeError:
        # Point stdout at /dev/null so the interpreter's last flush does not fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    if recorded:
        print(f"kb: recorded {len(recorded)} evidence file(s) under {record_root}", file=sys.stderr)
    if rc == EXIT_NOTHING:
        _err("nothing could be verified here (every repro was skipped)")
    return rc
