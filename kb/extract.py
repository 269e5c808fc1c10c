"""Log text -> the lines that can hold an error, cleaned of the noise real logs carry.

Streaming and bounded: input comes as byte chunks; each chunk is lowercased once and searched for
a handful of trigger words with bytes.find (memchr-fast), so a line without one costs nothing
in Python. Only the first and last candidate lines are kept (root errors come early, summaries
late), repeated lines are folded into one with a count, and a giant line is cut into pieces, so
memory stays bounded whatever the input.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass
from typing import BinaryIO, Iterable, Iterator

# Every error line kb knows holds one of these: TRIGGERS in any case, EXACT_TRIGGERS as written
# ("cuda" in lower case is everywhere in training logs: cuda:0, torch.cuda, .cuda()). lint checks
# each entry's examples against them (KB009's hint), so no signature is invisible to the scan.
TRIGGERS = (b"error", b"assert", b"fail", b"nccl", b"out of memory", b"exception", b"nvidia",
            b"mismatch", b"expected", b"cublas", b"cudnn", b"triton", b"abort", b"timeout",
            b"timed out", b"illegal", b"driver", b"sm_", b"capability", b"nvrm", b"xid",
            # Native crashes, signals and broken installs rarely say "error".
            b"fault", b"segv", b"sigbus", b"sigfpe", b"sigill", b"sigkill", b"sigterm",
            b"core dumped", b"floating point", b"killed", b"signal", b"terminate",
            b"undefined symbol", b"no module named", b"shared object", b"not implemented",
            b"unsupported", b"not supported", b"no attribute", b"cannot", b"can't", b"could not",
            b"unable", b"invalid", b"warning", b"not compiled", b"corrupt", b"double free")
EXACT_TRIGGERS = (b"CUDA",)

CHUNK = 8 << 20
MAX_LINE = 64 << 10  # a longer "line" is cut into pieces of this size
KEEP_LINE = 4096  # characters of a candidate line kept for matching and display
KEEP_HEAD = 400  # first candidate lines kept: the root error is usually early...
KEEP_TAIL = 1600  # ...and the last lines hold the final exception

_ANSI_SRC = (r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[@-Z\\-_]")
# Prefixes stamped on lines by launchers, schedulers, CI systems and loggers. Applied repeatedly
# at the start of a line, so "2024-05-01T10:00:00Z [rank3]: [default0]: ..." is peeled in turn.
_PREFIX_SRC = (
    r"""^(?:
        \s+
      | \d{4}-\d\d-\d\d[T\s]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\s*   # ISO timestamps
      | \[\d{4}-\d\d-\d\d[^\]]*\]\s*                                             # [2024-01-01 ...]
      | \d\d:\d\d:\d\d(?:[.,]\d+)?\s*                                            # 12:00:01.123
      | \[(?:rank|default|local_rank)?\d+\]\s*:?\s*                              # [rank3]: [default0]:
      | rank\d+\s*:\s*                                                           # rank3:
      | \[\d+,\d+\]<std(?:out|err)>:\s*                                          # mpirun --tag-output
      | \d{1,5}:\s(?=\S)                                                         # srun --label "3: "
      | \#\#\[(?:error|warning|debug|group|endgroup)\]\s*                        # GitHub Actions
      | \[?(?:ERROR|WARNING|WARN|INFO|DEBUG|CRITICAL|FATAL)\]?\s*[:\-|]?\s+        # log levels
      | [│┃║|]\s*                                                                # rich / box borders
      | (?:E\s{3,})                                                              # pytest failure lines
      | >+\s*                                                                    # quoted replies
      | [-*]\s+(?=\*\*)                                                          # Markdown list items
    )"""
)
_BOX_TAIL_SRC = r"\s*[│┃║]\s*$"
# A line can only carry a prefix if it starts with one of these; most error lines start with a
# letter of an exception name and skip the (lazily compiled) prefix regex entirely.
_PREFIX_START = frozenset(" \t0123456789[#rEIWDCF│┃║|>-*")
_RX: dict[str, re.Pattern] = {}


def _rx(name: str) -> re.Pattern:
    rx = _RX.get(name)
    if rx is None:
        src = {"ansi": (_ANSI_SRC, 0), "prefix": (_PREFIX_SRC, re.VERBOSE), "box": (_BOX_TAIL_SRC, 0)}[name]
        rx = _RX[name] = re.compile(*src)
    return rx


def clean_line(line: str) -> str:
    """A log line as the program printed it: no colour codes, no launcher or CI prefixes."""
    if "\x1b" in line:
        line = _rx("ansi").sub("", line)
    line = line.rstrip("\r\n")
    if line[:1] in _PREFIX_START:
        prefix = _rx("prefix")
        for _ in range(8):
            m = prefix.match(line)
            if not m or m.end() == 0:
                break
            line = line[m.end():]
    if line.endswith(("│", "┃", "║")):
        line = _rx("box").sub("", line)
    if "**" in line:  # Markdown emphasis in pasted reports: "**RuntimeError: CUDA out of memory.**"
        line = line.replace("**", "")
    return line.strip()


@dataclass
class Line:
    number: int  # 1-based line number in the input
    text: str  # cleaned
    count: int = 1  # how many times this exact line appeared
    after: str = ""  # for an OOM line: the lines after it, where a wrapped message's figures went


@dataclass
class Scan:
    lines: list[Line]  # candidate lines in input order (head, then tail)
    total_lines: int
    total_bytes: int
    dropped: int  # candidate lines between head and tail that were not kept
    binary: bool  # the input looked like binary data, not a log


def iter_chunks(stream: BinaryIO, size: int = CHUNK) -> Iterator[bytes]:
    while True:
        b = stream.read(size)
        if not b:
            return
        yield b


def _looks_binary(first: bytes) -> bool:
    sample = first[:8192]
    if not sample:
        return False
    # Logs are text: few NULs, few control bytes, and (whatever the locale) mostly valid UTF-8.
    return (sample.count(b"\x00") > len(sample) // 100
            or sum(c < 9 or 13 < c < 32 for c in sample) > len(sample) // 10
            or sample.decode("utf-8", "replace").count("\ufffd") > len(sample) // 20)


class _Window:
    """The kept candidate lines: the first KEEP_HEAD distinct ones and the last KEEP_TAIL, with
    repeats folded into a count on their first occurrence."""

    def __init__(self):
        self.head: list[Line] = []
        self.tail: deque[Line] = deque(maxlen=KEEP_TAIL)
        self.seen: dict[str, Line] = {}
        self.dropped = 0

    @property
    def head_full(self) -> bool:
        return len(self.head) >= KEEP_HEAD

    def add(self, number: int, raw: bytes, count: int = 1, after: bytes = b"") -> bool:
        """Keep a line; False when it was a repeat (or blank after cleaning)."""
        text = clean_line(raw[:KEEP_LINE * 2].decode("utf-8", "replace").replace("\x00", ""))[:KEEP_LINE]
        if not text:
            return False
        prev = self.seen.get(text)
        if prev is not None:
            prev.count += count
            return False
        ln = Line(number, text, count)
        if after:
            ln.after = " ".join(clean_line(a) for a in after.decode("utf-8", "replace").splitlines())[:KEEP_LINE]
        if not self.head_full:
            self.head.append(ln)
        else:
            if len(self.tail) == self.tail.maxlen:
                old = self.tail[0]
                if self.seen.get(old.text) is old:
                    del self.seen[old.text]
                self.dropped += 1
            self.tail.append(ln)
        self.seen[text] = ln
        return True


def _hyperscan_db():
    """A Hyperscan database of the triggers (caseless), or None where Hyperscan is not installed
    (it is an x86-64 Linux dependency) or disabled with KB_NO_HYPERSCAN=1."""
    global _HS_DB
    if _HS_DB is False:
        import os

        _HS_DB = None
        if not os.environ.get("KB_NO_HYPERSCAN"):
            try:
                import hyperscan

                db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
                words = TRIGGERS + EXACT_TRIGGERS
                db.compile(expressions=[re.escape(t.decode()).encode() for t in words],
                           ids=list(range(len(words))),
                           flags=[hyperscan.HS_FLAG_CASELESS] * len(TRIGGERS) + [0] * len(EXACT_TRIGGERS))
                _HS_DB = db
            except Exception:  # no wheel for this platform, or a CPU without SSSE3
                _HS_DB = None
    return _HS_DB


_HS_DB = False
HYPERSCAN_MIN = 1 << 20  # below this, lower() + find is faster than calling into Hyperscan


def _trigger_offsets(body: bytes) -> list[int]:
    """Offsets in `body` where a trigger word ends or starts (any offset inside the line does)."""
    db = _hyperscan_db() if len(body) >= HYPERSCAN_MIN else None
    if db is not None:
        offs: list[int] = []
        add = offs.append
        db.scan(body, match_event_handler=lambda _id, _frm, to, _fl, _ctx: add(to - 1))
        offs.sort()
        return offs
    low = body.lower()
    offs = []
    for hay, words in ((low, TRIGGERS), (body, EXACT_TRIGGERS)):
        for trig in words:
            pos = hay.find(trig)
            while pos != -1:
                offs.append(pos)
                pos = hay.find(trig, pos + len(trig))
    offs.sort()
    return offs


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


def scan(chunks: Iterable[bytes]) -> Scan:
    win = _Window()
    line_no = 0  # newlines before the start of the current body
    total = 0
    carry = b""
    binary = None
    for chunk in chunks:
        total += len(chunk)
        if binary is None:
            binary = _looks_binary(chunk)
        buf = carry + chunk if carry else chunk
        end = buf.rfind(b"\n") + 1
        if end == 0 and len(buf) > MAX_LINE:
            end = len(buf)  # a giant line: process it in pieces rather than hold it whole
        body, carry = buf[:end], buf[end:]
        if body:
            line_no = _scan_body(body, line_no, win)
    if carry:
        _scan_body(carry + b"\n", line_no, win)
        line_no += 1
    return Scan(win.head + list(win.tail), line_no, total, win.dropped, bool(binary))


def _scan_body(body: bytes, line_no: int, win: _Window) -> int:
    """Keep the trigger-bearing lines of `body` (complete lines); returns the new line count."""
    cands = _candidate_lines(body, _trigger_offsets(body))
    # Lines that can still be kept: those filling the head, then, of the rest, only the last
    # KEEP_TAIL distinct ones (anything earlier would be pushed out of the tail by them). Walking
    # back from the end, folding exact repeats as it goes, bounds the work on a log with a
    # million candidate lines and keeps earlier distinct lines behind a flood of repeats.
    i = 0 if win.head_full else min(len(cands), KEEP_HEAD - len(win.head))
    chosen: list[tuple[int, int, int]] = [(ls, le, 1) for ls, le in cands[:i]]
    firsts: dict[bytes, list[int]] = {}
    j = len(cands)
    while j > i and len(firsts) < KEEP_TAIL:
        j -= 1
        ls, le = cands[j]
        key = body[ls:min(le, ls + 512)]
        got = firsts.get(key)
        if got is None:
            firsts[key] = [ls, le, 1]
        else:
            got[0], got[1], got[2] = ls, le, got[2] + 1  # keep the earliest occurrence
    win.dropped += j - i
    chosen += sorted(tuple(v) for v in firsts.values())
    n = line_no
    prev = 0
    for ls, le, count in chosen:
        n += body.count(b"\n", prev, ls)
        prev = ls
        seg = body[ls:le]
        if len(seg) > MAX_LINE:
            for k in range(0, len(seg), MAX_LINE):
                piece = seg[k:k + MAX_LINE]
                if _has_trigger_bytes(piece):
                    win.add(n + 1, piece)
        else:
            after = b""
            if b"of memory" in seg and b"total capacity" not in seg:
                # A pasted OOM message is often wrapped: its figures are on the next lines.
                end = le
                for _ in range(4):
                    nxt = body.find(b"\n", end + 1)
                    end = nxt if nxt != -1 else len(body)
                after = body[le + 1:end][:KEEP_LINE]
            win.add(n + 1, seg, count, after)
    return n + body.count(b"\n", prev)


def scan_text(text: str | bytes) -> Scan:
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if data and not data.endswith(b"\n"):
        data += b"\n"  # one body: a last line is not cut off from the lines before it
    s = scan([data] if data else [])
    return s


def _has_trigger_bytes(raw: bytes) -> bool:
    low = raw.lower()
    return any(t in low for t in TRIGGERS) or any(t in raw for t in EXACT_TRIGGERS)


def has_trigger(line: str) -> bool:
    return _has_trigger_bytes(line.encode("utf-8", "replace"))
