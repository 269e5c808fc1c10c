"""The kb TUI: paste an error, read the diagnosis, run the repro on this machine.

`create_app` is the one factory: `kb tui` (run_app) and the tests both build the app through it,
injecting a knowledge base, an environment and a GPU state where they want determinism.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.widgets import Footer, Input, OptionList, Static, TabbedContent, TabPane, TextArea

from kb import Engine, Entry, LookupResult, Match
from kb.render import verification_status

from . import services
from .confirm_screen import ConfirmScreen
from .detail_pane import DetailPane
from .gpu_status import GpuStatus
from .help_screen import HelpScreen
from .results_list import ResultsList
from .run_panel import RunPanel

DEBOUNCE_S = 0.2
MAX_INPUT_BYTES = 64 << 20  # what run_app reads from a pipe or a file
MAX_AREA_CHARS = 1 << 20  # a bigger log is looked up whole but only its tail is put in the editor
TOP = 8


class KbApp(App[int]):
    CSS_PATH = "app.tcss"
    TITLE = "kb"
    ESCAPE_TO_MINIMIZE = False
    BINDINGS = [
        Binding("f1", "help", "Help", priority=True),
        Binding("question_mark", "help", "Help", show=False),
        Binding("r", "run", "Run repro", show=False),
        Binding("f5", "run", "Run", priority=True),
        Binding("c", "cancel", "Cancel", show=False),
        Binding("escape", "escape", "Back"),
        Binding("y", "copy_fix", "Copy fix"),
        Binding("slash", "focus_filter", "Filter"),
        Binding("i", "focus_paste", "Paste", show=False),
        Binding("ctrl+x", "clear_paste", "Clear", show=False, priority=True),
        Binding("d", "show_tab('details')", "Details", show=False),
        Binding("l", "show_tab('run')", "Run log", show=False),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, kb: Any = None, text: str = "", environment: Any = None, gpu: Any = None,
                 kb_dirs: list[str] | None = None, verify: Any = None, watch_gpu: bool = True,
                 prewarm: bool = False) -> None:
        super().__init__()
        self.kb = kb
        self.engine: Engine | None = None
        self.kb_dirs = kb_dirs
        self.initial_text = text
        self.result: LookupResult | None = None
        self.verify = verify
        self.last_lookup_ms: float | None = None  # lookup compute time, in the worker
        self.last_result_ms: float | None = None  # debounce firing -> list updated
        self.mounted_at: float | None = None
        self.ready_at: float | None = None  # the first frame is on the screen
        self._environment = environment
        self._env_lock = threading.Lock()
        self._lookup_lock = threading.Lock()
        self._gpu = services.gpu_state_from(gpu) if gpu is not None else None
        self._watch_gpu = watch_gpu and gpu is None
        self._prewarm = prewarm
        self._full_text: str | None = None  # the whole piped log, while the editor shows its tail
        self._area_text: str | None = None
        self._debounce = None
        self._generation = 0
        self._created = time.perf_counter()

    # ------------------------------------------------------------------ layout
    def compose(self) -> ComposeResult:
        with Horizontal(id="top-bar"):
            yield Static("kb", id="app-name")
            yield GpuStatus(id="gpu")
        with Horizontal(id="main"):
            with Vertical(id="left"):
                yield TextArea(id="paste", soft_wrap=True, show_line_numbers=False, highlight_cursor_line=False,
                               placeholder="Paste an error or a log here…")
                yield Input(id="filter", placeholder="/ filter entries", compact=True)
                yield ResultsList(id="results")
            with TabbedContent(id="right", initial="details"):
                with TabPane("Details", id="details"):
                    yield DetailPane(id="detail")
                with TabPane("Run", id="run"):
                    yield RunPanel(id="runpanel")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#paste", TextArea).border_title = "Error or log (i)"
        self._set_paste_text(self.initial_text)
        if self._gpu is not None:
            self.query_one(GpuStatus).state = self._gpu
        elif self._environment is not None:
            self.query_one(GpuStatus).state = services.gpu_state_from(self._environment)
        elif self._watch_gpu:
            self.call_after_refresh(lambda: self.run_worker(self._read_gpu, thread=True, group="gpu",
                                                            exit_on_error=False))
        if self.kb is None:
            # Synchronously, on purpose: from the entry cache this takes milliseconds, while a
            # worker thread doing the same file reads next to the first paint took ~100x longer
            # (every read gives up the GIL and waits to get it back).
            try:
                self.engine = Engine(self.kb_dirs)
                self.kb = self.engine.knowledge
            except Exception as e:  # a broken install still opens, and says why
                self.notify(f"Cannot load entries: {e}", severity="error", timeout=30)
        if self.kb is not None:
            self._kb_ready()
            if self._prewarm:
                self.call_after_refresh(lambda: self.run_worker(self._prewarm_index, thread=True, group="warm",
                                                                exit_on_error=False))
        focus = "#paste" if not self.initial_text else "#results"
        self.query_one(focus).focus()
        self.mounted_at = time.perf_counter()

    def on_ready(self) -> None:
        self.ready_at = time.perf_counter()

    # ------------------------------------------------------------------ kb, gpu, environment
    def _prewarm_index(self) -> None:
        """Build or open the full-text index before the first paste that needs it (it is only
        used when no signature fires, and costs ~0.3 s the first time after entries change)."""
        try:
            with self._lookup_lock:
                self._engine().lookup("warm up the full text index", top=1)
        except Exception:
            pass

    def _engine(self) -> Engine:
        if self.engine is None or self.engine.knowledge is not self.kb:
            self.engine = Engine(knowledge=self.kb)
        return self.engine

    def _kb_ready(self) -> None:
        if self._current_text().strip():
            self._start_lookup()
        else:
            self._refresh_list()

    def _read_gpu(self) -> None:
        state = services.read_gpu_state()
        self.call_from_thread(self._set_gpu, state)

    def _set_gpu(self, state: services.GpuState) -> None:
        self.query_one(GpuStatus).state = state
        if state.available and self._watch_gpu:
            self._watch_gpu = False
            self.set_interval(5.0, lambda: self.run_worker(self._read_gpu, thread=True, group="gpu",
                                                            exclusive=True, exit_on_error=False))

    def get_environment(self) -> Any:
        """The run environment, probed once on first use (from the repro worker thread)."""
        with self._env_lock:
            if self._environment is None:
                verify = self._verifier()
                self._environment = verify.probe_environment(python=sys.executable)
            return self._environment

    def _verifier(self) -> Any:
        if self.verify is None:
            self.verify = services.verifier()
        return self.verify

    # ------------------------------------------------------------------ the paste area and lookup
    def _set_paste_text(self, text: str) -> None:
        area = self.query_one("#paste", TextArea)
        if len(text) > MAX_AREA_CHARS:
            self._full_text = text
            cut = text.find("\n", len(text) - MAX_AREA_CHARS)
            shown = text[cut + 1:] if cut >= 0 else text[-MAX_AREA_CHARS:]
            area.border_subtitle = f"last {len(shown) >> 10} KiB of {len(text) >> 20} MiB; results use all"
        else:
            self._full_text = None
            shown = text
            area.border_subtitle = ""
        self._area_text = shown
        area.load_text(shown)
        if shown:
            area.move_cursor(area.document.end)

    def _current_text(self) -> str:
        area_text = self.query_one("#paste", TextArea).text
        if self._full_text is not None and area_text == self._area_text:
            return self._full_text
        return area_text

    @on(TextArea.Changed, "#paste")
    def _paste_changed(self) -> None:
        if self._debounce is not None:
            self._debounce.stop()
        self._debounce = self.set_timer(DEBOUNCE_S, self._start_lookup)

    def _start_lookup(self) -> None:
        self._debounce = None
        if self.kb is None:
            return  # _kb_ready runs it
        text = self._current_text()
        self._generation += 1
        if not text.strip():
            self.result = None
            self._refresh_list()
            return
        gen, kb, fired = self._generation, self.kb, time.perf_counter()

        def work() -> None:
            t0 = time.perf_counter()
            try:
                with self._lookup_lock:  # lookup's caches are per process: one builder at a time
                    result = self._engine().lookup(text, top=TOP)
            except Exception as e:
                self.call_from_thread(self.notify, f"Lookup failed: {e}", severity="error")
                return
            took = (time.perf_counter() - t0) * 1000
            self.call_from_thread(self._show_result, gen, result, took, fired)

        self.run_worker(work, thread=True, group="lookup", exit_on_error=False)

    def _show_result(self, gen: int, result: LookupResult, took_ms: float, fired: float) -> None:
        if gen != self._generation or not self.is_running:
            return  # the text changed while this one ran: a newer result is coming
        self.result = result
        self.last_lookup_ms = took_ms
        self._refresh_list()
        self.last_result_ms = (time.perf_counter() - fired) * 1000

    @on(Input.Changed, "#filter")
    def _filter_changed(self) -> None:
        self._refresh_list()

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self) -> None:
        self.query_one(ResultsList).focus()

    def _refresh_list(self) -> None:
        if self.kb is None:
            return
        results = self.query_one(ResultsList)
        filt = self.query_one("#filter", Input).value
        if self.result is None:
            statuses = {e.id: verification_status(e, self.kb.evidence_for(e.id)) for e in self.kb.entries}
            results.show_entries(self.kb.entries, statuses, filt)
            results.border_title = f"Entries ({len(self.kb.entries)})"
        else:
            results.show_matches(self.result.matches, self.result.suggestions, filt)
            n = len(self.result.matches)
            results.border_title = f"Matches ({n})" if n else "No match"
        self._show_selected()

    @on(OptionList.OptionHighlighted, "#results")
    def _highlighted(self) -> None:
        try:
            self._show_selected()
        except NoMatches:  # a late message while the app shuts down
            pass

    def _selected_match(self) -> tuple[Entry | None, Match | None]:
        entry_id = self.query_one(ResultsList).selected_id
        if entry_id is None or self.kb is None:
            return None, None
        if self.result is not None:
            for m in list(self.result.matches) + list(self.result.suggestions):
                if m.id == entry_id:
                    return m.entry, m
        return self.kb.get(entry_id), None

    def _show_selected(self) -> None:
        entry, match = self._selected_match()
        diagnosis = self.result.diagnosis if self.result is not None else None
        evidence = self.kb.evidence_for(entry.id) if entry is not None and self.kb is not None else None
        note = ""
        if entry is None and self.result is not None:
            note = "No entry matched this text." + (" The diagnosis below is from its facts." if diagnosis else "")
        self.query_one(DetailPane).show(entry, match, diagnosis, evidence, note)
        self.query_one(RunPanel).set_target(entry)

    # ------------------------------------------------------------------ actions
    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_focus_filter(self) -> None:
        self.query_one("#filter", Input).focus()

    def action_focus_paste(self) -> None:
        self.query_one("#paste", TextArea).focus()

    def action_clear_paste(self) -> None:
        self._set_paste_text("")
        self.query_one("#paste", TextArea).focus()

    def action_show_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab

    def action_escape(self) -> None:
        if self.query_one(RunPanel).running:
            self.action_cancel()
        elif isinstance(self.focused, (TextArea, Input)):
            self.query_one(ResultsList).focus()

    def action_cancel(self) -> None:
        if self.query_one(RunPanel).cancel():
            self.notify("Cancelling the repro…", timeout=2)

    def action_copy_fix(self) -> None:
        entry, _ = self._selected_match()
        if entry is None:
            self.notify("Select an entry first.", severity="warning")
            return
        for i, fix in enumerate(entry.fixes, 1):
            if fix.get("code"):
                self.copy_to_clipboard(fix["code"])
                self.notify(f"Copied fix {i}: {fix.get('title', '')}", timeout=3)
                return
        self.notify("This entry's fixes have no code to copy.", severity="warning")

    def action_run(self) -> None:
        panel = self.query_one(RunPanel)
        entry, _ = self._selected_match()
        if panel.running:
            self.notify("A repro is already running (c cancels it).", severity="warning")
            return
        if entry is None:
            self.notify("Select an entry first.", severity="warning")
            return
        if entry.repro is None:
            self.notify(f"{entry.id} has no repro to run.", severity="warning")
            return
        if self._verifier() is None:
            self.notify("This install of kb cannot run repros (no kb.verify).", severity="error")
            return
        if entry.local:
            question = f"Run the repro of your local entry {entry.id}?"
            detail = (f"It comes from {entry.path}, not from kb itself: its code runs on this machine "
                      "as you. Run it only if you trust that file.")
            self.push_screen(ConfirmScreen(question, detail),
                             lambda yes: self._start_run(entry, trust=True) if yes else None)
            return
        self._start_run(entry, trust=False)

    def _start_run(self, entry: Entry, trust: bool) -> None:
        self.query_one(TabbedContent).active = "run"
        self.query_one(RunPanel).start(entry, self.kb, self.get_environment, self._verifier(), trust=trust)

    def on_button_pressed(self, event) -> None:
        if event.button.id == "run-start":
            self.action_run()
        elif event.button.id == "run-cancel":
            self.action_cancel()


def create_app(kb: Any = None, text: str = "", environment: Any = None, gpu: Any = None,
               kb_dirs: list[str] | None = None, verify: Any = None, prewarm: bool = False) -> KbApp:
    """Build the app. kb: a loaded KnowledgeBase (loaded in the background when None); text: the
    initial paste; environment: a kb.verify Environment (probed on the first run when None); gpu:
    a fixed GPU state for the status line (read from NVML when None); verify: the verification
    module (kb.verify when None); prewarm: open the full-text index in the background."""
    return KbApp(kb=kb, text=text, environment=environment, gpu=gpu, kb_dirs=kb_dirs, verify=verify,
                 prewarm=prewarm)


# ---------------------------------------------------------------------- command line
def read_input(args: Any, stdin: Any = None) -> tuple[str, str | None]:
    """(the log text, an error message). Reads --file, else a piped stdin, capped at 64 MiB."""
    stdin = stdin if stdin is not None else sys.stdin
    path = getattr(args, "file", None)
    if path:
        from kb.engine import open_log

        try:
            with open_log(path) as fh:
                data = fh.read(MAX_INPUT_BYTES)
        except OSError as e:
            return "", f"kb: cannot read {path}: {e.strerror or e}"
        return data.decode("utf-8", errors="replace"), None
    if stdin is not None and not stdin.isatty():
        buf = getattr(stdin, "buffer", None)
        data = buf.read(MAX_INPUT_BYTES) if buf is not None else stdin.read(MAX_INPUT_BYTES).encode()
        return (data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data), None
    return "", None


def _attach_terminal() -> str | None:
    """Make fd 0 (keys) and fd 2 (Textual's output) the terminal, even after reading a pipe."""
    need_in = not os.isatty(0)
    need_out = not os.isatty(2)
    if not (need_in or need_out):
        return None
    try:
        fd = os.open("/dev/tty", os.O_RDWR)
    except OSError:
        return ("the TUI needs a terminal, and there is none here (no /dev/tty). "
                "For a log without a terminal use: kb lookup FILE (or pipe into kb lookup).")
    if need_in:
        os.dup2(fd, 0)
    if need_out:
        os.dup2(fd, 2)
    os.close(fd)
    return None


def run_app(args: Any) -> int:
    text, err = read_input(args)
    if err:
        print(err, file=sys.stderr)
        return 2
    problem = _attach_terminal()
    if problem:
        print(f"kb: {problem}", file=sys.stderr)
        return 2
    app = create_app(text=text, kb_dirs=getattr(args, "kb_dir", None), prewarm=True)
    app.run()
    return app.return_code or 0
