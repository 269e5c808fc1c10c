"""A lookup result as text for people, JSON for machines and Markdown for bug reports: every
rendering of a LookupResult lives here, so the three say the same thing."""

from __future__ import annotations

import textwrap

from kb.diagnosis.diagnose import Finding
from kb.diagnosis.engine import LookupResult
from kb.knowledge.base import KnowledgeBase
from kb.model.entry import Match
from kb.model.root import Relation, RootFailure
from kb.render.style import Style, evidence_line
from kb.render.terminal import for_terminal

TYPE_CHECKING = False  # typing stays unimported at run time (kb lookup's cold start)
if TYPE_CHECKING:
    from typing import Any


def match_dict(m: Match) -> dict[str, Any]:
    return {
        "id": m.id,
        "title": m.entry.title,
        "confidence": m.confidence,
        "score": round(m.score, 3),
        "source": m.source,
        "signature": m.signature,
        "line": m.line,
        "line_number": m.line_number,
        "captures": m.captures,
        "local": m.entry.local,
        # A language or platform class (a KeyError, a missing file): kb knows the class, not a
        # PyTorch/CUDA failure of its own. Exit code 0 all the same (kb/exit_codes.py).
        "generic": m.entry.generic,
        "hits": [
            {"signature": h.signature, "line_number": h.line_number, "line": h.line} for h in m.hits
        ],
        # What the entry says, so a script need not call `kb show`: its summary and the fix to
        # try first (every field, "" where the entry leaves one out).
        "summary": " ".join(m.entry.summary.split()),
        "fix": _first_fix(m),
        # The entry's causes whose evidence quotes a wording this log shows, those first.
        "causes_seen": [m.entry.causes[i].title for i in m.causes_seen],
    }


def _first_fix(m: Match) -> dict[str, str] | None:
    if not m.entry.fixes:
        return None
    f = m.entry.fixes[0]
    return {"title": f.title, "detail": " ".join(f.detail.split()), "code": f.code, "lang": f.lang}


def about(kb: KnowledgeBase) -> dict[str, str]:
    """Which kb and which knowledge gave a result: the version, and the knowledge's identity
    (its contents, wherever its files are; the id `kb triage` writes in its knowledge column)."""
    from kb.version import __version__

    return {"version": __version__, "knowledge": (kb.identity or kb.content_hash)[:12]}


def result_dict(r: LookupResult, kb: KnowledgeBase | None = None) -> dict:
    """The lookup's JSON (docs/json.md, `kb help json`); with kb, `"kb"` too: its version and the
    knowledge's identity."""
    d = {
        "matches": [match_dict(m) for m in r.matches],
        "suggestions": [match_dict(m) for m in r.suggestions],
        "facts": r.facts.to_dict(),
        "diagnosis": [f.to_dict() for f in r.diagnosis],
        "input": {
            "lines": r.lines_scanned,
            "bytes": r.bytes_scanned,
            "binary": r.binary,
            "dropped": r.dropped,
            "skimmed": r.skimmed,
        },
        "warnings": list(r.warnings),
        "root": r.root.to_dict() if r.root is not None else None,
        # matches on what followed from a root failure no entry knows: never the answer
        "followers": [match_dict(m) for m in r.followers],
    }
    if kb is not None:
        d["kb"] = about(kb)
    return d


def _wrap(text: str, indent: str, width: int = 96) -> str:
    return textwrap.fill(
        " ".join(text.split()), width=width, initial_indent=indent, subsequent_indent=indent
    )


def _finding_text(f: Finding, st: Style, indent: str = "  ") -> list[str]:
    out = [_wrap(f.verdict, indent)]
    out += [indent + "  " + st.cyan(ln) for ln in f.lines]
    out += [_wrap("-> " + a, indent + "  ") for a in f.advice]
    return out


_HOW = {
    Relation.CAUSE: "raised from it",
    Relation.CONTEXT: "raised while handling it",
    Relation.WRAPPER: "re-raised or reported it",
}


def root_text(root: RootFailure, st: Style) -> list[str]:
    """The root failure for people: what the log shows, marked as not coming from an entry. No
    causes, no fix, no confidence: kb has no diagnosis of it."""
    what = root.exception or root.kind.value
    out = [st.bold("root failure") + f"  {what}  " + st.yellow("(not in the knowledge base)")]
    out.append(f"  line {root.line_number:<6} {root.line[:300]}")
    more = [ln for ln in root.message.split("\n")[1:4] if ln.strip()]
    out += [f"  {'':11} {ln[:300]}" for ln in more]
    if root.frame is not None:
        owner = root.package if root.package else "your code"
        if root.raised_in is not None and root.raised_in.value == "stdlib":
            owner = f"{root.package} (standard library)"
        out.append(f"  raised in   {owner}: {root.frame.where()}")
    if root.user_frame is not None and root.user_frame is not root.frame:
        out.append(f"  your code   {root.user_frame.where()}")
        if root.user_frame.code:
            out.append(f"  {'':11} " + st.cyan(root.user_frame.code[:200]))
    if root.printed_by is not None:
        # kb's message catalog knows where the message is printed, not what it means.
        out.append(f"  printed by  {root.printed_by.describe()}")
    if root.signal or root.exit_code is not None:
        how = [f"signal {root.signal}"] if root.signal else []
        if root.exit_code is not None:
            how.append(f"exit code {root.exit_code}")
        out.append("  ended by    " + ", ".join(how))
    for c in root.chain[:4]:
        name = c.exception or c.wrapper or "report"
        via = f" ({c.wrapper})" if c.wrapper and c.exception else ""
        out.append(f"  then        line {c.line_number}: {name}{via}, {_HOW[c.relation]}")
    if root.consequence:
        out.append(
            "  "
            + st.dim(
                f"every failure in the log is a consequence ({root.consequence}); this is the first"
            )
        )
    if root.others:
        out.append(f"  also        {root.others} other failure(s) in the log")
    if root.truncated:
        out.append("  " + st.dim("its traceback was cut: some of its lines are not in the input"))
    return out


def result_text(r: LookupResult, kb: KnowledgeBase, st: Style) -> str:
    out: list[str] = []
    if not r.matches:
        why = " (the input looks binary, not a log)" if r.binary else ""
        if r.root is not None:
            out += root_text(r.root, st)
            out.append("")
            out.append(
                st.yellow("no known entry")
                + " for this failure: above is what the log shows, not a diagnosis."
            )
            if r.followers:
                out.append(
                    st.dim(
                        "what followed from it matched "
                        + ", ".join(f"{m.id} (line {m.line_number})" for m in r.followers)
                        + ": consequences, not the cause"
                    )
                )
        else:
            out.append(st.yellow("no known entry") + f" for this input{why}.")
        if r.suggestions:
            out.append(st.dim("Weak suggestions, not matches:"))
            for m in r.suggestions:
                out.append(
                    f"  {m.id:34} {st.dim(m.entry.title)}  "
                    + st.dim(f"(terms {m.captures.get('terms', '')})")
                )
        for f in r.diagnosis:
            out += [""] + _finding_text(f, st)
        return for_terminal("\n".join(out) + "\n", colour=st.on)
    best = r.matches[0]
    e = best.entry
    conf_color = {"high": st.green, "medium": st.yellow, "low": st.red}[best.confidence]
    out.append(st.bold(e.id) + (" " + st(" local ", "35") if e.local else "") + "  " + e.title)
    how = {
        "signature": f"signature {best.signature}",
        "code": "CUDA code owned by this entry",
        "fulltext": f"full-text only, {best.captures.get('terms', '')} terms",
        "catalog": _catalog_how(best),
    }[best.source]
    out.append(f"  confidence  {conf_color(best.confidence)} ({how})")
    if best.line:
        out.append(f"  line {best.line_number:<6} {best.line[:300]}")
    caps = {k: v for k, v in best.captures.items() if best.source != "fulltext"}
    if caps:
        out.append("  captures    " + ", ".join(f"{k}={st.cyan(v)}" for k, v in caps.items()))
    if _root_elsewhere(r, best):
        root = r.root
        assert root is not None
        out.append(
            f"  root        line {root.line_number}: "
            + st.dim(f"{root.line[:200]}  (the log's first failure; no entry matched it)")
        )
    out.append("")
    out.append(_wrap(e.summary, "  "))
    if r.diagnosis:
        out += ["", st.bold("Diagnosis")]
        for f in r.diagnosis:
            out += _finding_text(f, st)
    out += ["", st.bold("Likely causes")]
    for i, (c, shown) in enumerate(best.causes_in_order()[:3], 1):
        mark = "  " + st.green("(this log shows it)") if shown else ""
        out.append(_wrap(f"{i}. {c.title}", "  ") + mark)
        if c.evidence:
            out.append(st.dim(_wrap("tells it apart: " + c.evidence, "     ")))
    fix = e.fixes[0]
    out += ["", st.bold("Try first")]
    out.append(_wrap(fix.title + (": " + fix.detail if fix.detail else ""), "  "))
    if fix.code:
        out += ["    " + st.cyan(ln) for ln in fix.code.rstrip().splitlines()]
    out += [
        "",
        "  " + st.dim(evidence_line(kb.evidence_for(e.id))),
        "  " + st.dim(f"kb show {e.id}  for diagnostics and every fix"),
    ]
    if len(r.matches) > 1:
        out += ["", st.bold("Also matched")]
        for m in r.matches[1:]:
            where = f"line {m.line_number}" if m.line_number else m.source
            out.append(f"  {m.id:34} {m.confidence:6} {where}")
    return for_terminal("\n".join(out) + "\n", colour=st.on)


def _root_elsewhere(r: LookupResult, best: Match) -> bool:
    """Whether the root failure is on a line other than the match's (and not its message)."""
    root = r.root
    if root is None or not best.line_number or root.line_number == best.line_number:
        return False
    if any(h.line_number == root.line_number for m in r.matches for h in m.hits):
        return False  # an entry matched the root's line too: it is no unmatched failure
    return best.line not in root.message and root.line not in best.line


def _catalog_how(m: Match) -> str:
    """How a message catalog match was made: the template the line fits (where its project
    prints it), then the entry's own signature on the message as printed, or the family."""
    where = " ".join(
        x for x in (m.captures.get("template_source", ""), m.captures.get("template_file", "")) if x
    )
    sig = m.signature or ""
    via = f"family {sig[len('catalog-') :]}" if sig.startswith("catalog-") else f"signature {sig}"
    return f"message catalog: {where}; {via}" if where else f"message catalog; {via}"


def root_markdown(root: RootFailure) -> list[str]:
    out = ["```", root.line, *[ln for ln in root.message.split("\n")[1:6] if ln.strip()], "```", ""]
    facts = [f"line {root.line_number}", f"kind `{root.kind.value}`"]
    if root.frame is not None:
        owner = f"`{root.package}`" if root.package else "your code"
        facts.append(f"raised in {owner} (`{root.frame.where()}`)")
    if root.user_frame is not None and root.user_frame is not root.frame:
        facts.append(f"your code: `{root.user_frame.where()}`")
    if root.signal:
        facts.append(f"signal {root.signal}")
    if root.printed_by is not None:
        facts.append(f"printed by {root.printed_by.describe()}")
    for c in root.chain[:3]:
        facts.append(
            f"then `{c.exception or c.wrapper}` ({_HOW[c.relation]}, line {c.line_number})"
        )
    if root.others:
        facts.append(f"{root.others} other failure(s) in the log")
    return [*out, "; ".join(facts) + ".", ""]


def result_markdown(r: LookupResult, kb: KnowledgeBase) -> str:
    # Markdown is read in a terminal as often as pasted: no sequence of the log's reaches one.
    return for_terminal(_markdown(r, kb))


def _markdown(r: LookupResult, kb: KnowledgeBase) -> str:
    if not r.matches:
        if r.root is not None:
            return "\n".join(
                [
                    "**kb:** no known entry for this error. The log's first failure "
                    "(not in the knowledge base: what the log shows, not a diagnosis):",
                    "",
                    *root_markdown(r.root),
                ]
            )
        return "**kb:** no known entry for this error.\n"
    m = r.matches[0]
    e = m.entry
    out = [
        f"### kb: `{e.id}` ({m.confidence} confidence)",
        "",
        f"**{e.title}**",
        "",
        e.summary.strip(),
        "",
    ]
    if m.line:
        out += [
            f"Matched line {m.line_number} (signature `{m.signature}`):",
            "",
            "```",
            m.line,
            "```",
            "",
        ]
    if r.root is not None and _root_elsewhere(r, m):
        out += [f"The log's first failure, line {r.root.line_number} (no entry matched it):", ""]
        out += ["```", r.root.line, "```", ""]
    for f in r.diagnosis:
        out += [f"**Diagnosis:** {f.verdict}", ""]
        if f.lines:
            out += ["```", *f.lines, "```", ""]
        out += [f"- {a}" for a in f.advice] + [""]
    out += (
        ["**Likely causes**", ""]
        + [
            f"{i}. {c.title}" + (" _(this log shows it)_" if shown else "")
            for i, (c, shown) in enumerate(m.causes_in_order()[:3], 1)
        ]
        + [""]
    )
    fix = e.fixes[0]
    out += [f"**Try first:** {fix.title}", ""]
    if fix.code:
        out += [f"```{fix.lang}", fix.code.rstrip(), "```", ""]
    out += [f"_{evidence_line(kb.evidence_for(e.id))}_", ""]
    return "\n".join(out)
