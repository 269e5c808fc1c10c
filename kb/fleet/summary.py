"""The summary of a triage run as Rich tables: the failure classes by GPU hours (when the jobs file
gave them) and by count, whose problem they are, the hosts and GPUs to look at, and the jobs kb
had no answer for. The numbers come from SQL over the table (store.summarize)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from kb.render.style import print_whole, terminal_width
from kb.render.table import Col, fitted
from kb.render.terminal import inert

from .store import Result, Summary


def render(s: Summary, console: Console, out: str | None = None) -> None:
    has_hours = s.with_meta > 0
    head = f"{s.jobs} job{'s' if s.jobs != 1 else ''}"
    if s.jobs:
        head += (
            f": {s.answered} answered ({_pct(s.answered, s.jobs)}), {s.unanswered} without an "
            f"answer, {s.no_failure} with no failure, {s.unreadable} unreadable"
        )
    console.print(head)
    if has_hours:
        console.print(
            f"GPU hours lost: {_hours(s.gpu_hours)} over the {s.with_meta} job(s) the jobs file "
            f"names ({s.jobs - s.with_meta} not in it)"
        )
    for version, knowledge, n in s.versions:
        console.print(
            Text(f"kb {inert(str(version))}, knowledge {inert(str(knowledge))}: {n} job(s)"),
            style="dim",
        )
    if out:
        console.print(Text(f"table: {inert(out)}"), style="dim")
    if not s.jobs:
        return

    width = terminal_width(console)
    if s.classes:
        # Never cut: the class and the numbers. The title is cut first, then it goes, then the
        # action, then the domain.
        cols = [Col("class"), Col("jobs", justify="right"), Col("share", justify="right")]
        if has_hours:
            cols.append(Col("GPU h", justify="right"))
        cols += [
            Col("domain", drop=2),
            Col("action", drop=3),
            Col("title", give="cut", min_width=8, drop=4),
        ]
        rows = []
        for id_, title, domain, action, n, h in s.classes:
            cells = [id_, str(n), _pct(n, s.jobs)]
            if has_hours:
                cells.append(_hours(h))
            cells += [domain or "unknown", action or "unknown", title or ""]
            rows.append(cells)
        more = s.answered - sum(c[4] for c in s.classes)
        caption = f"and {more} job(s) of other classes" if more > 0 else None
        title = "Failure classes" + (" by GPU hours lost" if has_hours else "")
        _print(console, title, cols, rows, width, caption=caption)

    cols = [Col("domain"), Col("jobs", justify="right"), Col("share", justify="right")]
    if has_hours:
        cols.append(Col("GPU h", justify="right"))
    rows = []
    for domain, n, h in s.domains:
        cells = [domain or "unknown", str(n), _pct(n, s.jobs)]
        if has_hours:
            cells.append(_hours(h))
        rows.append(cells)
    _print(console, "Whose problem", cols, rows, width)

    if s.faulty:
        cols = [
            Col(n, justify="right" if n == "failures" else "left")
            for n in ("level", "host", "gpu", "failures")
        ]
        cols += [Col("classes", give="wrap", min_width=12), Col("jobs", give="wrap", min_width=12)]
        rows = []
        for level, host, gpu, n, classes, jobs, *_ in s.faulty:
            shown = ", ".join(jobs[:3]) + (f" and {len(jobs) - 3} more" if len(jobs) > 3 else "")
            rows.append([level, host or "", gpu or "", str(n), ", ".join(classes), shown])
        _print(
            console,
            "Hosts and GPUs with repeated hardware-class failures (drain, check, reset)",
            cols,
            rows,
            width,
        )
    else:
        console.print("No host or GPU has two or more hardware-class failures.")

    if s.no_answer:
        cols = [
            Col("kind"),
            Col("exception", give="wrap", min_width=12),
            Col("jobs", justify="right"),
        ]
        if has_hours:
            cols.append(Col("GPU h", justify="right"))
        rows = []
        for kind, exc, n, h in s.no_answer:
            cells = [kind or "", exc or "", str(n)]
            if has_hours:
                cells.append(_hours(h))
            rows.append(cells)
        _print(console, f"Jobs without an answer ({s.unanswered})", cols, rows, width)
    if s.errors:
        console.print(f"Unreadable jobs ({s.unreadable}):")
        for error, n in s.errors:
            console.print(f"  {n} x {inert(str(error))}", markup=False, highlight=False)


def render_result(r: Result, console: Console, fmt: str = "table") -> None:
    """A query's result: a Rich table, CSV, or one JSON object per row."""
    if fmt == "csv":
        import csv
        import io

        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(r.columns)
        w.writerows(["" if v is None else v for v in row] for row in r.rows)
        console.file.write(buf.getvalue())
        return
    if fmt == "jsonl":
        import json

        for row in r.rows:
            console.file.write(json.dumps(dict(zip(r.columns, row)), default=str) + "\n")
        return
    t = Table(show_edge=False, header_style="bold", pad_edge=False)
    for i, c in enumerate(r.columns):
        first = next((row[i] for row in r.rows if row[i] is not None), None)
        numeric = isinstance(first, (int, float)) and not isinstance(first, bool)
        t.add_column(Text(inert(str(c))), overflow="fold", justify="right" if numeric else "left")
    for row in r.rows:
        t.add_row(*(_cell(v) for v in row))
    console.print(t)
    console.print(f"{len(r.rows)} row(s)", style="dim")


def _cell(v: object) -> Text:
    """A query's cell as text, never markup ("[/]" in a root line, a folder `job-[bold]b`), with
    nothing a terminal would obey."""
    if v is None:
        return Text("")
    if isinstance(v, float):
        return Text(f"{v:.1f}")
    if isinstance(v, list):
        return Text(inert(", ".join(str(x) for x in v)))
    return Text(inert(str(v)))


def _print(
    console: Console,
    title: str,
    cols: list[Col],
    rows: list[list[str]],
    width: int | None,
    caption: str | None = None,
) -> None:
    """One summary table, fitted to the terminal's width (kb.render.table: numbers are never
    cut, the least useful column goes first) or, in a pipe, whole."""
    t, _, needed = fitted(
        cols,
        rows,
        width,
        title=title,
        title_justify="left",
        show_edge=False,
        header_style="bold",
        caption=caption,
    )
    print_whole(console, t, needed)


def _pct(n: int, total: int) -> str:
    return f"{100.0 * n / total:.0f}%" if total else "-"


def _hours(h: float | None) -> str:
    return "-" if h is None else f"{h:,.1f}"
