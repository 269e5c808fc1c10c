"""DetailPane: one entry in full, and why it matched this log.

Rendered as one rich Group in one Static (a single update per selection, cheap to swap). Colours
come from the app's theme variables at render time, and the pane re-renders when the theme
changes, so light and dark themes both read well.
"""

from __future__ import annotations

import re
from typing import Any

from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from kb.diagnose import Finding
from kb.model import Entry, Evidence, Match
from kb.render import evidence_line, verification_status

INTRO = ("Paste an error message or a whole log into the box on the left: matching entries appear "
         "as you type. With the box empty, every entry is listed; type / to filter them. "
         "Press ? for keys.")


def highlight_line(line: str, pattern: str | None, ignore_case: bool, styles: dict[str, str]) -> Text:
    """The matched line with the signature's span underlined and each captured value marked."""
    text = Text(line)
    if not pattern:
        return text
    try:
        m = re.search(pattern, line, re.IGNORECASE if ignore_case else 0)
    except re.error:
        return text
    if not m:
        return text
    text.stylize(f"underline {styles['match']}", m.start(), m.end())
    for name in m.re.groupindex:
        s, e = m.span(name)
        if s >= 0 and e > s:
            text.stylize(styles["capture"], s, e)
    return text


def bullet(text: str | Text, st: dict[str, str], mark: str = "•") -> Table:
    """A list item whose wrapped lines hang under its text, not under the mark."""
    grid = Table.grid(padding=(0, 1, 0, 0))
    grid.add_column(width=max(3, len(mark)), justify="right", style=st["dim"])
    grid.add_column(ratio=1)
    grid.add_row(mark, text)
    return grid


class DetailPane(VerticalScroll):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._shown: tuple | None = None

    def compose(self):
        yield Static(id="detail-body")

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self._rerender())
        self.show(None)

    def _rerender(self) -> None:
        if self._shown is not None:
            self.show(*self._shown)

    # ------------------------------------------------------------------ styles
    def _styles(self) -> dict[str, str]:
        tv = self.app.theme_variables
        dark = self.app.current_theme.dark

        def c(name: str, fallback: str) -> str:
            v = tv.get(name, "")
            return v if v.startswith("#") else fallback

        return {
            "title": f"bold {c('text-primary', c('primary', 'blue'))}",
            "head": f"bold {c('text-accent', c('accent', 'magenta'))}",
            "ok": c("text-success", "green"), "warn": c("text-warning", "yellow"),
            "bad": c("text-error", "red"), "dim": "dim",
            "match": f"bold {c('text-accent', 'magenta')}",
            "capture": f"bold reverse {c('text-warning', 'yellow')}",
            "code_bg": c("panel", "default"),
            "syntax": "monokai" if dark else "friendly",
        }

    # ------------------------------------------------------------------ content
    def show(self, entry: Entry | None, match: Match | None = None, diagnosis: list[Finding] | None = None,
             evidence: list[Evidence] | None = None, note: str = "") -> None:
        self._shown = (entry, match, diagnosis, evidence, note)
        st = self._styles()
        parts: list[RenderableType] = []
        if entry is None:
            parts.append(Text(note or INTRO, style=st["dim"]))
            if diagnosis:
                parts += self._diagnosis(diagnosis, st)
        else:
            parts += self._header(entry, evidence or [], st)
            if match is not None:
                parts += self._why(entry, match, st)
            if diagnosis:
                parts += self._diagnosis(diagnosis, st)
            parts += self._body(entry, evidence or [], st)
        self.query_one("#detail-body", Static).update(Group(*parts))
        self.scroll_home(animate=False)

    def _section(self, title: str, st: dict[str, str]) -> Text:
        return Text("\n" + title, style=st["head"])

    def _header(self, e: Entry, evs: list[Evidence], st: dict[str, str]) -> list[RenderableType]:
        status = verification_status(e, evs)
        status_style = st["ok"] if status in ("reproduced", "fix-verified") else st["dim"]
        meta = Text.assemble((e.id, "bold"), (f" · {e.area}", st["dim"]),
                             (" · local entry" if e.local else "", st["warn"]),
                             (" · ", st["dim"]), (status, status_style))
        return [Text(e.title, style=st["title"]), meta, Text(""), Text(e.summary.strip())]

    def _why(self, e: Entry, m: Match, st: dict[str, str]) -> list[RenderableType]:
        out: list[RenderableType] = [self._section("Why it matched", st)]
        conf_style = {"high": st["ok"], "medium": st["warn"]}.get(m.confidence, st["dim"])
        out.append(Text.assemble(("confidence ", st["dim"]), (m.confidence, f"bold {conf_style}"),
                                 (f"  via {m.source}", st["dim"]), (f"  score {m.score:.1f}", st["dim"])))
        if m.source == "signature" and m.signature:
            sig = e.signature(m.signature)
            if m.line:
                out.append(Text.assemble((f"line {m.line_number}: " if m.line_number else "line: ", st["dim"]),
                                         highlight_line(m.line.strip(), sig.pattern if sig else None,
                                                        bool(sig and sig.ignore_case), st)))
            out.append(Text.assemble(("signature ", st["dim"]), (m.signature, "bold"),
                                     (f"  {sig.era}" if sig and sig.era else "", st["dim"])))
            if sig:
                out.append(Text.assemble(("pattern   ", st["dim"]), (sig.pattern, st["dim"])))
        elif m.source == "code":
            out.append(Text(f"The log names CUDA error {m.captures.get('code', '?')} "
                            f"({m.captures.get('api', '?')} numbering), which this entry owns."))
        elif m.source == "fulltext":
            out.append(Text(f"No signature fired; full-text search: {m.captures.get('terms', '?')} of the "
                            f"message's terms are in this entry (coverage {m.captures.get('coverage', '?')}).",
                            style=st["dim"]))
        caps = {k: v for k, v in m.captures.items() if m.source == "signature"}
        if caps:
            cap_text = Text("captured  ", style=st["dim"])
            for i, (k, v) in enumerate(caps.items()):
                cap_text.append(("  " if i else "") + f"{k}=")
                cap_text.append(str(v), style=st["capture"])
            out.append(cap_text)
        return out

    def _diagnosis(self, findings: list[Finding], st: dict[str, str]) -> list[RenderableType]:
        out: list[RenderableType] = [self._section("Diagnosis of this log", st)]
        for f in findings:
            out.append(Text(f.verdict, style="bold"))
            if f.lines:
                out.append(Padding(Text("\n".join(f.lines), style=st["dim"], overflow="fold"), (0, 0, 0, 4)))
            for a in f.advice:
                out.append(bullet(a, st))
        return out

    def _body(self, e: Entry, evs: list[Evidence], st: dict[str, str]) -> list[RenderableType]:
        out: list[RenderableType] = []
        if e.causes:
            out.append(self._section("Causes (most likely first)", st))
            for i, c in enumerate(e.causes, 1):
                out.append(bullet(Text(c.get("title", ""), style="bold"), st, f"{i}."))
                if c.get("detail"):
                    out.append(Padding(Text(c["detail"].strip()), (0, 0, 0, 4)))
                if c.get("evidence"):
                    out.append(Padding(Text.assemble(("tells it apart: ", st["dim"]), c["evidence"].strip()),
                                       (0, 0, 0, 4)))
        if e.diagnostics:
            out.append(self._section("Diagnostics", st))
            for d in e.diagnostics:
                out.append(bullet(Text(d.get("title", ""), style="bold"), st))
                out.append(Padding(Text("$ " + d.get("command", ""), style=st["ok"]), (0, 0, 0, 4)))
                if d.get("tells"):
                    out.append(Padding(Text(d["tells"].strip(), style=st["dim"]), (0, 0, 0, 4)))
        if e.fixes:
            out.append(self._section("Fixes (best first; y copies the first code)", st))
            for i, f in enumerate(e.fixes, 1):
                out.append(bullet(Text(f.get("title", ""), style="bold"), st, f"{i}."))
                if f.get("detail"):
                    out.append(Padding(Text(f["detail"].strip()), (0, 0, 0, 4)))
                if f.get("code"):
                    out.append(Padding(Syntax(f["code"].rstrip(), f.get("lang", "python"), theme=st["syntax"],
                                              background_color=st["code_bg"], word_wrap=True),
                                       (0, 0, 0, 4)))
        for nr in e.not_reproducible:
            out.append(Text.assemble(("\nnot reproducible today ", st["warn"]), (f"({nr.get('signature')}): ", st["dim"]),
                                     str(nr.get("reason", "")).strip()))
        out.append(self._section("Verification", st))
        if e.repro is None:
            out.append(Text("This entry has no repro.", style=st["dim"]))
        else:
            req = e.repro.requires
            needs = "a GPU" if req.gpu else "no GPU"
            if req.gpu and req.gpus > 1:
                needs = f"{req.gpus} GPUs"
            out.append(Text.assemble(("repro needs ", st["dim"]), needs,
                                     (f", expects {', '.join(e.repro.expect)}", st["dim"]),
                                     ("; fix check included" if e.fix_check else "", st["dim"]),
                                     ("  — r runs it here", st["dim"])))
        if not evs:
            out.append(Text(evidence_line(evs), style=st["dim"]))
        for ev in evs:
            good = ev.status == "reproduced"
            out.append(Text.assemble(("✓ " if good else "✗ ", st["ok"] if good else st["bad"]), ev.summary()))
        if e.references:
            out.append(self._section("References", st))
            for r in e.references:
                out.append(bullet(Text.assemble((r.get("title", "") + " ", ""), (r["url"], st["dim"])), st))
        return out
