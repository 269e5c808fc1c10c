"""The trigger set: what a log line must hold for the scan to look at it.

A log is searched for these in one pass over its bytes (Hyperscan; a pure-Python search without
it), so a line that holds none of them costs no Python at all. The set has two parts:

- CORE, a small generic list kept here: the words of any failure, known to the knowledge base or
  not (Traceback, Error, Exception, FAILED, Killed, signal names...). A lookup that names no entry
  still shows these lines as its root failure, and the job view reads them.
- the literals of the knowledge base: every signature's required literal (or each of its
  alternatives' literals), every wrapper frame's and job-log wording's, worked out from the
  entries and data files when they are loaded (kb.knowledge.triggers) and cached with them. A
  new entry, bundled or in a user's folder, is then seen anywhere in any log with no edit here.

A literal that holds a CORE word adds nothing (every line holding it holds the word); one with
fewer than MIN_ALNUM bytes of letters and digits (": at ", "http") is too common to search for,
and its signature relies on CORE (lint's KB009 says when an example's line is then invisible).
Everything is caseless.

The middle of a long log is skimmed for error-looking lines (ERRORISH) and for the literals a
line with no error word can hold (Triggers' `skim`: chosen by kb.knowledge.triggers, since each
literal costs Hyperscan speed over the whole middle).
"""

from __future__ import annotations

import os
import re
import zlib
from collections.abc import Iterable

# The generic core: lowercase, searched caseless.
CORE = (
    "error",
    "exception",
    "traceback",
    "fail",  # fail, failed, FAILED, failure
    "fatal",
    "assert",
    "abort",
    "fault",  # Segmentation fault, page fault
    "panic",
    "killed",
    "oom-kill",
    "signal",
    "sigsegv",
    "sigabrt",
    "sigbus",
    "sigfpe",
    "sigill",
    "sigkill",
    "sigterm",
    "sigint",
    "sighup",
    "core dumped",
    "terminate",
    "timeout",
    "timed out",
    "out of memory",
    "interrupt",  # KeyboardInterrupt
    "systemexit",
    "exit code",
    "exitcode",
    "exit status",
    "exited with",
    "nccl",  # NCCL's WARN / INFO lines and ProcessGroupNCCL's watchdog: the job view reads them
)
MIN_ALNUM = 6  # UTF-8 bytes of a literal's letters and digits (a CJK character counts 3)

# What an error line looks like, for the lines of a long log's middle (bytes for the bulk scan of
# skipped regions, text for lines leaving the tail): an error word before a colon, bracket, space
# or the end of the line (a shell's bare "Killed", "Bus error"), NCCL's WARN lines and launchers'
# signal reports, which hold no error word.
_ERROR_WORD_LIST = (
    b"Error",
    b"Exception",
    b"error",
    b"ERROR",
    b"FAILED",
    b"Fatal",
    b"fault",
    b"Killed",
    b"terminate called",
    b"Assertion",
)
_ERROR_WORDS = rb"(?:" + b"|".join(_ERROR_WORD_LIST) + rb")"
_ERROR_EXTRA = rb"|NCCL WARN|Signal \d+ \(SIG"
_ERROR_AFTER = frozenset(b":] \r\n")  # what follows an error word in ERRORISH
# A failure of its own, among error-looking lines (kb.scan.extract keeps the earliest of them past
# its window's cap): an error or exception name with its message ("CUDA error: an illegal memory
# access", "RuntimeError: ..."), a traceback's start, a C++ terminate, an assertion, a crash. A
# warning ("NCCL WARN ... with error 12") or another rank's wait ("Watchdog caught collective
# operation timeout") is not one.
_FAILURE = (
    rb"(?:Error|Exception|error|ERROR)(?::|$)|Traceback \(most recent call last\)|"
    rb"terminate called|[Aa]ssertion|Segmentation fault|Fatal Python error|core dumped"
)
_SOURCES: dict[str, tuple[str | bytes, int]] = {
    "FAILURE": (_FAILURE, re.M),
    "FAILURE_TEXT": (_FAILURE.decode(), 0),
    "ERRORISH": (_ERROR_WORDS + rb"[:\] \r\n]" + _ERROR_EXTRA, 0),
    "ERRORISH_TEXT": ((_ERROR_WORDS + rb"(?:[:\] ]|$)" + _ERROR_EXTRA).decode(), 0),
    "_CORE_RX": ("|".join(re.escape(w) for w in sorted(CORE, key=len, reverse=True)), 0),
    "_WORD": (r"\w+", 0),
    "_NOT_ALNUM": (r"[\W_]+", 0),
    "_SIGNAL": (rb"Signal \d+ \(SIG", 0),
}
_CORE_B = tuple(w.encode() for w in CORE)


def __getattr__(name: str) -> re.Pattern:
    """ERRORISH, ERRORISH_TEXT and the rest, compiled on first use: a one-line lookup needs none
    of them, and compiling them all cost every cold start about a millisecond."""
    src = _SOURCES.get(name)
    if src is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    pattern, flags = src
    rx: re.Pattern = re.compile(pattern, flags)
    globals()[name] = rx
    return rx


def _rx(name: str) -> re.Pattern:
    got = globals().get(name)
    return got if got is not None else __getattr__(name)


# Bytes that end a word, for the pure-Python search: ASCII punctuation and spaces. Other bytes
# (letters, digits, _, and every byte of a non-ASCII character) stay in the word.
_SPLIT = bytes(c if c >= 128 or chr(c).isalnum() or c == 95 else 32 for c in range(256))


class Triggers:
    """One knowledge base's trigger set (CORE and its literals), with the Hyperscan databases
    built from it. Pickled with the knowledge base (kb.knowledge.base), databases included, so a
    cold lookup neither works the set out nor compiles anything."""

    __slots__ = (
        "_live",
        "anchors",
        "errorish",
        "errorish_anchors",
        "errorish_loose",
        "hs",
        "key",
        "literals",
        "loose",
    )

    def __init__(self, literals: Iterable[str] = (), skim: Iterable[str] | None = None):
        """`skim`: the literals the skim of a long log's middle looks for besides ERRORISH (by
        default all of `literals`): each costs Hyperscan speed over the whole middle, so the
        knowledge base passes only those a line without an error word can hold
        (kb.knowledge.triggers.build)."""
        literals = list(literals)
        keep = _reduce(literals)
        self.literals: tuple[bytes, ...] = tuple(lit.lower().encode() for lit in keep)
        # Literals no error word already finds in the skimmed middle of a long log. From all the
        # literals, not only those the trigger search needs: one holding a CORE word ("Watchdog
        # caught collective operation timeout") is found by that word in the read parts of a
        # log, but no error word finds it in the skimmed middle (see _skim_literals).
        skim = [
            lit
            for lit in _skim_literals(literals if skim is None else skim)
            if not _rx("ERRORISH_TEXT").search(lit)
        ]
        self.errorish: tuple[bytes, ...] = tuple(lit.lower().encode() for lit in skim)
        # The pure-Python search finds a literal by one whole word of it first (a set look-up
        # over the body's words), and only then looks for the literal itself; a literal with no
        # whole ASCII word is searched for as it is.
        self.anchors, self.loose = _anchored(keep)
        self.errorish_anchors, self.errorish_loose = _anchored(skim)
        # Names the set in this process and in others (the same literals, the same key).
        crc = zlib.crc32(b"\0".join(_CORE_B + self.literals + (b"\1",) + self.errorish))
        self.key = f"{crc:08x}-{len(self.literals)}"
        self.hs: dict[str, bytes] = {}  # kind -> a serialised Hyperscan database (hyperscan.dumpb)
        self._live: dict[str, object] = {}

    def __getstate__(self) -> dict:
        return {n: getattr(self, n) for n in self.__slots__ if n != "_live"}

    def __setstate__(self, state: dict) -> None:
        for n, v in state.items():
            setattr(self, n, v)
        self._live = {}

    def __repr__(self) -> str:
        return f"Triggers({len(CORE)} core words, {len(self.literals)} literals)"

    # ------------------------------------------------------------ one line
    def has(self, line: str) -> bool:
        """The line holds a trigger: the scan of a log would look at it."""
        low = line.lower().encode("utf-8", "replace")
        if any(w in low for w in _CORE_B):
            return True
        return bool(self.literals) and bool(self._literal_offsets(low, 0, len(low), first=True))

    def errorish_text(self, text: str) -> bool:
        """An error-looking line (for lines leaving the tail of a long log for its middle)."""
        if _rx("ERRORISH_TEXT").search(text):
            return True
        if not self.errorish:
            return False
        low = text.lower().encode("utf-8", "replace")
        return any(b in low for b in self.errorish)

    # ------------------------------------------------------------ a body of many lines
    def offsets(self, body: bytes, hyperscan: bool) -> list[int]:
        """Offsets in `body` where a trigger starts or ends (an offset inside the line holding
        it), sorted."""
        db = self.database("triggers") if hyperscan else None
        if db is not None:
            offs: list[int] = []
            add = offs.append
            db.scan(body, match_event_handler=lambda _id, _frm, to, _fl, _ctx: add(to - 1))
            offs.sort()
            return offs
        low = body.lower()
        offs = []
        for trig in _CORE_B:
            pos = low.find(trig)
            while pos != -1:
                offs.append(pos)
                pos = low.find(trig, pos + len(trig))
        if self.literals:
            offs += self._literal_offsets(low, 0, len(low))
        offs.sort()
        return offs

    def errorish_offsets(self, body: bytes, start: int, end: int, hyperscan: bool) -> list[int]:
        """Offsets inside each error-looking line of body[start:end] (ERRORISH, or a literal of
        the set), sorted; a line may come more than once."""
        db = self.database("errorish") if hyperscan else None
        if db is not None:
            return _hyperscan_offsets(db, body, start, end)
        offs = _errorish_found(body, start, end)
        if self.errorish:
            low = body[start:end].lower()
            offs += [start + o for o in self._literal_offsets(low, 0, len(low), errorish=True)]
            offs.sort()
        return offs

    def failure_offsets(self, body: bytes, start: int, end: int, hyperscan: bool) -> list[int]:
        """Offsets inside each failure line (FAILURE) of body[start:end], sorted; a line may
        come more than once. Hyperscan for a big region: the skim of a long log's middle
        looks for these once its room for error-looking lines is full."""
        db = self.database("failure") if hyperscan else None
        if db is not None:
            return _hyperscan_offsets(db, body, start, end)
        return [m.start() for m in _rx("FAILURE").finditer(body, start, end)]

    def _literal_offsets(
        self, low: bytes, lo: int, hi: int, first: bool = False, errorish: bool = False
    ) -> list[int]:
        """The pure-Python search for the literals (with errorish: the skim's literals) in
        low[lo:hi] (lowercased already): the body's words against the anchors, then the
        literals of the anchors present."""
        lits, anchors, loose = (
            (self.errorish, self.errorish_anchors, self.errorish_loose)
            if errorish
            else (self.literals, self.anchors, self.loose)
        )
        words = set(low[lo:hi].translate(_SPLIT).split())
        picked = [i for w in words.intersection(anchors) for i in anchors[w]]
        picked += loose
        out: list[int] = []
        for i in picked:
            lit = lits[i]
            pos = low.find(lit, lo, hi)
            while pos != -1:
                out.append(pos)
                if first:
                    return out
                pos = low.find(lit, pos + len(lit), hi)
        return out

    # ------------------------------------------------------------ Hyperscan
    def database(self, kind: str):
        """The Hyperscan database of the set ("triggers") or of ERRORISH and the literals
        ("errorish"), or None where Hyperscan is not installed (it is an x86-64 Linux
        dependency) or disabled with KB_NO_HYPERSCAN=1."""
        if os.environ.get("KB_NO_HYPERSCAN"):
            return None
        db = self._live.get(kind)
        if db is None and kind not in self._live:
            db = self._live[kind] = _load(self.hs.get(kind)) or self._compile(kind)
        return db

    def _compile(self, kind: str):
        try:
            import hyperscan
        except Exception:  # no wheel for this platform
            return None
        if kind == "errorish":
            exprs = [_rx("ERRORISH").pattern] + [re.escape(b) for b in self.errorish]
            flags = [0] + [hyperscan.HS_FLAG_CASELESS] * len(self.errorish)
        elif kind == "failure":  # the same for every set
            exprs, flags = [_FAILURE], [hyperscan.HS_FLAG_MULTILINE]
        else:
            exprs = [re.escape(b) for b in _CORE_B + self.literals]
            flags = [hyperscan.HS_FLAG_CASELESS] * len(exprs)
        try:
            db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
            db.compile(expressions=exprs, ids=list(range(len(exprs))), flags=flags)
        except Exception:  # a CPU without SSSE3, or a pattern Hyperscan refuses
            return None
        return db

    def prepare(self) -> None:
        """Compile the databases now and keep them serialised (for the knowledge base's cache,
        written once): a later process loads them instead of compiling. The failure search's
        too: it is the same for every set, but compiling it took ~30 ms of a long log's scan
        (where the middle's room fills), loading its 23 KB 0.05 ms."""
        if not self.literals and not self.errorish:
            return  # CORE alone compiles in no time
        try:
            import hyperscan
        except Exception:
            return
        for kind in ("triggers", "errorish", "failure"):
            db = self._compile(kind)
            if db is not None:
                try:
                    self.hs[kind] = hyperscan.dumpb(db)
                except Exception:
                    continue
                self._live[kind] = db


def _load(blob: bytes | None):
    if not blob:
        return None
    try:
        import hyperscan

        db = hyperscan.loadb(blob, hyperscan.HS_MODE_BLOCK)
        db.scratch = hyperscan.Scratch(db)  # a loaded database has none
        return db
    except Exception:  # another CPU or Hyperscan version wrote it: compile instead
        return None


def _reduce(literals: Iterable[str]) -> list[str]:
    """The literals worth searching for, shortest first: none holding a CORE word, none too
    short to say anything, each once whatever its case."""
    out: list[str] = []
    seen: set[str] = set()
    for lit in sorted(set(literals), key=lambda s: (len(s), s)):
        low = lit.lower()
        if _alnum_bytes(low) < MIN_ALNUM:
            continue
        if low in seen or _rx("_CORE_RX").search(low):
            continue
        out.append(lit)
        seen.add(low)
    return out


def _anchored(lits: list[str]) -> tuple[dict[bytes, tuple[int, ...]], tuple[int, ...]]:
    """(anchor word -> indexes of the literals filed under it, indexes of those with none)."""
    anchors: dict[bytes, list[int]] = {}
    loose: list[int] = []
    for i, lit in enumerate(lits):
        word = _anchor(lit)
        if word:
            anchors.setdefault(word.lower().encode(), []).append(i)
        else:
            loose.append(i)
    return {w: tuple(v) for w, v in anchors.items()}, tuple(loose)


def _skim_literals(literals: Iterable[str]) -> list[str]:
    """The literals the skim of a long log's middle looks for, shortest first, each once
    whatever its case: every literal long enough to say something, those holding a CORE word
    too, as long as what they say beyond the CORE words is as long (a literal that is a core
    word and little else, "NCCL INFO ", would keep a flood of informational lines)."""
    out: list[str] = []
    seen: set[str] = set()
    for lit in sorted(set(literals), key=lambda s: (len(s), s)):
        low = lit.lower()
        if low in seen or _alnum_bytes(low) < MIN_ALNUM:
            continue
        if _rx("_CORE_RX").search(low) and _alnum_bytes(_rx("_CORE_RX").sub(" ", low)) < MIN_ALNUM:
            continue
        out.append(lit)
        seen.add(low)
    return out


def _alnum_bytes(text: str) -> int:
    """UTF-8 bytes of the text's letters and digits (one pass in C: run for every literal)."""
    return len(_rx("_NOT_ALNUM").sub("", text).encode())


def _anchor(literal: str) -> str:
    """The longest whole ASCII word of the literal (not cut at either end of it), or ''."""
    words = list(_rx("_WORD").finditer(literal))
    best = ""
    for m in words:
        w = m.group()
        cut = (m.start() == 0 and _is_word(literal[:1])) or (
            m.end() == len(literal) and _is_word(literal[-1:])
        )
        if cut or not w.isascii() or len(w) < 3:
            continue
        if len(w) > len(best):
            best = w
    return best


def _is_word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


_CORE_ONLY: Triggers | None = None
_REGISTERED: dict[str, Triggers] = {}
_MERGED: dict[tuple[str, ...], Triggers] = {}


def register(t: Triggers) -> None:
    """A knowledge base was loaded in this process: scans given no trigger set use its set too."""
    _REGISTERED.setdefault(t.key, t)


def default() -> Triggers:
    """For a scan not given a knowledge base's set: CORE and the literals of every knowledge base
    loaded in this process (one, in the command line). A lookup always passes its own."""
    global _CORE_ONLY
    if not _REGISTERED:
        if _CORE_ONLY is None:
            _CORE_ONLY = Triggers()
        return _CORE_ONLY
    if len(_REGISTERED) == 1:
        return next(iter(_REGISTERED.values()))
    keys = tuple(sorted(_REGISTERED))
    merged = _MERGED.get(keys)
    if merged is None:
        lits = sorted({b for t in _REGISTERED.values() for b in (*t.literals, *t.errorish)})
        merged = Triggers(b.decode("utf-8", "replace") for b in lits)
        _MERGED[keys] = merged
    return merged


def _hyperscan_offsets(db, body: bytes, start: int, end: int) -> list[int]:
    """Offsets (sorted) inside each line a Hyperscan database matches in body[start:end]."""
    offs: list[int] = []
    add = offs.append
    view = memoryview(body)[start:end]  # no copy
    db.scan(view, match_event_handler=lambda _id, _frm, to, _fl, _ctx: add(start + to - 1))
    offs.sort()
    return offs


def _errorish_found(body: bytes, start: int, end: int) -> list[int]:
    """Offsets inside each line of body[start:end] that ERRORISH matches, sorted (a line may
    come more than once), by bytes.find for each of its words: the pure-Python search, ~4x
    Python's re over the same bytes. Each word is searched for alone, then the byte after it
    checked; "Signal " is confirmed by the regex where found."""
    out: list[int] = []
    find = body.find
    after = _ERROR_AFTER
    for w in _ERROR_WORD_LIST:
        n = len(w)
        pos = find(w, start, end)
        while pos != -1:
            if pos + n < end and body[pos + n] in after:
                out.append(pos)
            pos = find(w, pos + 1, end)
    pos = find(b"NCCL WARN", start, end)
    while pos != -1:
        out.append(pos)
        pos = find(b"NCCL WARN", pos + 1, end)
    pos = find(b"Signal ", start, end)
    while pos != -1:
        if _rx("_SIGNAL").match(body, pos, end):
            out.append(pos)
        pos = find(b"Signal ", pos + 1, end)
    out.sort()
    return out
