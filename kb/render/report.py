"""A lookup result as text for people, JSON for machines and Markdown for bug reports: every
rendering of a LookupResult lives here, so the three say the same thing."""

from __future__ import annotations

import textwrap

from kb.diagnosis.diagnose import Finding
from kb.diagnosis.engine import LookupResult
from kb.knowledge.base import KnowledgeBase
from kb.model.entry import Match
from kb.render.style import Style, evidence_line

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
        "hits": [
            {"signature": h.signature, "line_number": h.line_number, "line": h.line} for h in m.hits
        ],
    }


def result_dict(r: LookupResult) -> dict:
    return {
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
    }


def _wrap(text: str, indent: str, width: int = 96) -> str:
    return textwrap.fill(
        " ".join(text.split()), width=width, initial_indent=indent, subsequent_indent=indent
    )


def _finding_text(f: Finding, st: Style, indent: str = "  ") -> list[str]:
    out = [_wrap(f.verdict, indent)]
    out += [indent + "  " + st.cyan(ln) for ln in f.lines]
    out += [_wrap("-> " + a, indent + "  ") for a in f.advice]
    return out


def result_text(r: LookupResult, kb: KnowledgeBase, st: Style) -> str:
    out: list[str] = []
    if not r.matches:
        why = " (the input looks binary, not a log)" if r.binary else ""
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
        return "\n".join(out) + "\n"
    best = r.matches[0]
    e = best.entry
    conf_color = {"high": st.green, "medium": st.yellow, "low": st.red}[best.confidence]
    out.append(st.bold(e.id) + (" " + st(" local ", "35") if e.local else "") + "  " + e.title)
    how = {
        "signature": f"signature {best.signature}",
        "code": "CUDA code owned by this entry",
        "fulltext": f"full-text only, {best.captures.get('terms', '')} terms",
    }[best.source]
    out.append(f"  confidence  {conf_color(best.confidence)} ({how})")
    if best.line:
        out.append(f"  line {best.line_number:<6} {best.line[:300]}")
    caps = {k: v for k, v in best.captures.items() if best.source != "fulltext"}
    if caps:
        out.append("  captures    " + ", ".join(f"{k}={st.cyan(v)}" for k, v in caps.items()))
    out.append("")
    out.append(_wrap(e.summary, "  "))
    if r.diagnosis:
        out += ["", st.bold("Diagnosis")]
        for f in r.diagnosis:
            out += _finding_text(f, st)
    out += ["", st.bold("Likely causes")]
    for i, c in enumerate(e.causes[:3], 1):
        out.append(_wrap(f"{i}. {c.title}", "  "))
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
    return "\n".join(out) + "\n"


def result_markdown(r: LookupResult, kb: KnowledgeBase) -> str:
    if not r.matches:
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
    for f in r.diagnosis:
        out += [f"**Diagnosis:** {f.verdict}", ""]
        if f.lines:
            out += ["```", *f.lines, "```", ""]
        out += [f"- {a}" for a in f.advice] + [""]
    out += (
        ["**Likely causes**", ""]
        + [f"{i}. {c.title}" for i, c in enumerate(e.causes[:3], 1)]
        + [""]
    )
    fix = e.fixes[0]
    out += [f"**Try first:** {fix.title}", ""]
    if fix.code:
        out += [f"```{fix.lang}", fix.code.rstrip(), "```", ""]
    out += [f"_{evidence_line(kb.evidence_for(e.id))}_", ""]
    return "\n".join(out)
