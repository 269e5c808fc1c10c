"""Read a log line as a catalog template, holes captured.

Robust to what logs do to messages: the line cut before the template ends (a truncated paste,
a Jupyter header), no exception prefix, lower-cased text, and the message hard-wrapped at a fixed
width across two lines (`match_pair`). Whitespace in a template matches any run of whitespace or
none, so a wrap that dropped the space between two words still fits.

Fast because a line is compared with a handful of templates, not all of them: each template is
indexed under its rarest literal words (two from its head, so a cut line still finds it, and the
rarest overall), a line's words pick the candidates, and a candidate must show most of its head
words before its regex runs. Regexes are compiled on first use.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache

from kb.model.record import record

from .template import Hole, Template

_TOKEN = re.compile(r"[a-z][a-z0-9_]{2,}")
_PREFIX = re.compile(r"([A-Za-z_][\w.]*(?:Error|Exception|Warning|Interrupt|Failure))\s*:\s*$")
_STOP = frozenset(
    [
        "the",
        "and",
        "for",
        "not",
        "but",
        "was",
        "are",
        "with",
        "has",
        "have",
        "this",
        "that",
        "from",
        "got",
        "its",
        "can",
        "been",
        "into",
        "than",
        "then",
        "when",
        "must",
        "should",
        "use",
        "all",
        "any",
        "you",
        "your",
        "only",
        "one",
        "has",
        "had",
        "were",
        "will",
    ]
)
MAX_LINE = 4000  # longer lines are matched on their first MAX_LINE characters
MIN_CUT_CHARS = 20  # a cut line must show this much of the template's literal text
MIN_CUT_SHARE = 0.4  # ... and this share of it, or
ENOUGH_CUT_CHARS = 48  # ... this much, which says enough whatever the template's length


@record(frozen=True)
class CatalogMatch:
    """One template read in a line. `captures` are the holes' values in order ("" where a hole
    fell in the part that was cut off); `coverage` is the share of the template's literal text
    the line shows; `prefix` is the exception name printed before the message, if any."""

    template: Template
    captures: tuple[str, ...]
    start: int
    end: int
    cut: bool
    wrapped: bool
    coverage: float
    prefix: str
    score: float

    @property
    def named_captures(self) -> dict[str, str]:
        names = [p.name for p in self.template.parts if isinstance(p, Hole)]
        out: dict[str, str] = {}
        for i, (name, value) in enumerate(zip(names, self.captures)):
            if value:
                out[name or f"hole{i}"] = value
        return out


@record
class _Literal:
    find: re.Pattern[str]  # the literal part, case-insensitive, any whitespace run for a space
    prefix_rx: str  # its leading words, as many as there are, then the line's end (`prefix`)
    marks: list[tuple[int, int]]  # (group of the mark after each word, characters up to it)
    size: int  # literal characters (whitespace not counted)
    text: str  # the literal as the template has it
    after_hole: bool  # a hole precedes it (else it starts where the previous part ended)

    @property
    def prefix(self) -> re.Pattern[str]:
        # Compiled on first use: only a line cut inside the template needs it, and a lookup in
        # a new process compiles every candidate's regexes. Kept in a cache of kb's own: re's
        # holds 512 patterns, and a warm engine's catalog lines cycled through more, compiling
        # the same ones again (~60 compiles a pass over kb's captured logs).
        return _prefix_re(self.prefix_rx)


@record
class _Compiled:
    lits: list[_Literal]
    holes_after: list[bool]  # whether a hole follows each literal
    lead_holes: int  # holes at the template's start
    lead_glued: bool  # the first literal starts with no space after the leading hole
    total: int  # literal characters in the template


@lru_cache(maxsize=8192)
def _prefix_re(rx: str) -> re.Pattern[str]:
    return re.compile(rx, re.IGNORECASE)


def _pieces(text: str) -> list[str]:
    """A literal part as regex pieces, split at its whitespace (the points a cut may fall on)."""
    pieces: list[str] = []
    for chunk in re.split(r"(\s+)", text):
        if not chunk:
            continue
        pieces.append(r"\s+" if chunk.isspace() else re.escape(chunk))
    return pieces


def _literal(text: str, after_hole: bool, first: bool, last: bool) -> _Literal:
    pieces = _pieces(text)
    # a template's first word must start a word in the line, its last must end one
    head = r"(?<![A-Za-z0-9_])" if first and not after_hole and re.match(r"\w", text) else ""
    tail = r"(?![A-Za-z0-9])" if last and re.search(r"\w$", text) else ""
    find = re.compile(head + "".join(pieces) + tail, re.IGNORECASE)
    body: list[str] = []
    marks: list[tuple[int, int]] = []
    group = 0
    seen = 0
    opened = 0
    for piece in pieces:
        if piece == r"\s+":
            body.append("(?:" + piece)
            opened += 1
            continue
        body.append(piece)
        seen += len(re.sub(r"\\(.)", r"\1", piece))
        group += 1
        marks.append((group, seen))
        body.append("()")
    rx = head + "".join(body) + ")?" * opened + r"\s*$"
    return _Literal(
        find=find,
        prefix_rx=rx,
        marks=marks,
        size=len(re.sub(r"\s+", "", text)),
        text=text,
        after_hole=after_hole,
    )


def _compile(t: Template) -> _Compiled | None:
    parts = list(t.parts)
    lead = 0
    while parts and isinstance(parts[0], Hole):
        parts.pop(0)
        lead += 1
    lits: list[_Literal] = []
    holes_after: list[bool] = []
    strs = [i for i, p in enumerate(parts) if isinstance(p, str)]
    if not strs:
        return None
    for i, p in enumerate(parts):
        if isinstance(p, Hole):
            continue
        text = p if lits or lead else p.lstrip()
        if not text.strip():
            text = " "
        lits.append(
            _literal(text, after_hole=(i > 0 or lead > 0), first=not lits, last=i == len(parts) - 1)
        )
        holes_after.append(i + 1 < len(parts))
    first_text = parts[strs[0]] if isinstance(parts[strs[0]], str) else ""
    return _Compiled(
        lits=lits,
        holes_after=holes_after,
        lead_holes=lead,
        lead_glued=lead > 0 and isinstance(first_text, str) and not first_text[:1].isspace(),
        total=sum(lit.size for lit in lits),
    )


def _keyable(t: Template) -> tuple[list[str], list[str]]:
    """The template's words that a line's tokenizer yields whole (not glued to a hole), in
    order, and the first few of them (its head)."""
    words: list[str] = []
    parts = list(t.parts)
    for i, p in enumerate(parts):
        if not isinstance(p, str):
            continue
        low = p.lower()
        toks = list(_TOKEN.finditer(low))
        for m in toks:
            glued_left = m.start() == 0 and i > 0 and isinstance(parts[i - 1], Hole)
            glued_right = (
                m.end() == len(low) and i + 1 < len(parts) and isinstance(parts[i + 1], Hole)
            )
            # a token in the middle of a word (after "_" or a digit) is not whole in the line
            before = low[m.start() - 1] if m.start() else ""
            if glued_left or glued_right or before.isalnum() or before == "_":
                continue
            words.append(m.group(0))
    return words, words[:6]


class Matcher:
    """The index over a set of templates. Build once, match many lines."""

    def __init__(self, templates: Iterable[Template]) -> None:
        self.templates: list[Template] = list(templates)
        words_of: list[list[str]] = []
        df: dict[str, int] = {}
        for t in self.templates:
            words, _ = _keyable(t)
            words_of.append(words)
            for w in set(words):
                df[w] = df.get(w, 0) + 1
        self._index: dict[str, list[int]] = {}
        self._need: list[tuple[frozenset[str], int]] = []
        for i, words in enumerate(words_of):

            def rank(w: str) -> tuple[int, int, int]:
                return (w in _STOP, df.get(w, 0), -len(w))

            head = words[:6]
            keys = sorted(set(head), key=rank)[:2] + sorted(set(words), key=rank)[:1]
            for k in set(keys):
                self._index.setdefault(k, []).append(i)
            head_set = frozenset(w for w in head[:5] if w not in _STOP)
            self._need.append((head_set, max(1, min(3, len(head_set)))))
        self._compiled: dict[int, _Compiled | None] = {}

    def __len__(self) -> int:
        return len(self.templates)

    def candidates(self, text: str) -> list[int]:
        toks = set(_TOKEN.findall(text.lower()))
        seen: set[int] = set()
        out: list[int] = []
        for tok in toks:
            for i in self._index.get(tok, ()):
                if i in seen:
                    continue
                seen.add(i)
                head, need = self._need[i]
                if len(head & toks) >= need:
                    out.append(i)
        return out

    def _get(self, i: int) -> _Compiled | None:
        if i not in self._compiled:
            self._compiled[i] = _compile(self.templates[i])
        return self._compiled[i]

    def _try(self, i: int, text: str, trimmed: str) -> CatalogMatch | None:
        """Find the literals in order, each at its leftmost place after the previous one (with
        only holes between literals, leftmost is complete: if any fit exists, this finds one).
        Linear in the line, unlike one regex with several lazy holes."""
        comp = self._get(i)
        if comp is None:
            return None
        t = self.templates[i]
        first = comp.lits[0].find.search(text)
        if first is None:
            return self._try_cut(comp, t, trimmed, text[len(trimmed) :])
        spans = [(first.start(), first.end())]
        pos = first.end()
        for k in range(1, len(comp.lits)):
            lit = comp.lits[k]
            m = lit.find.search(text, pos) if lit.after_hole else lit.find.match(text, pos)
            if m is None:
                return self._try_cut(comp, t, trimmed, text[len(trimmed) :])
            spans.append((m.start(), m.end()))
            pos = m.end()
        caps, start = self._lead(comp, text, spans[0][0])
        for k in range(len(spans)):
            if comp.holes_after[k]:
                end = spans[k + 1][0] if k + 1 < len(spans) else len(text)
                caps.append(text[spans[k][1] : end].strip())
        end = len(text) if comp.holes_after[-1] else spans[-1][1]
        score = comp.total - 0.01 * sum(len(c) for c in caps)
        return CatalogMatch(
            t, tuple(caps), start, end, False, False, 1.0, _prefix(text, start), score
        )

    @staticmethod
    def _lead(comp: _Compiled, text: str, start: int) -> tuple[list[str], int]:
        """Values of the template's leading holes: the word glued to the first literal
        ("index_add" in "index_add_(): ..."), else nothing; and where the message starts."""
        caps = [""] * comp.lead_holes
        if comp.lead_holes and comp.lead_glued:
            m = re.search(r"[\w.]+$", text[:start])
            if m:
                caps[-1] = m.group(0)
                start = m.start()
        return caps, start

    def _try_cut(
        self, comp: _Compiled, t: Template, text: str, tail: str = ""
    ) -> CatalogMatch | None:
        """The line ends inside the template: the literals it shows are in order and the last
        one is a prefix of its literal (or the line ends inside a hole). `tail` is the word the
        line ended in, left out of `text` because a cut may have fallen inside it: where the
        cut is inside a literal, the literal must go on with that word's letters ("non-empty
        TensorList" is not "non-empty list of tensors" cut short)."""
        pos = 0
        got = 0
        start = -1
        caps: list[str] = []
        for k, lit in enumerate(comp.lits):
            m = (
                lit.find.search(text, pos)
                if (lit.after_hole or k == 0)
                else lit.find.match(text, pos)
            )
            if m is not None:
                if start < 0:
                    start = m.start()
                if k and comp.holes_after[k - 1]:
                    caps.append(text[pos : m.start()].strip())
                got += lit.size
                pos = m.end()
                continue
            # the line ends in this literal, or in the hole before it
            pm = (
                lit.prefix.search(text, pos)
                if (lit.after_hole or k == 0)
                else lit.prefix.match(text, pos)
            )
            part = 0
            if pm is not None:
                for g, n in lit.marks:
                    if pm.group(g) is not None:
                        part = n
            if part and (pm is not None):
                if tail and not _goes_on(lit.text, part, tail):
                    return None
                if start < 0:
                    start = pm.start()
                if k and comp.holes_after[k - 1]:
                    caps.append(text[pos : pm.start()].strip())
                got += part
            elif k and comp.holes_after[k - 1]:
                caps.append(text[pos:].strip())
            else:
                return None
            break
        else:
            return None  # every literal was found: that is a full fit, not a cut
        if (
            got < MIN_CUT_CHARS
            or start < 0
            or (got < MIN_CUT_SHARE * comp.total and got < ENOUGH_CUT_CHARS)
        ):
            return None
        nholes = sum(comp.holes_after)
        lead, start = self._lead(comp, text, start)
        caps = lead + caps
        caps += [""] * (comp.lead_holes + nholes - len(caps))
        share = got / comp.total if comp.total else 0.0
        return CatalogMatch(
            t,
            tuple(caps),
            start,
            len(text.rstrip()),
            True,
            False,
            share,
            _prefix(text, start),
            0.8 * got,
        )

    def match(self, line: str, limit: int = 5) -> list[CatalogMatch]:
        """The templates the line fits, best first: full fits before cut ones, then by how much
        literal text they account for."""
        text = line.rstrip("\r\n")[:MAX_LINE]
        trimmed = (
            re.sub(r"\w+$", "", text) if text and (text[-1].isalnum() or text[-1] == "_") else text
        )
        found: list[CatalogMatch] = []
        for i in self.candidates(text):
            m = self._try(i, text, trimmed)
            if m is not None:
                found.append(m)
        found.sort(key=lambda m: (not m.cut, m.score, -len(m.template.text)), reverse=True)
        return found[:limit]

    def match_pair(self, first: str, second: str, limit: int = 5) -> list[CatalogMatch]:
        """Templates that a message hard-wrapped across two lines fits, reading the lines joined
        as they were before the wrap. Only fits that need both lines are returned."""
        a = first.rstrip("\r\n")
        b = second.rstrip("\r\n")
        # a fixed-width wrap (fold -w) breaks anywhere, even inside a word: the lines joined as
        # they are; a word wrap (textwrap, fold -s) drops the space it broke at: joined by one
        # a template either line fits whole on its own is that line's, not a wrap's
        alone = {id(m.template) for line in (a, b) for m in self.match(line, limit=50) if not m.cut}
        best: dict[int, CatalogMatch] = {}
        for joined, cut_at in ((a + b, len(a)), (a.rstrip() + " " + b.lstrip(), len(a.rstrip()))):
            for m in self.match(joined, limit=limit * 3):
                if not m.start < cut_at < m.end:
                    continue
                key = id(m.template)
                if key in alone:
                    continue
                old = best.get(key)
                if old is None or (not m.cut, m.score) > (not old.cut, old.score):
                    best[key] = CatalogMatch(
                        m.template,
                        m.captures,
                        m.start,
                        m.end,
                        m.cut,
                        True,
                        m.coverage,
                        m.prefix,
                        m.score,
                    )
        out = sorted(best.values(), key=lambda m: (not m.cut, m.score), reverse=True)
        return out[:limit]

    def match_lines(self, lines: Sequence[str], limit: int = 3) -> list[tuple[int, CatalogMatch]]:
        """Each line's best fits, and a pair's where a line and the next fit only together."""
        out: list[tuple[int, CatalogMatch]] = []
        for n, line in enumerate(lines):
            got = self.match(line, limit)
            if got and not got[0].cut:
                out.extend((n, m) for m in got)
                continue
            if n + 1 < len(lines):
                pair = self.match_pair(line, lines[n + 1], limit)
                if pair:
                    out.extend((n, m) for m in pair)
                    continue
            out.extend((n, m) for m in got)
        return out


def _goes_on(literal: str, shown: int, tail: str) -> bool:
    """Whether `literal`, after its first `shown` non-space characters, goes on with `tail`
    (the cut word), compared without case or whitespace."""
    seen = 0
    i = 0
    while i < len(literal) and seen < shown:
        if not literal[i].isspace():
            seen += 1
        i += 1
    rest = re.sub(r"\s+", "", literal[i:]).lower()
    return rest.startswith(re.sub(r"\s+", "", tail).lower())


def _prefix(text: str, start: int) -> str:
    m = _PREFIX.search(text[max(0, start - 120) : start])
    return m.group(1) if m else ""


_DEFAULT: Matcher | None = None


def default_matcher() -> Matcher:
    """A matcher over every template in kb/catalog/data, built once per process."""
    global _DEFAULT
    if _DEFAULT is None:
        from .store import load

        _DEFAULT = Matcher(load().templates)
    return _DEFAULT
