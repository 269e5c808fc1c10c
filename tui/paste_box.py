"""PasteBox: the paste box, a soft-wrapping TextArea that keeps its place when resized.

A TextArea keeps its scroll offset across a resize while every line wraps again at the new
width, so the line in view drifts away: after going to line 25,012 of a log, a terminal made
80 columns wide showed lines 100 rows above it. Here the cursor's line (the line a go to line
or a find selected) stays at the row it was on when it was in view before the resize.
"""

from __future__ import annotations

from textual.events import Resize
from textual.widgets import TextArea
from textual.widgets.text_area import Location


class PasteBox(TextArea):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._height = 0  # the view's height before this resize

    def on_resize(self, event: Resize) -> None:
        # Dispatched before TextArea's own handler, which wraps the lines again: the layout
        # here is still the old one, so the cursor's row on screen can be read from it.
        anchor = self._anchor()
        height = self.scrollable_content_region.height
        top = int(self.scroll_y)
        row = self.wrapped_document.location_to_offset(anchor).y - top
        in_view = self._height > 0 and 0 <= row < self._height
        self._height = height
        if in_view:
            self.call_next(self._keep_row, anchor, row)

    def _anchor(self) -> Location:
        """The first line of the selection (the cursor without one)."""
        start, end = self.selection
        return min(start, end)

    def _keep_row(self, anchor: Location, row: int) -> None:
        if anchor != self._anchor():  # the cursor moved meanwhile: it is where the user put it
            return
        y = self.wrapped_document.location_to_offset(anchor).y
        row = min(row, max(0, self.scrollable_content_region.height - 1))
        self.scroll_to(y=max(0, y - row), animate=False, immediate=True)
