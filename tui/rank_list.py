"""RankList: a job's ranks, the root cause first and marked, one rank a row.

Each row is the rank (and its host when the logs name one) with its part in the job, then a
muted line: the entry it names or what happened to it, and how its process ended. Option ids are
"rank-N", N the row's index in JobInfo.rows.
"""

from __future__ import annotations

from textual.content import Content
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from .job_ranks import JobInfo, RankRow

LABEL_STYLE = {
    "root cause": "bold $text-error",
    "root too (same error)": "$text-error",
    "also failed": "$text-warning",
}


class RankList(OptionList):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.job: JobInfo | None = None

    @property
    def selected_row(self) -> RankRow | None:
        if self.job is None or self.highlighted is None:
            return None
        rows = self.job.rows
        return rows[self.highlighted] if self.highlighted < len(rows) else None

    def show_job(self, job: JobInfo, fresh: bool = False) -> None:
        """List the job's ranks. The selection stays on the same rank when the job is read again
        (a pipe still arriving), else it starts on the root cause, the first row."""
        keep = None if fresh or self.selected_row is None else self.selected_row.who
        self.job = job
        self.set_options(
            [Option(self._prompt(row), id=f"rank-{i}") for i, row in enumerate(job.rows)]
        )
        whos = [r.who for r in job.rows]
        self.highlighted = whos.index(keep) if keep in whos else (0 if whos else None)
        n = len(job.rows)
        self.border_title = f"Job: {n} rank{'s' if n != 1 else ''}"

    @staticmethod
    def _prompt(row: RankRow) -> Content:
        mark = "▶ " if row.is_root else "  "
        status = f" · {row.status}" if row.status and row.cause != "exit" else ""
        return Content.assemble(
            (mark, "bold $text-error"),
            (row.who, "bold"),
            (f" · {row.host}" if row.host and row.rank is not None else "", "$text-muted"),
            "  ",
            (row.label, LABEL_STYLE.get(row.label, "$text-muted")),
            "\n",
            ("    " + row.verdict, "" if row.match is not None else "$text-muted"),
            (status, "$text-muted"),
        )
