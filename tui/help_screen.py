"""HelpScreen: every key, in one modal page, in columns built from the same table as the bindings."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from .keys import KEYS, display

INTRO = (
    "Paste an error or a whole log on the left (or pipe one in: cmd 2>&1 | kb tui). "
    "Matching entries appear as you type; the detail says what happened, the line it matched, "
    "the diagnosis of this log and the fix to try first. With the box empty, every entry is "
    "listed, to browse: an entry so shown is not a diagnosis."
)
TYPING = (
    "Typing is always text: on the start screen every key goes to the paste box, and a letter "
    "is a command only outside the box and only when no other key follows it at once (a paste "
    "is never taken for commands). A repro runs only after you say yes to it."
)
JOB = (
    "A job (kb tui DIR, or f3: a folder of per-rank logs, torchrun's --log-dir, a kb run "
    "folder, or a log with rank prefixes) lists its ranks instead, the root cause first (▶), "
    "ranks that fared the same in one row; the detail is the selected rank's diagnosis, and "
    "f5 and ctrl+o act on its entry."
)
MORE = [
    ("↑ ↓", "choose an entry, or a job's rank, in the list"),
    ("enter", "into the selected row's details"),
    ("tab", "next pane (shift+tab: the one before)"),
    ("pgup pgdn", "scroll the pane with the focus"),
    ("n N", "next / previous hit of a find (in the find field: enter, ↓, ↑)"),
    ("ctrl+p", "command palette: every action above, themes, screenshot"),
]
AFTER = (
    "A result marked guess is a full-text suggestion: no signature of that entry fired. "
    "Repros of entries from your own folders (--kb-dir, KB_PATH) run only after you confirm; "
    "verdicts are not recorded (kb verify --record does that)."
)


def keys_table() -> Table:
    table = Table(box=None, show_edge=False, pad_edge=False, padding=(0, 2, 0, 0), expand=False)
    table.add_column("anywhere", style="bold", no_wrap=True)
    table.add_column("letter", style="bold", no_wrap=True)
    table.add_column("does", ratio=1)
    for k in KEYS:
        table.add_row(display(k.anywhere), display(k.letter), k.help)
    for keys, does in MORE:
        table.add_row(keys, "", does)
    return table


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark,f1", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-body") as body:
            body.border_title = "Help"
            yield Static(id="help-text")

    def on_mount(self) -> None:
        accent = self.app.theme_variables.get("text-accent", "magenta")
        title = Text("kb: PyTorch and CUDA failures, explained and reproduced", style="bold")
        heads = Text.assemble(
            ("Keys: ", f"bold {accent}"),
            ("the first works anywhere; the letter outside the text boxes", "dim"),
        )
        self.query_one("#help-text", Static).update(
            Group(
                title,
                Text(""),
                heads,  # the keys first: the rest scrolls below them at 80x24
                keys_table(),
                Text(""),
                Text(INTRO),
                Text(""),
                Text(TYPING),
                Text(""),
                Text(JOB),
                Text(""),
                Text(AFTER, style="dim"),
            )
        )
        body = self.query_one("#help-body", VerticalScroll)
        # The page is taller than an 80x24 terminal: the border says there is more, and the
        # scroll keys work because the page has the focus (the screen focuses it on open).
        self.watch(body, "scroll_y", self._say_more, init=False)
        self.call_after_refresh(self._say_more)

    def _say_more(self, _scroll_y: float = 0.0) -> None:
        body = self.query_one("#help-body", VerticalScroll)
        more = body.max_scroll_y > 0 and body.scroll_y < body.max_scroll_y
        body.border_subtitle = "↓ pgdn: more · esc closes" if more else "esc closes"

    def action_dismiss(self, result: None = None) -> None:  # type: ignore[override]
        self.dismiss(result)
