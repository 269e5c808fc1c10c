"""ResultsList: the entries that matched the pasted text, or every entry when nothing is pasted.

Each row is the entry id whole on its own line (ids are what people search and quote), then a
muted line: how sure, where in the log, or the entry's title. When nothing matched, the first row
says so and is selected; full-text suggestions follow under their own heading, marked "guess".
While the input still arrives, that row says "so far". The filter searches every word of an
entry, not only its id and title.
"""

from __future__ import annotations

from collections.abc import Iterable

from textual.content import Content
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from kb import Entry, Match

CONFIDENCE_STYLE = {"high": "$text-success", "medium": "$text-warning", "low": "$text-muted"}
NO_MATCH = "kb:no-match"  # the row that stands for "nothing matched" (entry ids have no colon)


def entry_text(entry: Entry) -> str:
    """Every word an entry says, lower-cased: what the filter searches ("expandable" finds the
    entry whose fix sets expandable_segments)."""
    parts = [entry.id, entry.title, entry.area, " ".join(entry.tags), entry.summary]
    for c in entry.causes:
        parts += [c.title, c.detail, c.evidence]
    for d in entry.diagnostics:
        parts += [d.title, d.command, d.tells]
    for f in entry.fixes:
        parts += [f.title, f.detail, f.code]
    return " ".join(parts).lower()


def entry_matches_filter(
    entry: Entry, words: list[str], cache: dict[str, str] | None = None
) -> bool:
    if cache is None:
        hay = entry_text(entry)
    else:
        hay = cache.get(entry.id) or cache.setdefault(entry.id, entry_text(entry))
    return all(w in hay for w in words)


class ResultsList(OptionList):
    """Option ids are entry ids, or NO_MATCH; headings are disabled rows."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.mode = "browse"  # browse | matches | no-match
        self._text: dict[str, str] = {}  # entry id -> its words, for the filter

    def _passes(self, entry: Entry, words: list[str]) -> bool:
        return not words or entry_matches_filter(entry, words, self._text)

    @property
    def selected_id(self) -> str | None:
        if self.highlighted is None:
            return None
        opt = self.get_option_at_index(self.highlighted)
        return None if opt.disabled else opt.id

    def _replace(self, options: list[Option], keep: str | None, first: bool = True) -> None:
        """first: select the first row when the kept one is gone (else select none)."""
        self.set_options(options)
        ids = [o.id for o in options if not o.disabled]
        if not ids or (keep not in ids and not first):
            self.highlighted = None
            return
        target = keep if keep in ids else ids[0]
        self.highlighted = next(i for i, o in enumerate(options) if o.id == target)

    def show_matches(
        self,
        matches: list[Match],
        suggestions: list[Match],
        filter_text: str = "",
        reading: bool = False,
    ) -> None:
        """reading: the input is still arriving, so "no match" means "none so far"."""
        keep = self.selected_id
        words = filter_text.lower().split()
        options: list[Option] = [
            Option(self._match_prompt(m), id=m.id) for m in matches if self._passes(m.entry, words)
        ]
        if matches:
            self.mode = "matches"
            if not options:
                options.append(
                    Option(
                        Content.styled("No match passes the filter.", "$text-muted"), disabled=True
                    )
                )
            self._replace(options, keep)
            return
        self.mode = "no-match"
        guesses = [s for s in suggestions if self._passes(s.entry, words)]
        n = len(suggestions)
        more = (
            f"{n} full-text guess{'es' if n != 1 else ''} below" if n else "no close entry either"
        )
        head = "… No entry matched so far" if reading else "✗ No entry matched"
        if reading:
            more = "still reading the input"
        options.append(
            Option(
                Content.assemble((head, "bold $text-warning"), "\n", (f"  {more}", "$text-muted")),
                id=NO_MATCH,
            )
        )
        if guesses:
            options.append(
                Option(
                    Content.styled("Guesses (full text, unconfirmed)", "italic $text-muted"),
                    disabled=True,
                )
            )
            options += [Option(self._guess_prompt(s), id=s.id) for s in guesses]
        elif suggestions:
            options.append(
                Option(Content.styled("No guess passes the filter.", "$text-muted"), disabled=True)
            )
        self._replace(options, keep)

    def show_entries(
        self, entries: Iterable[Entry], statuses: dict[str, str], filter_text: str = ""
    ) -> None:
        keep = self.selected_id
        self.mode = "browse"
        words = filter_text.lower().split()
        options = [
            Option(self._entry_prompt(e, statuses.get(e.id, "")), id=e.id)
            for e in sorted(entries, key=lambda e: (e.area, e.id))
            if self._passes(e, words)
        ]
        if not options:
            options.append(
                Option(Content.styled("No entry passes the filter.", "$text-muted"), disabled=True)
            )
        # Browsing opens on no entry (the pane explains what to do): an entry shown first would
        # read as the diagnosis of something. A filter's first hit is what was asked for.
        self._replace(options, keep, first=bool(words))

    @staticmethod
    def _match_prompt(m: Match) -> Content:
        style = CONFIDENCE_STYLE.get(m.confidence, "")
        if m.line:
            where = (f"L{m.line_number} " if m.line_number else "") + m.line.strip()
        elif m.source == "code" and "code" in m.captures:
            where = f"CUDA code {m.captures['code']}"
        else:
            where = m.entry.title
        return Content.assemble(
            (m.id, "bold"),
            (" (local)" if m.entry.local else "", "$text-muted"),
            "\n",
            ("  " + m.confidence, style),
            (f" · {where[:200]}", "$text-muted"),
        )

    @staticmethod
    def _guess_prompt(m: Match) -> Content:
        terms = m.captures.get("terms", "")
        return Content.assemble(
            (m.id, ""),
            (" (local)" if m.entry.local else "", "$text-muted"),
            "\n",
            ("  guess", "italic $text-warning"),
            (f" · {terms} terms" if terms else "", "$text-muted"),
            (f" · {m.entry.title[:200]}", "$text-muted"),
        )

    @staticmethod
    def _entry_prompt(e: Entry, status: str) -> Content:
        style = {"fix-verified": "$text-success", "reproduced": "$text-success"}.get(
            status, "$text-muted"
        )
        return Content.assemble(
            (e.id, "bold"),
            (" (local)" if e.local else "", "$text-muted"),
            "\n",
            ("  " + (status or "-"), style),
            (f" · {e.area} · {e.title[:200]}", "$text-muted"),
        )
