"""RunPanel: runs one entry's repro (then its fix check) here, streams the output, ends in a verdict.

The run happens in a thread worker (kb.verify.verify_entry blocks on a subprocess). Output lines
arrive on that thread; they are queued and flushed onto the log every 50 ms, so a chatty repro
cannot flood the UI with one message per line. Cancel sets the threading.Event verify_entry
watches, which kills the subprocess.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from typing import Any, Callable

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Button, RichLog, Static

from kb.model import Entry

VERDICT_CLASSES = ("-good", "-bad", "-neutral", "-running")


def verdict_of(outcome: Any, cancelled: bool = False) -> tuple[str, str]:
    """(banner text, css class) for a kb.verify Outcome."""
    status = getattr(outcome, "status", "error")
    detail = (getattr(outcome, "detail", "") or "").strip()
    took = getattr(outcome, "duration_s", None)
    took_s = f"  ({took:.1f} s)" if isinstance(took, (int, float)) and took > 0 else ""
    if status == "cancelled" or (cancelled and status == "error"):
        return "CANCELLED: the repro was stopped and its processes killed" + took_s, "-neutral"
    if status == "reproduced":
        matched = ", ".join(getattr(outcome, "matched", ()) or ()) or "?"
        fix = getattr(outcome, "fix_status", "")
        why = detail.rsplit("; ", 1)[-1] if "; " in detail else ""
        fix_text = {"fix-verified": " · FIX VERIFIED",
                    "fix-failed": " · FIX FAILED" + (f": {why}" if why else ""),
                    "cancelled": " · fix check cancelled"}.get(fix, " · no fix check")
        return f"REPRODUCED: matched {matched}{fix_text}{took_s}", \
            "-bad" if fix == "fix-failed" else "-good"
    if status == "not-reproduced":
        instead = ", ".join(getattr(outcome, "matched_instead", ()) or ())
        why = f"; the output matched {instead} instead" if instead else ""
        return f"NOT REPRODUCED{why}" + (f": {detail}" if detail else "") + took_s, "-bad"
    if status == "timeout":
        return "TIMED OUT" + (f": {detail}" if detail else "") + took_s, "-bad"
    if status == "skipped":
        return f"SKIPPED: {detail or 'requirements not met on this machine'}", "-neutral"
    return f"ERROR: {detail or status}" + took_s, "-bad"


def describe_environment(env: Any) -> str:
    gpu = getattr(env, "gpu", None)
    where = f"{gpu.name} (driver {gpu.driver})" if gpu is not None else \
        "no GPU" + (f" ({env.gpu_reason})" if getattr(env, "gpu_reason", "") else "")
    torch = getattr(env, "torch", "")
    cuda = getattr(env, "cuda", "")
    return f"{where} · torch {torch or 'not importable'}" + (f" · CUDA {cuda}" if cuda else "")


class RunPanel(Vertical):
    class Finished(Message):
        def __init__(self, outcome: Any, cancelled: bool) -> None:
            super().__init__()
            self.outcome = outcome
            self.cancelled = cancelled

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.entry: Entry | None = None
        self.outcome: Any = None
        self.running = False
        self._cancel = threading.Event()
        self._lines: deque[str] = deque()
        self._flush_timer = None
        self._env_line = ""

    def compose(self) -> ComposeResult:
        with Horizontal(id="run-bar"):
            yield Static("No entry selected.", id="run-target", markup=False)
            yield Button("Run r", id="run-start", variant="primary", compact=True)
            yield Button("Cancel c", id="run-cancel", variant="error", compact=True, disabled=True)
        yield Static("", id="run-verdict", markup=False)
        yield RichLog(id="run-log", max_lines=5000, min_width=20, wrap=True, markup=False, highlight=False)

    def on_mount(self) -> None:
        self.query_one("#run-verdict").display = False

    def set_target(self, entry: Entry | None) -> None:
        if self.running:
            return
        self.entry = entry
        text = "No entry selected." if entry is None else (
            f"{entry.id}: no repro" if entry.repro is None else f"{entry.id}")
        self.query_one("#run-target", Static).update(text)
        self.query_one("#run-start", Button).disabled = entry is None or entry.repro is None

    def _banner(self, text: str, cls: str) -> None:
        banner = self.query_one("#run-verdict", Static)
        banner.remove_class(*VERDICT_CLASSES)
        banner.add_class(cls)
        banner.update(text)
        banner.display = True

    # ------------------------------------------------------------------ running
    def start(self, entry: Entry, kb: Any, get_environment: Callable[[], Any], verify: Any,
              trust: bool = False, python: str = sys.executable) -> bool:
        if self.running:
            return False
        self.set_target(entry)
        self.entry = entry
        self.outcome = None
        self.running = True
        self._cancel = threading.Event()
        log = self.query_one("#run-log", RichLog)
        log.clear()
        log.write(Text(f"$ kb verify {entry.id}" + ("  (trusted local entry)" if trust else ""), style="bold"))
        self._banner(f"RUNNING {entry.id}… (c or esc cancels)", "-running")
        self.query_one("#run-start", Button).disabled = True
        self.query_one("#run-cancel", Button).disabled = False
        self._flush_timer = self.set_interval(0.05, self._flush)
        cancel = self._cancel
        self.run_worker(lambda: self._work(entry, kb, get_environment, verify, trust, python, cancel),
                        thread=True, group="repro", exclusive=True, exit_on_error=False)
        return True

    def cancel(self) -> bool:
        if not self.running:
            return False
        self._cancel.set()
        self._lines.append("^C cancelling…")
        return True

    def _work(self, entry, kb, get_environment, verify, trust, python, cancel: threading.Event) -> None:
        outcome: Any
        t0 = time.monotonic()
        try:
            self._lines.append("checking this machine (GPU, torch)…")
            env = get_environment()
            self._env_line = "on " + describe_environment(env)
            self._lines.append(self._env_line)
            if cancel.is_set():
                raise _Cancelled()
            outcome = verify.verify_entry(entry, kb, env, python=python, on_line=self._lines.append,
                                          cancel=cancel, trust=trust, run_fix=True)
        except _Cancelled:
            outcome = _Failure(entry.id, "error", "cancelled", time.monotonic() - t0)
        except Exception as e:  # the UI reports it; it must not take the app down
            outcome = _Failure(entry.id, "error", f"{e.__class__.__name__}: {e}", time.monotonic() - t0)
        self.app.call_from_thread(self._done, outcome, cancel.is_set())

    def _flush(self) -> None:
        if not self._lines:
            return
        log = self.query_one("#run-log", RichLog)
        n = len(self._lines)
        for _ in range(n):
            log.write(Text(self._lines.popleft().rstrip("\n")))

    def _rewrite_sections(self, log: RichLog, outcome: Any) -> None:
        """Once both programs ran, show their outputs apart: the stream could not tell them apart."""
        log.clear()
        log.write(Text(f"$ kb verify {outcome.entry_id}", style="bold"))
        if self._env_line:
            log.write(Text(self._env_line))
        log.write(Text(f"── repro (exit code {outcome.exit_code}) ──", style="bold"))
        matched = [m.rstrip(".") for m in getattr(outcome, "lines", ()) or ()]
        for line in (outcome.output or "").splitlines():
            hit = any(m and line.strip().startswith(m) for m in matched)  # the lines the signatures matched
            log.write(Text(line, style="bold underline" if hit else ""))
        log.write(Text(f"── fix check (exit code {outcome.fix_exit_code}) ──", style="bold"))
        for line in (outcome.fix_output or "").splitlines():
            log.write(Text(line))

    def _done(self, outcome: Any, cancelled: bool) -> None:
        self._flush()
        if self._flush_timer is not None:
            self._flush_timer.stop()
            self._flush_timer = None
        self.running = False
        self.outcome = outcome
        text, cls = verdict_of(outcome, cancelled)
        self._banner(text, cls)
        log = self.query_one("#run-log", RichLog)
        if getattr(outcome, "fix_output", "") or getattr(outcome, "fix_exit_code", None) is not None:
            self._rewrite_sections(log, outcome)
        detail = (getattr(outcome, "detail", "") or "").strip()
        log.write(Text(text.split("  (")[0], style="bold"))
        if detail and detail not in text:
            log.write(Text(detail))
        self.query_one("#run-cancel", Button).disabled = True
        self.query_one("#run-start", Button).disabled = self.entry is None or self.entry.repro is None
        self.post_message(self.Finished(outcome, cancelled))


class _Cancelled(Exception):
    pass


class _Failure:
    """An Outcome-shaped record for runs that never reached verify_entry's own verdict."""

    def __init__(self, entry_id: str, status: str, detail: str, duration_s: float) -> None:
        self.entry_id = entry_id
        self.status = status
        self.fix_status = ""
        self.detail = detail
        self.duration_s = duration_s
        self.output = ""
        self.matched: tuple[str, ...] = ()
        self.matched_instead: tuple[str, ...] = ()
