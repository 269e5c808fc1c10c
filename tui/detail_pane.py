"""DetailPane: what the log says, in the order a person needs it.

For an entry: what happened (one line), the diagnosis of this log with its numbers, the fix to
try first, then causes, diagnostics, the other fixes, the entry's own description, the matched
line and signature, and the evidence per GPU kind. A full-text suggestion is shown under a banner
saying it is a guess; when nothing matched, the pane says so first and lists the guesses as
guesses. For a rank of a job, its part in the job and what happened to it come first, then its
entry as above, then the job's verdict. Rendered as lines of a TextView (one update per
selection), so find can search them; colours come from the theme at render time, and the pane
re-renders when the theme or its width changes.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable

from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from kb import Entry, Evidence, Finding, Fix, LookupResult, Match, RootFailure, evidence_line

from . import rank_detail
from .job_ranks import JobInfo, RankRow
from .text_view import TextView

INTRO = (
    "Paste an error message or a whole log into the box on the left (whatever you type goes "
    "there): the entries that match it appear as you type, and this pane shows the diagnosis."
)
KEYS_INTRO = (
    "The list below the box holds every entry of the knowledge base: ↓ browses them (an entry, "
    "not a diagnosis). f3 opens a log file or a job's folder; f1 lists every key; ctrl+p the "
    "command palette; ctrl+q quits."
)
Styles = dict[str, str]
TOP_LINE = 160  # characters of the matched line shown at the top of an entry


def highlight_line(line: str, pattern: str | None, ignore_case: bool, styles: Styles) -> Text:
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


def first_sentence(text: str) -> tuple[str, str]:
    """(the first sentence, the rest) of an entry's summary."""
    flat = " ".join(text.split())
    m = re.search(r"(?<=[.!?])\s+(?=[A-Z(`'\"])", flat)
    if not m or m.start() < 20:
        return flat, ""
    return flat[: m.start()], flat[m.end() :]


def bullet(text: str | Text, st: Styles, mark: str = "•") -> Table:
    """A list item whose wrapped lines hang under its text, not under the mark."""
    grid = Table.grid(padding=(0, 1, 0, 0))
    grid.add_column(width=max(2, len(mark)), justify="right", style=st["dim"])
    grid.add_column(ratio=1, overflow="fold")  # a URL is folded whole, never cut with "…"
    grid.add_row(mark, text)
    return grid


def figure(value: str, st: Styles) -> Text:
    """One value of a finding's arithmetic: the number bold, how it was worked out dim after it."""
    m = re.match(r"^(.*\S)\s+=\s+(\S+(?: [KMGT]?i?B)?)$", value)
    if m:  # "a - b = c": the result first, its sum after
        return Text.assemble((m.group(2), "bold"), (f"\n= {m.group(1)}", st["dim"]))
    head, sep, rest = value.partition("  ")
    return Text.assemble((head, "bold"), (f"\n{rest.strip()}" if sep else "", st["dim"]))


def figures(lines: list[str], st: Styles) -> RenderableType:
    """A finding's arithmetic ("label    value" rows) as two columns whose values wrap in place."""
    rows = [re.match(r"^(\S.{0,30}?)\s{2,}(\S.*)$", ln) for ln in lines]
    if not lines or not all(rows):
        return Padding(Text("\n".join(lines), style=st["dim"], overflow="fold"), (0, 0, 0, 2))
    grid = Table.grid(padding=(0, 1, 0, 0))
    grid.add_column(style=st["dim"], no_wrap=True, max_width=24)
    grid.add_column(ratio=1, overflow="fold")
    for m in rows:
        assert m is not None
        grid.add_row(m.group(1), figure(m.group(2), st))
    return Padding(grid, (0, 0, 0, 2))


class DetailPane(TextView):
    """The right pane's details, as searchable lines (find: TextView)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._build: Callable[[Styles], list[RenderableType]] | None = None
        self.kind = "intro"  # intro | message | no-match | entry | guess | browse | rank

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self._paint(scroll_home=False))
        self.show_intro()

    # ------------------------------------------------------------------ what can be shown
    def show_intro(self) -> None:
        self.kind = "intro"
        self._show(self._intro)

    def show_message(self, title: str, text: str = "", bad: bool = False) -> None:
        """A state rather than an entry: reading a pipe, a file that cannot be read, loading."""
        self.kind = "message"

        def parts(st: Styles) -> list[RenderableType]:
            out: list[RenderableType] = [Text(title, style=f"bold {st['bad' if bad else 'warn']}")]
            if text:
                out.append(Text(text, style=st["dim"]))
            return out

        self._show(parts)

    def show_no_match(self, result: LookupResult, reading: bool = False) -> None:
        """Nothing matched (reading: the input is still arriving, so nothing matched yet)."""
        self.kind = "no-match"
        self._show(lambda st: self._no_match(result, st, reading))

    def show_entry(
        self,
        entry: Entry,
        evidence: list[Evidence],
        match: Match | None = None,
        result: LookupResult | None = None,
        guess: bool = False,
    ) -> None:
        """An entry: a match of the input, a guess (guess=True), or browsed (no match)."""
        self.kind = "guess" if guess else ("entry" if match is not None else "browse")
        self._show(lambda st: self._entry(entry, evidence, match, result, guess, st))

    def show_rank(
        self,
        job: JobInfo,
        row: RankRow,
        entry: Entry | None,
        evidence: list[Evidence],
        result: LookupResult | None = None,
        others: tuple[RankRow, ...] = (),
    ) -> None:
        """One rank of a job: its part in the job, then its entry as for any lookup; result is
        the whole job's (what was read, and any trouble reading it); others: the ranks listed
        with it, which fared the same."""
        self.kind = "rank"
        self._show(lambda st: self._rank(job, row, entry, evidence, result, st, others))

    def _show(self, render: Callable[[Styles], list[RenderableType]]) -> None:
        self._build = render
        self._paint()

    def _paint(self, scroll_home: bool = True) -> None:
        if self._build is None:
            return
        self.set_content(self._build(self._styles()), scroll_home=scroll_home)

    def plain(self, width: int = 200) -> str:
        """What the pane shows, as plain text laid out at `width` columns (a wide layout keeps
        a sentence on one line: for reading the pane in tests and scripts)."""
        if self._build is None:
            return ""
        console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
        console.print(Group(*self._build(self._styles())))
        return console.export_text()

    def rewrap(self) -> None:
        # the content depends on the width (code shows line numbers when it would wrap)
        if self._build is not None:
            self._items = list(self._build(self._styles()))
        super().rewrap()

    def _intro(self, st: Styles) -> list[RenderableType]:
        return [
            Text("Nothing to diagnose yet", style=st["title"]),
            Text(INTRO, style=st["dim"]),
            Text(""),
            Text(KEYS_INTRO, style=st["dim"]),
        ]

    # ------------------------------------------------------------------ styles
    def _styles(self) -> Styles:
        tv = self.app.theme_variables
        dark = self.app.current_theme.dark

        def c(name: str, fallback: str) -> str:
            v = tv.get(name, "")
            return v if v.startswith("#") else fallback

        return {
            "title": f"bold {c('text-primary', c('primary', 'blue'))}",
            "head": f"bold {c('text-accent', c('accent', 'magenta'))}",
            "ok": c("text-success", "green"),
            "warn": c("text-warning", "yellow"),
            "bad": c("text-error", "red"),
            "dim": "dim",
            "banner": f"bold {c('text-warning', 'yellow')} on {c('warning-muted', 'default')}",
            "root": f"bold {c('text-error', 'red')} on {c('error-muted', 'default')}",
            "plain_banner": f"bold {c('text-primary', 'blue')} on {c('primary-muted', 'default')}",
            "match": f"bold {c('text-accent', 'magenta')}",
            "capture": f"bold reverse {c('text-warning', 'yellow')}",
            "code_bg": c("panel", "default"),
            "syntax": "monokai" if dark else "friendly",
        }

    @staticmethod
    def _section(title: str, st: Styles) -> Text:
        return Text("\n" + title, style=st["head"])

    # ------------------------------------------------------------------ nothing matched
    def _no_match(self, r: LookupResult, st: Styles, reading: bool) -> list[RenderableType]:
        out: list[RenderableType] = []
        if r.root is not None:
            out += self._root(r.root, st) + [Text("")]
        if reading:
            out += [
                Text("Still reading: no entry matched so far.", style=f"bold {st['warn']}"),
                Text(
                    "The input is still arriving; what came so far is looked up again as more "
                    "comes, and the whole of it when it ends.",
                    style=st["dim"],
                ),
            ]
        else:
            why = (
                "The input looks binary, not a log."
                if r.binary
                else "No signature of any entry fired on it, and no CUDA error code in it "
                "belongs to an entry."
            )
            out += [
                Text("No entry matched this log.", style=f"bold {st['warn']}"),
                Text(why, style=st["dim"]),
            ]
        if r.diagnosis:
            out += self._diagnosis(r.diagnosis, None, st)
        if r.suggestions and not reading:
            out.append(self._section("Guesses (full text, unconfirmed)", st))
            out.append(
                Text(
                    "Entries that share words with the log. None is a match: read one (↓ in "
                    "the list) as a lead, not as the answer.",
                    style=st["dim"],
                )
            )
            for s in r.suggestions:
                terms = s.captures.get("terms", "?")
                out.append(
                    bullet(
                        Text.assemble(
                            (s.id, "bold"), (f"  {terms} terms", st["dim"]), "\n", s.entry.title
                        ),
                        st,
                        "?",
                    )
                )
        elif not reading:
            out.append(
                Text(
                    "\nNo entry comes close either. Paste the first error line of the log, or "
                    "the lines around it; a traceback's last line usually names the error.",
                    style=st["dim"],
                )
            )
        out += self._input_notes(r, st)
        return out

    def _root(self, root: RootFailure, st: Styles) -> list[RenderableType]:
        """The log's first failure, which no entry knows: what the log itself says, marked as
        such, in the log's own words; no fix, no cause, nothing that reads as a diagnosis."""
        out: list[RenderableType] = [
            Text(" NOT IN THE KNOWLEDGE BASE ", style=st["plain_banner"]),
            Text("The root failure, as the log says it", style=st["title"]),
            Text(
                "No entry knows this failure. Below is only what the log says failed first; "
                "kb has no diagnosis or fix for it.",
                style=st["dim"],
            ),
            Text.assemble(
                (f"line {root.line_number}  " if root.line_number else "", st["dim"]),
                (root.line.strip(), "bold"),
            ),
        ]
        facts = Table.grid(padding=(0, 1, 0, 0))
        facts.add_column(style=st["dim"], no_wrap=True)
        facts.add_column(ratio=1, overflow="fold")
        rows: list[tuple[str, str]] = []
        if root.exception:
            rows.append(("exception", root.exception))
        else:
            rows.append(("what", root.kind.value))
        if root.message and root.message.strip() not in root.line:
            rows.append(("message", " ".join(root.message.split())))
        if root.frame is not None:
            owner = root.package or (root.raised_in.value if root.raised_in else "")
            if root.raised_in is not None and root.raised_in.value == "user":
                owner = "your own code"
            rows.append(("raised in", root.frame.where() + (f"  ({owner})" if owner else "")))
        if root.user_frame is not None and root.user_frame != root.frame:
            rows.append(("your code", root.user_frame.where()))
        if root.printed_by is not None:
            # kb's message catalog knows where the message is printed, not what it means
            rows.append(("printed by", root.printed_by.describe()))
        for link in root.chain:
            via = link.wrapper or link.relation.value
            rows.append(("came via", f"{link.exception or link.line.strip()} ({via})"))
        if root.signal:
            rows.append(("signal", root.signal))
        if root.exit_code is not None:
            rows.append(("exit status", str(root.exit_code)))
        if root.truncated:
            rows.append(("note", "its traceback was cut in the log"))
        if root.others:
            n = root.others
            rows.append(("and", f"{n} other failure{'s' if n != 1 else ''} later in the log"))
        for label, value in rows:
            facts.add_row(label, value)
        out.append(facts)
        return out

    @staticmethod
    def _terms(m: Match) -> str:
        found, _, asked = m.captures.get("terms", "?/?").partition("/")
        return f"{found} of the log's {asked} search terms are in this entry"

    def _input_notes(self, r: LookupResult, st: Styles, where: str = "") -> list[RenderableType]:
        n = r.lines_scanned
        read = f"{n:,} line{'s' if n != 1 else ''} read" + (f" from {where}" if where else "")
        notes = [read, *r.warnings]
        return [Text("\n" + " · ".join(notes), style=st["dim"])]

    # ------------------------------------------------------------------ one rank of a job
    def _rank(
        self,
        job: JobInfo,
        row: RankRow,
        e: Entry | None,
        evs: list[Evidence],
        r: LookupResult | None,
        st: Styles,
        others: tuple[RankRow, ...] = (),
    ) -> list[RenderableType]:
        m = row.match
        sig = e.signature(m.signature) if e is not None and m is not None and m.signature else None
        line = highlight_line(
            row.line.strip(), sig.pattern if sig else None, bool(sig and sig.ignore_case), st
        )
        out = rank_detail.head(job, row, line, st, others)
        if e is not None and m is not None:
            out.append(Text(""))
            out += self._entry(e, evs, m, row.lookup, False, st, rank=True)
        else:
            out += rank_detail.no_entry(row, st)
            if row.lookup is not None:  # numbers in its line are worth working out even so
                out += self._diagnosis(row.lookup.diagnosis, None, st)
        out += rank_detail.job_section(job, st)
        if r is not None:
            out += self._input_notes(r, st, rank_detail.files_read(job))
        return out

    # ------------------------------------------------------------------ one entry
    def _entry(
        self,
        e: Entry,
        evs: list[Evidence],
        m: Match | None,
        r: LookupResult | None,
        guess: bool,
        st: Styles,
        rank: bool = False,
    ) -> list[RenderableType]:
        """rank: shown under a rank's head, which has the line already and says what was read."""
        out: list[RenderableType] = []
        happened, rest = first_sentence(e.summary)
        if guess and m is not None:
            out.append(Text(" GUESS, NOT A MATCH ", style=st["banner"]))
            out.append(
                Text(
                    f"No signature of this entry fired on the log: it shares words with it "
                    f"({self._terms(m)}). Check it against the log before acting on it.",
                    style=st["warn"],
                )
            )
            out.append(Text(""))
        elif m is None:
            out.append(Text(" AN ENTRY, NOT A DIAGNOSIS ", style=st["plain_banner"]))
            out.append(
                Text(
                    "Browsing the knowledge base: nothing you gave matched this entry. Paste an "
                    "error or a log to have it diagnosed.",
                    style=st["dim"],
                )
            )
            out.append(Text(""))
        meta = Text.assemble(
            (e.id, "bold"),
            (f" · {e.area}", st["dim"]),
            (" · local entry" if e.local else "", st["warn"]),
        )
        if m is not None and not guess:
            conf = {"high": st["ok"], "medium": st["warn"]}.get(m.confidence, st["dim"])
            meta.append_text(
                Text.assemble((" · ", st["dim"]), (f"{m.confidence} confidence", conf))
            )
        out.append(meta)
        if m is None:
            out.append(Text(e.title, style=st["title"]))
        out.append(Text(happened, style="bold"))
        if m is not None and not guess and m.line and not rank:
            # the line that matched, at the top: it is what the diagnosis stands on
            out.append(self._matched_line(e, m, st, whole=False))
        if r is not None:
            out += self._diagnosis(r.diagnosis, None if guess else m, st)
        out += self._fixes(e, st, first="Try first" if m is not None and not guess else "")
        out += self._causes(e, st, m if not guess else None)
        out += self._diagnostics(e, st)
        out += self._more_fixes(e, st)
        out.append(self._section("About this error", st))
        out.append(Text(e.title, style=st["title"]))
        if rest:
            out.append(Text(rest))
        if m is not None:
            out += self._matched(e, m, guess, st, line_shown=not rank)
        out += self._evidence(e, evs, st)
        if e.references:
            out.append(self._section("References", st))
            for ref in e.references:
                out.append(bullet(Text.assemble((ref.title + " ", ""), (ref.url, st["dim"])), st))
        if r is not None and not rank:
            out += self._input_notes(r, st)
        return out

    def _matched_line(self, e: Entry, m: Match, st: Styles, whole: bool = True) -> Text:
        """The line a match stands on, its signature's span marked; not whole: at most
        TOP_LINE characters (the top of the pane; the Matched section has it whole)."""
        sig = e.signature(m.signature) if m.signature else None
        line = highlight_line(
            m.line.strip(), sig.pattern if sig else None, bool(sig and sig.ignore_case), st
        )
        if not whole and len(line) > TOP_LINE:
            line.truncate(TOP_LINE)
            line.append("… (whole under Matched)", style=st["dim"])
        return Text.assemble(
            (f"line {m.line_number}  " if m.line_number else "line  ", st["dim"]), line
        )

    def _diagnosis(
        self, findings: list[Finding], m: Match | None, st: Styles
    ) -> list[RenderableType]:
        caps = dict(m.captures.items()) if m is not None and m.source != "fulltext" else {}
        if not findings and not caps:
            return []
        out: list[RenderableType] = [self._section("Diagnosis of this log", st)]
        for f in findings:
            out.append(Text(f.verdict, style="bold"))
            if f.lines:
                out.append(figures(f.lines, st))
            for a in f.advice:
                out.append(bullet(a, st))
        if caps and not findings:
            out.append(self._values(caps, st))
        return out

    @staticmethod
    def _values(caps: dict[str, str], st: Styles) -> Text:
        """The values the signature captured; a CUDA code in words."""
        caps = dict(caps)
        text = Text("in the log  ", style=st["dim"])
        if "code" in caps and "api" in caps:
            code, api = caps.pop("code"), caps.pop("api")
            name, wrapper = caps.pop("name", ""), caps.pop("wrapper", "")
            text.append("CUDA error ")
            text.append(code, style=st["capture"])
            text.append(f" {name}" if name else "")
            text.append(
                f" ({api} API"
                + (f", reported by {wrapper})" if wrapper and wrapper != "cuda" else ")"),
                style=st["dim"],
            )
            if caps:
                text.append("  ")
        for i, (k, v) in enumerate(caps.items()):
            text.append(("  " if i else "") + f"{k}=")
            text.append(str(v), style=st["capture"])
        return text

    def _code(self, fix: Fix, st: Styles) -> RenderableType:
        from rich.syntax import Syntax  # with Pygments, ~10 ms: imported when a fix shows code

        code = fix.code.rstrip()
        room = self._width - 3  # the padding below
        # A line wider than the pane wraps; numbered lines show where a wrap continues a line,
        # so a wrapped comment never reads as a line of code.
        wraps = any(len(line) > room for line in code.splitlines())
        return Padding(
            Syntax(
                code,
                (fix.lang or "python"),
                theme=st["syntax"],
                background_color=st["code_bg"],
                word_wrap=True,
                line_numbers=wraps,
            ),
            (0, 0, 0, 3),
        )

    def _fixes(self, e: Entry, st: Styles, first: str = "") -> list[RenderableType]:
        """The first fix: "Try first" for a match of the input; for a guess or a browsed entry,
        only "Fixes": nothing says they fit the input."""
        if not e.fixes:
            return []
        fix = e.fixes[0]
        has_code = any(f.code for f in e.fixes)
        out: list[RenderableType] = [
            self._section((first or "Fixes") + ("  (ctrl+o: copy)" if has_code else ""), st),
            bullet(Text(fix.title, style="bold"), st, "1."),
        ]
        if fix.detail:
            out.append(Padding(Text(" ".join(fix.detail.split())), (0, 0, 0, 3)))
        if fix.code:
            out.append(self._code(fix, st))
        return out

    def _more_fixes(self, e: Entry, st: Styles) -> list[RenderableType]:
        if len(e.fixes) < 2:
            return []
        out: list[RenderableType] = [self._section("Other fixes", st)]
        for i, fix in enumerate(e.fixes[1:], 2):
            out.append(bullet(Text(fix.title, style="bold"), st, f"{i}."))
            if fix.detail:
                out.append(Padding(Text(" ".join(fix.detail.split())), (0, 0, 0, 3)))
            if fix.code:
                out.append(self._code(fix, st))
        return out

    def _causes(self, e: Entry, st: Styles, m: Match | None = None) -> list[RenderableType]:
        if not e.causes:
            return []
        out: list[RenderableType] = [self._section("Causes (most likely first)", st)]
        # for a match, those whose telling wording this log shows lead, as in kb lookup's report
        causes = m.causes_in_order() if m is not None else [(c, False) for c in e.causes]
        for n, (c, shown) in enumerate(causes, 1):
            title = Text(c.title, style="bold")
            if shown:
                title.append("  (this log shows it)", style=st["dim"])
            out.append(bullet(title, st, f"{n}."))
            if c.detail:
                out.append(Padding(Text(" ".join(c.detail.split())), (0, 0, 0, 3)))
            if c.evidence:
                out.append(
                    Padding(
                        Text.assemble(
                            ("tells it apart: ", st["dim"]), " ".join(c.evidence.split())
                        ),
                        (0, 0, 0, 3),
                    )
                )
        return out

    def _diagnostics(self, e: Entry, st: Styles) -> list[RenderableType]:
        if not e.diagnostics:
            return []
        out: list[RenderableType] = [self._section("Diagnostics", st)]
        for d in e.diagnostics:
            out.append(bullet(Text(d.title, style="bold"), st))
            out.append(
                Padding(Text("$ " + d.command, style=st["ok"], overflow="fold"), (0, 0, 0, 3))
            )
            if d.tells:
                out.append(Padding(Text(" ".join(d.tells.split()), style=st["dim"]), (0, 0, 0, 3)))
        return out

    def _matched(
        self, e: Entry, m: Match, guess: bool, st: Styles, line_shown: bool = True
    ) -> list[RenderableType]:
        if guess:
            return [
                self._section("Why it is listed", st),
                Text(
                    f"Full-text search only: {self._terms(m)} (coverage "
                    f"{m.captures.get('coverage', '?')}). No signature fired.",
                    style=st["dim"],
                ),
            ]
        out: list[RenderableType] = [self._section("Matched", st)]
        sig = e.signature(m.signature) if m.signature else None
        if m.source == "code":
            out.append(
                Text(
                    f"The log names CUDA error {m.captures.get('code', '?')} "
                    f"({m.captures.get('api', '?')} numbering), which this entry owns."
                )
            )
        if m.line and (not line_shown or len(m.line.strip()) > TOP_LINE):
            out.append(self._matched_line(e, m, st))
        if sig is not None:
            out.append(
                Text.assemble(
                    ("signature ", st["dim"]),
                    (sig.id, "bold"),
                    (f"  {sig.era}" if sig.era else "", st["dim"]),
                    (f"  score {m.score:.1f}", st["dim"]),
                )
            )
        caps = dict(m.captures.items())
        if caps:
            out.append(self._values(caps, st))
        others = [h for h in m.hits if h.line_number != m.line_number]
        for h in others[:4]:
            out.append(
                Text.assemble(
                    (f"also line {h.line_number}  ", st["dim"]),
                    (h.signature, "bold"),
                    ("  " + h.line.strip()[:200], st["dim"]),
                )
            )
        if len(others) > 4:
            out.append(Text(f"and {len(others) - 4} more lines", style=st["dim"]))
        if sig is not None:
            out.append(Text.assemble(("pattern   ", st["dim"]), (sig.pattern, st["dim"])))
        return out

    def _evidence(self, e: Entry, evs: list[Evidence], st: Styles) -> list[RenderableType]:
        out: list[RenderableType] = [self._section("Verified on", st)]
        by_gpu: dict[str, list[Evidence]] = {}
        for ev in evs:
            by_gpu.setdefault(ev.gpu or "no GPU", []).append(ev)
        if not by_gpu:
            out.append(Text(evidence_line(evs), style=st["dim"]))
        for gpu, group in by_gpu.items():
            last = max(group, key=lambda ev: ev.date)
            good = last.status == "reproduced"
            fix = {"fix-verified": ", fix verified", "fix-failed": ", fix FAILED"}.get(
                last.fix_status, ""
            )
            runs = f" ({len(group)} runs)" if len(group) > 1 else ""
            out.append(
                bullet(
                    Text.assemble(
                        (gpu, "bold"),
                        f": {last.status}{fix}",
                        (
                            f"\ntorch {last.torch}, CUDA {last.cuda}, driver {last.driver}, "
                            f"{last.date}{runs}",
                            st["dim"],
                        ),
                    ),
                    st,
                    "✓" if good else "✗",
                )
            )
        if e.repro is None:
            out.append(Text("This entry has no repro.", style=st["dim"]))
        else:
            req = e.repro.requires
            needs = "a GPU" if req.gpu else "no GPU"
            if req.gpu and req.gpus > 1:
                needs = f"{req.gpus} GPUs"
            out.append(
                Text.assemble(
                    ("Its repro needs ", st["dim"]),
                    needs,
                    ("; a fix check follows it" if e.fix_check else "", st["dim"]),
                    (". f5 runs it here.", st["dim"]),
                )
            )
        for nr in e.not_reproducible:
            out.append(
                Text.assemble(
                    ("not reproducible today ", st["warn"]),
                    (f"({nr.signature}): ", st["dim"]),
                    " ".join(nr.reason.split()),
                )
            )
        return out
