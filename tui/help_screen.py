"""HelpScreen: every key, in one modal page."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

HELP = """\
[b]kb — PyTorch / CUDA error knowledge base[/b]

Paste an error or a whole log on the left: matching entries appear as you
type. Select one to read why it matched, the diagnosis, causes and fixes.
Leave the paste area empty to browse every entry.

[b $text-accent]Keys[/]
  [b]i[/]            edit the paste area      [b]esc[/]  leave it / cancel
  [b]/[/]            filter the list          [b]↑ ↓[/]  choose an entry
  [b]tab[/]          next pane                [b]d / l[/] details / run log
  [b]r[/]  [b]F5[/]       run the repro on this machine, then its fix check
  [b]c[/]  [b]esc[/]      cancel a running repro
  [b]y[/]            copy the first fix's code to the clipboard
  [b]ctrl+x[/]       clear the paste area
  [b]?[/]  [b]F1[/]       this help               [b]q[/]  [b]ctrl+q[/] quit

Repros of entries from your own folders (--kb-dir, KB_PATH) run only
after you confirm. Verdicts are not recorded: use `kb verify --record`.
"""


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark,f1", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-body"):
            yield Static(HELP, id="help-text")
            yield Static("[$text-muted]esc to close[/]", id="help-close")

    def action_dismiss(self, result: None = None) -> None:  # type: ignore[override]
        self.dismiss(result)
