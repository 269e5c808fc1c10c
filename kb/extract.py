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

# Every error line kb knows holds one of these (lowercase). lint checks each entry's examples
# against this list (KB017), so a signature can never be invisible to the streaming scan.
TRIGGERS = (b"error", b"assert", b"fail", b"cuda", b"nccl", b"memory", b"exception", b"nvidia",
            b"mismatch", b"expected", b"cublas", b"cudnn", b"triton", b"abort", b"timeout",
            b"timed out", b"illegal", b"driver", b"sm_")

CHUNK = 8 << 20
MAX_LINE = 64 << 10  # a longer "line" is cut into pieces of this size
KEEP_LINE = 4096  # characters of a candidate line kept for matching and display
KEEP_HEAD = 400  # first candidate lines kept: the root error is usually early...
KEEP_TAIL = 1600  # ...and the last lines hold the final exception

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[@-Z\\-_]")
# Prefixes stamped on lines by launchers, schedulers, CI systems and loggers. Applied repeatedly
# at the start of a line, so "2024-05-01T10:00:00Z [rank3]: [default0]: ..." is peeled in turn.
_PREFIX = re.compile(
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
    )""",
    re.VERBOSE,
)
_BOX_TAIL = re.compile(r"\s*[│┃║]\s*$")


def clean_line(line: str) -> str:
    """A log line as the program printed it: no colour codes, no launcher or CI prefixes."""
    if "\x1b" in line:
        line = _ANSI.sub("", line)
    line = line.rstrip("\r\n")
    for _ in range(8):
        m = _PREFIX.match(line)
        if not m or m.end() == 0:
            break
        line = line[m.end():]
    if line.endswith(("│", "┃", "║")):
        line = _BOX_TAIL.sub("", line)
    return line.strip()


@dataclass
class Line:
    number: int  # 1-based line number in the input
    text: str  # cleaned
    count: int = 1  # how many times this exact line appeared


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
    return bool(sample) and (sample.count(b"\x00") > len(sample) // 100 or
                             sum(c < 9 or 13 < c < 32 for c in sample) > len(sample) // 10)


def scan(chunks: Iterable[bytes]) -> Scan:
    head: list[Line] = []
    tail: deque[Line] = deque(maxlen=KEEP_TAIL)
    seen: dict[str, Line] = {}  # folded repeats among kept lines
    dropped = 0
    line_no = 0  # newlines before the start of `buf`
    total = 0
    carry = b""
    binary = None

    def keep(number: int, raw: bytes) -> None:
        nonlocal dropped
        text = clean_line(raw[:KEEP_LINE * 2].decode("utf-8", "replace").replace("\x00", ""))[:KEEP_LINE]
        if not text:
            return
        prev = seen.get(text)
        if prev is not None:
            prev.count += 1
            return
        ln = Line(number, text)
        if len(head) < KEEP_HEAD:
            head.append(ln)
        else:
            if len(tail) == tail.maxlen:
                old = tail[0]
                if seen.get(old.text) is old:
                    del seen[old.text]
                dropped += 1
            tail.append(ln)
        seen[text] = ln

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
            line_no = _scan_body(body, line_no, keep)
    if carry:
        _scan_body(carry + b"\n", line_no, keep)
        line_no += 1
    return Scan(head + list(tail), line_no, total, dropped, bool(binary))


def _scan_body(body: bytes, line_no: int, keep) -> int:
    """Find trigger-bearing lines in `body` (complete lines); returns the new line count."""
    low = body.lower()
    starts: set[int] = set()
    for trig in TRIGGERS:
        pos = low.find(trig)
        while pos != -1:
            ls = body.rfind(b"\n", 0, pos) + 1
            le = body.find(b"\n", pos)
            if le == -1:
                le = len(body)
            starts.add(ls)
            pos = low.find(trig, le)
    n = line_no
    prev = 0
    for ls in sorted(starts):
        n += body.count(b"\n", prev, ls)
        prev = ls
        le = body.find(b"\n", ls)
        if le == -1:
            le = len(body)
        seg = body[ls:le]
        if len(seg) > MAX_LINE:
            for i in range(0, len(seg), MAX_LINE):
                piece = seg[i:i + MAX_LINE]
                if any(t in piece.lower() for t in TRIGGERS):
                    keep(n + 1, piece)
        else:
            keep(n + 1, seg)
    return line_no + body.count(b"\n")


def scan_text(text: str | bytes) -> Scan:
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    return scan([data] if data else [])


def has_trigger(line: str) -> bool:
    low = line.lower().encode("utf-8", "replace")
    return any(t in low for t in TRIGGERS)
