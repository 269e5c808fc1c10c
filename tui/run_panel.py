"""RunPanel: runs one entry's repro (then its fix check) here, streams the output, ends in a verdict.

The run happens in a thread worker (kb.verify_entry blocks on a subprocess). Output lines
arrive on that thread; they are queued and flushed onto the log every 50 ms, so a chatty repro
cannot flood the UI with one message per line. Cancel sets the threading.Event verify_entry
watches, which kills the subprocess.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from collections.abc import Callable

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.timer import Timer
from textual.widgets import Button, RichLog, Static

from kb import Entry, Environment, KnowledgeBase, Outcome

from .verifier import Verifier

VERDICT_CLASSES = ("-good", "-bad", "-neutral", "-running")


def verdict_of(outcome: Outcome, cancelled: bool = False) -> tuple[str, str]:
    """(banner text, css class) for a verification Outcome."""
    status = outcome.status
    detail = (outcome.detail or "").strip()
    took = outcome.duration_s
    took_s = f"  ({took:.1f} s)" if took > 0 else ""
    if status == "cancelled" or (cancelled and status == "error"):
        return "CANCELLED: the repro was stopped and its processes killed" + took_s, "-neutral"
    if status == "reproduced":
        matched = ", ".join(outcome.matched) or "?"
        fix = outcome.fix_status
        why = detail.rsplit("; ", 1)[-1] if "; " in detail else ""
        fix_text = {
            "fix-verified": " · FIX VERIFIED",
            "fix-failed": " · FIX FAILED" + (f": {why}" if why else ""),
            "cancelled": " · fix check cancelled",
        }.get(fix, " · no fix check")
        return (
            f"REPRODUCED: matched {matched}{fix_text}{took_s}",
            "-bad" if fix == "fix-failed" else "-good",
        )
    if status == "not-reproduced":
        instead = ", ".join(outcome.matched_instead)
        why = f"; the output matched {instead} instead" if instead else ""
        return f"NOT REPRODUCED{why}" + (f": {detail}" if detail else "") + took_s, "-bad"
    if status == "timeout":
        return "TIMED OUT" + (f": {detail}" if detail else "") + took_s, "-bad"
    if status == "skipped":
        return f"SKIPPED: {detail or 'requirements not met on this machine'}", "-neutral"
    return f"ERROR: {detail or status}" + took_s, "-bad"


def describe_environment(env: Environment) -> str:
    gpu = env.gpu
    where = (
        f"{gpu.name} ×{gpu.count}, driver {gpu.driver}"
        if gpu is not None
        else "no GPU" + (f": {env.gpu_reason}" if env.gpu_reason else "")
    )
    if env.torch:
        torch = f"torch {env.torch}" + (f", CUDA {env.cuda}" if env.cuda else " (CPU build)")
    else:
        torch = f"no torch in {env.python}" + (f": {env.torch_error}" if env.torch_error else "")
    return f"{where}; {torch}"


class RunPanel(Vertical):
    class Finished(Message):
        def __init__(self, outcome: Outcome, cancelled: bool) -> None:
            super().__init__()
            self.outcome = outcome
            self.cancelled = cancelled

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.entry: Entry | None = None
        self.outcome: Outcome | None = None
        self.running = False
        self._cancel = threading.Event()
        self._lines: deque[str] = deque()
        self._flush_timer: Timer | None = None
        self._env_line = ""

    def compose(self) -> ComposeResult:
        with Horizontal(id="run-bar"):
            yield Static("No entry selected.", id="run-target", markup=False)
            yield Button("Run", id="run-start", variant="primary", compact=True)
            yield Button("Cancel", id="run-cancel", variant="error", compact=True, disabled=True)
        yield Static("", id="run-verdict", markup=False)
        yield RichLog(
            id="run-log", max_lines=5000, min_width=20, wrap=True, markup=False, highlight=False
        )

    def on_mount(self) -> None:
        self.query_one("#run-verdict").display = False

    def set_target(self, entry: Entry | None) -> None:
        if self.running:
            return
        self.entry = entry
        text = (
            "No entry selected."
            if entry is None
            else (f"{entry.id}: no repro" if entry.repro is None else f"{entry.id}")
        )
        self.query_one("#run-target", Static).update(text)
        self.query_one("#run-start", Button).disabled = entry is None or entry.repro is None

    def _banner(self, text: str, cls: str) -> None:
        banner = self.query_one("#run-verdict", Static)
        banner.remove_class(*VERDICT_CLASSES)
        banner.add_class(cls)
        banner.update(text)
        banner.display = True

    # ------------------------------------------------------------------ running
    def start(
        self,
        entry: Entry,
        kb: KnowledgeBase,
        get_environment: Callable[[], Environment],
        verifier: Verifier,
        trust: bool = False,
        python: str = sys.executable,
    ) -> bool:
        if self.running:
            return False
        self.set_target(entry)
        self.entry = entry
        self.outcome = None
        self.running = True
        self._cancel = threading.Event()
        log = self.query_one("#run-log", RichLog)
        log.clear()
        log.write(
            Text(
                f"$ kb verify {entry.id}" + ("  (trusted local entry)" if trust else ""),
                style="bold",
            )
        )
        self._banner(f"RUNNING {entry.id}… (c or esc cancels)", "-running")
        self.query_one("#run-start", Button).disabled = True
        self.query_one("#run-cancel", Button).disabled = False
        self._flush_timer = self.set_interval(0.05, self._flush)
        cancel = self._cancel
        self.run_worker(
            lambda: self._work(entry, kb, get_environment, verifier, trust, python, cancel),
            thread=True,
            group="repro",
            exclusive=True,
            exit_on_error=False,
        )
        return True

    def cancel(self) -> bool:
        if not self.running:
            return False
        self._cancel.set()
        self._lines.append("^C cancelling…")
        return True

    def _work(
        self,
        entry: Entry,
        kb: KnowledgeBase,
        get_environment: Callable[[], Environment],
        verifier: Verifier,
        trust: bool,
        python: str,
        cancel: threading.Event,
    ) -> None:
        outcome: Outcome
        t0 = time.monotonic()
        try:
            self._lines.append("checking this machine (GPU, torch)…")
            env = get_environment()
            self._env_line = "here: " + describe_environment(env)
            self._lines.append(self._env_line)
            if cancel.is_set():
                raise _Cancelled()
            outcome = verifier.verify_entry(
                entry,
                kb,
                env,
                python=python,
                on_line=self._lines.append,
                cancel=cancel,
                trust=trust,
            )
        except _Cancelled:
            outcome = Outcome(
                entry.id,
                "cancelled",
                detail="cancelled before the repro started",
                duration_s=time.monotonic() - t0,
            )
        except Exception as e:  # the UI reports it; it must not take the app down
            outcome = Outcome(
                entry.id,
                "error",
                detail=f"{e.__class__.__name__}: {e}",
                duration_s=time.monotonic() - t0,
            )
        try:
            self.app.call_from_thread(self._done, outcome, cancel.is_set())
        except RuntimeError:  # the app closed while the repro ran
            pass

    def _flush(self) -> None:
        if not self._lines:
            return
        log = self.query_one("#run-log", RichLog)
        n = len(self._lines)
        for _ in range(n):
            log.write(Text(self._lines.popleft().rstrip("\n")))

    def _rewrite_sections(self, log: RichLog, outcome: Outcome) -> None:
        """Once both programs ran, show their outputs apart: the stream could not tell them apart."""
        log.clear()
        log.write(Text(f"$ kb verify {outcome.entry_id}", style="bold"))
        if self._env_line:
            log.write(Text(self._env_line))
        log.write(Text(f"── repro (exit code {outcome.exit_code}) ──", style="bold"))
        matched = [m.rstrip(".") for m in outcome.lines]
        for line in (outcome.output or "").splitlines():
            hit = any(
                m and line.strip().startswith(m) for m in matched
            )  # the lines the signatures matched
            log.write(Text(line, style="bold underline" if hit else ""))
        log.write(Text(f"── fix check (exit code {outcome.fix_exit_code}) ──", style="bold"))
        for line in (outcome.fix_output or "").splitlines():
            log.write(Text(line))

    def _done(self, outcome: Outcome, cancelled: bool) -> None:
        self._flush()
        if self._flush_timer is not None:
            self._flush_timer.stop()
            self._flush_timer = None
        self.running = False
        self.outcome = outcome
        text, cls = verdict_of(outcome, cancelled)
        self._banner(text, cls)
        log = self.query_one("#run-log", RichLog)
        if outcome.fix_output or outcome.fix_exit_code is not None:
            self._rewrite_sections(log, outcome)
        detail = (outcome.detail or "").strip()
        log.write(Text(text.split("  (")[0], style="bold"))
        if detail and detail not in text:
            log.write(Text(detail))
        # The banner just shown shortens the log after these writes scrolled it: end at the
        # verdict once that layout is done, or a busy machine leaves the last lines out of view.
        self.call_after_refresh(log.scroll_end, animate=False)
        self.query_one("#run-cancel", Button).disabled = True
        self.query_one("#run-start", Button).disabled = (
            self.entry is None or self.entry.repro is None
        )
        self.post_message(self.Finished(outcome, cancelled))


class _Cancelled(Exception):
    pass
