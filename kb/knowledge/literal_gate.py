"""Which of the signatures with no word to be filed under can match a line, found in one pass.

Most signatures are filed under a whole word of their literal, and a line reaches only those
filed under its own words. About 180 cannot be (their literal starts or ends inside a word:
"egmentation fault", "CUBLAS_STATUS_", "Unsupported: "; or their alternatives hold no whole
word: "exit ", "段错误"), so every candidate line used to test each of them with `in`: ~45 us a
line, a fifth of a warm engine's time on a real log (scripts/bench_engine.py). A Hyperscan
database of their literals answers the same question in about one microsecond.

An index builds it (~7 ms, plus Hyperscan's import) only once it has read enough lines for that
to pay (kb.knowledge.signatures.GATE_AFTER): a one-line lookup never does. Without Hyperscan (not installed, disabled with
KB_NO_HYPERSCAN=1, a CPU it refuses) or when a scan fails, the caller tests the literals as
before; the answer is the same either way (tests/test_literal_gate.py).
"""

from __future__ import annotations

import os
import re

from kb.model.entry import Entry, Signature

TYPE_CHECKING = False  # typing stays unimported at run time (kb lookup's cold start)
if TYPE_CHECKING:
    from typing import Any

Pair = tuple[Entry, Signature]


class LiteralGate:
    """The case-sensitive literals of `pairs` in one Hyperscan database. `admitted(line)` gives
    the pairs whose literal (and one of whose alternatives) the line holds, in their order, or
    None where the database cannot answer (the caller then tests each pair itself)."""

    def __init__(self, pairs: list[Pair]):
        self.pairs = pairs
        needles: dict[str, int] = {}
        # For each pair: the needle of its literal (or -1) and those of its alternatives.
        self._needs: list[tuple[int, tuple[int, ...]]] = []
        self._open: list[int] = []  # pairs no needle can rule out (caseless ones: see below)
        self._by_needle: dict[int, list[int]] = {}
        for k, (_e, s) in enumerate(pairs):
            lit = needles.setdefault(s.literal, len(needles)) if s.literal else -1
            alts = tuple(needles.setdefault(a, len(needles)) for a in s.any_of)
            self._needs.append((lit, alts))
            if s.ignore_case or (lit == -1 and not alts):
                # A caseless literal is tested against the lowered line by the caller: a
                # case-sensitive needle cannot say it is missing.
                self._open.append(k)
                continue
            for n in {lit, *alts} - {-1}:
                self._by_needle.setdefault(n, []).append(k)
        self._needles = list(needles)
        self._open_set = frozenset(self._open)
        self._db: Any = self._compile()

    @property
    def usable(self) -> bool:
        return self._db is not None

    def admitted(self, line: str) -> list[Pair] | None:
        db = self._db
        if db is None:
            return None
        found: set[int] = set()
        try:
            db.scan(
                line.encode("utf-8", "surrogatepass"),
                match_event_handler=lambda i, _a, _b, _f, _c: found.add(i),
            )
        except Exception:  # another thread's scan holds the scratch: test the pairs instead
            return None
        maybe = set(self._open)
        for n in found:
            maybe.update(self._by_needle.get(n, ()))
        out = []
        for k in sorted(maybe):
            lit, alts = self._needs[k]
            if k in self._open_set or (
                (lit == -1 or lit in found) and (not alts or not found.isdisjoint(alts))
            ):
                out.append(self.pairs[k])
        return out

    def _compile(self) -> Any:
        if os.environ.get("KB_NO_HYPERSCAN") or not self._needles:
            return None
        try:
            import hyperscan

            db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
            exprs = [re.escape(n).encode("utf-8", "surrogatepass") for n in self._needles]
            db.compile(
                expressions=exprs,
                ids=list(range(len(exprs))),
                elements=len(exprs),
                flags=[hyperscan.HS_FLAG_SINGLEMATCH] * len(exprs),
            )
        except Exception:  # not installed, a CPU without SSSE3, a needle it refuses
            return None
        return db
