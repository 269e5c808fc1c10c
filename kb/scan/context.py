"""The traceback around a kept exception line: the lines the scan would otherwise not keep.

The scan keeps lines that hold a trigger word. A Python traceback's header, its frames
('  File "train.py", line 3, in main') and their source lines rarely hold one, nor do the lines a
long message goes on over. Without them the root failure (kb.diagnosis.root) could name the
exception but not where it was raised, in whose code, or the rest of its message. So a kept line
that ends a traceback carries, as Line.context, the lines above it back to the traceback's
header and the few below it up to a blank line: (offset from the line, text) pairs, the text
with its indentation, which is what tells a frame's source line from the exception line.

Bounded: at most MAX_ABOVE lines above, MAX_BELOW below, MAX_CHARS characters each, and the
walk happens only when a traceback's marks are just above the line, so a line that ends none
costs one short substring search.
"""

from __future__ import annotations

from collections.abc import Callable

from kb.scan.prefixes import rank_of

MAX_ABOVE = 160  # lines: a deep traceback's raising end, where the user's frame usually is
MAX_BELOW = 8  # lines of a message continued after the exception line
MAX_CHARS = 400  # characters kept of each context line
MAX_LOOSE = 12  # lines in a row that are neither a frame nor a header (source, carets, blanks)
LOOK_BACK = 1024  # bytes above a line searched for the marks of a traceback

_HEADER = "Traceback (most recent call last)"
# A traceback is just above when one of these is in the bytes above the line: Python's frame and
# header, IPython's ("File /x.py:3, in f()", "Cell In[4], line 2").
_MARKS = (b'File "', b"Traceback (most recent call last)", b"Cell In[", b", in ")

Context = tuple[tuple[int, str], ...]


def indented(prefix: str, text: str) -> str:
    """The text with the whitespace that stood between the launcher's prefix and it: a frame's
    source line is indented, its exception line is not."""
    ws = prefix[len(prefix.rstrip()) :]
    return ws.expandtabs(4) + text if ws else text


def _depth(prefix: str) -> int:
    return len(prefix) - len(prefix.rstrip())


def _ends_traceback(body: bytes, ls: int, text_of: Callable[[bytes], tuple[str, str]]) -> bool:
    """Whether the line at ls can end a traceback: the line above it (past one blank line, which
    IPython prints there) is a frame, a frame's indented source or caret line, or IPython's
    `--> 12` arrow. A line after an exception line or after ordinary output is not."""
    pos = ls
    for _ in range(2):
        if pos <= 0:
            return False
        start = body.rfind(b"\n", 0, pos - 1) + 1
        p, t = text_of(body[start : pos - 1])
        pos = start
        if not t:
            continue
        return _depth(p) >= 2 or t.startswith(("File ", "Cell In[", "-->", "---->"))
    return False


# What Python (and mp.spawn) print just above a traceback to say how it is tied to the one
# before: the same words each time, so the scan folds their repeats into the first one.
_MARKERS = (
    "The above exception was the direct cause",
    "During handling of the above exception",
    "Exception ignored in",
    "-- Process ",
)


def _marker_above(
    body: bytes, pos: int, k: int, text_of: Callable[[bytes], tuple[str, str]]
) -> list[tuple[int, str]]:
    """The chain marker above a traceback's header (past one blank line), as a context item."""
    for _ in range(2):
        if pos <= 0:
            return []
        start = body.rfind(b"\n", 0, pos - 1) + 1
        p, t = text_of(body[start : pos - 1])
        pos, k = start, k + 1
        if t:
            return [(-k, indented(p, t)[:MAX_CHARS])] if t.startswith(_MARKERS) else []
    return []


def _new_record(p: str, prefix: str) -> bool:
    """A line whose peeled prefix holds a time or a number the exception's own prefix does not:
    the next record of a logger, not a line of the exception's message."""
    p = p.strip()
    return bool(p) and p != prefix.strip() and any(c.isdigit() for c in p)


def around(body: bytes, ls: int, le: int, text_of: Callable[[bytes], tuple[str, str]]) -> Context:
    """The traceback lines above body[ls:le] and the lines its message continues on below, or ()
    when no traceback ends at this line. text_of is the scan's own line cleaner ((prefix, text)),
    passed in because this module sits below kb.scan.extract."""
    if ls <= 0:
        return ()
    above_bytes = body[max(0, ls - LOOK_BACK) : ls]
    if not any(m in above_bytes for m in _MARKS):
        return ()
    prefix, text = text_of(body[ls:le])
    if _depth(prefix) >= 2 or text.startswith(("File ", "Cell In[")):
        return ()  # a frame or its source line: inside a traceback, not at its end
    if not _ends_traceback(body, ls, text_of):
        return ()
    rank = rank_of(prefix) if prefix else None
    above: list[tuple[int, str]] = []
    loose: list[tuple[int, str]] = []
    pos, k = ls, 0
    while pos > 0 and k < MAX_ABOVE:
        start = body.rfind(b"\n", 0, pos - 1) + 1
        p, t = text_of(body[start : pos - 1])
        pos, k = start, k + 1
        if p and rank_of(p) not in (None, rank):
            continue  # another rank's line, printed between this rank's frames
        item = (-k, indented(p, t)[:MAX_CHARS])
        if t.startswith(("File ", "Cell In[")):
            above += loose
            above.append(item)
            loose = []
        elif t.endswith((_HEADER + ":", _HEADER)):
            above += loose
            above.append(item)
            loose = []
            above += _marker_above(body, start, k, text_of)
            break
        else:
            loose.append(item)
            if len(loose) > MAX_LOOSE:
                break
    if not above:
        return ()
    below: list[tuple[int, str]] = []
    pos, k = le, 0
    while pos < len(body) and k < MAX_BELOW:
        end = body.find(b"\n", pos + 1)
        end = len(body) if end == -1 else end
        p, t = text_of(body[pos + 1 : end])
        pos, k = end, k + 1
        if not t:
            break  # a message ends at a blank line
        if p and rank_of(p) not in (None, rank):
            if rank is None:
                break  # the ranks' own output begins: this process's message has ended
            continue
        if _new_record(p, prefix):
            break  # a timestamped log record: the program went on, the message has ended
        below.append((k, indented(p, t)[:MAX_CHARS]))
    above.reverse()
    return tuple(above) + tuple(below)
