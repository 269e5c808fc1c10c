"""Log text -> the lines that can hold an error, cleaned of the noise real logs carry.

Streaming and bounded: input comes as byte chunks, searched for a handful of trigger words in
one pass (Hyperscan; bytes.find without it), so a line without one costs nothing in Python. Only
the first and last candidate lines are kept (root errors come early, summaries late), repeated
lines are folded into one with a count, and a giant line is cut into pieces, so memory stays
bounded whatever the input. The middle of a long log is skimmed: searched only for
error-looking lines, with no Python per line (see scan).
"""

from __future__ import annotations

import re
from collections import Counter, deque
from collections.abc import Iterable, Iterator

from kb.model.record import field, record
from kb.scan.context import around as traceback_around
from kb.scan.prefixes import rank_of
from kb.scan.triggers import Triggers
from kb.scan.triggers import default as default_triggers

TYPE_CHECKING = False  # typing stays unimported at run time (kb lookup's cold start)
if TYPE_CHECKING:
    from typing import IO

# What makes a line a candidate: the trigger set of the knowledge base being looked up (its
# signatures' literals and a small generic core, kb.scan.triggers), given to scan(); without one,
# the core and the literals of the knowledge bases loaded in this process.

CHUNK = 8 << 20
MAX_LINE = 64 << 10  # a longer "line" is cut into pieces of this size
KEEP_LINE = 4096  # characters of a candidate line kept for matching and display
KEEP_HEAD = 400  # first candidate lines kept: the root error is usually early...
KEEP_TAIL = 1600  # ...and the last lines hold the final exception
KEEP_MIDDLE = 200  # error-looking lines between the two, the earliest first
# ...and past those, lines that read as a failure of their own (an error with its message, a
# traceback, a C++ terminate, an assertion, a death by signal), the earliest first: a flood of
# warnings or of other ranks' timeouts never pushes the failure that started them out.
KEEP_FAILURES = 200
MAX_WINDOWS = 64  # per long line: windows around its first and last trigger words
MAX_CONTEXT = 4 << 20  # characters of traceback context kept per scan (kb.scan.context)

_ANSI_SRC = r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[@-Z\\-_]"
# Prefixes stamped on lines by launchers, schedulers, CI systems and loggers. Applied repeatedly
# at the start of a line, so "2024-05-01T10:00:00Z [rank3]: [default0]: ..." is peeled in turn.
_PREFIX_SRC = r"""(?:
        \s+
      | \d{4}-\d\d-\d\d[T\s]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\s*   # ISO timestamps
      | \[\d{4}-\d\d-\d\d[^\]]*\]\s*                                             # [2024-01-01 ...]
      | \d\d:\d\d:\d\d(?:[.,]\d+)?\s*                                            # 12:00:01.123
      | std(?:out|err)\s[FP]\s                                                   # Kubernetes CRI: "<time> stderr F "
      | \[(?:rank|default|local_rank)?\d+\]\s*:?\s*                              # [rank3]: [default0]:
      | rank\d+\s*:\s*                                                           # rank3:
      | \[\d+,\d+\]<std(?:out|err)>:\s*                                          # mpirun --tag-output
      | \d{1,5}:\s(?=\S)                                                         # srun --label "3: "
      | \((?:[\w.:-]+\s+)?pid=\d+(?:,\s*ip=[\d.]+)?\)\s*                            # Ray: (MyActor pid=7046, ip=10.0.0.1)
      | \(raylet(?:,\s*ip=[\d.]+)?\)\s*                                             # (raylet)
      | \#\#\[(?:error|warning|debug|group|endgroup)\]\s*                        # GitHub Actions
      | (?:FAILED|ERROR)\s+[^\s:]+::[^\s\[]+(?:\[[^\]]*\])?\s+-\s+              # pytest's short summary
      | \[?(?:ERROR|WARNING|WARN|INFO|DEBUG|CRITICAL|FATAL)\]?\s*[:\-|]?\s+        # log levels
      | [│┃║|]\s*                                                                # rich / box borders
      | (?:E\s{3,})                                                              # pytest failure lines
      | >+\s*                                                                    # quoted replies
      | [-*]\s+(?=\*\*)                                                          # Markdown list items
    )"""
_BOX_TAIL_SRC = r"\s*[│┃║]\s*$"
_BOLD_SRC = r"(?<!\*)\*\*(?=[^\s*])(.+?)(?<=[^\s*])\*\*(?!\*)"  # **text**, not *** banners ***
# A line can only carry a prefix if it starts with one of these; most error lines start with a
# letter of an exception name and skip the (lazily compiled) prefix regex entirely.
_PREFIX_START = frozenset(" \t0123456789[#rEIWDCF│┃║|>-*(")
# A line starting with a letter carries a prefix only if it starts with one of these words (a
# log level, "rank3:", pytest's "E   "): "CUDA error: ..." is passed over without the regex.
_PREFIX_WORDS = (
    "rank",
    "ERROR",
    "E ",
    "E\t",
    "INFO",
    "WARN",
    "DEBUG",
    "CRITICAL",
    "FATAL",
    "FAILED",
)
_RX: dict[str, re.Pattern] = {}


def _rx(name: str) -> re.Pattern:
    rx = _RX.get(name)
    if rx is None:
        src = {
            "ansi": (_ANSI_SRC, 0),
            "prefix": (_PREFIX_SRC, re.VERBOSE),
            "box": (_BOX_TAIL_SRC, 0),
            "bold": (_BOLD_SRC, 0),
            "new_record": (_NEW_RECORD_SRC, 0),
        }[name]
        rx = _RX[name] = re.compile(*src)
    return rx


def clean_line(line: str) -> str:
    """A log line as the program printed it: no colour codes, no launcher or CI prefixes."""
    return peel(line)[1]


def _inline_code(line: str) -> bool:
    """A line that opens with one backtick and has no other before its last character."""
    return line.startswith("`") and "`" not in line[1:].rstrip()[:-1]


def peel(line: str) -> tuple[str, str]:
    """(prefix, text): the launcher / scheduler / logger prefixes peeled off a line, and the line
    as the program printed it. The prefix is kept because it says which rank printed the line
    ([rank3]:, [default0]:, srun's "3: ") and when; see kb.rank_prefix."""
    if line.startswith('{"log":"'):
        line = _docker_json(line)
    if "\x1b" in line:
        line = _rx("ansi").sub("", line)
    line = line.rstrip("\r\n")
    head = ""
    for _ in range(2):
        if _inline_code(line):
            # a line pasted as Markdown inline code (`ERROR: ...`, > `ImportError: ...`): its
            # backticks are the paste's; a message that quotes a name (`x` is not ...) keeps them
            head, line = head + "`", line[1:].rstrip().removesuffix("`")
        start = 0
        first = line[:1]
        if first in _PREFIX_START and (not first.isalpha() or line.startswith(_PREFIX_WORDS)):
            prefix = _rx("prefix")
            for _ in range(8):
                m = prefix.match(line, start)
                if not m or m.end() == start:
                    break
                start = m.end()
        head, line = head + line[:start], line[start:]
        if not _inline_code(line):
            break
    if line.endswith(("│", "┃", "║")):
        line = _rx("box").sub("", line)
    if "**" in line:  # Markdown emphasis in pasted reports: "**RuntimeError: CUDA out of memory.**"
        line = _rx("bold").sub(r"\1", line)
    if not line.isascii():  # a web page's or word processor's quotes: the program printed ASCII
        line = line.translate(_TYPOGRAPHIC)
    return head, line.strip()


def _docker_json(line: str) -> str:
    """The line a program printed, from a record of Docker's json-file log driver
    (`{"log":"...\\n","stream":"stderr","time":"..."}`, one per line in
    /var/lib/docker/containers/<id>/<id>-json.log); the record as it is when it does not parse."""
    import json

    try:
        rec = json.loads(line)
    except ValueError:
        return line
    got = rec.get("log") if isinstance(rec, dict) else None
    return got if isinstance(got, str) else line


# Typographic quotes that pasting through a web page, chat or a word processor puts in place of
# the ASCII quotes every library prints (‘evaluation_strategy’ for 'evaluation_strategy').
_TYPOGRAPHIC = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})


@record
class Line:
    number: int  # 1-based line number in the input
    text: str  # cleaned
    count: int = 1  # how many times this exact line appeared
    after: str = ""  # for an OOM line: the lines after it, where a wrapped message's figures went
    rank: int | None = None  # the rank its launcher prefix names ([rank3]:, [default3]:, "3: ")
    prefix: str = ""  # what was peeled off (launcher prefixes, timestamps)
    block: str = (
        ""  # for torchrun's ChildFailedError line: the Failures / Root Cause block after it
    )
    source: int = 0  # which input it came from, when several are read as one job
    # For a line that ends a Python traceback: the traceback's lines above it and the lines its
    # message goes on over below, as (offset from this line, text with its indentation). They
    # hold no trigger word, so they are not lines of their own (kb.scan.context).
    context: tuple[tuple[int, str], ...] = ()


@record
class Scan:
    lines: list[Line]  # candidate lines in input order (head, then tail)
    total_lines: int
    total_bytes: int
    dropped: int  # candidate lines between head and tail that were not kept
    binary: bool  # the input looked like binary data, not a log
    skimmed: int = 0  # lines of a long log's middle searched only for error-looking lines
    warnings: list[str] = field(default_factory=list)  # why reading stopped early (kb.scan.reader)
    # what the dropped lines were: "failure" (past KEEP_FAILURES kept), "other"
    dropped_kinds: dict[str, int] = field(default_factory=dict)


# Newlines are counted with StringZilla where it is installed (SIMD: ~4x bytes.count here, whose
# loop over each byte checks a limit and is not vectorised), for spans long enough to pay for the
# call; bytes.count otherwise. Both give the same count (tests/test_scan_paths.py).
NATIVE_COUNT_MIN = 64 << 10
_COUNT = None  # stringzilla.count, or False where it cannot be imported


def newlines(data: bytes, start: int = 0, end: int | None = None) -> int:
    """data.count(b"\n", start, end), at SIMD speed for a long span where StringZilla is
    installed (KB_NO_STRINGZILLA=1: never)."""
    end = len(data) if end is None else end
    if end - start >= NATIVE_COUNT_MIN:
        global _COUNT
        if _COUNT is None:
            _COUNT = _native_count()
        if _COUNT:
            return _COUNT(data, b"\n", start, end)
    return data.count(b"\n", start, end)


def _native_count():
    import os

    if os.environ.get("KB_NO_STRINGZILLA"):
        return False
    try:
        from stringzilla import count  # type: ignore[import-not-found, unused-ignore]
    except Exception:  # not installed, or no wheel for this platform
        return False
    try:
        if count(b"a\nb\n\n", b"\n", 1, 4) != 2:  # the signature this code relies on
            return False
    except Exception:
        return False
    return count


def iter_chunks(stream: IO[bytes], size: int = CHUNK) -> Iterator[bytes]:
    while True:
        b = stream.read(size)
        if not b:
            return
        yield b


# Every byte but the control bytes a text log does not hold (below tab, and 14-31): deleting
# them leaves those, counted in C rather than byte by byte in Python.
_NOT_CONTROL = bytes(c for c in range(256) if not (c < 9 or 13 < c < 32))


def _looks_binary(first: bytes) -> bool:
    sample = first[:8192]
    if not sample:
        return False
    # Logs are text: few NULs, few control bytes, and (whatever the locale) mostly valid UTF-8.
    return (
        sample.count(b"\x00") > len(sample) // 100
        or len(sample.translate(None, _NOT_CONTROL)) > len(sample) // 10
        or sample.decode("utf-8", "replace").count("\ufffd") > len(sample) // 20
    )


class _Window:
    """The kept candidate lines: the first KEEP_HEAD distinct ones, the last KEEP_TAIL, and in
    between up to KEEP_MIDDLE that look like errors (the earliest), with repeats folded into a
    count on their first occurrence. A root error followed by thousands of distinct lines is
    kept in the middle; what is not kept is counted in `dropped`, never lost silently."""

    def __init__(self, triggers: Triggers | None = None):
        self.triggers = triggers if triggers is not None else default_triggers()
        self.head: list[Line] = []
        self.middle: list[Line] = []
        self.failures: list[Line] = []  # failure lines kept once the middle is full
        self.kinds: Counter[str] = Counter()  # what the dropped lines were
        self.tail: deque[Line] = deque(maxlen=KEEP_TAIL)
        self.seen: dict[str, Line] = {}
        self.dropped = 0
        self.context_left = MAX_CONTEXT  # characters of traceback context kept, in all

    @property
    def head_full(self) -> bool:
        return len(self.head) >= KEEP_HEAD

    @property
    def middle_full(self) -> bool:
        return len(self.middle) >= KEEP_MIDDLE

    @property
    def closed(self) -> bool:
        """No room left between head and tail, not even for a failure line."""
        return self.middle_full and len(self.failures) >= KEEP_FAILURES

    def add(
        self,
        number: int,
        raw: bytes,
        count: int = 1,
        after: bytes = b"",
        block: bytes = b"",
        where: tuple[bytes, int, int] | None = None,
    ) -> bool:
        """Keep a line; False when it was a repeat (or blank after cleaning). `where`: the line's
        place in its body (body, start, end), to read the traceback around it."""
        prefix, text = _text(raw)
        if not text:
            return False
        rank = rank_of(prefix) if prefix else None
        key = _key(rank, text)
        prev = self.seen.get(key)
        if prev is not None:
            prev.count += count
            return False
        ln = Line(number, text, count, rank=rank, prefix=prefix[:200])
        if after:
            ln.after = " ".join(
                clean_line(a) for a in after.decode("utf-8", "replace").splitlines()
            )[:KEEP_LINE]
        if block:
            ln.block = block.decode("utf-8", "replace")
        if where is not None:
            ln.context = self.context(*where)
        if not self.head_full:
            self.head.append(ln)
        else:
            if len(self.tail) == self.tail.maxlen:
                old = self.tail[0]
                errorish = self.triggers.errorish_text(old.text)
                failure = errorish and _failure_text(old.text)
                if errorish and not self.middle_full:
                    self.middle.append(old)  # still in `seen`: its repeats keep folding into it
                elif failure and len(self.failures) < KEEP_FAILURES:
                    self.failures.append(old)
                else:
                    old_key = _key(old.rank, old.text)
                    if self.seen.get(old_key) is old:
                        del self.seen[old_key]
                    self.dropped += 1
                    self.kinds["failure" if failure else "other"] += 1
            self.tail.append(ln)
        self.seen[key] = ln
        return True

    def keep_middle(
        self, number: int, raw: bytes, where: tuple[bytes, int, int] | None = None
    ) -> bool:
        """Keep an error-looking line between head and tail: in the middle while it has room,
        then only a failure line (with KEEP_FAILURES of room of its own). False: not kept."""
        target = self.middle
        if self.middle_full:
            if len(self.failures) >= KEEP_FAILURES or not _failure(raw):
                return False
            target = self.failures
        prefix, text = _text(raw)
        if not text:
            return False
        rank = rank_of(prefix) if prefix else None
        key = _key(rank, text)
        if key in self.seen:
            return True
        ln = self.seen[key] = Line(number, text, rank=rank, prefix=prefix[:200])
        if where is not None:
            ln.context = self.context(*where)
        target.append(ln)
        return True

    def context(self, body: bytes, ls: int, le: int) -> tuple[tuple[int, str], ...]:
        """The traceback around body[ls:le] (kb.scan.context), while the budget lasts: the
        earliest tracebacks get it, and the root failure is the earliest."""
        if self.context_left <= 0:
            return ()
        ctx = traceback_around(body, ls, le, _text)
        self.context_left -= sum(len(t) for _, t in ctx)
        return ctx

    def lines(self) -> list[Line]:
        between = sorted([*self.middle, *self.failures], key=lambda ln: ln.number)
        return self.head + between + list(self.tail)


CUT = " [...]"  # ends a line kept short: its real end is unknown, so `$` must not match here


def _text(raw: bytes) -> tuple[str, str]:
    prefix, text = peel(raw[: KEEP_LINE * 2].decode("utf-8", "replace").replace("\x00", ""))
    if len(text) > KEEP_LINE or len(raw) > KEEP_LINE * 2:
        return prefix, text[:KEEP_LINE] + CUT
    return prefix, text


def _key(rank: int | None, text: str):
    # The same line from two ranks is two pieces of evidence (the job view needs both); from
    # one rank, or from a log without rank prefixes, a repeat.
    return text if rank is None else (rank, text)


def _failure(raw: bytes) -> bool:
    """A line that reads as a failure of its own (kb.scan.triggers.FAILURE)."""
    from kb.scan import triggers

    return triggers.FAILURE.search(raw) is not None


def _failure_text(text: str) -> bool:
    from kb.scan import triggers

    return triggers.FAILURE_TEXT.search(text) is not None


# Error-looking lines (for the lines between head and tail) are kb.scan.triggers.ERRORISH or hold
# one of the knowledge base's literals.
HYPERSCAN_MIN = 64 << 10  # below this, the pure-Python search costs less than calling Hyperscan


def _trigger_offsets(body: bytes, triggers: Triggers) -> list[int]:
    """Offsets in `body` where a trigger ends or starts (any offset inside the line does)."""
    return triggers.offsets(body, hyperscan=len(body) >= HYPERSCAN_MIN)


def _line_starts(body: bytes) -> list[int]:
    """The start of each non-blank line of a short body (scan_text's every_line)."""
    out: list[int] = []
    pos, size = 0, len(body)
    while pos < size:
        end = body.find(b"\n", pos)
        end = size if end == -1 else end
        if not body[pos:end].isspace() and end > pos:
            out.append(pos)
        pos = end + 1
    return out


def _candidate_lines(body: bytes, offs: list[int]) -> list[tuple[int, int]]:
    """(start, end) of each line holding a trigger offset, once per line, in order."""
    out: list[tuple[int, int]] = []
    append, rfind, find = out.append, body.rfind, body.find
    line_end = -1
    size = len(body)
    for pos in offs:
        if pos <= line_end:
            continue  # another trigger in a line already taken
        le = find(b"\n", pos)
        line_end = le if le != -1 else size
        append((rfind(b"\n", 0, pos) + 1, line_end))
    return out


TAIL_BYTES = 2 * CHUNK  # the end of a log read in full, whatever its size (see scan)
HEAD_BYTES = 2 * CHUNK  # at most this much of the start read in full waiting for the head to fill


def scan(
    chunks: Iterable[bytes], every_line: bool = False, triggers: Triggers | None = None
) -> Scan:
    """The candidate lines of a log. Its start is read in full until the head window is full
    (or HEAD_BYTES have been read), and so is its last TAIL_BYTES, kept back until the input
    ends; what lies between is skimmed: searched for error-looking lines only (Hyperscan over the
    bytes and a newline count, no Python per line), the earliest KEEP_MIDDLE of which are kept.
    How many lines were skimmed is reported (Scan.skimmed), never hidden.

    Each chunk is used in place, as (chunk, start, end) spans of complete lines: only the line
    cut by a chunk's end is copied (with the start of the next chunk), so a byte of the
    skimmed middle is never copied at all.

    every_line: all non-blank lines of the start are candidates, not only those holding a
    trigger word (for a short message, see scan_text).

    triggers: the knowledge base's trigger set (kb.scan.triggers); the default one without."""
    added: list[int] = []  # the line break _terminated put at the end, not the input's
    chunks = _terminated(chunks, added)
    win = _Window(triggers)
    line_no = 0  # newlines before the start of the current span (or of the oldest one held)
    total = 0
    carry = b""
    skip = 0  # leading bytes of carry whose triggers were handled already (a giant line goes on)
    binary = None
    held: deque[tuple[bytes, int, int]] = deque()  # spans kept back: the last TAIL_BYTES or more
    held_bytes = 0
    skimmed = 0
    head_read = 0  # bytes of the start read in full

    def read_held() -> None:
        # As one body: a line's continuation (a hard wrap, an OOM message's figures, torchrun's
        # summary) is read with it across the seams between spans.
        nonlocal line_no, held_bytes
        if held:
            # Joined through views (no copy of each span first), and the spans let go before
            # the body is read: the tail is in memory once, not three times.
            body = b"".join(memoryview(d)[a:b] for d, a, b in held)
            held.clear()
            line_no = _scan_body(body, line_no, win)
        held_bytes = 0

    def hold(data: bytes, a: int, b: int) -> None:
        """Complete lines data[a:b] held back: read in full if they turn out to be among the
        last TAIL_BYTES, skimmed when newer ones push them out."""
        nonlocal line_no, held_bytes, skimmed
        held.append((data, a, b))
        held_bytes += b - a
        while held_bytes - (held[0][2] - held[0][1]) >= TAIL_BYTES:
            old, oa, ob = held.popleft()
            held_bytes -= ob - oa
            line_no, n = _skim(old, oa, ob, line_no, win)
            skimmed += n

    for chunk in chunks:
        total += len(chunk)
        if binary is None:
            binary = _looks_binary(chunk)
        first = chunk.find(b"\n")
        if first == -1:
            buf = carry + chunk if carry else chunk
            if len(buf) > MAX_LINE:
                # A giant line: take the errors in what is here now, and carry the end on with
                # enough context that a message across the cut is read whole next time.
                read_held()
                cut = len(buf) - KEEP_LINE // 2
                for a, b in _trigger_windows(buf, skip, cut, win.triggers):
                    win.add(line_no + 1, buf[a:b])
                carry, skip = buf[cut - KEEP_LINE // 2 :], KEEP_LINE // 2
            else:
                carry = buf
            continue
        if skip or (not win.head_full and head_read < HEAD_BYTES):
            read_held()  # (none after the head; after a giant line, read already): in order
            buf = carry + chunk if carry else chunk
            end = buf.rfind(b"\n") + 1
            line_no = _scan_body(buf[:end], line_no, win, skip, every_line)
            head_read += end
            skip = 0
            carry = buf[end:]
            continue
        # The line the last chunk cut, finished here; then this chunk's own complete lines.
        seam = carry + chunk[: first + 1] if carry else chunk[: first + 1]
        hold(seam, 0, len(seam))
        last = chunk.rfind(b"\n") + 1
        if last > first + 1:
            hold(chunk, first + 1, last)
        carry = chunk[last:]
    read_held()
    # (nothing is carried past the end: _terminated ends the last chunk with a line break)
    return Scan(
        win.lines(),
        line_no,
        total - len(added),
        win.dropped,
        bool(binary),
        skimmed,
        dropped_kinds={k: n for k, n in win.kinds.items() if n},
    )


def _terminated(chunks: Iterable[bytes], added: list[int]) -> Iterator[bytes]:
    """The chunks, the last one ending in a line break: a last line with none (a paste, a log
    cut off mid-write) is read with the lines before it, so a message wrapped onto it is joined
    as anywhere else. One chunk is held back to know which is the last."""
    prev = None
    for chunk in chunks:
        if not chunk:
            continue
        if prev is not None:
            yield prev
        prev = chunk
    if prev is not None:
        if prev.endswith(b"\n"):
            yield prev
        else:
            added.append(1)
            yield prev + b"\n"


def _trigger_windows(data: bytes, lo: int, hi: int, triggers: Triggers) -> list[tuple[int, int]]:
    """Windows of at most KEEP_LINE bytes around the trigger words found in data[lo:hi], each
    kept within one progress-bar update (carriage returns) and merged where they overlap; the
    first and last MAX_WINDOWS when there are more."""
    half = KEEP_LINE // 2
    out: list[tuple[int, int]] = []
    for off in _trigger_offsets(data[lo:hi], triggers):
        off += lo
        if out and off < out[-1][1]:
            continue
        a = max(data.rfind(b"\r", max(0, off - half), off) + 1, off - half, 0)
        b = data.find(b"\r", off, off + half)
        b = min(len(data), off + half) if b == -1 else b
        if out and a <= out[-1][1]:
            a = out[-1][0]
            out.pop()
            b = min(b, a + KEEP_LINE)
        out.append((a, b))
    if len(out) > 2 * MAX_WINDOWS:
        out = out[:MAX_WINDOWS] + out[-MAX_WINDOWS:]
    return out


STEP = 1 << 20  # a body's candidate lines are found this many bytes at a time (see _candidates)
FOLD_BLOCK = 1 << 14  # candidate lines keyed at a time while folding the tail (see fold_tail)


def _scan_body(
    body: bytes, line_no: int, win: _Window, skip: int = 0, every_line: bool = False
) -> int:
    """Keep the trigger-bearing lines of `body` (complete lines), or with every_line all its
    non-blank lines; returns the new line count.

    Memory stays bounded by what is kept, not by how many lines hold a trigger: the candidate
    lines are two arrays of offsets (16 bytes a line), and only the lines that can still be
    kept become Python objects (a tail of millions of distinct warning lines would otherwise
    cost hundreds of MB in tuples, keys and dicts)."""
    starts, ends = _candidates(body, win.triggers, every_line)
    # Lines that can still be kept: those filling the head, then, of the rest, only the last
    # KEEP_TAIL distinct ones (anything earlier would be pushed out of the tail by them). Folding
    # exact repeats from the end (fold_tail) bounds the work on a log with a million candidate
    # lines and keeps earlier distinct lines behind a flood of repeats.
    i = 0 if win.head_full else min(len(starts), KEEP_HEAD - len(win.head))
    chosen: list[tuple[int, int, int]] = [(starts[k], ends[k], 1) for k in range(i)]
    j, firsts = fold_tail(_Keys(body, starts, ends), KEEP_TAIL, i)
    if j > i:
        kept, lost = _keep_errorish_in_steps(body, starts[i], ends[j - 1], line_no, win)
        win.dropped += j - i - kept
        win.kinds["failure"] += lost
        win.kinds["other"] += j - i - kept - lost
    chosen += sorted((starts[at], ends[at], count) for at, count in firsts.values())
    n = line_no
    prev = 0
    for ls, le, count in chosen:
        n += newlines(body, prev, ls)
        prev = ls
        _emit(body, ls, le, n + 1, count, win, skip if ls == 0 else 0)
    return n + newlines(body, prev)


def _steps(body: bytes, start: int, end: int) -> Iterator[tuple[int, int]]:
    """body[start:end] (whole lines) in spans of about STEP bytes, each ending at a line end."""
    a = start
    while a < end:
        b = min(end, a + STEP)
        if b < end:
            nl = body.rfind(b"\n", a, b)
            if nl != -1:
                b = nl + 1
            else:  # one line longer than STEP: the span runs to its end
                nl = body.find(b"\n", b, end)
                b = end if nl == -1 else nl + 1
        yield a, b
        a = b


def _candidates(body: bytes, triggers: Triggers, every_line: bool = False):
    """(starts, ends) of the candidate lines of body, as arrays of 8-byte offsets, found a
    STEP at a time (a step's offsets and tuples are the only Python objects per line). A short
    message's (scan_text: every line, few of them) are plain lists: importing array is ~0.5 ms
    of a one-line lookup."""
    if every_line:
        pairs = list(_candidate_lines(body, _line_starts(body)))
        return [a for a, _ in pairs], [b for _, b in pairs]
    from array import array

    starts, ends = array("q"), array("q")
    for a, b in _steps(body, 0, len(body)):
        piece = body[a:b] if (a, b) != (0, len(body)) else body
        for ls, le in _candidate_lines(piece, _trigger_offsets(piece, triggers)):
            starts.append(a + ls)
            ends.append(a + le)
    return starts, ends


class _Keys:
    """The fold key of each candidate line (its first 512 bytes), made on demand."""

    __slots__ = ("body", "ends", "starts")

    def __init__(self, body: bytes, starts, ends):
        self.body, self.starts, self.ends = body, starts, ends

    def __len__(self) -> int:
        return len(self.starts)

    def slice(self, lo: int, hi: int) -> list[bytes]:
        body, starts, ends = self.body, self.starts, self.ends
        return [body[starts[k] : min(ends[k], starts[k] + 512)] for k in range(lo, hi)]


def fold_tail(keys, keep: int, lo: int = 0) -> tuple[int, dict[bytes, tuple[int, int]]]:
    """Walk back from the end of `keys` (a list, or _Keys) to `lo` until `keep` distinct ones are
    seen: where the walk stopped, and for each key seen its earliest index in the walked part
    and its count there. Done a block of FOLD_BLOCK keys at a time, with dict and Counter
    instead of a Python loop per line (a flood of one repeated line is the common case, and a
    GiB log holds millions of them), so at most a block of keys and `keep` distinct ones are
    held at once."""
    get = keys.slice if isinstance(keys, _Keys) else (lambda a, b: keys[a:b])
    counts: Counter[bytes] = Counter()
    earliest: dict[bytes, int] = {}
    hi = len(keys)
    j = lo
    while hi > lo:
        blo = max(lo, hi - FOLD_BLOCK)
        block = get(blo, hi)
        last = dict(zip(block, range(blo, hi)))  # later duplicates overwrite: the last index
        new = [at for k, at in last.items() if k not in counts]
        if len(counts) + len(new) >= keep:
            # The keep-th distinct key from the end has its last occurrence in this block.
            import heapq  # only logs with more candidate lines than kept

            j = min(heapq.nlargest(keep - len(counts), new))
            block = block[j - blo :]
            blo, hi = j, lo  # this block is the last one walked
        counts.update(block)
        earliest.update(zip(reversed(block), range(blo + len(block) - 1, blo - 1, -1)))
        hi = min(hi, blo)
    return j, {k: (at, counts[k]) for k, at in earliest.items()}


def _keep_errorish_in_steps(
    body: bytes, start: int, end: int, line_no: int, win: _Window
) -> tuple[int, int]:
    """_keep_errorish over body[start:end], a STEP at a time (the offsets of one step are held
    at a time, not a whole tail's): (lines kept, failure lines not kept for want of room)."""
    n = line_no + newlines(body, 0, start)  # lines before `start`
    _, kept, lost = _search_steps(body, start, end, n, win)
    return kept, lost


def _search_steps(body: bytes, start: int, end: int, n: int, win: _Window) -> tuple[int, int, int]:
    """_keep_errorish over body[start:end] (whole lines), a STEP at a time, `n` lines before
    `start`: (lines before `end`, lines kept, failure lines not kept for want of room). Each
    step is counted and searched while it is in the CPU's cache (one read of it from memory,
    not one per pass); a step ends at a line end, and no pattern spans a line break, so the
    lines found are those a search of the whole would find."""
    kept = lost = 0
    for a, b in _steps(body, start, end):
        k, f = _keep_errorish(body, a, b, n, win, counted_from=a)
        kept, lost = kept + k, lost + f
        n += newlines(body, a, b)
    return n, kept, lost


def _errorish_offsets(body: bytes, start: int, end: int, triggers: Triggers) -> Iterable[int]:
    """Offsets inside each error-looking line of body[start:end], in order (a line may come
    more than once). Hyperscan for a big region (Python's re reads ~100 MB/s here)."""
    return triggers.errorish_offsets(body, start, end, hyperscan=end - start >= HYPERSCAN_MIN)


def _keep_errorish(
    body: bytes,
    start: int,
    end: int,
    line_no: int,
    win: _Window,
    counted_from: int = 0,
) -> tuple[int, int]:
    """Keep the earliest error-looking lines of a region no window has room for; once the
    middle is full, the earliest failure lines of the rest (_Window.keep_middle), found by one
    search of their own over it (no Python per warning of a flood): (lines kept, failure lines
    not kept for want of room, counted to the region's end). `line_no` is the number of lines
    before offset `counted_from` of body."""
    kept = lost = 0
    last = -1
    n, prev = line_no, counted_from
    rest = start  # where the search for failure lines alone begins
    if not win.middle_full:
        for pos in _errorish_offsets(body, start, end, win.triggers):
            ls = body.rfind(b"\n", 0, pos) + 1
            if ls == last:
                continue
            last = ls
            le = body.find(b"\n", pos)
            le = le if le != -1 else len(body)
            n += newlines(body, prev, ls)
            prev = ls
            kept += win.keep_middle(n + 1, body[ls:le], (body, ls, le))
            if win.middle_full:
                rest = min(le + 1, end)
                break
        else:
            return kept, 0
    big = end - rest >= HYPERSCAN_MIN
    for pos in win.triggers.failure_offsets(body, rest, end, hyperscan=big):
        ls = body.rfind(b"\n", 0, pos) + 1
        if ls == last:
            continue
        last = ls
        le = body.find(b"\n", pos)
        le = le if le != -1 else len(body)
        if win.closed:
            lost += 1  # counted, so that the cap says it dropped failure lines
            continue
        n += newlines(body, prev, ls)
        prev = ls
        if win.keep_middle(n + 1, body[ls:le], (body, ls, le)):
            kept += 1
        else:
            lost += 1
    return kept, lost


def _skim(data: bytes, start: int, end: int, line_no: int, win: _Window) -> tuple[int, int]:
    """Lines data[start:end] in the middle of a long log, read only for error-looking lines
    (kept while the middle has room): (the new line count, how many lines were read this way
    and not kept). A STEP at a time, counted and searched in one thread (_search_steps): a
    second thread running the search beside the count took the time of one pass, but cost
    more CPU than both in turn, each reading the bytes from memory again."""
    n, kept, lost = _search_steps(data, start, end, line_no, win)
    win.kinds["failure"] += lost
    return n, n - line_no - kept


def _emit(body: bytes, ls: int, le: int, number: int, count: int, win: _Window, skip: int) -> None:
    """One candidate line into the window: as it is, or read as a JSON record, cut into windows
    when long, and joined with its continuation when a terminal hard-wrapped it."""
    seg = body[ls:le]
    stripped = seg.strip()
    if stripped[:1] == b"{" and stripped[-1:] == b"}" and len(stripped) <= MAX_JSON:
        texts = _json_texts(stripped, win.triggers)
        if texts is not None:
            for t in texts:
                win.add(number, t.encode("utf-8", "surrogatepass"))
            return
    if len(seg) > KEEP_LINE or b"\r" in seg.rstrip(b"\r"):
        for a, b in _trigger_windows(seg, skip, len(seg), win.triggers):
            # A window that stops inside the line is marked cut, as _text marks a long line.
            cut = b < len(seg) and seg[b : b + 1] not in (b"\r", b"\n")
            win.add(number, seg[a:b] + CUT.encode() if cut else seg[a:b])
        return
    after = b""
    if b"of memory" in seg and b"total capacity" not in seg:
        # A pasted OOM message is often wrapped: its figures are on the next lines.
        end = le
        for _ in range(4):
            nxt = body.find(b"\n", end + 1)
            end = nxt if nxt != -1 else len(body)
        after = body[le + 1 : end][:KEEP_LINE]
    if b"ChildFailedError:" in seg:
        block = _failure_block(body, le)
    elif b"Root Cause (first observed failure)" in seg:
        # A summary pasted from its middle: its Root Cause part, this line included (the job
        # view reads it only where no ChildFailedError line came with its whole summary).
        block = seg + b"\n" + _failure_block(body, le)
    else:
        block = b""
    win.add(number, seg, count, after, block, (body, ls, le))
    joined = _unwrapped(body, ls, le) or _word_wrapped(body, ls, le)
    if joined:
        win.add(number, joined)


MAX_BLOCK = 64 << 10


def _failure_block(body: bytes, le: int) -> bytes:
    """The lines after torchrun's "ChildFailedError:" line, through the closing border of its
    Failures / Root Cause summary (torch/distributed/elastic/multiprocessing/errors/__init__.py,
    _MSG_FORMAT_TEMPLATE). Most of those lines hold no trigger word ("rank      : 1 (local_rank:
    1)"), and the job view needs them in order, so they are kept whole, once per summary. Only
    the part inside this chunk of input is seen: a summary cut by an 8 MiB chunk boundary is
    read in part."""
    end = min(len(body), le + 1 + MAX_BLOCK)
    root = body.find(b"Root Cause (first observed failure)", le, end)
    if root != -1:
        border = body.find(b"\n====", root, end)
        if border != -1:
            end = border + 1
    return body[le + 1 : end]


WRAP_WIDTHS = frozenset((80, 100, 120, 132, 140, 150, 160, 200, 240, 250, 256))
WRAP_MIN = 60


def _unwrapped(body: bytes, ls: int, le: int) -> bytes | None:
    """The line joined with the lines a fixed-width wrap cut it into, or None. A line is taken
    as hard-wrapped when it is exactly as long as the line before it or a common terminal
    width; its continuations are the following lines of the same length, then one shorter."""
    seg = body[ls:le].rstrip(b"\r")
    width = len(seg)
    if width < WRAP_MIN:
        return None
    prev_start = body.rfind(b"\n", 0, max(ls - 1, 0)) + 1 if ls else -1
    prev = body[prev_start : ls - 1].rstrip(b"\r") if ls > 0 else b""
    # Two records of one length in a row (the same warning from two ranks, stamped alike) are
    # not a wrap: the pieces of a wrapped line do not start alike.
    if len(prev) == width and prev[:8] == seg[:8]:
        return None  # the second of two such records, whatever the width
    same_as_prev = len(prev) == width
    if width not in WRAP_WIDTHS and not same_as_prev:
        return None
    parts = [seg]
    pos = le
    for _ in range(8):
        if pos >= len(body):
            break
        nxt_end = body.find(b"\n", pos + 1)
        nxt_end = len(body) if nxt_end == -1 else nxt_end
        nxt = body[pos + 1 : nxt_end].rstrip(b"\r")
        if not nxt.strip() or len(nxt) > width or nxt[:8] == seg[:8]:
            break  # (a line that starts like the first is the next record, not its rest)
        parts.append(nxt)
        pos = nxt_end
        if len(nxt) < width:
            break
    return b"".join(parts) if len(parts) > 1 else None


# A line that starts a record of its own, not the rest of a sentence: indented traceback
# frames, tracebacks' own lines, bracketed / numbered / stamped records, exception lines, log
# levels, glog's "E1123 ...", markers and rules. Compiled on first use (_rx).
_NEW_RECORD_SRC = (
    r"\s|Traceback|File \"|During handling|The above exception|frame #|#\d|[\[{<(=*>|~^+-]"
    r"|\d{4}-\d\d-\d\d|\d\d?:\d\d:\d\d|\d\d?/\d\d?/\d\d|[A-Za-z_][\w.]*(?:Error|Exception|Warning|Interrupt|Exit)\b"
    r"|(?:INFO|WARN|WARNING|ERROR|DEBUG|CRITICAL|FATAL|NOTE)\b|[IWEF]\d{4} "
)
WORD_WRAP_MIN = 40  # a shorter line is a record of its own, not a line a paste wrapped
WORD_WRAP_LINES = 2  # continuation lines joined at most


def _word_wrapped(body: bytes, ls: int, le: int) -> bytes | None:
    """The line joined with the lines a word wrap broke it into (a notebook or rich console at
    its width, an issue's text wrapped by hand), or None. Taken as wrapped: a line of some
    length that ends inside a sentence (no full stop, colon... or a trailing space where the
    wrap fell) followed by a line that does not start a record of its own. The joined line is
    read as well as the pieces, so a wording cut across the wrap still matches."""
    seg = body[ls:le].rstrip(b"\r")
    if len(seg) < WORD_WRAP_MIN:
        return None
    prefix, text = _text(seg)
    parts = [text]
    pos = le
    for _ in range(WORD_WRAP_LINES):
        at_space = seg[-1:] == b" "  # the wrap fell on a space the line still ends in
        ends_open = parts[-1][-1:].isalnum() or parts[-1][-1:] in ",;-" or at_space
        if not ends_open or pos >= len(body):
            break
        nxt_end = body.find(b"\n", pos + 1)
        nxt_end = len(body) if nxt_end == -1 else nxt_end
        seg = body[pos + 1 : nxt_end].rstrip(b"\r")
        nprefix, nxt = _text(seg)
        # After a trailing space, a bracket goes on the sentence ("connect \n[10.0.0.1]:29500:
        # Connection refused"); a line that ends in a word and is followed by one is a record.
        new_record = _rx("new_record").match(nxt) and not (at_space and nxt[:1] == "[")
        if not nxt or nprefix != prefix or new_record:
            break
        parts.append(nxt)
        pos = nxt_end
    if len(parts) == 1:
        return None
    return (prefix + " ".join(p.strip() for p in parts)).encode("utf-8", "surrogatepass")


MAX_JSON = 8 << 20


def _json_texts(raw: bytes, triggers: Triggers) -> list[str] | None:
    """The text lines inside a structured (JSON) log record: every string value, split into lines,
    so a traceback in a "message" or "exc_info" field is read like a plain one. None when the
    line is not JSON."""
    import json

    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    out: list[str] = []
    stack = [obj]
    while stack and len(out) < 2000:
        o = stack.pop()
        if isinstance(o, str):
            out.extend(ln for ln in o.splitlines() if ln.strip())
        elif isinstance(o, dict):
            stack.extend(reversed(list(o.values())))
        elif isinstance(o, list):
            stack.extend(reversed(o))
    return [t for t in out if triggers.has(t)]


# A message short enough that all its lines fit in the head window is read line by line, trigger
# word or not: a message pasted without its "RuntimeError:" (an issue title, the text of a
# c10::Error's what(), a notebook's last line) holds none, and no line can push another out.
SHORT_TEXT_BYTES = 64 << 10


def scan_text(text: str | bytes, triggers: Triggers | None = None) -> Scan:
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if data and not data.endswith(b"\n"):
        data += b"\n"  # one body: a last line is not cut off from the lines before it
    short = len(data) <= SHORT_TEXT_BYTES and data.count(b"\n") <= KEEP_HEAD
    return scan([data] if data else [], every_line=short, triggers=triggers)


def has_trigger(line: str, triggers: Triggers | None = None) -> bool:
    """The line holds a trigger of the set (by default, kb.scan.triggers.default()): the scan of
    a long log looks at it."""
    return (triggers if triggers is not None else default_triggers()).has(line)
