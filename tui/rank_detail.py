"""The parts of the detail pane that are about one rank of a job: its part in the job, what
happened to it, how it ended, the line that shows it; and, after the entry, the job's verdict.

DetailPane.show_rank puts these around the usual entry rendering (the entry the rank's verdict
names, with the diagnosis of its line's numbers), so a rank reads like any lookup, led by where
the rank stands in the job.
"""

from __future__ import annotations

from rich.console import RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from kb import Part

from .job_ranks import JobInfo, RankRow

Styles = dict[str, str]


def head(
    job: JobInfo, row: RankRow, line: Text, st: Styles, others: tuple[RankRow, ...] = ()
) -> list[RenderableType]:
    """Who, its part in the job, what happened (one line), how it ended, and its line (given
    rendered: the pane marks the span the entry's signature matched). others: the ranks listed
    in one row with it, which fared the same."""
    root = job.root
    who = Text.assemble((row.who, "bold"), (f" · {row.host}" if row.host else "", st["dim"]))
    if row.is_root:
        role = Text.assemble((" ROOT CAUSE ", st["root"]), " ", who)
    elif row.part == Part.ROOT_TOO:
        role = Text.assemble(who, (" · a root too", st["bad"]), _of(root, st, "", " beside"))
    elif row.part in (Part.CONSEQUENCE, Part.WAITED):
        # a root the collectives found did not fail: the others waited where it never arrived
        role = Text.assemble(
            who,
            (" · a consequence", st["warn"]),
            _waited(root, st)
            if root is not None and root.straggler
            else _of(root, st, "'s failure"),
        )
    else:
        role = Text.assemble(who, (f" · {row.label}", st["warn"]))
    out: list[RenderableType] = [role, Text(row.what, style="bold")]
    if others:
        names = ", ".join(o.who.removeprefix("rank ") for o in others)
        out.append(
            Text(
                f"{len(others)} more rank{'s' if len(others) != 1 else ''} fared the same "
                f"(ranks {names}); this is {row.who}'s.",
                style=st["dim"],
            )
        )
    facts = Table.grid(padding=(0, 1, 0, 0))
    facts.add_column(style=st["dim"], no_wrap=True)
    facts.add_column(ratio=1, overflow="fold")
    for label, value in (
        ("ended", row.status),
        ("at", row.time or ""),
        ("line from", row.source + (f" ({row.line_of}'s line)" if row.line_of else "")),
    ):
        if value:
            facts.add_row(label, Text(value))  # a path is text, never markup ("x[/]y.log")
    if facts.row_count:
        out.append(facts)
    if row.line:
        out.append(Padding(line, (0, 0, 0, 2)))
    if row.straggler and row.line_of:
        out.append(
            Text(
                f"The line is {row.line_of}'s, which timed out waiting for {row.who}; "
                "the entry below is that wait's.",
                style=st["dim"],
            )
        )
    return out


def _waited(root: RankRow | None, st: Styles) -> Text:
    return Text(f": it waited for {root.who}" if root is not None else "", style=st["dim"])


def _of(root: RankRow | None, st: Styles, tail: str, of: str = " of") -> Text:
    return Text(f"{of} {root.who}{tail}" if root is not None else "", style=st["dim"])


def no_entry(row: RankRow, st: Styles) -> list[RenderableType]:
    """Said where an entry would be: that none is known for this rank, and why."""
    if not row.line:
        why = "None of its own lines shows a failure, so no entry is named for it."
    else:
        why = "No entry's signature matches its line."
    return [Text(""), Text(why, style=st["dim"])]


def job_section(job: JobInfo, st: Styles) -> list[RenderableType]:
    out: list[RenderableType] = [Text("\nThe job", style=st["head"]), Text(job.summary)]
    for note in job.notes:
        out.append(Text(note, style=st["dim"]))
    return out


def files_read(job: JobInfo) -> str:
    n = len(job.files)
    return f"{n} file{'s' if n != 1 else ''}"
