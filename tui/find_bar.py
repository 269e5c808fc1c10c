"""FindBar: the find field at the bottom of the screen, for the pane it was opened on (the details,
the run log or the paste box). The app does the finding; the bar says which pane, and "3/7".

enter or ↓ goes to the next hit, ↑ to the previous one, esc closes the bar (the pane keeps its
marks, and n / N go on from there).
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import Input, Static


class FindBar(Horizontal):
    BINDINGS = [
        Binding("down", "step(1)", "Next", show=False),
        Binding("up", "step(-1)", "Previous", show=False),
        Binding("escape", "close", "Close", show=False),
    ]

    class Step(Message):
        def __init__(self, step: int) -> None:
            super().__init__()
            self.step = step

    class Closed(Message):
        pass

    def compose(self) -> ComposeResult:
        yield Static("Find in the details", id="find-where", markup=False)
        yield Input(id="find-input", placeholder="a word", compact=True)
        yield Static("", id="find-count", markup=False)

    def open(self, where: str, query: str = "") -> None:
        self.query_one("#find-where", Static).update(f"Find in {where}")
        field = self.query_one("#find-input", Input)
        self.display = True
        if query and not field.value:
            field.value = query
        field.focus()

    def count(self, current: int, total: int, query: str) -> None:
        if not query:
            text = "enter: next · ↑: previous · esc: close"
        elif total == 0:
            text = "not found"
        else:
            text = f"{current + 1}/{total} · enter next · ↑ previous"
        self.query_one("#find-count", Static).update(text)

    def action_step(self, step: int) -> None:
        self.post_message(self.Step(step))

    def action_close(self) -> None:
        self.post_message(self.Closed())
