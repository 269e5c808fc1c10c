"""The kb TUI: paste an error, read the diagnosis, run the repro on this machine. A job (a folder
of rank logs, or a log with several ranks) lists its ranks, the root cause first, in place of the
paste box and the entries; the detail pane shows the selected rank.

`create_app` is the one factory: `kb tui` (run_app) and the tests both build the app through it,
injecting a knowledge base, an environment and a verifier where they want determinism.

Safe to type into: the paste box has the focus from the start, every printable key typed on the
start screen goes to it wherever the focus is, and a letter outside the box acts only when no
other key follows it at once (keys.BURST_S: a paste from a terminal without bracketed paste is
text, never commands). Running a repro always asks first, showing the command; quitting while
one runs asks, then cancels it and leaves.

Nothing blocking runs on the event loop: loading the entries, every lookup, reading a file or a
pipe, asking NVML, probing torch and running repros all happen in daemon threads (background.py,
so quitting never waits for them), which hand their results back with call_from_thread. The app
reaches kb only through its public API.
"""

from __future__ import annotations

import argparse
import gc
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from textual import events, on
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.css.query import NoMatches
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import (
    Footer,
    Input,
    OptionList,
    Static,
    TabbedContent,
    TabPane,
    TextArea,
)
from textual.widgets.text_area import Selection

from kb import (
    Engine,
    Entry,
    Environment,
    KnowledgeBase,
    LookupResult,
    Match,
    inert,
    verification_status,
)

from . import clipboard, command_line, inert_lines, keys
from .background import Background
from .confirm_screen import ConfirmScreen
from .copy_items import items_for
from .copy_screen import CopiedScreen, CopyMenu
from .detail_pane import DetailPane
from .find_bar import FindBar
from .help_screen import HelpScreen
from .job_ranks import JobInfo, shorter
from .log_source import (
    human_size,
    problem,
    read_tail,
    read_window,
    remove_spool,
    spool,
    spool_path,
)
from .lookup import LookupFailed, look_up
from .machine_status import MachineStatus
from .open_screen import OpenScreen
from .paste_box import PasteBox
from .rank_list import RankList
from .results_list import NO_MATCH, ResultsList
from .run_panel import RunPanel, cannot_run_here
from .text_view import TextView
from .verifier import Verifier

DEBOUNCE_S = 0.2
MAX_AREA_CHARS = (
    64 << 10
)  # a bigger log is looked up whole; the editor gets its tail (loading 1 MiB
# into a soft-wrapping TextArea froze the UI for ~0.8 s; 64 KiB is ~900 lines and ~50 ms)
LIVE_LOOKUP_S = 2.0  # while a pipe is still arriving, look up what came so far this often
LIVE_TAIL_S = 0.5  # ...and show its tail this often (when more came)
GPU_REFRESH_S = 5.0
COMPACT_BELOW = 100  # columns
TOP = 8
WINDOW_LINES = 200  # around a matched line beyond the shown tail, each side
BURST_KEYS = {"enter": "\n", "tab": "\t"}  # keys a paste holds besides printable ones
QUIT_WAIT_S = 0.3  # how long quitting waits for a cancelled repro to end (then it goes anyway)
FINISH_WRITING_S = 60.0  # how long the process waits, once the app has ended, for kb's caches
SAY_WAITING_S = 0.3  # ...before saying that it waits
LOAD_SWITCH_S = 0.0005  # the GIL's switch interval while the entries load (see _load_kb)
LISTED_WAIT_S = 5.0  # how long the loader waits for the list to be drawn before the prewarm


class KbApp(App[int]):
    CSS_PATH = "app.tcss"
    TITLE = "kb"
    ESCAPE_TO_MINIMIZE = True
    BINDINGS = [
        *keys.bindings(),
        Binding("n", "find_step(1)", "Next hit", show=False),
        Binding("N", "find_step(-1)", "Previous hit", show=False),
    ]

    def __init__(
        self,
        kb: KnowledgeBase | None = None,
        text: str = "",
        log: Path | None = None,
        stream: BinaryIO | None = None,
        environment: Environment | None = None,
        verifier: Verifier | None = None,
        kb_dirs: list[str] | None = None,
        python: str = sys.executable,
        prewarm: bool = False,
        watch_gpu: bool = True,
    ) -> None:
        inert_lines.install()  # no line of a log, a path or an entry drives the terminal
        super().__init__()
        self.kb = kb
        self.engine: Engine | None = Engine(knowledge=kb) if kb is not None else None
        self.kb_dirs = kb_dirs
        self.verifier = verifier or Verifier()
        self.python = python
        self.background = Background()
        self.result: LookupResult | None = None
        self.job: JobInfo | None = None  # the ranks of a job (a folder, a multi-rank log)
        self.last_lookup_ms: float | None = None  # lookup compute time, in the worker
        self.last_result_ms: float | None = None  # debounce firing -> list updated
        self.mounted_at: float | None = None
        self.ready_at: float | None = None  # the first frame is on the screen
        self.kb_ready_at: float | None = None  # the entries are loaded and listed
        self.quit_with_run = False  # quit while a repro ran: run_app kills what is left of it
        self._initial_text = text
        self._environment = environment
        self._torch_known = environment is not None
        self._env_lock = threading.Lock()
        self._watch_gpu = watch_gpu and environment is None
        self._prewarm = prewarm
        # The thread that loads the entries and opens the full-text index: both write into
        # KB_HOME (the entries' cache, an index built in a temporary folder of its own)
        self._writer: threading.Thread | None = None
        # A log read from a file or a pipe: looked up whole from `_log_path`, while the editor
        # shows its tail (`_area_tail`); once the editor's text differs from that, it is the input.
        self._log_path = log
        self._log_label = str(log) if log is not None else ""
        self._stream = stream
        self._spool: Path | None = None
        self._streaming = False
        self._stop_spool = threading.Event()
        self._spooled = 0  # bytes of the pipe copied so far (the reader thread counts them)
        self._tail_bytes = 0  # ...when its tail was last shown
        self._tail_reading = False
        self._looked_bytes = 0  # ...when it was last looked up
        self._looked_at = 0.0
        self._pipe_timer: Timer | None = None
        self._area_tail: str | None = None
        self._message: tuple[str, str, bool] | None = None  # shown instead of an entry
        self._lookup_running = False
        self._debounce: Timer | None = None
        self._generation = 0
        self._created = time.perf_counter()
        self._shown_key: tuple[str, str | None, str | None] | None = None
        # Keys: a letter held back while we see whether more keys follow (a paste, not a command)
        self._held: list[str] | None = None
        self._held_key = ""
        self._held_at = 0.0  # the last held key's event time
        self._held_mono = 0.0
        self._replay: str | None = None
        self._letters = keys.letters()
        # Find: which pane, and for the paste box its hits (text offsets) and the current one
        self._find_target = "detail"
        self._area_hits: list[tuple[int, int]] = []
        self._area_current = -1
        self._quitting = False
        self._statuses: tuple[KnowledgeBase, dict[str, str]] | None = None
        # The entries load from the start, beside Textual's own start (its CSS, the widgets, the
        # first frame), not after it: what the loader hands over before the screen is mounted
        # waits here, and on_mount takes it (_hand_over).
        self._mounted = False
        self._handover_lock = threading.Lock()
        self._handover: tuple[Callable[..., None], tuple] | None = None
        self._listed = threading.Event()  # the entries are listed (or the app has gone)
        if kb is None:
            self._writer = self.background.start(self._load_kb, "kb")

    def run(self, *args: Any, **kwargs: Any) -> int | None:
        # What has been imported lives as long as the process: left to the collector, it was
        # walked again by a full collection in the first frames (~20 ms). Frozen, it is not.
        gc.freeze()
        return super().run(*args, **kwargs)

    # ------------------------------------------------------------------ layout
    def compose(self) -> ComposeResult:
        with Horizontal(id="top-bar"):
            yield Static("kb", id="app-name")
            yield MachineStatus(id="machine")
        with Horizontal(id="main"):
            with Vertical(id="left"):
                yield PasteBox(
                    id="paste",
                    soft_wrap=True,
                    show_line_numbers=False,
                    highlight_cursor_line=False,
                    placeholder="Paste or type an error or a log here",
                )
                yield Input(id="filter", placeholder="filter the entries (f6)", compact=True)
                yield ResultsList(id="results")
                yield RankList(id="ranks")  # in place of the three above while a job is open
            with TabbedContent(id="right", initial="details"):
                with TabPane("Details", id="details"):
                    yield DetailPane(id="detail")
                with TabPane("Run log", id="run"):
                    yield RunPanel(id="runpanel")
        find = FindBar(id="find")
        find.display = False
        yield find
        yield Footer(show_command_palette=True)

    def on_mount(self) -> None:
        self.query_one("#paste", TextArea).border_title = "Error or log"
        self.query_one(MachineStatus).show(self._environment, self._torch_known)
        results = self.query_one(ResultsList)
        if self._initial_text:
            self._load_area(self._initial_text)
        if self.kb is None:
            results.border_title = "Entries (loading)"
            self.query_one(DetailPane).show_message("Loading the entries…")
        if self._stream is None and self._log_path is not None:
            self._area_tail = ""  # the editor shows nothing of it yet
            self._message = ("Reading " + self._log_label + "…", "", False)
            self.query_one(DetailPane).show_message(*self._message)
        # The paste box has the focus, as a form's first field does: typing and pasting land in
        # it from the first key. The list's letters work once the focus is moved there.
        self.query_one("#paste", TextArea).focus()
        self.call_after_refresh(self._start_background)
        with self._handover_lock:
            self._mounted = True
            handover, self._handover = self._handover, None
        if handover is not None:  # loaded already: listed in the first frame
            handover[0](*handover[1])
        self.mounted_at = time.perf_counter()

    def on_resize(self, event: events.Resize) -> None:
        # Below 100 columns the footer drops the spaces around its keys: at 80 the roomy footer
        # pushed its last keys off the line.
        self.query_one(Footer).compact = event.size.width < COMPACT_BELOW

    def on_ready(self) -> None:
        self.ready_at = time.perf_counter()

    def _start_background(self) -> None:
        """After the first frame: the machine, the log; each in its own thread (the entries have
        been loading in theirs since the app was made)."""
        if self.kb is not None and self._writer is None:  # given ready-made
            self._kb_ready_now()
        if self._environment is None:
            self.background.start(self._probe_machine, "machine")
        if self._stream is not None:
            self.background.start(self._read_pipe, "pipe")
        elif self._log_path is not None:
            self.background.start(self._read_log_tail, "input")

    @property
    def busy(self) -> bool:
        """Whether anything is still in flight: a thread, the debounce, a held key."""
        return self.background.busy or self._debounce is not None or self._held is not None

    # ------------------------------------------------------------------ the knowledge base
    def _load_kb(self) -> None:
        """Thread, started with the app: load the entries and hand them to the UI."""
        # The loader reads and stats hundreds of files while Textual starts; each call gives up
        # the GIL, and taking it back from a busy event loop waits a switch interval (5 ms by
        # default): hundreds of those made a 50 ms load take 300 ms. A short interval while it
        # loads lets it back in at once.
        interval = sys.getswitchinterval()
        sys.setswitchinterval(min(interval, LOAD_SWITCH_S))
        try:
            engine = Engine(self.kb_dirs)
            kb = engine.knowledge
            statuses = entry_statuses(kb)
        except Exception as e:  # a broken install still opens, and says why
            self._hand_over(self._kb_failed, f"{type(e).__name__}: {e}")
            return
        finally:
            sys.setswitchinterval(interval)
        self._hand_over(self._kb_ready, engine, kb, statuses)
        if self._prewarm:
            # After the list is drawn, not beside it (bounded: a quit before the screen was up
            # lists nothing)
            self._listed.wait(LISTED_WAIT_S)
            # Even after a quit: a lookup may be building the index now, and this waits for it
            # (the engine builds it once, under its lock), so finish_writing covers that too.
            self._prewarm_index(engine)

    def finish_writing(self, say: Callable[[str], None] | None = None) -> bool:
        """Once the app has ended: wait for the entries' cache and the full-text index that
        are being written into KB_HOME. They are written in a daemon thread, which the end of
        the process stops wherever it is: quitting in the first seconds left the index's
        temporary folder (index-<key>-XXXX) behind, half built. Waiting lets the writing
        finish, so what is in KB_HOME is whole and named (kb removes a build's folder itself
        when the build fails). say(text) is told when the wait is more than a moment. Whether
        all was written (False after FINISH_WRITING_S)."""
        writer = self._writer
        if writer is None or not writer.is_alive():
            return True
        writer.join(SAY_WAITING_S)
        if writer.is_alive() and say is not None:
            say("kb: finishing the entries' cache and search index in KB_HOME before leaving…")
        writer.join(FINISH_WRITING_S)
        return not writer.is_alive()

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """A toast whose text is never markup (a path or a problem may hold `[/]`) and never
        drives the terminal: every message here says something about the input."""
        super().notify(
            inert(str(message), newlines=True),
            title=inert(str(title)),
            severity=severity,
            timeout=timeout,
            markup=False,
        )

    @staticmethod
    def _prewarm_index(engine: Engine) -> None:
        """Open the full-text index before the first paste that needs it (only used when no
        signature fires; ~0.3 s the first time after entries change)."""
        try:
            engine.lookup("warm up the full text index", top=1)
        except Exception:
            pass

    def _hand_over(self, fn: Callable[..., None], *args) -> None:
        """Thread: run fn(*args) on the UI, now if the screen is mounted, else when it is."""
        with self._handover_lock:
            if not self._mounted:
                self._handover = (fn, args)
                return
        self._call_ui(fn, *args)

    def _kb_failed(self, why: str) -> None:
        self.query_one(DetailPane).show_message("Cannot load the entries", why, bad=True)
        self.notify(f"Cannot load entries: {why}", severity="error", timeout=30)
        self._listed.set()

    def _kb_ready(self, engine: Engine, kb: KnowledgeBase, statuses: dict[str, str]) -> None:
        self.engine, self.kb = engine, kb
        self._statuses = (kb, statuses)
        self._kb_ready_now()
        self.call_after_refresh(self._listed.set)

    def _kb_ready_now(self) -> None:
        kb = self.kb
        assert kb is not None
        for p in kb.problems[:3]:
            self.notify(str(p), title="A local entry has a problem", severity="warning", timeout=10)
        for w in kb.warnings[:3]:
            self.notify(w, severity="warning", timeout=10)
        if self._lookup_target() is not None:
            self._start_lookup()
        else:
            self._refresh_list(fresh=True)
        self.kb_ready_at = time.perf_counter()

    # ------------------------------------------------------------------ the machine: GPU, torch
    def _probe_machine(self) -> None:
        """Thread: the GPUs first (milliseconds), then torch in the repro interpreter (seconds)."""
        self.get_environment()
        if self._watch_gpu and self._environment is not None and self._environment.gpu is not None:
            self._call_ui(self._watch_gpu_memory)

    def get_environment(self) -> Environment:
        """Where repros run, probed once (threads only: NVML and a child interpreter)."""
        with self._env_lock:
            if self._environment is None or not self._torch_known:
                gpu, reason = self.verifier.read_gpu()
                partial = Environment(python=self.python, gpu=gpu, gpu_reason=reason)
                self._call_ui(self._set_machine, partial, False)
                torch, cuda, error = self.verifier.probe_torch(self.python)
                self._environment = Environment(
                    python=self.python,
                    gpu=gpu,
                    gpu_reason=reason,
                    torch=torch,
                    cuda=cuda,
                    torch_error=error,
                )
                self._torch_known = True
                self._call_ui(self._set_machine, self._environment, True)
            return self._environment

    def _call_ui(self, fn, *args) -> None:
        try:
            self.call_from_thread(fn, *args)
        except RuntimeError:  # the app is shutting down
            pass

    def _set_machine(self, env: Environment, torch_known: bool) -> None:
        self.query_one(MachineStatus).show(env, torch_known)
        panel = self.query_one(RunPanel)  # what its run log says of a repro that cannot run
        panel.set_cannot(self._cannot_run(panel.entry))

    def _watch_gpu_memory(self) -> None:
        def reread() -> None:
            if not self._quitting:
                self.background.start(self._reread_gpu, "gpu")

        self.set_interval(GPU_REFRESH_S, reread)

    def _reread_gpu(self) -> None:
        gpu, reason = self.verifier.read_gpu()
        with self._env_lock:
            env = self._environment
            if env is None:
                return
            self._environment = Environment(
                python=env.python,
                gpu=gpu,
                gpu_reason=reason,
                torch=env.torch,
                cuda=env.cuda,
                torch_error=env.torch_error,
            )
            env, known = self._environment, self._torch_known
        self._call_ui(self._set_machine, env, known)

    # ------------------------------------------------------------------ a log from a file or a pipe
    def _read_log_tail(self) -> None:
        """Thread: the tail of the file for the editor (the lookup reads the file whole); a
        folder has no tail, and goes straight to its lookup."""
        log = self._log_path
        if log is None:  # cleared meanwhile
            return
        if log.is_dir():
            self._call_ui(self._folder_opened, log)
            return
        try:
            tail, size, trouble = read_tail(log, MAX_AREA_CHARS)
        except Exception as e:  # a file that cannot be read is said in words
            self._call_ui(self._log_failed, log, problem(self._log_label, e))
            return
        self._call_ui(self._log_loaded, log, tail, size, trouble)

    def _folder_opened(self, folder: Path) -> None:
        if folder != self._log_path:  # another path was opened meanwhile
            return
        area = self.query_one("#paste", TextArea)
        area.border_title = Content(f"{folder.name or folder}/")  # a name is text, not markup
        area.border_subtitle = "a folder: its logs are read as one job"
        self._start_lookup()

    def _log_failed(self, log: Path, why: str) -> None:
        if log != self._log_path:
            return
        self._log_path = None
        self._show_failure(why)

    def _show_failure(self, why: str) -> None:
        """The input could not be read: the detail pane says why, and the list is emptied of
        what another input found (a list of entries would select its first row, and the pane
        would show that entry instead of why)."""
        self._message = ("Cannot read the input", why, True)
        self.result = None
        self._set_job(None)
        results = self.query_one(ResultsList)
        results.clear_options()
        results.border_title = "Nothing read"
        results.border_subtitle = ""
        self.query_one(DetailPane).show_message(*self._message)
        self._shown_key = None
        self._front_details()
        self.notify(why, severity="error", timeout=15)

    def _log_loaded(self, log: Path, tail: str, size: int, trouble: str) -> None:
        if log != self._log_path:
            return
        self._message = None
        if self.query_one("#paste", TextArea).text == (self._area_tail or ""):
            self._load_area(tail, size)  # not typed over meanwhile
        if trouble:
            self.query_one(
                "#paste", TextArea
            ).border_subtitle = f"tail of {human_size(size)}, cut short"
            self.notify(trouble, severity="warning", timeout=8)
        self._start_lookup()

    def _read_pipe(self) -> None:
        """Thread: copy the piped log to a temporary file as it arrives (counting the bytes in
        `_spooled`); the UI's timer (_pipe_tick) shows its tail and looks up what came so far,
        and all of it is looked up at the end."""
        assert self._stream is not None
        self._spool = spool_path()
        self._area_tail = ""
        self._log_path, self._log_label, self._streaming = self._spool, "the piped log", True
        spooled = self._spool

        def progress(n: int) -> None:
            self._spooled = n

        self._call_ui(self._watch_pipe)
        try:
            total = spool(self._stream, spooled, progress, self._stop_spool.is_set)
        except OSError as e:
            self._streaming = False
            self._call_ui(self._log_failed, spooled, f"cannot read the piped log: {e}")
            return
        finally:
            self._stream.close()
        self._streaming = False
        if self._stop_spool.is_set():  # cleared, or another path opened: the pipe is not the input
            return
        self._call_ui(self._pipe_ended, total)
        self._read_log_tail()

    def _watch_pipe(self) -> None:
        self._pipe_progress(0, "")
        self._pipe_timer = self.set_interval(LIVE_TAIL_S, self._pipe_tick)

    def _pipe_tick(self) -> None:
        """While a pipe streams: its tail into the box when more came, and a lookup of what came
        so far, at once for the first bytes and then every LIVE_LOOKUP_S. A pipe that goes quiet
        still has its last bytes shown and looked up."""
        if not self._streaming or self._log_path != self._spool or self._spool is None:
            if self._pipe_timer is not None:
                self._pipe_timer.stop()
                self._pipe_timer = None
            return
        n, spooled = self._spooled, self._spool
        if n != self._tail_bytes and not self._tail_reading:
            self._tail_bytes, self._tail_reading = n, True

            def work() -> None:
                try:
                    tail, _, _ = read_tail(spooled, MAX_AREA_CHARS)
                except Exception:  # the copy is ours; a failure only skips this update
                    tail = ""
                self._call_ui(self._pipe_progress, n, tail)

            self.background.start(work, "tail")
        now = time.monotonic()
        due = self._looked_bytes == 0 or now - self._looked_at >= LIVE_LOOKUP_S
        if (
            n
            and n != self._looked_bytes
            and due
            and not self._lookup_running
            and self.kb is not None
        ):
            self._looked_bytes, self._looked_at = n, now
            self._start_lookup()

    def _pipe_progress(self, n: int, tail: str) -> None:
        self._tail_reading = False
        if not self._streaming or self._log_path != self._spool:
            return
        area = self.query_one("#paste", TextArea)
        if tail and area.text == (self._area_tail or ""):  # not typed over meanwhile
            self._load_area(tail, n)
        area.border_title = "piped log"
        area.border_subtitle = f"still reading: {human_size(n)} so far"
        self.query_one(RankList).border_subtitle = area.border_subtitle
        self._message = (
            "Still reading the piped log…",
            f"{human_size(n)} so far; its tail is in the box on the left. Results follow as it "
            "arrives; the whole log is looked up when the pipe closes.",
            False,
        )
        if self.result is None:
            self.query_one(DetailPane).show_message(*self._message)

    def _pipe_ended(self, total: int) -> None:
        area = self.query_one("#paste", TextArea)
        area.border_subtitle = f"read to its end: {human_size(total)}"
        self.query_one(RankList).border_subtitle = area.border_subtitle

    def _load_area(self, text: str, whole_size: int | None = None) -> None:
        """Put text in the editor without it counting as an edit (no debounced lookup of it)."""
        area = self.query_one("#paste", TextArea)
        if whole_size is not None and whole_size > len(text.encode()):
            area.border_subtitle = f"tail of {human_size(whole_size)}, all read"
        else:
            area.border_subtitle = ""
        if whole_size is not None and self._log_label:
            area.border_title = (
                "piped log" if self._stream is not None else Content(Path(self._log_label).name)
            )
        else:
            area.border_title = "Error or log"
        if whole_size is not None:
            self._area_tail = text
        area.show_line_numbers = False
        area.line_number_start = 1
        with area.prevent(TextArea.Changed):
            area.load_text(text)
        if text:
            area.move_cursor(area.document.end)

    # ------------------------------------------------------------------ lookup
    def _lookup_target(self) -> Path | str | None:
        """What to look up: the log file when the editor still shows its tail, else the editor's text."""
        text = self.query_one("#paste", TextArea).text
        if self._log_path is not None and (self._area_tail is None or text == self._area_tail):
            return self._log_path
        return text if text.strip() else None

    @on(TextArea.Changed, "#paste")
    def _paste_changed(self) -> None:
        if self._debounce is not None:
            self._debounce.stop()
        self._debounce = self.set_timer(DEBOUNCE_S, self._start_lookup)

    def _start_lookup(self) -> None:
        self._debounce = None
        engine = self.engine
        if engine is None:
            return  # _kb_ready runs it
        target = self._lookup_target()
        self._generation += 1
        if target is None:
            self.result = None
            self._set_job(None)
            self._refresh_list(fresh=True)
            return
        gen, fired, label = self._generation, time.perf_counter(), self._log_label
        self._lookup_running = True
        self.query_one(ResultsList).border_subtitle = "looking up…"

        def work() -> None:
            t0 = time.perf_counter()
            try:
                result, job = look_up(engine, target, label, TOP)
            except LookupFailed as e:
                self._call_ui(self._lookup_failed, gen, str(e))
                return
            except Exception as e:  # the UI reports it; it must not take the app down
                self._call_ui(self._lookup_failed, gen, f"lookup failed: {type(e).__name__}: {e}")
                return
            took = (time.perf_counter() - t0) * 1000
            self._call_ui(self._show_result, gen, result, job, took, fired)

        self.background.start(work, "lookup")

    def _lookup_failed(self, gen: int, why: str) -> None:
        self._lookup_running = False
        self.query_one(ResultsList).border_subtitle = ""
        if gen != self._generation:
            return
        self._show_failure(why)

    def _show_result(
        self,
        gen: int,
        result: LookupResult,
        job: JobInfo | None,
        took_ms: float,
        fired: float,
    ) -> None:
        self._lookup_running = False
        self.query_one(ResultsList).border_subtitle = ""
        if gen != self._generation or not self.is_running:
            return  # the text changed while this one ran: a newer result is coming
        self.result = result
        self.last_lookup_ms = took_ms
        if not self._streaming:
            self._message = None
        self._set_job(job)
        self._refresh_list(fresh=True)
        self.last_result_ms = (time.perf_counter() - fired) * 1000

    # ------------------------------------------------------------------ a job: its ranks
    def _set_job(self, job: JobInfo | None) -> None:
        """Show a job's ranks in place of the paste box and the list, or put those back."""
        was = self.job
        self.job = job
        left = self.query_one("#left")
        ranks = self.query_one(RankList)
        left.set_class(job is not None, "-job")
        if job is not None:
            # a pipe read again keeps the rank it was on; a newly opened job starts on the root
            ranks.show_job(job, fresh=was is None)
            ranks.border_subtitle = (
                self.query_one("#paste", TextArea).border_subtitle
                if self._streaming
                else Content(shorter(self._log_label))
            )
            if was is None or not isinstance(self.focused, RankList):
                ranks.focus()  # the hidden widgets cannot keep the focus
        elif was is not None:
            ranks.clear_options()
            if self.focused is None or isinstance(self.focused, RankList):
                self.query_one("#paste", TextArea).focus()
        self.refresh_bindings()

    # ------------------------------------------------------------------ list and detail
    @on(Input.Changed, "#filter")
    def _filter_changed(self) -> None:
        self._refresh_list()

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self) -> None:
        self.query_one(ResultsList).focus()

    def _refresh_list(self, fresh: bool = False) -> None:
        kb = self.kb
        if kb is None:
            return
        results = self.query_one(ResultsList)
        filt = self.query_one("#filter", Input).value
        if fresh:
            results.highlighted = None  # a new result opens on its best row (or "no match")
        if self.result is None:
            if self._statuses is None or self._statuses[0] is not kb:
                self._statuses = (kb, entry_statuses(kb))
            statuses = self._statuses[1]
            results.show_entries(kb.entries, statuses, filt)
            shown = sum(1 for o in results.options if not o.disabled)
            n = len(kb.entries)
            results.border_title = f"Entries ({shown} of {n})" if filt.strip() else f"Entries ({n})"
        else:
            results.show_matches(
                self.result.matches, self.result.suggestions, filt, reading=self._streaming
            )
            n = len(self.result.matches)
            so_far = " so far" if self._streaming else ""
            results.border_title = f"Matches{so_far} ({n})" if n else f"No match{so_far}"
        self._show_selected()

    @on(OptionList.OptionHighlighted, "#results")
    @on(OptionList.OptionHighlighted, "#ranks")
    def _highlighted(self) -> None:
        try:
            self._show_selected()
        except NoMatches:  # a late message while the app shuts down
            pass

    @on(OptionList.OptionSelected, "#results")
    @on(OptionList.OptionSelected, "#ranks")
    def _drill_in(self) -> None:
        """Enter on a row: into its details."""
        self._front_details()
        self.query_one(DetailPane).focus()

    def _selected(self) -> tuple[Entry | None, Match | None, bool]:
        """(the selected entry, its match, whether it is only a guess)."""
        if self.job is not None:
            row = self.query_one(RankList).selected_row
            if row is None or row.match is None:
                return None, None, False
            return row.match.entry, row.match, False
        entry_id = self.query_one(ResultsList).selected_id
        if entry_id is None or entry_id == NO_MATCH or self.kb is None:
            return None, None, False
        if self.result is not None:
            for m in self.result.matches:
                if m.id == entry_id:
                    return m.entry, m, False
            for m in self.result.suggestions:
                if m.id == entry_id:
                    return m.entry, m, True
        return self.kb.get(entry_id), None, False

    def _show_selected(self) -> None:
        entry, match, guess = self._selected()
        pane = self.query_one(DetailPane)
        ranks = self.query_one(RankList)
        row = ranks.selected_row if self.job is not None else None
        if self.job is not None and row is not None and self.kb is not None:
            evidence = self.kb.evidence_for(entry.id) if entry is not None else []
            pane.show_rank(self.job, row, entry, evidence, self.result, ranks.selected_others)
        elif entry is not None and self.kb is not None:
            pane.show_entry(entry, self.kb.evidence_for(entry.id), match, self.result, guess)
        elif self.result is not None and not self.result.matches:
            pane.show_no_match(self.result, reading=self._streaming)
        elif self._message is not None and self.result is None:
            pane.show_message(*self._message)
        elif self.result is not None:
            pane.show_message(
                "The filter hides every match.", "Clear it (f6, then ctrl+u) to see them."
            )
        else:
            pane.show_intro()
        self.query_one(RunPanel).set_target(entry, self._cannot_run(entry))
        # A new paste or selection brings its details to the front: the run log in front
        # belongs to the entry that ran, not to this one.
        key = (pane.kind, entry.id if entry is not None else None, row.who if row else None)
        if key != self._shown_key:
            self._shown_key = key
            self._front_details()

    def _front_details(self) -> None:
        self.query_one(TabbedContent).active = "details"

    # ------------------------------------------------------------------ keys: typing is text
    def _start_screen(self) -> bool:
        """Nothing given yet: no text, no file, no pipe, no job."""
        return (
            self.job is None
            and self._log_path is None
            and not self.query_one("#paste", TextArea).text.strip()
        )

    async def on_event(self, event: events.Event) -> None:
        # Keys are seen here, in the order they came, before they go to the widget with the
        # focus: a key typed outside the box must reach the box before the keys after it do
        # (forwarded to the list, they would queue there behind the focus change, and be lost).
        if isinstance(event, events.Key) and not event.is_forwarded and self._typing(event):
            return
        await super().on_event(event)

    def _typing(self, event: events.Key) -> bool:
        """Whether a key is text rather than a command, and was put where text goes: keys typed
        on the start screen go to the paste box wherever the focus is; a letter elsewhere is
        held for BURST_S, and is text if more keys follow that fast (keys.py)."""
        if self._replay is not None and event.key == self._replay:
            self._replay = None  # a held letter coming back to act
            return False
        if len(self.screen_stack) > 1 or isinstance(self.focused, (TextArea, Input)):
            return False  # a dialog, or a text box: they take their keys
        char = event.character
        typed = event.is_printable and char is not None
        if self._held is not None:
            if event.time - self._held_at < keys.BURST_S and (typed or event.key in BURST_KEYS):
                self._held.append(BURST_KEYS.get(event.key, char or ""))
                self._held_at, self._held_mono = event.time, time.monotonic()
                return True
            self._flush_held()  # the burst is over: what it held acts, or is typed, first
        if not typed or char is None:
            return False
        if self._start_screen():
            self._type(char)
        elif event.key in self._letters:
            self._held, self._held_key = [char], event.key
            self._held_at, self._held_mono = event.time, time.monotonic()
            self.set_timer(keys.BURST_S, self._release_held)
        elif self.job is None:
            self._type(char)  # any other key outside the box: the user is typing
        else:
            return False
        return True

    def _release_held(self) -> None:
        if self._held is None:
            return
        wait = keys.BURST_S - (time.monotonic() - self._held_mono)
        if wait > 0:  # more keys came in the meantime: wait for the burst to end
            self.set_timer(wait, self._release_held)
            return
        self._flush_held()

    def _flush_held(self) -> None:
        held = self._held
        self._held = None
        if not held:
            return
        if len(held) == 1:
            # one key alone: the command it stands for, let through to the bindings this time
            self._replay = self._held_key
            self.simulate_key(self._held_key)
        elif self.job is None:
            self._type("".join(held))
        else:
            self.notify("A job has no paste box: the typed text was dropped (f2 opens one).")

    def _type(self, text: str) -> None:
        """Typing outside the box: it goes into the box, which takes the focus at once (focus()
        would wait its turn behind the keys already queued)."""
        area = self.query_one("#paste", TextArea)
        self.screen.set_focus(area)
        area.move_cursor(area.document.end)
        area.insert(text)

    # ------------------------------------------------------------------ paste anywhere
    def on_paste(self, event: events.Paste) -> None:
        """A paste while the list or the detail has focus still lands in the paste box (a paste
        into the box itself never gets here: the box takes it)."""
        area = self.query_one("#paste", TextArea)
        if self.focused is area or isinstance(self.focused, Input) or not event.text.strip():
            return
        event.stop()
        if self.job is not None:
            self.action_clear_paste()
        area.load_text(event.text)
        self.screen.set_focus(area)

    # ------------------------------------------------------------------ actions
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if len(self.screen_stack) > 1:  # a modal screen: it has its own keys
            return action == "quit"
        return self._available(action)

    def _available(self, action: str) -> bool:
        """Whether an action makes sense now (on the main screen)."""
        running = self._repro_running()
        if action == "run":
            return not running
        if action == "cancel":
            return running
        if action == "focus_paste":
            return not isinstance(self.focused, TextArea)
        if action == "focus_filter":  # a job lists its ranks, which the filter does not filter
            return self.job is None and not isinstance(self.focused, Input)
        return True

    def _repro_running(self) -> bool:
        try:
            return self.query_one(RunPanel).running
        except NoMatches:
            return False

    def get_system_commands(self, screen: Screen) -> list[SystemCommand]:
        """The command palette: the app's own actions first, each with its keys, then Textual's
        own (themes, screenshot, keys) less those the app does its own way (quit, maximise)."""
        out: list[SystemCommand] = []
        for k in keys.KEYS:
            if k.action == "escape" or not self._available(k.action):
                continue
            key = " or ".join(keys.display(x) for x in (k.anywhere, k.letter) if x)
            out.append(
                SystemCommand(
                    k.help[:1].upper() + k.help[1:],
                    f"{k.label} · {key}",
                    lambda action=k.action: self.call_later(self.run_action, action),
                )
            )
        mine = {"Quit", "Maximize", "Minimize"}
        out += [c for c in super().get_system_commands(screen) if c.title not in mine]
        return out

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_focus_filter(self) -> None:
        if self.job is None:
            self.query_one("#filter", Input).focus()

    def action_focus_paste(self) -> None:
        if self.job is not None:  # the box is hidden under the job: close the job to paste
            self.action_clear_paste()
            return
        self.query_one("#paste", TextArea).focus()

    def action_clear_paste(self) -> None:
        self._stop_spool.set()
        self._streaming = False
        self._log_path, self._area_tail, self._message = None, None, None
        self._load_area("")
        self._start_lookup()  # first: closing a job moves the focus, and the box must get it
        self.query_one("#paste", TextArea).focus()

    def action_open(self) -> None:
        start = self._log_label if self._log_path is not None and not self._streaming else ""
        self.push_screen(OpenScreen(start), self._open_chosen)

    def _open_chosen(self, path: str | None) -> None:
        if path:
            self.open_path(Path(path).expanduser())

    def open_path(self, path: Path) -> None:
        """Make a folder or a log file the input, as `kb tui PATH` does: read in threads, a
        folder (or a log with several ranks) shown as a job. A pipe still being read stops."""
        self._stop_spool.set()
        self._streaming = False
        self._generation += 1  # a lookup still running for the old input is not shown
        self._log_path, self._log_label, self._area_tail = path, str(path), ""
        self._message = ("Reading " + self._log_label + "…", "", False)
        self._load_area("")
        self.query_one(DetailPane).show_message(*self._message)
        self._shown_key = None
        self._front_details()
        self.query_one(ResultsList).border_subtitle = "reading…"
        self.background.start(self._read_log_tail, "input")

    def action_toggle_log(self) -> None:
        tabs = self.query_one(TabbedContent)
        tabs.active = "run" if tabs.active == "details" else "details"

    def action_maximize(self) -> None:
        """The pane with the focus fills the screen (the details or the run log with their
        tabs, the paste box, the list); again, or esc, puts it back."""
        screen = self.screen
        if screen.maximized is not None:
            screen.minimize()
            return
        focused = self.focused
        if focused is None:
            return
        tabs = self.query_one(TabbedContent)
        screen.maximize(tabs if tabs in focused.ancestors else focused, container=False)

    def action_escape(self) -> None:
        """Back: out of the details or the run log to the list, out of the list to the paste
        box, out of a text box to the list."""
        focused = self.focused
        right = self.query_one(TabbedContent)
        rows: Widget = (
            self.query_one(RankList) if self.job is not None else self.query_one(ResultsList)
        )
        if (focused is not None and right in focused.ancestors) or isinstance(
            focused, (TextArea, Input)
        ):
            rows.focus()
        elif isinstance(focused, ResultsList):
            self.query_one("#paste", TextArea).focus()

    def action_cancel(self) -> None:
        if self.query_one(RunPanel).cancel():
            self.notify("Cancelling the repro…", timeout=2)

    # ------------------------------------------------------------------ quit
    async def action_quit(self) -> None:
        """Quit; while a repro runs, ask first, then cancel it and leave within a second."""
        panel = self.query_one(RunPanel)
        if not panel.running:
            self._leave()
            return
        if len(self.screen_stack) > 1:
            return  # already asking
        running = panel.running_id or "a repro"

        def answered(yes: bool | None) -> None:
            if yes:
                self._quit_during_run()

        self.push_screen(
            ConfirmScreen(
                f"The repro of {running} is running. Stop it and quit?",
                "Its processes are killed; nothing is recorded.",
                yes="Stop and quit",
                warn=True,
            ),
            answered,
        )

    def _quit_during_run(self) -> None:
        panel = self.query_one(RunPanel)
        panel.cancel()
        self.quit_with_run = True
        deadline = time.monotonic() + QUIT_WAIT_S

        def check() -> None:
            if not panel.running or time.monotonic() >= deadline:
                self._leave()
            else:
                self.set_timer(0.05, check)

        check()

    def _leave(self) -> None:
        self._quitting = True
        self._stop_spool.set()
        self.exit(0)

    # ------------------------------------------------------------------ find
    def action_find(self) -> None:
        """Find in the paste box when it has the focus, else in the pane in front on the right
        (the details or the run log). The list has its filter (f6) instead."""
        focused = self.focused
        if focused is not None and focused.id == "find-input":
            self._find_step(1)
            return
        tabs = self.query_one(TabbedContent)
        if focused is not None and focused.id == "paste":
            self._find_target, where = "paste", "the paste box"
        elif tabs.active == "run":
            self._find_target, where = "log", "the run log"
        else:
            self._find_target, where = "detail", "the details"
        self.query_one(FindBar).open(where)
        self._do_find(self.query_one("#find-input", Input).value)

    def _find_view(self) -> TextView | None:
        if self._find_target == "detail":
            return self.query_one(DetailPane)
        if self._find_target == "log":
            return self.query_one(RunPanel).run_log
        return None

    @on(Input.Changed, "#find-input")
    def _find_changed(self, event: Input.Changed) -> None:
        self._do_find(event.value)

    @on(Input.Submitted, "#find-input")
    def _find_submitted(self) -> None:
        self._find_step(1)

    @on(FindBar.Step)
    def _find_bar_step(self, event: FindBar.Step) -> None:
        self._find_step(event.step)

    @on(FindBar.Closed)
    def _find_closed(self) -> None:
        bar = self.query_one(FindBar)
        bar.display = False
        view = self._find_view()
        if view is not None:
            view.focus()
        else:
            self.query_one("#paste", TextArea).focus()

    def action_find_step(self, step: int) -> None:
        self._find_step(step)

    def _do_find(self, query: str) -> None:
        view = self._find_view()
        if view is not None:
            total = view.find(query)
            current = view.current_hit
        else:
            area = self.query_one("#paste", TextArea)
            self._area_hits = self._area_offsets(area, query)
            total = len(self._area_hits)
            self._area_current = 0 if total else -1
            self._select_area_hit()
            current = self._area_current
        self.query_one(FindBar).count(current, total, query)

    def _find_step(self, step: int) -> None:
        view = self._find_view()
        if view is not None:
            current = view.next_hit(step)
            total, query = view.hit_count, view.find_query
        else:
            total = len(self._area_hits)
            if total:
                self._area_current = (self._area_current + step) % total
                self._select_area_hit()
            current, query = self._area_current, self.query_one("#find-input", Input).value
        self.query_one(FindBar).count(current, total, query)

    @staticmethod
    def _area_offsets(area: TextArea, query: str) -> list[tuple[int, int]]:
        low, q = area.text.lower(), query.lower()
        out: list[tuple[int, int]] = []
        at = low.find(q)
        while q and at != -1:
            out.append((at, at + len(q)))
            at = low.find(q, at + len(q))
        return out

    def _select_area_hit(self) -> None:
        if not 0 <= self._area_current < len(self._area_hits):
            return
        area = self.query_one("#paste", TextArea)
        start, end = self._area_hits[self._area_current]
        area.selection = Selection(_location(area.text, start), _location(area.text, end))
        area.scroll_cursor_visible(center=True)

    # ------------------------------------------------------------------ go to the matched line
    def action_goto_line(self) -> None:
        """The line that matched, in the log: in the run log when it is in front, else in the
        paste box (a file's lines around it are read when the box shows another part)."""
        if self.query_one(TabbedContent).active == "run":
            panel = self.query_one(RunPanel)
            line = panel.matched_line()
            if line is None:
                self.notify("This run's log has no matched line.", severity="warning")
                return
            panel.run_log.scroll_to_line(line)
            panel.run_log.focus()
            return
        if self.job is not None:
            self.notify(
                "A job's rank shows its line and where it was read at the top of its details."
            )
            return
        _, match, guess = self._selected()
        number, text = 0, ""
        if match is not None and not guess and match.line_number:
            number, text = match.line_number, match.line
        elif self.result is not None and self.result.root is not None and match is None:
            number, text = self.result.root.line_number, self.result.root.line
        if not number:
            self.notify("Nothing matched a line of the input.", severity="warning")
            return
        if self._log_path is None:
            self._select_area_line(number - 1, text)
            return
        log, label = self._log_path, self._log_label

        def work() -> None:
            try:
                window, first = read_window(log, number, WINDOW_LINES)
            except Exception as e:  # said in words, never a traceback
                self._call_ui(self._say_error, problem(label, e))
                return
            self._call_ui(self._window_loaded, log, window, first, number, text)

        self.background.start(work, "window")

    def _say_error(self, why: str) -> None:
        self.notify(why, severity="error", timeout=10)

    def _window_loaded(self, log: Path, window: str, first: int, number: int, text: str) -> None:
        if log != self._log_path:
            return
        area = self.query_one("#paste", TextArea)
        with area.prevent(TextArea.Changed):
            area.load_text(window)
        self._area_tail = window  # still the whole file's view: the lookup stays on the file
        area.show_line_numbers = True
        area.line_number_start = first
        last = first + window.count("\n")
        area.border_subtitle = f"lines {first:,}-{last:,} (all of it was read)"
        self._select_area_line(number - first, text)

    def _select_area_line(self, row: int, text: str) -> None:
        area = self.query_one("#paste", TextArea)
        if not 0 <= row < area.document.line_count:
            self.notify("The matched line is not in the box.", severity="warning")
            return
        line = area.document.get_line(row)
        area.selection = Selection((row, 0), (row, len(line)))
        area.scroll_cursor_visible(center=True)
        self.screen.set_focus(area)

    # ------------------------------------------------------------------ copy
    def action_copy(self) -> None:
        entry, match, guess = self._selected()
        items = items_for(entry, match, self.result, guess)
        if not items:
            self.notify("Nothing to copy here: select an entry first.", severity="warning")
            return
        subject = entry.id if entry is not None else "the root failure"

        def chosen(index: int | None) -> None:
            if index is not None:
                item = items[index]
                self.copy_text(item.text, item.what)

        self.push_screen(CopyMenu(items, subject), chosen)

    def copy_text(self, text: str, what: str) -> None:
        """Copy, and say where it went: the system clipboard says so when it takes it; the
        terminal (OSC 52) never does, so then the text is shown to select."""
        self.copy_to_clipboard(text)  # OSC 52, for the terminals that take it

        def work() -> None:
            done = clipboard.copy(text)
            self._call_ui(self._copied, text, what, done)

        self.background.start(work, "clipboard")

    def _copied(self, text: str, what: str, done: clipboard.Copied) -> None:
        if done.system:
            self.notify(f"Copied {what} to the clipboard ({done.system}).", timeout=4)
        else:
            self.push_screen(CopiedScreen(what, text, done.osc52))

    # ------------------------------------------------------------------ run
    def action_run(self) -> None:
        panel = self.query_one(RunPanel)
        entry, _, _ = self._selected()
        if panel.running:
            self.notify("A repro is already running (c or f5 cancels it).", severity="warning")
            return
        if entry is None:
            self.notify("Select an entry first.", severity="warning")
            return
        if entry.repro is None:
            self.notify(f"{entry.id} has no repro to run.", severity="warning")
            return
        cannot = self._cannot_run(entry)
        if cannot is not None:
            # The header already says what this machine lacks: no question whose yes could
            # only end in "skipped", but why, and what would let it run.
            self.notify(cannot, title="Cannot run here", severity="warning", timeout=20)
            return
        req = entry.repro.requires
        needs = "a GPU" if req.gpu else "no GPU"
        if req.gpu and req.gpus > 1:
            needs = f"{req.gpus} GPUs"
        then = "then its fix check; " if entry.fix_check is not None else ""
        python = self._environment.python if self._environment is not None else self.python
        detail = (
            f"Its repro runs here in {python} (it needs {needs}), {then}up to "
            f"{entry.repro.timeout:.0f} s each. c or f5 stops it."
        )
        if entry.local:
            detail = (
                f"A local entry: its code comes from {entry.path}, not from kb itself, and runs "
                "on this machine as you. Run it only if you trust that file. " + detail
            )
        self.push_screen(
            ConfirmScreen(
                f"Run the repro of {entry.id}?",
                detail,
                command=f"$ kb verify {entry.id}",
                warn=entry.local,
            ),
            lambda yes: self._start_run(entry, trust=entry.local) if yes else None,
        )

    def _cannot_run(self, entry: Entry | None) -> str | None:
        """Why the entry's repro cannot run on this machine, or None when it can or that is
        not known yet (torch still being probed: the run itself checks again)."""
        env, kb = self._environment, self.kb
        if entry is None or entry.repro is None or env is None or kb is None:
            return None
        if not self._torch_known:
            return None
        why = self.verifier.cannot_run(entry, kb, env)
        return None if why is None else cannot_run_here(entry, env, why)

    def _start_run(self, entry: Entry, trust: bool) -> None:
        if self.kb is None:
            return
        _, match, guess = self._selected()
        yours = (
            match.signature if match is not None and not guess and match.id == entry.id else None
        )
        self.query_one(TabbedContent).active = "run"
        self.query_one(RunPanel).start(
            entry,
            self.kb,
            self.get_environment,
            self.verifier,
            self.background,
            trust=trust,
            python=self.python,
            signature=yours,
        )
        self.refresh_bindings()

    @on(RunPanel.Finished)
    def _run_finished(self) -> None:
        self.refresh_bindings()
        # The header's GPU memory was read while the repro held its memory: read it again now
        # that the repro has ended, not GPU_REFRESH_S later (or never, between reads).
        env = self._environment
        if self._watch_gpu and env is not None and env.gpu is not None and not self._quitting:
            self.background.start(self._reread_gpu, "gpu")

    def on_button_pressed(self, event) -> None:
        if event.button.id == "run-start":
            self.action_run()
        elif event.button.id == "run-cancel":
            self.action_cancel()

    def on_unmount(self) -> None:
        self._listed.set()
        self._stop_spool.set()
        if self._spool is not None:
            remove_spool(self._spool)


def entry_statuses(kb: KnowledgeBase) -> dict[str, str]:
    """Each entry's verification word for the list (reads the evidence: done once per kb)."""
    return {e.id: verification_status(e, kb.evidence_for(e.id)) for e in kb.entries}


def _location(text: str, index: int) -> tuple[int, int]:
    """(row, column) in the paste box of an offset into its text."""
    row = text.count("\n", 0, index)
    return row, index - (text.rfind("\n", 0, index) + 1)


def create_app(
    kb: KnowledgeBase | None = None,
    text: str = "",
    log: Path | None = None,
    stream: BinaryIO | None = None,
    environment: Environment | None = None,
    verifier: Verifier | None = None,
    kb_dirs: list[str] | None = None,
    python: str = sys.executable,
    prewarm: bool = False,
    watch_gpu: bool = True,
) -> KbApp:
    """Build the app. kb: a loaded KnowledgeBase (loaded in a thread when None); text: the
    initial paste; log: a log file (plain or gzip) looked up whole; stream: a piped log, read in
    a thread; environment: where repros run (GPU and torch; probed in a thread when None);
    verifier: the door to the machine (tests pass a subclass); python: the repro interpreter;
    prewarm: open the full-text index in the background."""
    return KbApp(
        kb=kb,
        text=text,
        log=log,
        stream=stream,
        environment=environment,
        verifier=verifier,
        kb_dirs=kb_dirs,
        python=python,
        prewarm=prewarm,
        watch_gpu=watch_gpu,
    )


def run_app(args: argparse.Namespace) -> int:
    """`kb tui` (kb.cli calls this)."""
    return command_line.main(args, create_app)
