"""Signatures -> hits. The one implementation of "does this text match this entry".

Lookup, lint's example checks, the entry tests, `kb verify` and the TUI all come through here.
Each signature is filed under one word of its required literal (the rarest such word across the
knowledge base); a line only reaches the regexes filed under its own words, and only after the
literal itself is found in it. Regexes compile on first use, so a cold process pays for the few
signatures a log touches, not for all of them.

Two fallbacks run only on a line no signature matched as written:
- a retyped line (lower case, say) is tried against long wordings without regard to case;
- a line cut off inside a signature's distinctive literal (a paste or an excerpt that ends
  mid-word) is a partial hit: lower confidence, still an answer.

Patterns from the user's own folders are untrusted: they run on the `regex` engine with a time
limit, so a catastrophic pattern costs a warning, never a frozen lookup.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Iterable

from kb.knowledge.regex_literal import key_words
from kb.model.entry import Entry, Signature
from kb.model.record import record

TYPE_CHECKING = False  # typing stays unimported at run time (kb lookup's cold start)
if TYPE_CHECKING:
    from typing import Any

    from kb.scan.extract import Line, Scan

_WORD = re.compile(r"\w+")
LOCAL_REGEX_TIMEOUT = 0.5  # seconds per line for a pattern from a user's folder; one overrun spent in the search itself and that pattern is skipped
LOCAL_REGEX_TRIES = 8  # stalled searches tried again at most this often (bounds a lookup's time)
CASELESS_MIN_LITERAL = 20  # a wording this long is unambiguous in any case
CUT_MIN = 10  # a line ending in this many characters of a literal was cut inside it
CUT_WORDS = 7  # a line ending in this many words of a literal was cut after them
# Lines an index reads before it gates its unfiled signatures with one Hyperscan pass
# (kb.knowledge.literal_gate): a long log or a warm engine reads many more and wins the ~7 ms
# compile back; a one-line lookup never pays it.
GATE_AFTER = 256
# A quote marker inside a line, after a word and before one: a quoted paste's wrapped lines
# joined (not "a >= b", "->", ">>" or a marker followed by a space).
_QUOTE_JOIN = re.compile(r"(?<=\S) >(?=[^\s>=])")
# Exception classes and "CUDA error:" heads say nothing about which error it is.
_GENERIC_HEAD = re.compile(
    r"^(?:\s*(?:[\w.]*(?:error|exception|warning|assert)\w*|cuda error|hip error)\s*:?)+\s*"
)


Pair = tuple[Entry, Signature]


@record(frozen=True)
class Hit:
    entry: Entry
    signature: Signature
    line_number: int
    line: str
    captures: dict[str, str]
    count: int = 1
    partial: bool = False  # cut-off line or caseless retyping: a lower-confidence hit
    source: str = "signature"  # or "code": a CUDA code the line states, its owner's hit


@record(frozen=True)
class Tables:
    """Where each signature is filed: what SignatureIndex is built from. Worked out once per
    knowledge base and kept in its cache (kb.knowledge), so a cold lookup does not redo it."""

    pairs: list[Pair]  # every (entry, signature), in the knowledge base's order
    by_word: dict[str, list[Pair]]
    by_word_ci: dict[str, list[Pair]]
    always: list[Pair]  # no literal to file them by: tried on every candidate line
    caseless: dict[str, list[Pair]]  # fallback: long case-sensitive literals, by word


def file_signatures(entries: Iterable[Entry]) -> Tables:
    """Each signature filed under the rarest word of its required literal (or of each of its
    alternatives), across the whole knowledge base."""
    pairs = [(e, s) for e in entries for s in e.signatures]
    freq: Counter[tuple[bool, str]] = Counter()
    keyed: list[tuple[Entry, Signature, list[str]]] = []
    for e, s in pairs:
        words = list(s.words) if s.words or not s.literal else key_words(s.literal)
        keyed.append((e, s, words))
        freq.update({(s.ignore_case, w) for w in words})
    t = Tables(pairs, {}, {}, [], {})
    for e, s, words in keyed:
        table = t.by_word_ci if s.ignore_case else t.by_word
        if not words:
            alt_words = (
                [list(ws) for ws in s.any_words]
                if len(s.any_words) == len(s.any_of)
                else [key_words(a) for a in s.any_of]
            )
            if not alt_words or not all(alt_words):
                t.always.append((e, s))
                continue
            # One of the alternatives is in every matching line: file under each one's word.
            for ws in alt_words:
                key = min(ws, key=lambda w: (freq[(s.ignore_case, w)], -len(w)))
                table.setdefault(key, []).append((e, s))
            continue
        key = min(words, key=lambda w: (freq[(s.ignore_case, w)], -len(w)))
        table.setdefault(key, []).append((e, s))
        if not s.ignore_case and len(s.literal) >= CASELESS_MIN_LITERAL:
            t.caseless.setdefault(key.lower(), []).append((e, s))
    return t


class SignatureIndex:
    def __init__(self, entries: Iterable[Entry], tables: Tables | None = None):
        """`tables`: file_signatures(entries) made earlier (the knowledge base's cache keeps
        them); the index only reads them, so many indexes can share one."""
        t = tables if tables is not None else file_signatures(entries)
        pairs = t.pairs
        # Rank of each (entry, signature): ties between hits are broken by it, never by hashing.
        self.order: dict[tuple[str, str], int] = {(e.id, s.id): i for i, (e, s) in enumerate(pairs)}
        self.by_word = t.by_word
        self.by_word_ci = t.by_word_ci
        self.always = t.always
        self.caseless = t.caseless
        self._pairs = pairs
        self._cuts: dict[str, list[tuple[Entry, Signature, str]]] | None = None
        self._compiled: dict[tuple[str, bool, bool], Any] = {}
        self.warnings: list[str] = []
        self._timed_out: set[tuple[str, str]] = set()
        self._lines = 0
        self._gate: Any = None  # kb.knowledge.literal_gate.LiteralGate, from GATE_AFTER lines on

    @property
    def cuts(self) -> dict[str, list[tuple[Entry, Signature, str]]]:
        """Cut-off lines: every CUT_MIN-character window of a signature's leading literal (the
        head of the message), lowercased, -> the signatures and where the window ends. Built on
        the first line that needs it: most lookups match as written and never do."""
        if self._cuts is None:
            cuts: dict[str, list[tuple[Entry, Signature, str]]] = {}
            for e, s in self._pairs:
                lit = s.head
                if len(lit) < CUT_MIN + 8:
                    continue
                for end in range(CUT_MIN, len(lit)):  # a window ending before the literal does
                    cuts.setdefault(lit[end - CUT_MIN : end], []).append((e, s, lit[:end]))
            self._cuts = cuts
        return self._cuts

    def regex(self, sig: Signature, caseless: bool = False, untrusted: bool = False):
        key = (sig.pattern, sig.ignore_case or caseless, untrusted)
        rx = self._compiled.get(key)
        if rx is None:
            if untrusted:
                import regex  # only for users' own patterns: it can stop a search after a time limit

                rx = regex.compile(sig.pattern, regex.IGNORECASE if key[1] else 0)
            else:
                rx = re.compile(sig.pattern, re.IGNORECASE if key[1] else 0)
            self._compiled[key] = rx
        return rx

    def _search(self, e: Entry, s: Signature, line: str, caseless: bool = False):
        if not e.local:
            return self.regex(s, caseless).search(line)
        if (e.id, s.id) in self._timed_out:
            return None
        rx = self.regex(s, caseless, untrusted=True)
        # The time limit is wall clock, but a busy machine can stall a thread that long without
        # the pattern being at fault: a search is tried again until the CPU time the tries used
        # themselves reaches half the limit; only that condemns the pattern.
        cpu = 0.0
        for _ in range(LOCAL_REGEX_TRIES):
            spent = time.thread_time()
            try:
                return rx.search(line, timeout=LOCAL_REGEX_TIMEOUT)
            except TimeoutError:
                cpu += time.thread_time() - spent
            if cpu >= LOCAL_REGEX_TIMEOUT / 2:
                break
        else:  # stalled every time: the machine is too busy, the pattern is not to blame
            self.warnings.append(
                f"signature '{s.id}' of local entry '{e.id}' ({e.path}) could not search a "
                f"line in {LOCAL_REGEX_TRIES} tries on a busy machine; that line was skipped"
            )
            return None
        self._timed_out.add((e.id, s.id))
        self.warnings.append(
            f"signature '{s.id}' of local entry '{e.id}' ({e.path}) took over "
            f"{LOCAL_REGEX_TIMEOUT * 1000:.0f} ms on one line and was skipped; "
            f"`kb lint` explains why"
        )
        return None

    def candidates(self, line: str) -> list[Pair]:
        # dict.fromkeys, not set: the order of the words in the line, the same in every process.
        words = dict.fromkeys(_WORD.findall(line))
        out = self._unfiled(line)
        for w in words:
            got = self.by_word.get(w)
            if got:
                out.extend(got)
        if self.by_word_ci:
            for w in dict.fromkeys(w.lower() for w in words):
                got = self.by_word_ci.get(w)
                if got:
                    out.extend(got)
        return out

    def _unfiled(self, line: str) -> list[Pair]:
        """The signatures filed under no word, less those whose literals the gate finds
        missing from the line (all of them before the gate is built, or where it cannot say)."""
        gate = self._gate
        if gate is None:
            self._lines += 1
            if self._lines < GATE_AFTER:
                return list(self.always)
            from kb.knowledge.literal_gate import LiteralGate

            gate = self._gate = LiteralGate(self.always)
        got = gate.admitted(line) if gate.usable else None
        return list(self.always) if got is None else got

    def match_line(self, line: str, line_number: int = 1, count: int = 1) -> list[Hit]:
        hits = []
        low = None
        tried: set[tuple[str, str]] = set()  # filed under several alternatives' words
        for e, s in self.candidates(line):
            if s.literal or s.any_of:
                if s.ignore_case:
                    low = low if low is not None else line.lower()
                    hay = low
                else:
                    hay = line
                if s.literal not in hay:
                    continue
                if s.any_of:
                    if (e.id, s.id) in tried or not any(a in hay for a in s.any_of):
                        continue
                    tried.add((e.id, s.id))
            m = self._search(e, s, line)
            if m:
                hits.append(_hit(e, s, line_number, line, m, count))
        if not hits:
            hits = self._fallbacks(line, line_number, count)
        return hits

    def _fallbacks(self, line: str, line_number: int, count: int) -> list[Hit]:
        if " >" in line:
            # A quoted paste whose wrapped lines were joined keeps each continuation's quote
            # marker inside the line ("... is_available() is >False. If you ..."): the line is
            # read again without them (a line that still holds none cannot come back here).
            healed = _QUOTE_JOIN.sub(" ", line)
            if healed != line:
                hits = self.match_line(healed, line_number, count)
                if hits:
                    return hits
        low = line.lower()
        hits = []
        if self.caseless and low != line:
            seen: set[tuple[str, str]] = set()
            for w in dict.fromkeys(_WORD.findall(low)):
                for e, s in self.caseless.get(w, ()):
                    if (e.id, s.id) in seen or s.literal.lower() not in low:
                        continue
                    seen.add((e.id, s.id))
                    m = self._search(e, s, line, caseless=True)
                    if m:
                        hits.append(_hit(e, s, line_number, line, m, count, partial=True))
        if hits or len(low) < CUT_MIN:
            return hits
        tail = low.rstrip()
        seen_cut: set[tuple[str, str]] = set()
        whole: bool | None = None
        for e, s, head in self.cuts.get(tail[-CUT_MIN:], ()):
            # What was kept must say more than a generic "CUDA error: " or "RuntimeError: " head.
            # What was kept must say more than a generic head ("RuntimeError: CUDA error: ").
            kept = _GENERIC_HEAD.sub("", head)
            # Cut mid-word, or after a long head: a short line that ends on a word boundary may
            # be a whole, shorter message ("IndexError: list index out of range" is not "... out
            # of range in self"); a head of CUT_WORDS words is one message's alone.
            mid_word = head[-1].isalnum() and s.head[len(head) :][:1].isalnum()
            if (
                (e.id, s.id) in seen_cut
                or len(kept) < CUT_MIN
                or len(kept.split()) < 3
                or not tail.endswith(head)
                or not (mid_word or len(kept.split()) >= CUT_WORDS)
            ):
                continue
            if whole is None:
                whole = _whole_cuda_message(tail)
            if whole:
                break  # the line ends in a whole, shorter message ("operation not permitted" is
                # code 800, not a cut-off "operation not permitted when stream is capturing")
            seen_cut.add((e.id, s.id))
            hits.append(Hit(e, s, line_number, line, {}, count, partial=True))
        return hits


def _whole_cuda_message(tail: str) -> bool:
    from kb.knowledge.wrappers import code_for_text

    found = code_for_text(tail.rsplit(": ", 1)[-1])
    return found is not None and not found[1]


def _hit(
    e: Entry, s: Signature, line_number: int, line: str, m, count: int, partial: bool = False
) -> Hit:
    caps = {k: v for k, v in m.groupdict().items() if v is not None}
    return Hit(e, s, line_number, line, caps, count, partial)


def scan_hits(index: SignatureIndex, s: Scan) -> list[Hit]:
    """Every signature hit in a scan's lines, in order."""
    hits: list[Hit] = []
    for ln in s.lines:
        hits.extend(index.match_line(ln.text, ln.number, ln.count))
    if any(h.signature.announces for h in hits):
        hits = _announced(hits, s.lines)
    return hits


def text_hits(index: SignatureIndex, text: str) -> list[Hit]:
    """Signature hits over a whole text, through the same scan and cleaning a lookup uses."""
    from kb.scan.extract import scan_text

    return scan_hits(index, scan_text(text))


# A Python exception line: what an announcing line (mp.spawn's "-- Process N terminated with
# the following error:") says is coming. The wrappers' own exceptions are not it. Compiled only
# when a log has such a line (re caches it), not on every start.
_EXCEPTION_LINE = r"^(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception|Interrupt|Exit)\b(?::|$)"
_WRAPPER_EXCEPTIONS = ("ProcessRaisedException", "ProcessExitedException", "ChildFailedError")


def _announced(hits: list[Hit], lines: list[Line]) -> list[Hit]:
    """Drop the hits of announcing signatures that the announced exception follows."""
    exception_line = re.compile(_EXCEPTION_LINE)
    after = [
        ln.number
        for ln in lines
        if exception_line.match(ln.text) and not any(w in ln.text for w in _WRAPPER_EXCEPTIONS)
    ]
    last = max(after, default=-1)
    return [h for h in hits if not (h.signature.announces and last > h.line_number)]
