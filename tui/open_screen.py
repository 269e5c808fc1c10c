"""OpenScreen: asks for a path to open, a job's folder or a log file.

Completion works as in a shell: tab completes as far as every name that fits agrees, and lists
them when several do; → takes the grey suggestion, which is only ever that common part. A path
that is not there is said under the field, and the dialog stays open with it to fix.
"""

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
SHOWN_NAMES = 12


def candidates(value: str) -> list[str]:
    """The names in the typed path's folder that start with its last part ("/" after a folder's
    name), sorted; hidden names only when asked for with a leading dot. Reads the disk."""
    folder, start = os.path.split(value)
    where = os.path.expanduser(folder) if folder else "."
    try:
        with os.scandir(where) as it:
            return sorted(
                (e.name + ("/" if e.is_dir() else ""))
                for _, e in zip(range(MAX_NAMES), it)
                if e.name.startswith(start)
                and (start.startswith(".") or not e.name.startswith("."))
            )
    except OSError:
        return []


def complete(value: str) -> tuple[str | None, list[str]]:
    """(the typed path completed as far as every fitting name agrees, or None when that adds
    nothing; the fitting names). Reads the disk: call it off the event loop."""
    if not value:
        return None, []
    folder, start = os.path.split(value)
    names = candidates(value)
    if not names:
        return None, []
    common = _shared_start(names)
    if len(common) <= len(start):
        return None, names
    return os.path.join(folder, common), names


def _shared_start(names: list[str]) -> str:
    """The characters every name starts with (names, not paths: "rank" for rank0.log, rank1.log)."""
    first, last = min(names), max(names)
    n = 0
    while n < min(len(first), len(last)) and first[n] == last[n]:
        n += 1
    return first[:n]


class PathSuggester(Suggester):
    def __init__(self) -> None:
        super().__init__(use_cache=False, case_sensitive=True)  # the disk changes

    async def get_suggestion(self, value: str) -> str | None:
        done, _ = await asyncio.to_thread(complete, value)
        return done


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

    def _say(self, text: str, bad: bool = False) -> None:
        hint = self.query_one("#open-hint", Static)
        hint.update(text)
        hint.set_class(bad, "-bad")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        value = event.value.strip()
        if not value:
            self.dismiss(None)
            return
        path = os.path.expanduser(value)
        if not os.path.exists(path):
            self._say(f"No such file or folder: {value}", bad=True)
            return
        if not os.access(path, os.R_OK):
            self._say(f"Permission denied: {value}", bad=True)
            return
        self.dismiss(value)

    def on_input_changed(self, event: Input.Changed) -> None:
        if self.query_one("#open-hint", Static).has_class("-bad"):
            self._say(HINT)

    async def action_take_completion(self) -> None:
        """Tab: complete as far as the names agree, and list them when several fit."""
        field = self.query_one("#open-path", Input)
        done, names = await asyncio.to_thread(complete, field.value)
        if done is not None:
            field.value = done
            field.cursor_position = len(done)
        if not names:
            self._say("Nothing here starts like that.", bad=True)
        elif len(names) > 1:
            shown = "  ".join(names[:SHOWN_NAMES])
            more = f"  … and {len(names) - SHOWN_NAMES} more" if len(names) > SHOWN_NAMES else ""
            self._say(f"{len(names)} fit: {shown}{more}")
        else:
            self._say(HINT)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
