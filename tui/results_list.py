"""ResultsList: the entries that matched the pasted text, or every entry when nothing is pasted."""

from __future__ import annotations

from typing import Iterable

from textual.content import Content
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from kb.model import Entry, Match

CONFIDENCE_STYLE = {"high": "$text-success", "medium": "$text-warning", "low": "$text-muted"}


def entry_matches_filter(entry: Entry, words: list[str]) -> bool:
    hay = " ".join((entry.id, entry.title, entry.area, " ".join(entry.tags))).lower()
    return all(w in hay for w in words)


class ResultsList(OptionList):
    """Option ids are entry ids; anything else (a heading, "nothing matched") is disabled."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.mode = "browse"  # browse | matches

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

    def show_matches(self, matches: list[Match], suggestions: list[Match], filter_text: str = "") -> None:
        keep = self.selected_id
        self.mode = "matches"
        words = filter_text.lower().split()
        options: list[Option] = []
        for m in matches:
            if words and not entry_matches_filter(m.entry, words):
                continue
            options.append(Option(self._match_prompt(m), id=m.id))
        if not options:
            why = "No entry matched this text." if not matches else "No match passes the filter."
            options.append(Option(Content.styled(why, "$text-muted"), disabled=True))
            for s in suggestions:
                if not words or entry_matches_filter(s.entry, words):
                    options.append(Option(self._match_prompt(s, suggestion=True), id=s.id))
        self._replace(options, keep)

    def show_entries(self, entries: Iterable[Entry], statuses: dict[str, str], filter_text: str = "") -> None:
        keep = self.selected_id
        self.mode = "browse"
        words = filter_text.lower().split()
        options = [Option(self._entry_prompt(e, statuses.get(e.id, "")), id=e.id)
                   for e in sorted(entries, key=lambda e: (e.area, e.id))
                   if not words or entry_matches_filter(e, words)]
        if not options:
            options.append(Option(Content.styled("No entry passes the filter.", "$text-muted"), disabled=True))
        self._replace(options, keep)

    @staticmethod
    def _match_prompt(m: Match, suggestion: bool = False) -> Content:
        conf = "maybe" if suggestion else m.confidence
        style = "$text-muted" if suggestion else CONFIDENCE_STYLE.get(m.confidence, "")
        where = m.line.strip() if m.line else (f"code {m.captures['code']}" if m.source == "code" and "code" in m.captures
                                               else m.entry.title)
        loc = f"L{m.line_number} " if m.line_number and m.line else ""
        return Content.assemble(
            (f"{conf:<6} ", f"bold {style}"), (m.id, "bold"), ("  (local)" if m.entry.local else "", "$text-muted"),
            "\n", (f"  {loc}{where[:160]}", "$text-muted"))

    @staticmethod
    def _entry_prompt(e: Entry, status: str) -> Content:
        style = {"fix-verified": "$text-success", "reproduced": "$text-success"}.get(status, "$text-muted")
        return Content.assemble(
            (e.id, "bold"), ("  " + e.area, "$text-muted"), ("  (local)" if e.local else "", "$text-muted"),
            "\n", ("  " + (status or "-"), style), ("  " + e.title[:160], "$text-muted"))
