"""Entries, matches and problems as text for people, JSON for machines, Markdown for bug reports.

Lookup's text output is written without rich on purpose: rich costs ~40 ms to import, which
would be most of a cold `kb lookup`. Everything else (show, list, verify tables) uses rich.
"""

from __future__ import annotations

import os
import sys
from dataclasses import asdict
from typing import Any

from .model import Entry, Evidence, Problem


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


def use_color(stream=sys.stdout) -> bool:
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
        "summary": entry.summary,
        "tags": list(entry.tags),
        "local": entry.local,
        "path": entry.path,
        "codes": [asdict(c) for c in entry.codes],
        "signatures": [
            {"id": s.id, "pattern": s.pattern, "era": s.era, "weight": s.weight}
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
def entry_markdown(entry: Entry, evs: list[Evidence] | None = None) -> str:
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
    out += ["", "### Verification", "", evidence_line(evs or [])]
    if entry.references:
        out += ["", "### References", ""]
        out += [f"- [{r.title or r.url}]({r.url})" for r in entry.references]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- rich (show, list, lint)
def console(stream=sys.stdout):
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            # rich exits 1 here; a reader that stopped early (`kb list | head`) is no error:
            # the CLI turns this into exit 0.
            raise BrokenPipeError

    return _Console(
        file=stream,
        highlight=False,
        soft_wrap=False,
        force_terminal=True if os.environ.get("FORCE_COLOR") else None,
    )


def print_entry(entry: Entry, evs: list[Evidence], stream=sys.stdout) -> None:
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
    sig = Table(title="Wordings", title_justify="left", show_lines=False, box=None, pad_edge=False)
    sig.add_column("signature", style="cyan", no_wrap=True)
    sig.add_column("pattern", overflow="fold")
    sig.add_column("era", style="dim", overflow="fold")
    for s in entry.signatures:
        sig.add_row(x(s.id), x(s.pattern), x(s.era))
    con.print(sig)
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
    con.print("\n[bold]Verification[/bold]  " + x(evidence_line(evs)))
    if entry.references:
        con.print("\n[bold]References[/bold]")
        for r in entry.references:
            con.print(x(f" • {r.title} {r.url}".replace("  ", " ")))


def print_problems(problems: list[Problem], stream=sys.stdout) -> None:
    for p in problems:
        print(str(p), file=stream)
