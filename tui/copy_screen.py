"""The copy menu (what to copy) and, when no clipboard confirms a copy, the text shown to select.

CopyMenu lists what the detail pane's selection offers (copy_items); enter or the item's number
picks one. CopiedScreen shows a copied text whole, with what is known of where it went, for a
terminal that did not take it: select it by hand (shift+drag in most terminals).
"""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static, TextArea
from textual.widgets.option_list import Option

from .copy_items import Item


class CopyMenu(ModalScreen[int | None]):
    BINDINGS = [
        Binding("escape", "close", "Close", show=False),
        *(Binding(str(n), f"pick({n - 1})", show=False) for n in range(1, 10)),
    ]

    def __init__(self, items: list[Item], subject: str) -> None:
        super().__init__()
        self.items = items
        self.subject = subject

    def compose(self) -> ComposeResult:
        with Vertical(id="copy-body") as body:
            body.border_title = f"Copy from {self.subject}"
            body.border_subtitle = "enter or 1-9 copies · esc closes"
            yield OptionList(
                *(
                    Option(
                        Content.assemble((f"{i}. " if i < 10 else "   ", "$text-muted"), it.label),
                        id=f"copy-{i - 1}",
                    )
                    for i, it in enumerate(self.items, 1)
                ),
                id="copy-list",
            )

    def on_mount(self) -> None:
        self.query_one("#copy-list", OptionList).highlighted = 0

    @on(OptionList.OptionSelected, "#copy-list")
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(event.option_index)

    def action_pick(self, index: int) -> None:
        if 0 <= index < len(self.items):
            self.dismiss(index)

    def action_close(self) -> None:
        self.dismiss(None)


class CopiedScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape", "close", "Close", show=False)]

    def __init__(self, what: str, text: str, why: str) -> None:
        super().__init__()
        self.what = what
        self.text = text
        self.why = why

    def compose(self) -> ComposeResult:
        with Vertical(id="copied-body") as body:
            body.border_title = f"Not confirmed on a clipboard: {self.what}"
            body.border_subtitle = "esc closes"
            yield Static(
                f"{self.why[:1].upper()}{self.why[1:]}, and there is no system clipboard here "
                "to fall back on. Select the text below by hand (shift+drag in most terminals).",
                id="copied-why",
                markup=False,
            )
            yield TextArea(
                self.text,
                id="copied-text",
                read_only=True,
                soft_wrap=True,
                show_line_numbers=False,
                highlight_cursor_line=False,
            )

    def on_mount(self) -> None:
        area = self.query_one("#copied-text", TextArea)
        area.focus()
        area.select_all()

    def action_close(self) -> None:
        self.dismiss(None)
