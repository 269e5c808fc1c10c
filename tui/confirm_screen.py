"""ConfirmScreen: one key to say yes before something that cannot be taken back: running a
repro (real work on this machine: a GPU job on a GPU host), quitting while one runs.

A question opened by a stray letter must not be answered by the next letters of a paste: keys
that arrive within GUARD_S of the question (no one reads it that fast) are dropped, and so is any
key but the answers.
"""

from __future__ import annotations

import time

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

GUARD_S = 0.3


class ConfirmScreen(ModalScreen[bool]):
    BINDINGS = [
        Binding("y", "answer(True)", "Yes", show=False),
        Binding("n,escape", "answer(False)", "No", show=False),
    ]

    def __init__(
        self,
        question: str,
        detail: str = "",
        command: str = "",
        yes: str = "Run it",
        warn: bool = False,
    ) -> None:
        super().__init__()
        self.question = question
        self.detail = detail
        self.command = command
        self.yes = yes
        self.warn = warn
        self._opened = time.monotonic()

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-body", classes="-warn" if self.warn else ""):
            yield Static(self.question, id="confirm-question", markup=False)
            if self.command:
                yield Static(self.command, id="confirm-command", markup=False)
            if self.detail:
                yield Static(self.detail, id="confirm-detail", markup=False)
            with Horizontal(id="confirm-buttons"):
                yield Button(f"{self.yes} (y)", id="confirm-yes", variant="warning")
                yield Button("No (n)", id="confirm-no")

    def on_mount(self) -> None:
        self._opened = time.monotonic()
        self.query_one("#confirm-no", Button).focus()  # the safe answer is the default

    def on_key(self, event: events.Key) -> None:
        early = time.monotonic() - self._opened < GUARD_S
        if early or (event.is_printable and event.key not in ("y", "n")):
            event.stop()
            event.prevent_default()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "confirm-yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
