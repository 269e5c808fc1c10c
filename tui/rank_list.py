"""RankList: a job's ranks, the root cause first and marked, one row per rank or per run of ranks
that fared the same.

Each row is the rank (and its host when the logs name one) with its part in the job, then a
muted line with the entry it names or what happened to it, and a third with how its process
ended ("exit -15 (SIGTERM)"), so nothing is cut at 80 columns. Ranks next to each other in the
list with the same part, verdict and end are one row ("ranks 2-8 (7)"): a job of 64 ranks where
63 timed out waiting reads as two rows, not 64. Option ids are "rank-N", N the row's index.
"""

from __future__ import annotations

from textual.content import Content
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from kb import Part

from .job_ranks import JobInfo, RankRow

LABEL_STYLE = {
    str(Part.ROOT_CAUSE): "bold $text-error",
    str(Part.ROOT_TOO): "$text-error",
    str(Part.ALSO_FAILED): "$text-warning",
}


def group_rows(rows: tuple[RankRow, ...]) -> list[tuple[RankRow, ...]]:
    """Consecutive rows that read the same (part, verdict, end), the root cause always alone."""
    out: list[list[RankRow]] = []
    for row in rows:
        last = out[-1][-1] if out else None
        if (
            last is not None
            and not row.is_root
            and not last.is_root
            and row.rank is not None
            and last.rank is not None
            and _same(row, last)
        ):
            out[-1].append(row)
        else:
            out.append([row])
    return [tuple(g) for g in out]


def _same(a: RankRow, b: RankRow) -> bool:
    return (a.label, a.verdict, a.status) == (b.label, b.verdict, b.status)


def rank_span(rows: tuple[RankRow, ...]) -> str:
    """The rows' ranks: "rank 3", or "ranks 2-8, 10 (8)" for a group."""
    if len(rows) == 1:
        return rows[0].who
    numbers = sorted(r.rank for r in rows if r.rank is not None)
    parts: list[str] = []
    start = prev = numbers[0]
    for n in [*numbers[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        parts.append(f"{start}-{prev}" if prev > start else str(start))
        if n is not None:
            start = prev = n
    return f"ranks {', '.join(parts)} ({len(rows)})"


class RankList(OptionList):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.job: JobInfo | None = None
        self.groups: list[tuple[RankRow, ...]] = []

    @property
    def selected_group(self) -> tuple[RankRow, ...]:
        if self.highlighted is None or self.highlighted >= len(self.groups):
            return ()
        return self.groups[self.highlighted]

    @property
    def selected_row(self) -> RankRow | None:
        group = self.selected_group
        return group[0] if group else None

    @property
    def selected_others(self) -> tuple[RankRow, ...]:
        """The other ranks of the selected row's group (they fared the same)."""
        return self.selected_group[1:]

    def show_job(self, job: JobInfo, fresh: bool = False) -> None:
        """List the job's ranks. The selection stays on the same rank when the job is read again
        (a pipe still arriving), else it starts on the root cause, the first row."""
        keep = None if fresh or self.selected_row is None else self.selected_row.who
        self.job = job
        self.groups = group_rows(job.rows)
        self.set_options(
            [Option(self._prompt(g), id=f"rank-{i}") for i, g in enumerate(self.groups)]
        )
        index = next(
            (i for i, g in enumerate(self.groups) if any(r.who == keep for r in g)),
            0 if self.groups else None,
        )
        self.highlighted = index
        n = len(job.rows)
        self.border_title = f"Job: {n} rank{'s' if n != 1 else ''}"

    @staticmethod
    def _prompt(group: tuple[RankRow, ...]) -> Content:
        row = group[0]
        mark = "▶ " if row.is_root else "  "
        status = row.status if row.status and row.cause != "exit" else ""  # "exit" says it
        return Content.assemble(
            (mark, "bold $text-error"),
            (rank_span(group), "bold"),
            (
                f" · {row.host}" if row.host and row.rank is not None and len(group) == 1 else "",
                "$text-muted",
            ),
            "  ",
            (row.label, LABEL_STYLE.get(row.label, "$text-muted")),
            "\n",
            ("    " + row.verdict, "" if row.match is not None else "$text-muted"),
            (f"\n    {status}" if status else "", "$text-muted"),
        )
