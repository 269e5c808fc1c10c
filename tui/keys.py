"""Every key of the TUI, in one table: the app's bindings and the help screen are both built from it.

Each action has a letter, which works when no text box has focus, and a key that works anywhere
(a priority binding: ctrl+ or a function key that neither the paste box nor the filter uses).
Both are shown in the footer, the letter listed first: Textual's footer shows one key per action,
the first of its bindings still active, and it drops the letters while a text box has focus
(the box consumes them). So the footer always names a key that works where the focus is.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding, BindingType


@dataclass(frozen=True)
class Key:
    action: str
    letter: str  # works when no text box has focus ("" for none)
    anywhere: str  # works whatever has focus ("" for none)
    label: str  # the footer's word
    help: str  # the help screen's line


KEYS: tuple[Key, ...] = (
    Key("quit", "q", "ctrl+q", "Quit", "quit"),
    Key("help", "question_mark", "f1", "Help", "this help"),
    Key("run", "r", "f5", "Run", "run the selected entry's repro here, then its fix check"),
    Key("cancel", "c", "f5", "Cancel", "stop the running repro (esc too) and kill its processes"),
    Key("copy_fix", "y", "ctrl+o", "Copy fix", "copy the code of the fix to try first"),
    Key("focus_filter", "slash", "ctrl+f", "Filter", "filter the list by id, title, area or tag"),
    Key("focus_paste", "i", "f2", "Paste", "type or paste an error or a log (closes a job)"),
    Key("open", "o", "f3", "Open", "open a job's folder or a log file; a job lists its ranks"),
    Key("toggle_log", "l", "f4", "Log", "switch between the details and the repro's log"),
    Key("clear_paste", "", "ctrl+l", "Clear", "empty the paste box, close a job: every entry"),
    Key("escape", "", "escape", "Back", "leave a text box; cancel a running repro"),
)
"""In footer order."""


# Textual (8.2) cannot tell that a text box consumes "/" (key_to_character("slash") is None), so
# an app-level "/" binding would stay in the footer while typing; the list binds "/" instead.
WIDGET_LETTERS = ("slash",)


def bindings(keys: tuple[Key, ...] = KEYS) -> list[BindingType]:
    """The app's bindings: the letter first (non-priority: a text box gets letters first), then
    the key that works anywhere (priority)."""
    out: list[BindingType] = []
    for k in keys:
        if k.letter and k.letter not in WIDGET_LETTERS:
            out.append(Binding(k.letter, k.action, k.label))
        if k.anywhere:
            # esc is not a priority: the help and confirm screens close on it
            out.append(Binding(k.anywhere, k.action, k.label, priority=k.anywhere != "escape"))
    return out


DISPLAY = {"question_mark": "?", "slash": "/", "escape": "esc"}


def display(key: str) -> str:
    """A key as the help screen writes it: ctrl+q, f5, ?, /, esc."""
    if not key:
        return ""
    return DISPLAY.get(key, key)


def widget_bindings(keys: tuple[Key, ...] = KEYS) -> list[BindingType]:
    """The letters bound on the list and the detail rather than on the app (see WIDGET_LETTERS).
    Same action names as the app's (the footer shows one key per action name); the widgets pass
    them on with `forward`."""
    return [Binding(k.letter, k.action, k.label) for k in keys if k.letter in WIDGET_LETTERS]
