"""Signatures -> hits. The one implementation of "does this text match this entry".

Lookup, lint's example checks, the entry tests, `kb verify` and the TUI all come through here.
Each signature is filed under one word of its required literal (the rarest such word across the
knowledge base); a line only reaches the regexes filed under its own words, and only after the
literal itself is found in it. Regexes compile on first use, so a cold process pays for the few
signatures a log touches, not for all of them.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Iterable

from .model import Entry, Signature
from .regex_literal import key_words

_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Hit:
    entry: Entry
    signature: Signature
    line_number: int
    line: str
    captures: dict[str, str]
    count: int = 1


class SignatureIndex:
    def __init__(self, entries: Iterable[Entry]):
        pairs = [(e, s) for e in entries for s in e.signatures]
        freq: Counter[tuple[bool, str]] = Counter()
        keyed: list[tuple[Entry, Signature, list[str]]] = []
        for e, s in pairs:
            words = key_words(s.literal)
            keyed.append((e, s, words))
            freq.update({(s.ignore_case, w) for w in words})
        self.by_word: dict[str, list[tuple[Entry, Signature]]] = {}
        self.by_word_ci: dict[str, list[tuple[Entry, Signature]]] = {}
        self.always: list[tuple[Entry, Signature]] = []
        for e, s, words in keyed:
            if not words:
                self.always.append((e, s))
                continue
            key = min(words, key=lambda w: (freq[(s.ignore_case, w)], -len(w)))
            (self.by_word_ci if s.ignore_case else self.by_word).setdefault(key, []).append((e, s))
        self._compiled: dict[tuple[str, bool], re.Pattern] = {}

    def regex(self, sig: Signature) -> re.Pattern:
        key = (sig.pattern, sig.ignore_case)
        rx = self._compiled.get(key)
        if rx is None:
            rx = re.compile(sig.pattern, re.IGNORECASE if sig.ignore_case else 0)
            self._compiled[key] = rx
        return rx

    def candidates(self, line: str) -> list[tuple[Entry, Signature]]:
        words = set(_WORD.findall(line))
        out = list(self.always)
        for w in words:
            got = self.by_word.get(w)
            if got:
                out.extend(got)
        if self.by_word_ci:
            for w in {w.lower() for w in words}:
                got = self.by_word_ci.get(w)
                if got:
                    out.extend(got)
        return out

    def match_line(self, line: str, line_number: int = 1, count: int = 1) -> list[Hit]:
        hits = []
        low = None
        for e, s in self.candidates(line):
            if s.literal:
                if s.ignore_case:
                    low = low if low is not None else line.lower()
                    if s.literal not in low:
                        continue
                elif s.literal not in line:
                    continue
            m = self.regex(s).search(line)
            if m:
                caps = {k: v for k, v in m.groupdict().items() if v is not None}
                hits.append(Hit(e, s, line_number, line, caps, count))
        return hits


def text_hits(index: SignatureIndex, text: str) -> list[Hit]:
    """Signature hits over a whole text, through the same scan and cleaning a lookup uses."""
    from .extract import scan_text

    out: list[Hit] = []
    for ln in scan_text(text).lines:
        out.extend(index.match_line(ln.text, ln.number, ln.count))
    return out
