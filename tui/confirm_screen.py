"""ConfirmScreen: asks before running code that did not ship with kb (a local entry's repro)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class ConfirmScreen(ModalScreen[bool]):
    BINDINGS = [
        Binding("y", "answer(True)", "Run", show=False),
        Binding("n,escape", "answer(False)", "Cancel", show=False),
    ]

    def __init__(self, question: str, detail: str = "") -> None:
        super().__init__()
        self.question = question
        self.detail = detail

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-body"):
            yield Static(self.question, id="confirm-question", markup=False)
            if self.detail:
                yield Static(self.detail, id="confirm-detail", markup=False)
            with Horizontal(id="confirm-buttons"):
                yield Button("Run it (y)", id="confirm-yes", variant="warning")
                yield Button("Cancel (n)", id="confirm-no")

    def on_mount(self) -> None:
        self.query_one("#confirm-no", Button).focus()  # the safe answer is the default

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "confirm-yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
