"""TextView: rich renderables shown as wrapped lines that can be searched.

The detail pane and the run log are both this: a list of renderables (texts, tables, code)
rendered once at the view's width into lines, so that find can say which line holds a word,
mark every occurrence and scroll to the current one. Lines are re-rendered only when the width
changes; appending (the run log) renders only the new renderable. A match that a wrap splits
across two lines is not found: find works on what is on the screen.

A resize keeps the view's place: the line brought into view (go to line, a find hit, the
run log's first error) is brought into view again, or else the top line stays the top; a view
that followed its end (the run log while it streams) still does. Its line numbers change with
the width (every renderable wraps again), so the place is kept as a renderable and how far into
it. Following the end waits for the next refresh (the layout gives the new end); a line brought
into view since cancels it, so a late scroll to the end never takes the view away from it.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

from rich.cells import cell_len
from rich.console import RenderableType
from rich.segment import Segment
from rich.style import Style
from textual.events import Resize
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip


@dataclass(frozen=True)
class Hit:
    line: int  # index into the rendered lines
    start: int  # cells
    end: int


@dataclass(frozen=True)
class Place:
    """Where a view is, in its renderables rather than its lines (which a new width changes)."""

    item: int  # the renderable the anchored line belongs to
    within: float  # how far into it that line is, 0 to 1
    row: int  # the line's row in the view
    chosen: bool  # the line is the one brought into view (not just the top)
    at_end: bool  # the view showed its last line and follows its end (auto_scroll)


def find_hits(lines: Sequence[str], query: str) -> list[Hit]:
    """Every occurrence of query in the lines, ignoring case, in reading order."""
    q = query.lower()
    if not q:
        return []
    hits: list[Hit] = []
    for n, line in enumerate(lines):
        low = line.lower()
        at = low.find(q)
        while at != -1:
            start = cell_len(line[:at])
            hits.append(Hit(n, start, start + cell_len(line[at : at + len(q)])))
            at = low.find(q, at + len(q))
    return hits


class TextView(ScrollView, can_focus=True):
    DEFAULT_CSS = """
    TextView {
        overflow-x: hidden;
        overflow-y: auto;
        scrollbar-gutter: stable;
    }
    """

    def __init__(
        self,
        *,
        auto_scroll: bool = False,
        max_lines: int | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(id=id, classes=classes)
        self.auto_scroll = auto_scroll
        self.max_lines = max_lines
        self._items: list[RenderableType] = []
        self._starts: list[int] = []  # the first line of each item
        self._lines: list[Strip] = []
        self._plain: list[str] = []
        self._width = 0
        self._query = ""
        self._hits: list[Hit] = []
        self._by_line: dict[int, list[Hit]] = {}
        self._current = -1
        self._height = 0  # the view's height at the last resize
        self._following = False  # a scroll to the end is due after the next refresh
        # the line brought into view (go to line, a find hit), as (item, within): see Place
        self._chosen: tuple[int, float] | None = None

    # ------------------------------------------------------------------ content
    @property
    def plain_lines(self) -> list[str]:
        """The lines as shown, without styles (what find searches)."""
        return list(self._plain)

    @property
    def item_count(self) -> int:
        return len(self._items)

    def set_content(self, items: Sequence[RenderableType], scroll_home: bool = True) -> None:
        self._items = list(items)
        self._chosen = None
        self._render_all()
        if scroll_home:
            self._following = False
            self.scroll_to(0, 0, animate=False, immediate=True)
        elif self.auto_scroll:
            self._follow_end()

    def clear(self) -> None:
        self.set_content([])

    def write(self, item: RenderableType) -> None:
        """Add one renderable at the end (the run log); scrolls to it when auto_scroll is on."""
        self._items.append(item)
        if self.max_lines is not None and len(self._items) > self.max_lines:
            dropped = len(self._items) - self.max_lines
            del self._items[:dropped]
            if self._chosen is not None:  # it names a renderable by its index
                index, within = self._chosen
                self._chosen = (index - dropped, within) if index >= dropped else None
            self._render_all()
        elif self._width:
            self._starts.append(len(self._lines))
            self._add(self._render_item(item))
            self._refind()
            self._resize_virtual()
        if self.auto_scroll:
            self._follow_end()

    def _follow_end(self) -> None:
        """To the end once the next refresh has laid the new lines out."""
        self._following = True
        self.call_after_refresh(self._to_end)

    def _to_end(self) -> None:
        if self._following:
            self._following = False
            self.scroll_end(animate=False, immediate=True, x_axis=False)

    def line_of_item(self, index: int) -> int | None:
        """The first rendered line of the index-th renderable (None before the first render)."""
        return self._starts[index] if 0 <= index < len(self._starts) else None

    def scroll_to_line(self, line: int, top: bool = False) -> None:
        """Bring a line into view (see y_for_line). It stays in view when the view is
        resized."""
        self._following = False
        self.scroll_to(y=self.y_for_line(line, top), animate=False, immediate=True)
        self._choose(line)

    def show_item(self, index: int) -> None:
        """Bring the index-th renderable's first line into view as scroll_to_line does: now,
        or when the view is first laid out."""
        self._following = False
        self._chosen = (index, 0.0)
        start = self.line_of_item(index)
        if start is not None and self._height:
            self.scroll_to_line(start)

    def y_for_line(self, line: int, top: bool = False) -> int:
        """Where scroll_to_line scrolls for a line: to the top (top=True), else a third of the
        way down, or the view's start when the line is in its first two thirds from there (the
        lines above it are what led to it)."""
        if top:
            return max(0, min(line, int(self.max_scroll_y)))
        height = self.scrollable_content_region.height
        if line < height * 2 // 3:
            return 0
        return max(0, min(line - height // 3, int(self.max_scroll_y)))

    def _choose(self, line: int) -> None:
        self._chosen = self._item_at(line)

    def _item_at(self, line: int) -> tuple[int, float] | None:
        """(the renderable holding a rendered line, how far into it the line is)."""
        if not self._starts or not 0 <= line < len(self._lines):
            return None
        item = bisect_right(self._starts, line) - 1
        end = self._starts[item + 1] if item + 1 < len(self._starts) else len(self._lines)
        return item, (line - self._starts[item]) / max(1, end - self._starts[item])

    def _line_of(self, item: int, within: float) -> int:
        start = self._starts[item]
        end = self._starts[item + 1] if item + 1 < len(self._starts) else len(self._lines)
        return start + min(int(within * (end - start) + 0.5), max(0, end - start - 1))

    # ------------------------------------------------------------------ find
    @property
    def find_query(self) -> str:
        return self._query

    @property
    def hit_count(self) -> int:
        return len(self._hits)

    @property
    def current_hit(self) -> int:
        """The index of the current hit, -1 for none."""
        return self._current

    def find(self, query: str) -> int:
        """Mark every occurrence of query; the current one is the first at or below the top of
        the view. Returns how many there are."""
        self._query = query
        self._hits = find_hits(self._plain, query)
        self._index_hits()
        top = int(self.scroll_y)
        self._current = next((i for i, h in enumerate(self._hits) if h.line >= top), 0)
        if not self._hits:
            self._current = -1
        self._show_current()
        return len(self._hits)

    def next_hit(self, step: int = 1) -> int:
        """Move to the next (step 1) or previous (-1) hit, wrapping around; its index."""
        if not self._hits:
            return -1
        self._current = (self._current + step) % len(self._hits)
        self._show_current()
        return self._current

    def end_find(self) -> None:
        self._query = ""
        self._hits = []
        self._by_line = {}
        self._current = -1
        self.refresh()

    def _refind(self) -> None:
        if self._query:
            keep = self._current
            self._hits = find_hits(self._plain, self._query)
            self._index_hits()
            self._current = min(keep, len(self._hits) - 1) if self._hits else -1

    def _index_hits(self) -> None:
        self._by_line = {}
        for h in self._hits:
            self._by_line.setdefault(h.line, []).append(h)
        self.refresh()

    def _show_current(self) -> None:
        if 0 <= self._current < len(self._hits):
            line = self._hits[self._current].line
            height = self.scrollable_content_region.height
            if not (self.scroll_y <= line < self.scroll_y + height):
                self.scroll_to_line(line)
            else:
                self._choose(line)
        self.refresh()

    # ------------------------------------------------------------------ rendering
    def _render_item(self, item: RenderableType) -> list[Strip]:
        console = self.app.console
        options = console.options.update_width(self._width)
        lines = list(Segment.split_lines(console.render(item, options)))
        if not lines:
            return [Strip.blank(self._width)]
        strips = Strip.from_lines(lines)
        for s in strips:
            s.adjust_cell_length(self._width)
        return strips

    def _add(self, strips: list[Strip]) -> None:
        self._lines.extend(strips)
        self._plain.extend(s.text for s in strips)

    def _render_all(self) -> None:
        self._lines, self._plain, self._starts = [], [], []
        if self._width:
            for item in self._items:
                self._starts.append(len(self._lines))
                self._add(self._render_item(item))
        self._refind()
        self._resize_virtual()
        self.refresh()

    def _resize_virtual(self) -> None:
        self.virtual_size = Size(self._width, len(self._lines))

    def on_resize(self, event: Resize) -> None:
        place = self._place()
        self._height = self.scrollable_content_region.height
        width = self.scrollable_content_region.width
        if width and width != self._width:
            self._width = width
            self.rewrap()
        if place is not None:
            self._restore(place)
        elif self._chosen is not None and self._chosen[0] < len(self._starts):
            self.scroll_to_line(self._line_of(*self._chosen))  # show_item before any layout
        elif self.auto_scroll:  # the first layout: a log opens at its end
            self._follow_end()

    def rewrap(self) -> None:
        """Lay the renderables out again at the view's width (a subclass whose renderables
        depend on the width makes them again first)."""
        self._render_all()

    def _place(self) -> Place | None:
        """Where the view is now, laid out as it was before this resize (None before the first
        layout): the line brought into view if it is still in view, else the top line."""
        if not self._lines or not self._height:
            return None
        top = int(self.scroll_y)
        at_end = self.auto_scroll and top + self._height >= len(self._lines)
        line, chosen = top, False
        if self._chosen is not None and self._chosen[0] < len(self._starts):
            at = self._line_of(*self._chosen)
            if top <= at < top + self._height:
                line, chosen = at, True
        found = self._item_at(min(line, len(self._lines) - 1))
        if found is None:
            return None
        return Place(found[0], found[1], line - top, chosen, at_end and not chosen)

    def _restore(self, place: Place) -> None:
        if place.at_end:
            self.scroll_end(animate=False, immediate=True, x_axis=False)
            return
        if place.item >= len(self._starts):
            return
        line = self._line_of(place.item, place.within)
        if place.chosen:  # brought into view again, as it was the first time
            self.scroll_to_line(line)
            self._chosen = (place.item, place.within)
            return
        # the same row when the view still has it; a shorter view puts the line at its last row
        row = min(place.row, max(0, self.scrollable_content_region.height - 1))
        self.scroll_to(y=max(0, line - row), animate=False, immediate=True)

    def _hit_styles(self) -> tuple[Style, Style]:
        """Hits in reverse warning colour; the current one bold on the accent colour (theme
        values that are not plain colours, such as "auto", fall back to named ones)."""
        tv = self.app.theme_variables

        def colour(name: str, fallback: str) -> str:
            v = tv.get(name, "")
            return v if v.startswith("#") else fallback

        hit = Style.parse(f"reverse {colour('text-warning', 'yellow')}")
        current = Style.parse(f"bold reverse {colour('accent', 'magenta')}")
        return hit, current

    def render_line(self, y: int) -> Strip:
        n = int(self.scroll_y) + y
        width = self.scrollable_content_region.width
        if n >= len(self._lines):
            return Strip.blank(width, self.rich_style)
        strip = self._lines[n]
        hits = self._by_line.get(n)
        if hits:
            strip = self._mark(strip, n, hits)
        return strip.crop_extend(0, width, self.rich_style).apply_style(self.rich_style)

    def _mark(self, strip: Strip, n: int, hits: list[Hit]) -> Strip:
        hit_style, current_style = self._hit_styles()
        current = self._hits[self._current] if 0 <= self._current < len(self._hits) else None
        cuts: list[int] = []
        for h in hits:
            cuts += [h.start, h.end]
        pieces = strip.divide([*cuts, strip.cell_length])
        out: list[Strip] = []
        for i, piece in enumerate(pieces):
            if i % 2 == 1:  # the odd pieces lie between a hit's start and end
                h = hits[i // 2]
                style = current_style if h is current else hit_style
                # after the line's own styles, so a coloured word is marked as well
                piece = Strip(Segment.apply_style(list(piece), post_style=style), piece.cell_length)
            out.append(piece)
        return Strip.join(out)
