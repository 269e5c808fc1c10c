"""OpenScreen: asks for a path to open, a job's folder or a log file, with the path completed as
it is typed (→ or tab takes the completion)."""

from __future__ import annotations

import asyncio
import os

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.suggester import Suggester
from textual.widgets import Input, Static

HINT = (
    "A folder opens as a job: per-rank logs, torchrun's --log-dir, a kb run folder. A log "
    "whose lines carry rank prefixes opens as a job too; any other log as one process's."
)
MAX_NAMES = 2000  # a completion reads one folder; a huge one is not worth stalling for


def complete(value: str) -> str | None:
    """The typed path with the rest of the first name in its folder that starts with what was
    typed ("/" after a folder's name); None when no name does. Reads the disk: call it off the
    event loop."""
    if not value:
        return None
    folder, start = os.path.split(value)
    where = os.path.expanduser(folder) if folder else "."
    try:
        with os.scandir(where) as it:
            names = sorted(
                (e.name + ("/" if e.is_dir() else ""))
                for _, e in zip(range(MAX_NAMES), it)
                if e.name.startswith(start)
                and (start.startswith(".") or not e.name.startswith("."))
            )
    except OSError:
        return None
    name = next((n for n in names if n != start), None)
    return os.path.join(folder, name) if name is not None else None


class PathSuggester(Suggester):
    def __init__(self) -> None:
        super().__init__(use_cache=False, case_sensitive=True)  # the disk changes

    async def get_suggestion(self, value: str) -> str | None:
        return await asyncio.to_thread(complete, value)


class OpenScreen(ModalScreen[str | None]):
    BINDINGS = [
        Binding("escape", "dismiss_none", "Cancel", show=False),
        Binding("tab", "take_completion", "Complete", show=False, priority=True),
    ]

    def __init__(self, start: str = "") -> None:
        super().__init__()
        self.start = start

    def compose(self) -> ComposeResult:
        with Vertical(id="open-body") as body:
            body.border_title = "Open a job's folder or a log file"
            body.border_subtitle = "tab completes · enter opens · esc cancels"
            yield Input(self.start, id="open-path", suggester=PathSuggester())
            yield Static(HINT, id="open-hint", markup=False)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value.strip() or None)

    def action_take_completion(self) -> None:
        """Tab, as in a shell: the input's own → at the end of the text takes the completion."""
        field = self.query_one("#open-path", Input)
        field.cursor_position = len(field.value)
        field.action_cursor_right()

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
