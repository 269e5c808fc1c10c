"""Every key of the TUI, in one table: the app's bindings, the footer, the help screen and the
command palette are all built from it.

Each action has a key that works anywhere (a priority binding: ctrl+ or a function key that
neither the paste box nor the find and filter fields use), and most have a letter as well. The
footer always names the key that works anywhere, so it never changes with the focus.

Letters are commands only where typing cannot be meant: never in a text box, never on the start
screen (there every printable key goes to the paste box), and never inside a burst of keys a
person cannot type that fast (a paste from a terminal without bracketed paste): the app holds a
letter for BURST_S before acting on it, and keys that follow within that time are text.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding, BindingType

BURST_S = 0.05  # a person types no two keys this close; a terminal's paste sends them closer


@dataclass(frozen=True)
class Key:
    action: str
    letter: str  # works outside the text boxes and off the start screen ("" for none)
    anywhere: str  # works whatever has focus ("" for none)
    label: str  # the footer's word
    help: str  # the help screen's line and the command palette's
    footer: bool = True  # shown in the footer (the rest: the help screen and the palette)


KEYS: tuple[Key, ...] = (
    Key("quit", "q", "ctrl+q", "Quit", "quit (asks first while a repro runs, then stops it)"),
    Key("help", "question_mark", "f1", "Help", "this help"),
    Key("run", "r", "f5", "Run", "run the selected entry's repro here, then its fix check (asks)"),
    Key("cancel", "c", "f5", "Cancel", "stop the running repro and kill its processes"),
    Key("copy", "y", "ctrl+o", "Copy", "copy a fix, a command, the matched line, a URL or all"),
    Key("find", "slash", "ctrl+f", "Find", "find in the details, the run log or the paste box"),
    Key("open", "o", "f3", "Open", "open a job's folder or a log file; a job lists its ranks"),
    Key("toggle_log", "l", "f4", "Log", "switch between the details and the run log"),
    Key("maximize", "m", "f10", "Max", "maximise the pane with the focus (again, or esc: back)"),
    Key("goto_line", "g", "f7", "Line", "go to the matched line in the log", footer=False),
    Key("focus_paste", "i", "f2", "Paste", "type or paste an error (closes a job)", footer=False),
    Key("focus_filter", "", "f6", "Filter", "filter the list by any word of an entry", False),
    Key("clear_paste", "", "ctrl+l", "Clear", "empty the paste box, close a job", footer=False),
    Key(
        "escape",
        "",
        "escape",
        "Back",
        "back: out of a pane, a find, a box, a maximised pane",
        footer=False,  # every screen's way back; the footer's room at 80 columns is for the rest
    ),
)
"""In footer order."""

DISPLAY = {"question_mark": "?", "slash": "/", "escape": "esc"}


def bindings(keys: tuple[Key, ...] = KEYS) -> list[BindingType]:
    """The app's bindings: the letter (non-priority, hidden: a text box gets letters first), then
    the key that works anywhere (priority; esc is not, so the modal screens close on it)."""
    out: list[BindingType] = []
    for k in keys:
        if k.letter:
            out.append(Binding(k.letter, k.action, k.label, show=False))
        if k.anywhere:
            priority = k.anywhere != "escape"
            out.append(Binding(k.anywhere, k.action, k.label, show=k.footer, priority=priority))
    return out


def letters(keys: tuple[Key, ...] = KEYS) -> frozenset[str]:
    """The key names that are commands outside the text boxes (held back in a burst)."""
    return frozenset(k.letter for k in keys if k.letter) | {"n", "N"}  # n, N: the next find hit


def display(key: str) -> str:
    """A key as the help screen writes it: ctrl+q, f5, ?, /, esc."""
    if not key:
        return ""
    return DISPLAY.get(key, key)
