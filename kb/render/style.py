"""Entries, matches and problems as text for people, JSON for machines, Markdown for bug reports.

Lookup's text output is written without rich on purpose: rich costs ~40 ms to import, which
would be most of a cold `kb lookup`. Everything else (show, list, verify tables) uses rich.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable

from kb.model.entry import Entry, Evidence, Problem
from kb.model.record import asdict, record

TYPE_CHECKING = False  # typing stays unimported at run time (kb lookup's cold start)

if TYPE_CHECKING:
    from typing import Any, TextIO

    from kb.knowledge.evidence_summary import GpuVerdict


# ---------------------------------------------------------------- plain styling for lookup
class Style:
    def __init__(self, enabled: bool):
        self.on = enabled

    def __call__(self, text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.on else text

    def bold(self, t: str) -> str:
        return self(t, "1")

    def dim(self, t: str) -> str:
        return self(t, "2")

    def red(self, t: str) -> str:
        return self(t, "31")

    def green(self, t: str) -> str:
        return self(t, "32")

    def yellow(self, t: str) -> str:
        return self(t, "33")

    def cyan(self, t: str) -> str:
        return self(t, "36")


# Streams default to None, read as sys.stdout when called: a default of sys.stdout would be the
# stream of import time, not the one in place now (a redirect, a test's capture).
def use_color(stream: TextIO | None = None) -> bool:
    stream = stream if stream is not None else sys.stdout
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return hasattr(stream, "isatty") and stream.isatty()


# ---------------------------------------------------------------- evidence
def evidence_line(evs: list[Evidence]) -> str:
    if not evs:
        return "not verified on a GPU yet"
    return "verified: " + evs[0].summary()


@record(frozen=True)
class VerificationRow:
    """One GPU kind's line in `kb show` and cell in `kb list`."""

    kind: str  # the GPU kind ("H100"); "" when the knowledge base has no records at all
    verdict: GpuVerdict | None  # the newest record of that kind; None: none yet
    has_repro: bool

    @property
    def word(self) -> str:
        """fix-verified | reproduced | fix-failed | not-reproduced | flaky | ... | none | no repro"""
        if self.verdict is not None:
            return self.verdict.word
        return "none" if self.has_repro else "no repro"

    @property
    def seen(self) -> str:
        """What was seen and when: "reproduced 3/3, fix-verified, 2026-11-23"."""
        if self.verdict is not None:
            return self.verdict.text()
        if not self.has_repro:
            return "no repro"
        from kb.knowledge.evidence_summary import NOT_YET

        return NOT_YET + ("" if self.kind else " on a GPU")

    @property
    def where(self) -> str:
        return self.verdict.environment() if self.verdict is not None else ""

    def cell(self, level: int = 0) -> str:
        """The form for a list, shorter at each level, for terminals too narrow for every GPU
        kind's column: 0 "fix-verified 3/3 2026-11-23", 1 "fix ok 3/3 11-23", 2 "fix ok 3/3"."""
        if self.verdict is None:
            return ("not yet" if self.has_repro else "no repro") if level < 2 else "-"
        v = self.verdict
        if level == 0:
            return " ".join(p for p in (v.word, v.counts, v.record.date) if p)
        word = _NARROW.get(v.word, v.word)
        date = v.record.date[5:] if level == 1 else ""
        return " ".join(p for p in (word, v.counts, date) if p)


# Shorter verdicts for narrow terminals (dates lose their year there too).
_NARROW = {"fix-verified": "fix ok", "not-reproduced": "not repro", "fix-failed": "fix failed"}


# How `kb show` and `kb list` colour a verification word.
WORD_COLORS = {"fix-verified": "green", "reproduced": "green", "none": "yellow", "no repro": "dim"}


def verification_rows(
    entry: Entry, evs: list[Evidence], kinds: Iterable[str] = ()
) -> list[VerificationRow]:
    """What was seen, per GPU kind: every kind the knowledge base has records for (`kinds`),
    and this entry's own."""
    from kb.knowledge.evidence_summary import by_gpu  # only `kb show` and `kb list` need it

    seen = by_gpu(evs)
    every = sorted(set(kinds) | set(seen)) or [""]
    return [VerificationRow(k, seen.get(k), entry.repro is not None) for k in every]


def verification_status(entry: Entry, evs: list[Evidence]) -> str:
    """A short word for list tables: what kb has seen this entry do on a GPU."""
    if entry.repro is None:
        return "no repro"
    if not evs:
        return "unverified"
    e = evs[0]
    if e.status == "reproduced":
        return "fix-verified" if e.fix_status == "fix-verified" else "reproduced"
    return e.status


# ---------------------------------------------------------------- JSON
def entry_dict(entry: Entry, evs: list[Evidence] | None = None) -> dict[str, Any]:
    d = {
        "id": entry.id,
        "area": entry.area,
        "title": entry.title,
        "aliases": list(entry.aliases),
        "summary": entry.summary,
        "tags": list(entry.tags),
        "local": entry.local,
        "path": entry.path,
        "codes": [asdict(c) for c in entry.codes],
        "signatures": [
            {"id": s.id, "pattern": s.pattern, "era": s.era, "level": s.level}
            for s in entry.signatures
        ],
        # Every field of every record, empty when the entry leaves it out.
        "causes": [asdict(c) for c in entry.causes],
        "diagnostics": [asdict(x) for x in entry.diagnostics],
        "fixes": [asdict(f) for f in entry.fixes],
        "repro": None,
        "fix_check": None,
        "not_reproducible": [asdict(n) for n in entry.not_reproducible],
        "examples": {
            "match": list(entry.examples_match),
            "no_match": [{"text": n.text, "belongs": n.belongs} for n in entry.examples_no_match],
        },
        "references": [asdict(r) for r in entry.references],
        "verification": [asdict(e) for e in (evs or [])],
    }
    if entry.repro:
        d["repro"] = {
            "code": entry.repro.code,
            "expect": list(entry.repro.expect),
            "env": entry.repro.env,
            "timeout": entry.repro.timeout,
            "requires": asdict(entry.repro.requires),
        }
    if entry.fix_check:
        d["fix_check"] = asdict(entry.fix_check)
    return d


def problem_dict(p: Problem) -> dict[str, Any]:
    return asdict(p)


# ---------------------------------------------------------------- Markdown
def entry_markdown(
    entry: Entry, evs: list[Evidence] | None = None, kinds: Iterable[str] = ()
) -> str:
    out = [
        f"## {entry.title}",
        "",
        f"`kb` entry **{entry.id}**" + (" (local)" if entry.local else ""),
        "",
        entry.summary.strip(),
        "",
    ]
    if entry.codes:
        out += [
            "**Codes:** "
            + ", ".join(
                f"{c.api} {c.value}" + (f" `{c.name}`" if c.name else "") for c in entry.codes
            ),
            "",
        ]
    out += ["### Causes (most likely first)", ""]
    for i, c in enumerate(entry.causes, 1):
        out.append(f"{i}. **{c.title}**: {c.detail.strip()}")
        if c.evidence:
            out.append(f"   *Tells it apart:* {c.evidence.strip()}")
    out += ["", "### Diagnostics", ""]
    for d in entry.diagnostics:
        out += [f"- {d.title}: `{d.command}`" + (f" ({d.tells.strip()})" if d.tells else "")]
    out += ["", "### Fixes", ""]
    for f in entry.fixes:
        out.append(f"- **{f.title}**" + (f": {f.detail.strip()}" if f.detail else ""))
        if f.code:
            out += [
                "",
                f"  ```{f.lang}",
                *("  " + ln for ln in f.code.rstrip().splitlines()),
                "  ```",
            ]
    out += ["", "### Verification", ""]
    for r in verification_rows(entry, evs or [], kinds):
        out.append(
            (f"- **{r.kind}**: {r.seen}" if r.kind else f"- {r.seen}")
            + (f" ({r.where})" if r.where else "")
        )
    if entry.references:
        out += ["", "### References", ""]
        out += [f"- [{r.title or r.url}]({r.url})" for r in entry.references]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- rich (show, list, lint)
def console(stream: TextIO | None = None):
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            # rich exits 1 here; a reader that stopped early (`kb list | head`) is no error:
            # the CLI turns this into exit 0.
            raise BrokenPipeError

    from kb.render.terminal import InertWriter

    # Whatever reaches the stream is made inert (kb.render.terminal): rich's own styles pass,
    # no sequence from an entry, a log or a name does.
    return _Console(
        file=InertWriter(stream if stream is not None else sys.stdout),  # type: ignore[arg-type]
        highlight=False,
        soft_wrap=False,
        force_terminal=True if os.environ.get("FORCE_COLOR") else None,
    )


def terminal_width(con) -> int | None:
    """The width tables fit into: the terminal's, when the console writes to one; None for a
    pipe or a file, where a table is never cut (`kb list | grep` sees every title whole)."""
    isatty = getattr(con.file, "isatty", None)
    try:
        tty = bool(isatty and isatty())
    except (OSError, ValueError):
        tty = False
    return con.width if tty else None


def print_whole(con, renderable, needed: int) -> None:
    """Print a table `needed` cells wide without rich cutting it to the console's width (80
    when it cannot tell): wider than the terminal, its lines wrap there rather than lose cells;
    in a pipe, lines end where their text does."""
    if terminal_width(con) is not None and needed <= con.width:
        con.print(renderable)
        return
    old = con.width
    con.width = max(needed, 1)
    try:
        with con.capture() as cap:
            con.print(renderable)
    finally:
        con.width = old
    con.file.write("".join(ln.rstrip(" ") + "\n" for ln in cap.get().splitlines()))


EXAMPLES_SHOWN = 6  # of an entry's match examples, in `kb show`


def print_entry(
    entry: Entry,
    evs: list[Evidence],
    stream: TextIO | None = None,
    kinds: Iterable[str] = (),
    patterns: bool = False,
) -> None:
    """`kb show`. kinds: the GPU kinds the knowledge base has records for, so the entry says
    which of them have not seen it yet. What the error looks like comes first, as the entry's
    own examples; the signatures' regexes only with `patterns` (`kb show ID --patterns`)."""
    from rich.markup import escape as x  # entry text is text: "[rank0]" or "[/\\]" is no markup
    from rich.panel import Panel
    from rich.syntax import Syntax
    from rich.table import Table

    con = console(stream)
    head = (
        f"[bold]{x(entry.title)}[/bold]\n[dim]{x(entry.id)} · {x(entry.area)}"
        + (" · local" if entry.local else "")
        + "[/dim]"
    )
    con.print(Panel(head + "\n\n" + x(entry.summary.strip()), expand=False))
    if entry.codes:
        con.print(
            "[bold]Codes[/bold]  "
            + ", ".join(
                f"{c.api} {c.value}" + (f" ({x(c.name)})" if c.name else "") for c in entry.codes
            )
        )
    if entry.examples_match:
        con.print("\n[bold]What it looks like[/bold] (messages it matches)")
        wide = terminal_width(con) is None  # a pipe: every example whole
        for ex in entry.examples_match[:EXAMPLES_SHOWN]:
            line = " " + x(_shown_line(entry, ex))
            if wide:
                con.print(line, soft_wrap=True)
            else:  # one line each on a terminal, cut at its edge
                con.print(line, overflow="ellipsis", no_wrap=True, crop=True)
        more = len(entry.examples_match) - EXAMPLES_SHOWN
        if more > 0:
            con.print(f" [dim]and {more} more (kb show {x(entry.id)} --json)[/dim]")
    if patterns:
        sig = Table(
            title="\nWordings", title_justify="left", show_lines=False, box=None, pad_edge=False
        )
        sig.add_column("signature", style="cyan", no_wrap=True)
        sig.add_column("pattern", overflow="fold")
        sig.add_column("era", style="dim", overflow="fold")
        for s in entry.signatures:
            sig.add_row(x(s.id), x(s.pattern), x(s.era))
        con.print(sig)
    else:
        n = len(entry.signatures)
        con.print(
            f" [dim]{n} wording{'s' if n != 1 else ''}: kb show {x(entry.id)} --patterns shows "
            "each one's regex and the versions that print it[/dim]"
        )
    con.print("\n[bold]Causes[/bold] (most likely first)")
    for i, c in enumerate(entry.causes, 1):
        con.print(f" {i}. [bold]{x(c.title)}[/bold]\n    {x(c.detail.strip())}")
        if c.evidence:
            con.print(f"    [dim]tells it apart:[/dim] {x(c.evidence.strip())}")
    if entry.diagnostics:
        con.print("\n[bold]Diagnostics[/bold]")
        for d in entry.diagnostics:
            con.print(f" • {x(d.title)}")
            con.print(f"   [green]$ {x(d.command)}[/green]")
            if d.tells:
                con.print(f"   [dim]{x(d.tells.strip())}[/dim]")
    con.print("\n[bold]Fixes[/bold] (try the first one first)")
    for i, f in enumerate(entry.fixes, 1):
        con.print(
            f" {i}. [bold]{x(f.title)}[/bold]"
            + (f"\n    {x(f.detail.strip())}" if f.detail else "")
        )
        if f.code:
            con.print(
                Syntax(
                    f.code.rstrip(),
                    f.lang,
                    theme="ansi_dark",
                    background_color="default",
                    padding=(0, 4),
                )
            )
    for nr in entry.not_reproducible:
        con.print(
            f"\n[yellow]Not reproducible today[/yellow] ({x(nr.signature)}): {x(nr.reason.strip())}"
        )
    con.print("\n[bold]Verification[/bold]")
    rows = verification_rows(entry, evs, kinds)
    width = max(len(r.kind) for r in rows)
    for r in rows:
        color = WORD_COLORS.get(r.word, "red")
        con.print(
            f" {x(r.kind):{width}}  [{color}]{x(r.seen)}[/{color}]"
            + (f"  [dim]{x(r.where)}[/dim]" if r.where else "")
        )
    if entry.references:
        con.print("\n[bold]References[/bold]")
        for ref in entry.references:
            con.print(x(f" • {ref.title} {ref.url}".replace("  ", " ")))


def _shown_line(entry: Entry, example: str) -> str:
    """The line of an example that the entry matches (a traceback's exception line, not its
    'Traceback (most recent call last):'), as a lookup reads it; else its last line."""
    lines = [ln.strip() for ln in example.splitlines() if ln.strip()]
    if len(lines) <= 1:
        return lines[0] if lines else example.strip()
    from kb.knowledge.signatures import SignatureIndex, text_hits

    hits = text_hits(SignatureIndex([entry]), example)
    return min(hits, key=lambda h: h.line_number).line if hits else lines[-1]


def print_problems(problems: list[Problem], stream: TextIO | None = None) -> None:
    for p in problems:
        print(str(p), file=stream if stream is not None else sys.stdout)
