"""ResultsList: the entries that matched the pasted text, or every entry when nothing is pasted.

Each row is the entry id whole on its own line (ids are what people search and quote), then a
muted line: how sure, where in the log, or the entry's title. When nothing matched, the first row
says so and is selected; full-text suggestions follow under their own heading, marked "guess".
"""

from __future__ import annotations

from collections.abc import Iterable

from textual.content import Content
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from kb import Entry, Match

from .keys import widget_bindings

CONFIDENCE_STYLE = {"high": "$text-success", "medium": "$text-warning", "low": "$text-muted"}
NO_MATCH = "kb:no-match"  # the row that stands for "nothing matched" (entry ids have no colon)


def entry_matches_filter(entry: Entry, words: list[str]) -> bool:
    hay = " ".join((entry.id, entry.title, entry.area, " ".join(entry.tags))).lower()
    return all(w in hay for w in words)


class ResultsList(OptionList):
    """Option ids are entry ids, or NO_MATCH; headings are disabled rows."""

    BINDINGS = widget_bindings()

    async def action_focus_filter(self) -> None:
        await self.app.run_action("focus_filter")

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.mode = "browse"  # browse | matches | no-match

    @property
    def selected_id(self) -> str | None:
        if self.highlighted is None:
            return None
        opt = self.get_option_at_index(self.highlighted)
        return None if opt.disabled else opt.id

    def _replace(self, options: list[Option], keep: str | None) -> None:
        self.set_options(options)
        ids = [o.id for o in options if not o.disabled]
        if not ids:
            self.highlighted = None
            return
        target = keep if keep in ids else ids[0]
        self.highlighted = next(i for i, o in enumerate(options) if o.id == target)

    def show_matches(
        self, matches: list[Match], suggestions: list[Match], filter_text: str = ""
    ) -> None:
        keep = self.selected_id
        words = filter_text.lower().split()
        options: list[Option] = [
            Option(self._match_prompt(m), id=m.id)
            for m in matches
            if not words or entry_matches_filter(m.entry, words)
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
        guesses = [s for s in suggestions if not words or entry_matches_filter(s.entry, words)]
        n = len(suggestions)
        more = (
            f"{n} full-text guess{'es' if n != 1 else ''} below" if n else "no close entry either"
        )
        options.append(
            Option(
                Content.assemble(
                    ("✗ No entry matched", "bold $text-warning"), "\n", (f"  {more}", "$text-muted")
                ),
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
            if not words or entry_matches_filter(e, words)
        ]
        if not options:
            options.append(
                Option(Content.styled("No entry passes the filter.", "$text-muted"), disabled=True)
            )
        self._replace(options, keep)

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
