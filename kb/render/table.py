"""Tables that fit the terminal without cutting what matters, and are never cut in a pipe.

rich fits a table that is too wide by shrinking every column evenly, numbers and ids included
(a `jobs` column of width 0, an area read `att…`). Here each column says how it may give way:

- keep: never narrower than its widest cell (ids, numbers, short labels);
- wrap: wraps onto more lines, down to `min_width`;
- cut:  ends in "…", down to `min_width`.

A column with a `drop` rank may be left out when the rest still does not fit, the highest rank
first: the least useful column goes, the numbers stay. Widths are worked out here and given to
rich as fixed widths, so rich never shrinks a column itself. With no width (a pipe, a file),
every cell is whole.
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.table import Table
from rich.text import Text

from kb.render.terminal import inert

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any


class Col:
    """One column: its header, how it gives way, and how its cells are aligned."""

    def __init__(
        self,
        header: str,
        *,
        give: str = "keep",
        min_width: int = 1,
        drop: int = 0,
        justify: str = "left",
        style: str | None = None,
    ):
        assert give in ("keep", "wrap", "cut"), give
        self.header = header
        self.give = give
        self.min_width = min_width
        self.drop = drop  # 0: never left out; else the highest rank goes first
        self.justify = justify
        self.style = style


def _width(cell: str | Text) -> int:
    if isinstance(cell, Text):
        return max((cell_len(ln) for ln in cell.plain.split("\n")), default=0)
    return max((cell_len(ln) for ln in cell.split("\n")), default=0)


def _pads(pad: int | tuple[int, ...]) -> tuple[int, int]:
    """(left, right) of rich's padding: an int, (vertical, horizontal) or (top, right, bottom,
    left)."""
    if isinstance(pad, int):
        return pad, pad
    if len(pad) == 4:
        return pad[3], pad[1]
    return pad[-1], pad[-1]


def overhead(n: int, table_kwargs: dict[str, Any]) -> int:
    """What a rich Table of n columns adds to its cells' widths: padding, dividers, edges."""
    if n == 0:
        return 0
    left, right = _pads(table_kwargs.get("padding", (0, 1)))
    total = n * (left + right)
    if not table_kwargs.get("pad_edge", True):
        total -= left + right
    if table_kwargs.get("box", True) is not None:  # rich's default box is a heavy-head one
        total += n - 1
        if table_kwargs.get("show_edge", True):
            total += 2
    return total


def fit(
    cols: Sequence[Col],
    rows: Sequence[Sequence[str | Text]],
    width: int | None,
    table_kwargs: dict[str, Any] | None = None,
) -> tuple[list[int], list[int]]:
    """(the indices of the columns shown, their widths) for a table of at most `width` cells;
    width None: every column whole."""
    kw = table_kwargs or {}
    natural = [max([_width(c.header)] + [_width(r[i]) for r in rows]) for i, c in enumerate(cols)]
    shown = list(range(len(cols)))
    while True:
        widths = [natural[i] for i in shown]
        if width is None:
            return shown, widths
        excess = sum(widths) + overhead(len(shown), kw) - width
        if excess <= 0:
            return shown, widths
        # The columns that give way, the widest first, down to their minimums.
        give = [k for k, i in enumerate(shown) if cols[i].give != "keep"]
        room = sum(max(widths[k] - cols[shown[k]].min_width, 0) for k in give)
        if room >= excess:
            for _ in range(excess):
                k = max(give, key=lambda k: (widths[k] - cols[shown[k]].min_width, -k))
                widths[k] -= 1
            return shown, widths
        droppable = [i for i in shown if cols[i].drop]
        if not droppable:
            # Nothing more can go: every giving column at its minimum, the table wider than the
            # terminal (which wraps its lines) rather than a number cut.
            for k in give:
                widths[k] = min(widths[k], cols[shown[k]].min_width)
            return shown, widths
        shown.remove(max(droppable, key=lambda i: (cols[i].drop, i)))


def _text(cell: str | Text) -> Text:
    return cell if isinstance(cell, Text) else Text(cell)


def fitted(
    cols: Sequence[Col],
    rows: Sequence[Sequence[str | Text]],
    width: int | None,
    **table_kwargs: Any,
) -> tuple[Table, list[str], int]:
    """A rich Table of `rows` fitted to `width` (None: whole cells), the headers of the columns
    it left out, and the width it needs (print it with a console at least that wide)."""
    # Cells come from input (entry titles, job and host names): inert, each on one line.
    rows = [[c if isinstance(c, Text) else inert(c) for c in r] for r in rows]
    shown, widths = fit(cols, rows, width, table_kwargs)
    t = Table(**table_kwargs)
    for i, w in zip(shown, widths):
        c = cols[i]
        t.add_column(
            Text(c.header),
            width=w,
            justify=c.justify,  # type: ignore[arg-type]
            style=c.style,
            no_wrap=c.give != "wrap",
            overflow="ellipsis" if c.give == "cut" else "fold",
        )
    for r in rows:
        t.add_row(*(_text(r[i]) for i in shown))
    left = [cols[i].header for i in range(len(cols)) if i not in shown]
    return t, left, sum(widths) + overhead(len(shown), table_kwargs)
