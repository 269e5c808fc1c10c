"""The kb TUI: paste an error, read the diagnosis, run the repro on this machine. A job (a folder
of rank logs, or a log with several ranks) lists its ranks, the root cause first, in place of the
paste box and the entries; the detail pane shows the selected rank.

`create_app` is the one factory: `kb tui` (run_app) and the tests both build the app through it,
injecting a knowledge base, an environment and a verifier where they want determinism.

Nothing blocking runs on the event loop: loading the entries, every lookup, reading a file or a
pipe, asking NVML, probing torch and running repros all happen in worker threads, which hand
their results back with call_from_thread. The app reaches kb only through its public API.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path
from typing import BinaryIO

from textual import events, on
from textual.app import App, ComposeResult
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.timer import Timer
from textual.widgets import (
    Footer,
    Input,
    OptionList,
    Static,
    TabbedContent,
    TabPane,
    TextArea,
)

from kb import (
    Engine,
    Entry,
    Environment,
    KnowledgeBase,
    LookupResult,
    Match,
    verification_status,
)

from . import command_line, keys
from .confirm_screen import ConfirmScreen
from .detail_pane import DetailPane
from .help_screen import HelpScreen
from .job_ranks import JobInfo, shorter
from .log_source import (
    READ_ERRORS,
    human_size,
    problem,
    read_tail,
    remove_spool,
    spool,
    spool_path,
)
from .lookup import LookupFailed, look_up
from .machine_status import MachineStatus
from .open_screen import OpenScreen
from .rank_list import RankList
from .results_list import NO_MATCH, ResultsList
from .run_panel import RunPanel
from .verifier import Verifier

DEBOUNCE_S = 0.2
MAX_AREA_CHARS = (
    64 << 10
)  # a bigger log is looked up whole; the editor gets its tail (loading 1 MiB
# into a soft-wrapping TextArea froze the UI for ~0.8 s; 64 KiB is ~900 lines and ~50 ms)
LIVE_LOOKUP_S = 2.0  # while a pipe is still arriving, look up what came so far this often
GPU_REFRESH_S = 5.0
COMPACT_BELOW = 100  # columns
TOP = 8


class KbApp(App[int]):
    CSS_PATH = "app.tcss"
    TITLE = "kb"
    ESCAPE_TO_MINIMIZE = False
    BINDINGS = keys.bindings()

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
        super().__init__()
        self.kb = kb
        self.engine: Engine | None = Engine(knowledge=kb) if kb is not None else None
        self.kb_dirs = kb_dirs
        self.verifier = verifier or Verifier()
        self.python = python
        self.result: LookupResult | None = None
        self.job: JobInfo | None = None  # the ranks of a job (a folder, a multi-rank log)
        self.last_lookup_ms: float | None = None  # lookup compute time, in the worker
        self.last_result_ms: float | None = None  # debounce firing -> list updated
        self.mounted_at: float | None = None
        self.ready_at: float | None = None  # the first frame is on the screen
        self.kb_ready_at: float | None = None  # the entries are loaded and listed
        self._initial_text = text
        self._environment = environment
        self._torch_known = environment is not None
        self._env_lock = threading.Lock()
        self._watch_gpu = watch_gpu and environment is None
        self._prewarm = prewarm
        # A log read from a file or a pipe: looked up whole from `_log`, while the editor shows
        # its tail (`_area_tail`); once the editor's text differs from that tail, it is the input.
        self._log_path = log
        self._log_label = str(log) if log is not None else ""
        self._stream = stream
        self._spool: Path | None = None
        self._streaming = False
        self._stop_spool = threading.Event()
        self._area_tail: str | None = None
        self._message: tuple[str, str, bool] | None = (
            None  # shown in the detail pane instead of an intro
        )
        self._lookup_running = False
        self._debounce: Timer | None = None
        self._generation = 0
        self._created = time.perf_counter()

    # ------------------------------------------------------------------ layout
    def compose(self) -> ComposeResult:
        with Horizontal(id="top-bar"):
            yield Static("kb", id="app-name")
            yield MachineStatus(id="machine")
        with Horizontal(id="main"):
            with Vertical(id="left"):
                yield TextArea(
                    id="paste",
                    soft_wrap=True,
                    show_line_numbers=False,
                    highlight_cursor_line=False,
                    placeholder="Paste an error or a log here (i or f2)",
                )
                yield Input(id="filter", placeholder="/ filter entries", compact=True)
                yield ResultsList(id="results")
                yield RankList(id="ranks")  # in place of the three above while a job is open
            with TabbedContent(id="right", initial="details"):
                with TabPane("Details", id="details"):
                    yield DetailPane(id="detail")
                with TabPane("Run log", id="run"):
                    yield RunPanel(id="runpanel")
        yield Footer(show_command_palette=False)

    def on_mount(self) -> None:
        self.query_one("#paste", TextArea).border_title = "Error or log"
        self.query_one(MachineStatus).show(self._environment, self._torch_known)
        results = self.query_one(ResultsList)
        if self._initial_text:
            self._load_area(self._initial_text)
        if self.kb is None:
            results.border_title = "Entries (loading)"
            self.query_one(DetailPane).show_message("Loading the entries…")
        results.focus()  # so every letter key works and the footer shows them; a paste still lands in the box
        self.call_after_refresh(self._start_background)
        self.mounted_at = time.perf_counter()

    def on_resize(self, event: events.Resize) -> None:
        # Below 100 columns the footer drops the spaces around its keys: at 80, while typing,
        # the roomy footer pushed "esc Back" off the line.
        self.query_one(Footer).compact = event.size.width < COMPACT_BELOW

    def on_ready(self) -> None:
        self.ready_at = time.perf_counter()

    def _start_background(self) -> None:
        """After the first frame: the entries, the machine, the log; each in its own worker."""
        if self.kb is None:
            self.run_worker(self._load_kb, thread=True, group="kb", exit_on_error=False)
        else:
            self._kb_ready_now()
        if self._environment is None:
            self.run_worker(self._probe_machine, thread=True, group="machine", exit_on_error=False)
        if self._stream is not None:
            self.run_worker(self._read_pipe, thread=True, group="input", exit_on_error=False)
        elif self._log_path is not None:
            self._area_tail = ""  # the editor shows nothing of it yet
            self._message = ("Reading " + self._log_label + "…", "", False)
            self.query_one(DetailPane).show_message(*self._message)
            self.run_worker(self._read_log_tail, thread=True, group="input", exit_on_error=False)

    # ------------------------------------------------------------------ the knowledge base
    def _load_kb(self) -> None:
        try:
            engine = Engine(self.kb_dirs)
            kb = engine.knowledge
        except Exception as e:  # a broken install still opens, and says why
            self.call_from_thread(self._kb_failed, f"{type(e).__name__}: {e}")
            return
        self.call_from_thread(self._kb_ready, engine, kb)
        if self._prewarm:
            self._prewarm_index(engine)

    @staticmethod
    def _prewarm_index(engine: Engine) -> None:
        """Open the full-text index before the first paste that needs it (only used when no
        signature fires; ~0.3 s the first time after entries change)."""
        try:
            engine.lookup("warm up the full text index", top=1)
        except Exception:
            pass

    def _kb_failed(self, why: str) -> None:
        self.query_one(DetailPane).show_message("Cannot load the entries", why, bad=True)
        self.notify(f"Cannot load entries: {why}", severity="error", timeout=30)

    def _kb_ready(self, engine: Engine, kb: KnowledgeBase) -> None:
        self.engine, self.kb = engine, kb
        self._kb_ready_now()

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
        """Worker: the GPUs first (milliseconds), then torch in the repro interpreter (seconds)."""
        self.get_environment()
        if self._watch_gpu and self._environment is not None and self._environment.gpu is not None:
            self.call_from_thread(self._watch_gpu_memory)

    def get_environment(self) -> Environment:
        """Where repros run, probed once (worker threads only: NVML and a child interpreter)."""
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

    def _watch_gpu_memory(self) -> None:
        self.set_interval(
            GPU_REFRESH_S,
            lambda: self.run_worker(
                self._reread_gpu, thread=True, group="gpu", exclusive=True, exit_on_error=False
            ),
        )

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
        """Worker: the tail of the file for the editor (the lookup reads the file whole); a
        folder has no tail, and goes straight to its lookup."""
        log = self._log_path
        if log is None:  # cleared meanwhile
            return
        if log.is_dir():
            self._call_ui(self._folder_opened, log)
            return
        try:
            tail, size, trouble = read_tail(log, MAX_AREA_CHARS)
        except READ_ERRORS as e:
            self._call_ui(self._log_failed, problem(self._log_label, e))
            return
        self._call_ui(self._log_loaded, tail, size, trouble)

    def _folder_opened(self, folder: Path) -> None:
        if folder != self._log_path:  # another path was opened meanwhile
            return
        area = self.query_one("#paste", TextArea)
        area.border_title = f"{folder.name or folder}/"
        area.border_subtitle = "a folder: its logs are read as one job"
        self._start_lookup()

    def _log_failed(self, why: str) -> None:
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
        self.notify(why, severity="error", timeout=15)

    def _log_loaded(self, tail: str, size: int, trouble: str) -> None:
        self._message = None
        if self.query_one("#paste", TextArea).text == (
            self._area_tail or ""
        ):  # not typed over meanwhile
            self._load_area(tail, size)
        if trouble:
            self.query_one(
                "#paste", TextArea
            ).border_subtitle = f"tail of {human_size(size)}, cut short"
            self.notify(trouble, severity="warning", timeout=8)
        self._start_lookup()

    def _read_pipe(self) -> None:
        """Worker: copy the piped log to a temporary file as it arrives; look up what came so far
        every few seconds, and all of it at the end."""
        assert self._stream is not None
        self._spool = spool_path()
        self._area_tail = ""
        self._log_path, self._log_label, self._streaming = self._spool, "the piped log", True
        last = [time.monotonic()]

        def progress(n: int) -> None:
            now = time.monotonic()
            if now - last[0] >= LIVE_LOOKUP_S:
                last[0] = now
                self._call_ui(self._pipe_progress, n)

        self._call_ui(self._pipe_progress, 0)
        try:
            total = spool(self._stream, self._spool, progress, self._stop_spool.is_set)
        except READ_ERRORS as e:
            self._streaming = False
            self._call_ui(self._log_failed, f"cannot read the piped log: {e}")
            return
        self._streaming = False
        if self._stop_spool.is_set():  # cleared, or another path opened: the pipe is not the input
            return
        self._call_ui(self._pipe_progress, total)
        self._read_log_tail()

    def _pipe_progress(self, n: int) -> None:
        area = self.query_one("#paste", TextArea)
        if self._streaming:
            area.border_subtitle = f"reading stdin: {human_size(n)}"
            self.query_one(RankList).border_subtitle = area.border_subtitle
            self._message = (
                "Reading the piped log…",
                f"{human_size(n)} so far. Results follow as it arrives; the whole log is "
                "looked up when the pipe closes.",
                False,
            )
            if self.result is None:
                self.query_one(DetailPane).show_message(*self._message)
            if n and not self._lookup_running and self.kb is not None:
                self._start_lookup()

    def _load_area(self, text: str, whole_size: int | None = None) -> None:
        """Put text in the editor without it counting as an edit (no debounced lookup of it)."""
        area = self.query_one("#paste", TextArea)
        if whole_size is not None and whole_size > len(text.encode()):
            area.border_subtitle = f"tail of {human_size(whole_size)}, all read"
        else:
            area.border_subtitle = ""
        if whole_size is not None and self._log_label:
            area.border_title = (
                "piped log" if self._stream is not None else Path(self._log_label).name
            )
        else:
            area.border_title = "Error or log"
        if whole_size is not None:
            self._area_tail = text
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

        self.run_worker(work, thread=True, group="lookup", exit_on_error=False)

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
                else shorter(self._log_label)
            )
            if was is None or not isinstance(self.focused, RankList):
                ranks.focus()  # the hidden widgets cannot keep the focus
        elif was is not None:
            ranks.clear_options()
            if self.focused is None or isinstance(self.focused, RankList):
                self.query_one(ResultsList).focus()
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
            statuses = {e.id: verification_status(e, kb.evidence_for(e.id)) for e in kb.entries}
            results.show_entries(kb.entries, statuses, filt)
            shown = sum(1 for o in results.options if not o.disabled)
            n = len(kb.entries)
            results.border_title = f"Entries ({shown} of {n})" if filt.strip() else f"Entries ({n})"
        else:
            results.show_matches(self.result.matches, self.result.suggestions, filt)
            n = len(self.result.matches)
            results.border_title = f"Matches ({n})" if n else "No match"
        self._show_selected()

    @on(OptionList.OptionHighlighted, "#results")
    @on(OptionList.OptionHighlighted, "#ranks")
    def _highlighted(self) -> None:
        try:
            self._show_selected()
        except NoMatches:  # a late message while the app shuts down
            pass

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
        row = self.query_one(RankList).selected_row if self.job is not None else None
        if self.job is not None and row is not None and self.kb is not None:
            evidence = self.kb.evidence_for(entry.id) if entry is not None else []
            pane.show_rank(self.job, row, entry, evidence, self.result)
        elif entry is not None and self.kb is not None:
            pane.show_entry(entry, self.kb.evidence_for(entry.id), match, self.result, guess)
        elif self._message is not None and (self.result is None or self._streaming):
            pane.show_message(*self._message)
        elif self.result is not None and not self.result.matches:
            pane.show_no_match(self.result)
        elif self.result is not None:
            pane.show_message(
                "The filter hides every match.", "Clear it (/ then ctrl+u) to see them."
            )
        else:
            pane.show_intro()
        self.query_one(RunPanel).set_target(entry)

    # ------------------------------------------------------------------ paste anywhere
    def on_paste(self, event: events.Paste) -> None:
        """A paste while the list or the detail has focus still lands in the paste box (a paste
        into the box itself never gets here: the box takes it)."""
        area = self.query_one("#paste", TextArea)
        if self.focused is area or isinstance(self.focused, Input) or not event.text.strip():
            return
        event.stop()
        area.load_text(event.text)
        area.focus()

    # ------------------------------------------------------------------ actions
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if len(self.screen_stack) > 1:  # a modal screen: it has its own keys
            return action == "quit"
        if action in ("run", "cancel"):
            try:
                running = self.query_one(RunPanel).running
            except NoMatches:
                running = False
            return running if action == "cancel" else not running
        if action == "focus_paste":
            return not isinstance(self.focused, TextArea)
        if action == "focus_filter":  # a job lists its ranks, which the filter does not filter
            return self.job is None and not isinstance(self.focused, Input)
        if action == "escape":
            try:
                running = self.query_one(RunPanel).running
            except NoMatches:
                running = False
            return running or isinstance(self.focused, (TextArea, Input))
        return True

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_focus_filter(self) -> None:
        self.query_one("#filter", Input).focus()

    def action_focus_paste(self) -> None:
        if self.job is not None:  # the box is hidden under the job: close the job to paste
            self.action_clear_paste()
            return
        self.query_one("#paste", TextArea).focus()

    def action_clear_paste(self) -> None:
        self._stop_spool.set()
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
        """Make a folder or a log file the input, as `kb tui PATH` does: read in workers, a
        folder (or a log with several ranks) shown as a job. A pipe still being read stops."""
        self._stop_spool.set()
        self._streaming = False
        self._generation += 1  # a lookup still running for the old input is not shown
        self._log_path, self._log_label, self._area_tail = path, str(path), ""
        self._message = ("Reading " + self._log_label + "…", "", False)
        self._load_area("")
        self.query_one(DetailPane).show_message(*self._message)
        self.query_one(ResultsList).border_subtitle = "reading…"
        self.run_worker(self._read_log_tail, thread=True, group="input", exit_on_error=False)

    def action_toggle_log(self) -> None:
        tabs = self.query_one(TabbedContent)
        tabs.active = "run" if tabs.active == "details" else "details"

    def action_escape(self) -> None:
        if self.query_one(RunPanel).running:
            self.action_cancel()
        elif isinstance(self.focused, (TextArea, Input)):
            self.query_one(ResultsList).focus()

    def action_cancel(self) -> None:
        if self.query_one(RunPanel).cancel():
            self.notify("Cancelling the repro…", timeout=2)

    def action_copy_fix(self) -> None:
        entry, _, guess = self._selected()
        if entry is None:
            self.notify("Select an entry first.", severity="warning")
            return
        for i, fix in enumerate(entry.fixes, 1):
            if fix.code:
                self.copy_to_clipboard(fix.code)
                also = " (from a guess: check it fits)" if guess else ""
                self.notify(f"Copied fix {i}: {fix.title}{also}", timeout=3)
                return
        self.notify("This entry's fixes have no code to copy.", severity="warning")

    def action_run(self) -> None:
        panel = self.query_one(RunPanel)
        entry, _, _ = self._selected()
        if panel.running:
            self.notify("A repro is already running (c or esc cancels it).", severity="warning")
            return
        if entry is None:
            self.notify("Select an entry first.", severity="warning")
            return
        if entry.repro is None:
            self.notify(f"{entry.id} has no repro to run.", severity="warning")
            return
        if entry.local:
            question = f"Run the repro of your local entry {entry.id}?"
            detail = (
                f"It comes from {entry.path}, not from kb itself: its code runs on this machine "
                "as you. Run it only if you trust that file."
            )
            self.push_screen(
                ConfirmScreen(question, detail),
                lambda yes: self._start_run(entry, trust=True) if yes else None,
            )
            return
        self._start_run(entry, trust=False)

    def _start_run(self, entry: Entry, trust: bool) -> None:
        if self.kb is None:
            return
        self.query_one(TabbedContent).active = "run"
        self.query_one(RunPanel).start(
            entry, self.kb, self.get_environment, self.verifier, trust=trust, python=self.python
        )
        self.refresh_bindings()

    @on(RunPanel.Finished)
    def _run_finished(self) -> None:
        self.refresh_bindings()

    def on_button_pressed(self, event) -> None:
        if event.button.id == "run-start":
            self.action_run()
        elif event.button.id == "run-cancel":
            self.action_cancel()

    def on_unmount(self) -> None:
        self._stop_spool.set()
        if self._spool is not None:
            remove_spool(self._spool)


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
    """Build the app. kb: a loaded KnowledgeBase (loaded in a worker when None); text: the
    initial paste; log: a log file (plain or gzip) looked up whole; stream: a piped log, read in
    a worker; environment: where repros run (GPU and torch; probed in a worker when None);
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
