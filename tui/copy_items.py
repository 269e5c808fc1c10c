"""What the copy menu offers for what the detail pane shows: each fix, each diagnostic command,
the matched line, each reference's URL (whole), and the whole diagnosis as Markdown.

Nothing here imports Textual.
"""

from __future__ import annotations

from dataclasses import dataclass

from kb import Entry, LookupResult, Match


@dataclass(frozen=True)
class Item:
    label: str  # the menu's line
    text: str  # what is copied
    what: str  # how the notice names it: "fix 2", "the matched line"


def items_for(
    entry: Entry | None,
    match: Match | None,
    result: LookupResult | None,
    guess: bool = False,
) -> list[Item]:
    """The copy menu's items, most wanted first."""
    out: list[Item] = []
    if entry is not None:
        for i, fix in enumerate(entry.fixes, 1):
            if fix.code:
                out.append(Item(f"Fix {i} (code): {fix.title}", fix.code, f"fix {i}"))
            else:
                body = fix.title + (f"\n\n{' '.join(fix.detail.split())}" if fix.detail else "")
                out.append(Item(f"Fix {i} (text): {fix.title}", body, f"fix {i}"))
        for d in entry.diagnostics:
            out.append(Item(f"Command: {d.command}", d.command, "the diagnostic command"))
    if match is not None and match.line and not guess:
        where = f"line {match.line_number}" if match.line_number else "line"
        out.append(
            Item(f"Matched {where}: {match.line.strip()}", match.line.strip(), "the matched line")
        )
    root = result.root if result is not None else None
    if root is not None and (match is None or guess):
        out.append(
            Item(
                f"Root failure, line {root.line_number}: {root.line.strip()}",
                root.line.strip(),
                "the root failure's line",
            )
        )
    if entry is not None:
        for ref in entry.references:
            out.append(Item(f"URL: {ref.url}", ref.url, "the URL"))
    if entry is not None or root is not None:
        out.append(
            Item(
                "All of it, as Markdown (for a bug report)",
                markdown(entry, match, result, guess),
                "the diagnosis as Markdown",
            )
        )
    return out


def markdown(
    entry: Entry | None, match: Match | None, result: LookupResult | None, guess: bool
) -> str:
    """The diagnosis as Markdown, saying what it is: a match, a guess, an entry browsed, or a
    failure no entry knows."""
    out: list[str] = []
    root = result.root if result is not None else None
    if root is not None and (entry is None or match is None or guess):
        out += [
            "### Root failure (not in the knowledge base)",
            "",
            f"Line {root.line_number}:",
            "",
            "```",
            root.line.strip(),
            "```",
            "",
        ]
        if root.frame is not None:
            out += [f"Raised in `{root.frame.where()}`", ""]
        if root.user_frame is not None and root.user_frame != root.frame:
            out += [f"Your code: `{root.user_frame.where()}`", ""]
        if root.printed_by is not None:
            out += [f"Printed by {root.printed_by.describe()}", ""]
    if entry is None:
        return "\n".join(out).rstrip() + "\n"
    if match is not None and not guess:
        head = f"### kb: `{entry.id}` ({match.confidence} confidence)"
    elif guess:
        head = f"### kb guess (full text, no signature matched): `{entry.id}`"
    else:
        head = f"### kb entry `{entry.id}` (not a diagnosis of a log)"
    out += [head, "", f"**{entry.title}**", "", " ".join(entry.summary.split()), ""]
    if match is not None and match.line and not guess:
        sig = f" (signature `{match.signature}`)" if match.signature else ""
        where = f"line {match.line_number}" if match.line_number else "line"
        out += [f"Matched {where}{sig}:", "", "```", match.line.strip(), "```", ""]
    if result is not None and not guess:
        for f in result.diagnosis:
            out += [f"**Diagnosis:** {f.verdict}", ""]
            if f.lines:
                out += ["```", *f.lines, "```", ""]
            out += [f"- {a}" for a in f.advice]
            if f.advice:
                out.append("")
    for i, fix in enumerate(entry.fixes, 1):
        label = "Try first" if i == 1 and match is not None and not guess else f"Fix {i}"
        out += [f"**{label}:** {fix.title}", ""]
        if fix.detail:
            out += [" ".join(fix.detail.split()), ""]
        if fix.code:
            out += [f"```{fix.lang}", fix.code.rstrip(), "```", ""]
    if entry.causes:
        out += ["**Causes (most likely first)**", ""]
        out += [f"{i}. {c.title}" for i, c in enumerate(entry.causes, 1)] + [""]
    if entry.diagnostics:
        out += ["**Diagnostics**", ""]
        out += [f"- {d.title}: `{d.command}`" for d in entry.diagnostics] + [""]
    if entry.references:
        out += ["**References**", ""]
        out += [f"- [{r.title or r.url}]({r.url})" for r in entry.references] + [""]
    return "\n".join(out).rstrip() + "\n"
