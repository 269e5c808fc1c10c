"""The order of a lookup's matches: a rule stated in words, with no weights to tune.

Hits are grouped into one match per entry. Matches are then ordered by these keys, each deciding
only between matches the ones before it leave tied:

0. The root's answer: when the log shows a failure of its own (the root failure is an
   initiating one, kb.diagnosis.root), a match that only stands on lines the root reading calls
   consequences, teardowns or launchers' reports of it (a peer's timeout, the shell's `Killed`
   after an exception, torchrun's report of the child's exit), or whose entry or signature is a
   consequence, comes after every match that is neither, whatever its level.
1. Level: high, then medium, then low. A hit has its signature's `level`; a line that only
   matched cut off or retyped in another case (a partial hit) is one level lower; a CUDA code
   stated in a wrapper counts as high (medium when its text was cut), a bare number as medium or
   low. A match has the strongest level of its hits. Two caps follow from the entries:
   - a match whose signature is `explained_by` an entry that matched too is at best at that
     entry's level (the explanation is the answer);
   - a `generic: true` entry's match on a line a specific entry matched is at best at that
     entry's level (the specific class is the answer).
2. Specific before generic: a generic entry's match comes after every specific entry's match at
   the same level.
3. Roles: a match that is explained (as above) or a consequence (its signature's or entry's
   `consequence`: a timeout waiting for another rank, the launcher's SIGTERM...) comes after the
   matches that are neither, at the same level.
4. Root before cascade: the earlier line first. A match's line is the earliest line of its
   strongest level (the line it shows).
5. Ties: the knowledge base's own order: entries as loaded (bundled, then the user's folders;
   by area and id), signatures in their entry's order; a code sighting after every signature on
   its line, a bare number last.

So an author reasons in levels: a wording another class shares is medium, a weak hint low; a
wording caused by another class's error says `explained_by`. Two entries that match one example
at the same level leave the answer to the entries' order: `kb lint` reports it (KB020).

Match.score is derived from the order (for JSON readers: higher is better, one scale per
lookup); nothing is ordered by it. docs/ordering.md says the same for entry authors.
"""

from __future__ import annotations

from collections.abc import Iterable

from kb.knowledge.signatures import Hit
from kb.model.entry import HitRef, Match
from kb.model.record import replace

LEVELS = ("high", "medium", "low")  # strongest first
_POINTS = {0: 10.0, 1: 6.0, 2: 3.0}  # Match.score: the level's points, less the place in the order
_CODE = 1 << 30  # a code sighting: after every signature of the knowledge base on its line
_NUMBER = 1 << 31  # a bare number: last


def level_index(level: str) -> int:
    return LEVELS.index(level) if level in LEVELS else len(LEVELS) - 1


def hit_level(h: Hit) -> int:
    """0 high, 1 medium, 2 low: the signature's level, one lower for a partial hit."""
    lv = level_index(h.signature.level)
    return min(lv + 1, len(LEVELS) - 1) if h.partial else lv


# after the root, level, generic, role, line, the knowledge base's order
Key = tuple[int, int, bool, int, int, int]


def rank(
    hits: Iterable[Hit],
    order: dict[tuple[str, str], int],
    extra: Iterable[Match] = (),
    after_root: frozenset[int] | None = None,
) -> list[Match]:
    """One match per entry of the hits, with `extra` matches made elsewhere (bare numbers), in
    the order this module states. `order`: the knowledge base's (entry, signature) order.
    `after_root`: when the log shows an initiating failure, the line numbers of the failures
    that followed from it (key 0); None when it shows none."""
    return [m for m, _ in ranked(hits, order, extra, after_root)]


def ranked(
    hits: Iterable[Hit],
    order: dict[tuple[str, str], int],
    extra: Iterable[Match] = (),
    after_root: frozenset[int] | None = None,
) -> list[tuple[Match, Key]]:
    """rank(), each match with the key it was ordered by (lint reads the keys: KB020)."""
    hits = sorted(
        hits, key=lambda h: (h.line_number, order.get((h.entry.id, h.signature.id), _CODE))
    )
    by_entry: dict[str, list[Hit]] = {}
    for h in hits:
        by_entry.setdefault(h.entry.id, []).append(h)
    cands: list[_Candidate] = []
    for hs in by_entry.values():
        lv = min(hit_level(h) for h in hs)
        # The evidence shown: the earliest line of the strongest level (then its entry's first
        # signature on that line).
        shown = next(h for h in hs if hit_level(h) == lv)
        tiebreak = order.get((shown.entry.id, shown.signature.id), _CODE)
        cands.append(_Candidate(shown, hs, lv, tiebreak))
    for i, m in enumerate(extra):
        cands.append(_Candidate(None, [], level_index(m.confidence), _NUMBER + i, m))
    return _ordered(cands, after_root)


class _Candidate:
    """A match before its place is known: made into a Match once, with its score."""

    signature: str | None

    __slots__ = (
        "entry",
        "hits",
        "level",
        "line_number",
        "made",
        "shown",
        "signature",
        "source",
        "tiebreak",
    )

    def __init__(
        self,
        shown: Hit | None,
        hits: list[Hit],
        level: int,
        tiebreak: int,
        made: Match | None = None,
    ):
        self.shown, self.hits, self.level, self.made = shown, hits, level, made
        self.tiebreak = tiebreak
        if shown is not None:
            self.entry, self.source = shown.entry, shown.source
            self.signature, self.line_number = shown.signature.id, shown.line_number
        else:
            assert made is not None
            self.entry, self.source = made.entry, made.source
            self.signature, self.line_number = made.signature, made.line_number

    def lines(self) -> set[int]:
        return {h.line_number for h in self.hits} | {self.line_number}

    def match(self, score: float) -> Match:
        if self.made is not None:
            return replace(self.made, score=score)
        shown = self.shown
        assert shown is not None
        return Match(
            entry=shown.entry,
            score=score,
            confidence=LEVELS[self.level],
            source=shown.source,
            signature=shown.signature.id,
            line=shown.line,
            line_number=shown.line_number,
            captures=_captures(shown, self.hits),
            hits=tuple(HitRef(h.signature.id, h.line_number, h.line) for h in self.hits),
        )


def _ordered(cands: list[_Candidate], after_root: frozenset[int] | None) -> list[tuple[Match, Key]]:
    level = {c.entry.id: c.level for c in cands}
    role: dict[str, int] = {}
    consequent: set[str] = set()
    for c in cands:
        # A catalog hit through an entry's own signature (kb.diagnosis.catalog_match) keeps its
        # roles; the catalog's family mappings name no signature of the entry (None here).
        sig = c.entry.signature(c.signature or "") if c.source in ("signature", "catalog") else None
        causes = [
            level[i] for i in (sig.explained_by if sig else ()) if i in level and i != c.entry.id
        ]
        if causes:
            level[c.entry.id] = max(c.level, min(causes))
        consequence = (sig.consequence if sig else "") or c.entry.consequence
        role[c.entry.id] = 1 if causes or consequence else 0
        if consequence:
            consequent.add(c.entry.id)
    # The strongest specific match on each line, for the generic matches on it.
    specific: dict[int, int] = {}
    for c in cands:
        if not c.entry.generic:
            for ln in c.lines():
                specific[ln] = min(specific.get(ln, len(LEVELS)), level[c.entry.id])
    for c in cands:
        if c.entry.generic and c.line_number in specific:
            level[c.entry.id] = max(level[c.entry.id], specific[c.line_number])

    def follows(c: _Candidate) -> int:
        if after_root is None:
            return 0
        lines = c.lines() - {0}
        return 1 if c.entry.id in consequent or (lines and lines <= after_root) else 0

    keyed = [
        (
            c,
            (
                follows(c),
                level[c.entry.id],
                c.entry.generic,
                role[c.entry.id],
                c.line_number,
                c.tiebreak,
            ),
        )
        for c in cands
    ]
    keyed.sort(key=lambda ck: ck[1])
    return [(c.match(round(_POINTS[key[1]] - i / 100, 2)), key) for i, (c, key) in enumerate(keyed)]


def _captures(shown: Hit, hs: list[Hit]) -> dict[str, str]:
    """The shown line's captures, then what the entry's other lines add (the reasons SDPA or
    xformers print on warning lines above the error, a rank, a return code)."""
    caps = dict(shown.captures)
    for h in hs:
        for k, v in h.captures.items():
            caps.setdefault(k, v)
    return caps
