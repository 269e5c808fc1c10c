"""Every line the TUI draws passes through kb.inert: nothing a log, a path or a local entry holds
reaches the terminal as something it obeys.

Textual keeps text as it is given (it drops only BEL, BS, VT, FF and CR): an escape in a pasted
log, a folder's name or an entry's title would reach the terminal inside a widget's line (a
window title, a reset, line drawing, a right-to-left override). Rather than trust every widget
that shows input to remember, the lines widgets render are made inert where Textual collects
them (Widget.render_lines and the widgets that render their own: the editor, option lists,
trees and tables), so borders, toasts, the paste box, the lists and the panes are all covered.
Textual's own output never holds such characters in its text (its cursor moves and styles are
not text), so nothing of the app's own changes; a line with nothing to make inert is the same
Strip object, untouched.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.segment import Segment
from textual.strip import Strip

from kb import inert

_INSTALLED: list[type] = []


def inert_strip(strip: Strip) -> Strip:
    """strip with the text of each of its segments made inert, as wide as it was."""
    segments = list(strip)
    if all(seg.control or not seg.text or _plain(seg.text) for seg in segments):
        return strip
    out = [
        seg if seg.control or not seg.text else Segment(inert(seg.text), seg.style, None)
        for seg in segments
    ]
    return Strip(out).crop_extend(0, strip.cell_length, None)


def _plain(text: str) -> bool:
    return inert(text) == text


def _wrap(render_lines: Callable) -> Callable:
    def render_inert_lines(self, crop):
        return [inert_strip(s) for s in render_lines(self, crop)]

    render_inert_lines.__wrapped__ = render_lines  # type: ignore[attr-defined]
    return render_inert_lines


def install() -> None:
    """Make the lines of every widget inert (once per process)."""
    if _INSTALLED:
        return
    from textual.widget import Widget
    from textual.widgets import DataTable, OptionList, TextArea, Tree

    for cls in (Widget, TextArea, OptionList, Tree, DataTable):
        own = cls.__dict__.get("render_lines")
        if own is not None:
            cls.render_lines = _wrap(own)  # type: ignore[method-assign]
            _INSTALLED.append(cls)
