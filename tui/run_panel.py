"""RunPanel: runs one entry's repro (then its fix check) here, streams the output, ends in a verdict.

The run happens in a background thread (kb.verify_entry blocks on a subprocess). Output lines
arrive on that thread; they are queued and flushed onto the log every 50 ms, so a chatty repro
cannot flood the UI with one message per line. Cancel sets the threading.Event verify_entry
watches, which kills the subprocess's process group. Each entry keeps its last run, and the log
shown is always the shown entry's, named above it.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.timer import Timer
from textual.widgets import Button, Static

from kb import Entry, Environment, KnowledgeBase, Outcome

from .background import Background
from .text_view import TextView
from .verifier import Verifier

VERDICT_CLASSES = ("-good", "-bad", "-neutral", "-running")
MAX_LINES = 5000  # of one run's log


def hit_words(matched: tuple[str, ...], yours: str | None = None) -> str:
    """The signatures a repro's output hit, for the banner: the one the user's line matched
    (yours) when the output hit it, else the first; the rest as a count. A repro's output can
    hit many (nine of the OOM entry's), and the whole list wrapped over three lines never said
    which one was the user's; the run log keeps the list."""
    if not matched:
        return "?"
    first = yours if yours in matched else matched[0]
    rest = len(matched) - 1
    others = f" and {rest} other signature{'s' if rest != 1 else ''}" if rest else ""
    if yours is None:
        return first + others
    if yours in matched:
        return f"{first}, as your line did" + (f",{others}" if others else "")
    return f"{first}{others}; not {yours}, which your line matched"


def verdict_of(
    outcome: Outcome, cancelled: bool = False, yours: str | None = None
) -> tuple[str, str]:
    """(banner text, css class) for a verification Outcome; yours: the signature the user's
    line matched, when a line did."""
    status = outcome.status
    detail = (outcome.detail or "").strip()
    took = outcome.duration_s
    took_s = f"  ({took:.1f} s)" if took > 0 else ""
    if status == "cancelled" or (cancelled and status == "error"):
        return "CANCELLED: the repro was stopped and its processes killed" + took_s, "-neutral"
    if status == "reproduced":
        matched = hit_words(outcome.matched, yours)
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


def cannot_run_here(entry: Entry, env: Environment, why: str) -> str:
    """What to say when an entry's repro cannot run on this machine: why, in kb verify's words,
    and what would let it run."""
    req = entry.repro.requires if entry.repro is not None else None
    verify = f"`kb verify {entry.id}`"
    if why.startswith("needs torch"):
        then = f"Install torch there, or run {verify} on a machine that has it."
    elif req is not None and req.gpu:
        gpus = f"{req.gpus} GPUs" if req.gpus > 1 else "a GPU"
        then = f"It needs {gpus}: {verify} on a machine with {gpus} and torch runs it there."
    else:
        then = f"{verify} runs it on a machine that has what it needs."
    return f"{entry.id}'s repro cannot run here: {why}. {then}"


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


@dataclass
class Run:
    """One entry's last run: its log and, once it ended, its verdict."""

    entry_id: str
    lines: list[Text] = field(default_factory=list)
    banner: tuple[str, str] | None = None
    outcome: Outcome | None = None
    signature: str | None = None  # the signature the user's line matched, when one did


class RunPanel(Vertical):
    """The run log. Each entry keeps its own last run: the log shown is the selected entry's (or
    the running one's), under that entry's name, never another entry's log under a new name."""

    class Finished(Message):
        def __init__(self, outcome: Outcome, cancelled: bool) -> None:
            super().__init__()
            self.outcome = outcome
            self.cancelled = cancelled

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.entry: Entry | None = None  # the selected entry
        self.outcome: Outcome | None = None  # the last run's, whichever entry it was
        self.running = False
        self.running_id: str | None = None
        self.runs: dict[str, Run] = {}
        self.shown: str | None = None  # the entry whose run the log shows
        self._cancel = threading.Event()
        self._lines: deque[str] = deque()
        self._flush_timer: Timer | None = None
        self._env_line = ""
        self._cannot: str | None = None  # why the selected entry's repro cannot run here

    def compose(self) -> ComposeResult:
        with Horizontal(id="run-bar"):
            yield Static("No entry selected.", id="run-target", markup=False)
            for button in (
                Button("Run", id="run-start", variant="primary", compact=True),
                Button("Cancel", id="run-cancel", variant="error", compact=True, disabled=True),
            ):
                # for the mouse: a focused button would take space and enter, which the keys
                # (r, f5, c) already do, with the confirmation a key press skips
                button.can_focus = False
                yield button
        yield Static("", id="run-verdict", markup=False)
        yield TextView(id="run-log", auto_scroll=True, max_lines=5000)

    def on_mount(self) -> None:
        self.query_one("#run-verdict").display = False

    @property
    def run_log(self) -> TextView:
        return self.query_one("#run-log", TextView)

    def set_target(self, entry: Entry | None, cannot: str | None = None) -> None:
        """The selected entry: its last run is shown (the running one while one runs); cannot:
        why its repro cannot run here (cannot_run_here's words), said where it has not run."""
        self.entry = entry
        self._cannot = cannot
        if not self.running:
            self._show(entry.id if entry is not None else None)
        self.query_one("#run-start", Button).disabled = (
            self.running or entry is None or entry.repro is None
        )

    def set_cannot(self, cannot: str | None) -> None:
        """What is known of this machine changed: say again whether the selected entry's repro
        can run here (its log is shown again only when that changed)."""
        if cannot != self._cannot:
            self.set_target(self.entry, cannot)

    def _show(self, entry_id: str | None) -> None:
        """Show entry_id's run (or that it has none) and name it above the log."""
        self.shown = entry_id
        run = self.runs.get(entry_id) if entry_id is not None else None
        entry = self.entry if self.entry is not None and self.entry.id == entry_id else None
        self.query_one("#run-target", Static).update(entry_id or "No entry selected.")
        if run is not None:
            lines = list(run.lines)
        elif entry_id is None:
            lines = [Text("Select an entry: its repro's runs show here.", style="dim")]
        elif entry is not None and entry.repro is None:
            lines = [Text(f"{entry_id} has no repro to run.", style="dim")]
        elif entry is not None and self._cannot is not None:
            lines = [Text(self._cannot)]
        else:
            lines = [
                Text(
                    f"{entry_id} has not run here yet. f5 runs its repro, once you say yes.",
                    style="dim",
                )
            ]
        # A run that is over opens at the first line of the repro's output that a signature
        # matched (the verdict is in the banner above it): a repro prints pages after its error
        # (the rest of a traceback, a memory summary, the fix check), and a log opened at its
        # end showed none of the error. One still running, or that matched no line, follows
        # its end.
        first = self._first_error(run)
        self.run_log.set_content(lines, scroll_home=first is not None)
        if first is not None:
            self.run_log.show_item(first)
        if run is not None and run.banner is not None:
            self._banner(*run.banner, remember=False)
        else:
            self.query_one("#run-verdict", Static).display = False

    def _banner(self, text: str, cls: str, remember: bool = True) -> None:
        banner = self.query_one("#run-verdict", Static)
        banner.remove_class(*VERDICT_CLASSES)
        banner.add_class(cls)
        banner.update(text)
        banner.display = True
        if remember and self.running_id in self.runs:
            self.runs[self.running_id].banner = (text, cls)

    def _write(self, line: Text) -> None:
        run = self.runs.get(self.running_id or "")
        if run is not None:
            run.lines.append(line)
            if len(run.lines) > MAX_LINES:
                del run.lines[: len(run.lines) - MAX_LINES]
        if self.shown == self.running_id:
            self.run_log.write(line)

    # ------------------------------------------------------------------ running
    def start(
        self,
        entry: Entry,
        kb: KnowledgeBase,
        get_environment: Callable[[], Environment],
        verifier: Verifier,
        background: Background,
        trust: bool = False,
        python: str = sys.executable,
        signature: str | None = None,
    ) -> bool:
        """Run the entry's repro; signature: the one the user's line matched (the verdict says
        whether the repro's output hit it too)."""
        if self.running:
            return False
        self.entry = entry
        self.outcome = None
        self.running = True
        self.running_id = entry.id
        self.runs[entry.id] = Run(entry.id, signature=signature)
        self._cancel = threading.Event()
        self._show(entry.id)
        self._write(
            Text(
                f"$ kb verify {entry.id}" + ("  (trusted local entry)" if trust else ""),
                style="bold",
            )
        )
        self._banner(f"RUNNING {entry.id}… (c or f5 cancels)", "-running")
        self.query_one("#run-start", Button).disabled = True
        self.query_one("#run-cancel", Button).disabled = False
        self._flush_timer = self.set_interval(0.05, self._flush)
        cancel = self._cancel
        background.start(
            lambda: self._work(entry, kb, get_environment, verifier, trust, python, cancel),
            "repro",
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
        n = len(self._lines)
        for _ in range(n):
            self._write(Text(self._lines.popleft().rstrip("\n")))

    def _sections(self, outcome: Outcome) -> list[Text]:
        """Once both programs ran, their outputs apart (the stream could not tell them apart),
        the lines the signatures matched marked."""
        out = [Text(f"$ kb verify {outcome.entry_id}", style="bold")]
        if self._env_line:
            out.append(Text(self._env_line))
        out.append(Text(f"── repro (exit code {outcome.exit_code}) ──", style="bold"))
        matched = [m.rstrip(".") for m in outcome.lines]
        for line in (outcome.output or "").splitlines():
            hit = any(m and line.strip().startswith(m) for m in matched)
            out.append(Text(line, style="bold underline" if hit else ""))
        out.append(Text(f"── fix check (exit code {outcome.fix_exit_code}) ──", style="bold"))
        for line in (outcome.fix_output or "").splitlines():
            out.append(Text(line))
        return out

    @staticmethod
    def _first_error(run: Run | None) -> int | None:
        """The index in a finished run's log of the first line a signature matched, if any."""
        if run is None or run.outcome is None:
            return None
        matched = [m.rstrip(".") for m in run.outcome.lines if m]
        for i, line in enumerate(run.lines):
            if any(line.plain.strip().startswith(m) for m in matched):
                return i
        return None

    def matched_line(self) -> int | None:
        """The first line of the shown log that a signature matched (underlined), if any."""
        first = self._first_error(self.runs.get(self.shown or ""))
        return self.run_log.line_of_item(first) if first is not None else None

    def _done(self, outcome: Outcome, cancelled: bool) -> None:
        self._flush()
        if self._flush_timer is not None:
            self._flush_timer.stop()
            self._flush_timer = None
        self.running = False
        self.outcome = outcome
        run = self.runs.setdefault(outcome.entry_id, Run(outcome.entry_id))
        run.outcome = outcome
        text, cls = verdict_of(outcome, cancelled, run.signature)
        if outcome.fix_output or outcome.fix_exit_code is not None:
            run.lines = self._sections(outcome)
        run.lines.append(Text(text.split("  (")[0], style="bold"))
        detail = (outcome.detail or "").strip()
        if detail and detail not in text:
            run.lines.append(Text(detail))
        run.banner = (text, cls)
        if self.shown == outcome.entry_id:
            self._show(outcome.entry_id)
        self.running_id = None
        self.query_one("#run-cancel", Button).disabled = True
        self.query_one("#run-start", Button).disabled = (
            self.entry is None or self.entry.repro is None
        )
        if self.entry is not None and self.shown != self.entry.id:
            self._show(self.entry.id)
        self.post_message(self.Finished(outcome, cancelled))


class _Cancelled(Exception):
    pass
