"""A log that was not typed: a file (plain or gzip, any size) or a pipe.

The lookup reads it whole, through kb.Engine.lookup on a stream, as `kb lookup --file` does; the
paste box only shows its tail (an editor holding a gigabyte helps nobody). A pipe is copied to a
temporary file as it arrives, so any size fits in bounded memory, and is then a file like any other.

A file that breaks while being read (a gzip cut short by a killed job, a disk error) still gives
its results for what could be read, and the problem in words: never a traceback. Nothing here
imports Textual; everything here blocks, so the app calls it from worker threads.
"""

from __future__ import annotations

import gzip
import io
import os
import tempfile
import zlib
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from kb import open_log

CHUNK = 1 << 20
READ_ERRORS = (OSError, EOFError, zlib.error)


def problem(path: str | os.PathLike[str], e: BaseException) -> str:
    """Why a log cannot be read, in words."""
    name = os.fspath(path)
    if isinstance(e, IsADirectoryError):
        return f"{name} is a folder, not a log file"
    if isinstance(e, FileNotFoundError):
        return f"no such file: {name}"
    if isinstance(e, PermissionError):
        return f"permission denied: {name}"
    if isinstance(e, EOFError):
        return f"{name} is cut short (its gzip stream ends early)"
    if isinstance(e, (zlib.error, gzip.BadGzipFile)) or "CRC check failed" in str(e):
        return f"{name} is a damaged gzip file ({e})"
    if not isinstance(e, READ_ERRORS):
        return str(e) or type(e).__name__  # kb's own errors say it in words already
    return f"cannot read {name}: {getattr(e, 'strerror', None) or e}"


def check(path: str | os.PathLike[str]) -> str | None:
    """Before the TUI opens: can the file be opened and its first bytes read? None when it can."""
    try:
        with open_log(path) as fh:
            fh.read(1)
    except Exception as e:  # kb's reader raises its own errors, in words; the OS its own
        return problem(path, e)
    return None


def check_folder(path: str | os.PathLike[str]) -> str | None:
    """Before the TUI opens: can the folder be listed? None when it can. Which of its files are
    a job's logs is for the lookup to find (and to say, when none is)."""
    try:
        with os.scandir(path):
            pass
    except OSError as e:
        return problem(path, e)
    return None


class TolerantReader(io.RawIOBase):
    """A log stream that ends where it breaks, keeping the error instead of raising it, so a
    lookup gets everything before the break. `read_bytes` counts what came through."""

    def __init__(self, raw: BinaryIO) -> None:
        super().__init__()
        self.raw = raw
        self.error: BaseException | None = None
        self.read_bytes = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        if self.error is not None:
            return 0
        try:  # read1: one read underneath, so what came before a break is returned, not lost
            data = (
                self.raw.read1(len(buffer))
                if hasattr(self.raw, "read1")
                else self.raw.read(len(buffer))
            )
        except READ_ERRORS as e:
            self.error = e
            return 0
        n = len(data)
        buffer[:n] = data
        self.read_bytes += n
        return n

    def close(self) -> None:
        try:
            self.raw.close()
        finally:
            super().close()


def open_tolerant(path: str | os.PathLike[str]) -> tuple[io.BufferedReader, TolerantReader]:
    """(a binary stream for Engine.lookup, the reader that keeps any error). Raises the errors of
    opening the file (missing, a folder, no permission)."""
    raw = TolerantReader(open_log(path))
    return io.BufferedReader(raw, CHUNK), raw


def read_tail(path: str | os.PathLike[str], max_chars: int) -> tuple[str, int, str]:
    """(the end of the log as text, from a line start; its whole size in bytes, gunzipped; the
    problem met while reading, or ""). The tail holds at most max_chars characters."""
    p = Path(path)
    with open(p, "rb") as fh:
        gz = fh.read(2) == b"\x1f\x8b"
        if not gz:
            size = os.fstat(fh.fileno()).st_size
            start = max(0, size - max_chars)
            fh.seek(start)
            return _from_line_start(fh.read(max_chars), start > 0), size, ""
    stream, raw = open_tolerant(p)
    keep: deque[bytes] = deque()
    kept = 0
    with stream:
        while chunk := stream.read(CHUNK):
            keep.append(chunk)
            kept += len(chunk)
            while keep and kept - len(keep[0]) >= max_chars:
                kept -= len(keep.popleft())
        tail = b"".join(keep)
        cut = raw.read_bytes > len(tail) or len(tail) > max_chars
        tail = tail[-max_chars:]
        return (
            _from_line_start(tail, cut),
            raw.read_bytes,
            problem(p, raw.error) if raw.error else "",
        )


def read_window(path: str | os.PathLike[str], number: int, around: int) -> tuple[str, int]:
    """(the lines from `around` before line `number` to `around` after it, the first one's
    number): where a match lies in a log bigger than the tail the paste box shows. Reads the
    file from its start (a gzip has no other way in), stopping after the window."""
    first = max(1, number - around)
    last = number + around
    keep: list[bytes] = []
    n = 0
    rest = b""
    with open_log(path) as fh:
        while n < last:
            chunk = fh.read(CHUNK)
            if not chunk:
                if rest:
                    n += 1
                    if n >= first:
                        keep.append(rest)
                break
            lines = (rest + chunk).split(b"\n")
            rest = lines.pop()
            for raw in lines:
                n += 1
                if n >= first:
                    keep.append(raw)
                if n >= last:
                    break
    return b"\n".join(keep).decode("utf-8", errors="replace"), first


def _from_line_start(data: bytes, cut: bool) -> str:
    if cut:
        nl = data.find(b"\n")
        if 0 <= nl < len(data) - 1:
            data = data[nl + 1 :]
    return data.decode("utf-8", errors="replace")


def spool_path() -> Path:
    """Where a pipe is copied: "stdin.log" in a folder of its own. The name matters: the job
    lookup reads a file's name for a rank ("r12x.log", "_3.log") and skips kb's own files
    ("kb-*"), and a random name could say either."""
    return Path(tempfile.mkdtemp(prefix="kb-tui-")) / "stdin.log"


def remove_spool(path: Path) -> None:
    """The copy of the pipe, and its folder."""
    for gone in (path.unlink, path.parent.rmdir):
        try:
            gone()
        except OSError:
            pass


def spool(
    stream: BinaryIO,
    dest: Path,
    on_progress: Callable[[int], None] | None = None,
    stop: Callable[[], bool] | None = None,
) -> int:
    """Copy a pipe into dest as it arrives (flushed per chunk, so a lookup can read what came so
    far). Returns the bytes copied; stops early when stop() says so."""
    total = 0
    read = getattr(stream, "read1", stream.read)
    with open(dest, "ab") as out:
        while True:
            if stop is not None and stop():
                break
            chunk = read(CHUNK)
            if not chunk:
                break
            out.write(chunk)
            out.flush()
            total += len(chunk)
            if on_progress is not None:
                on_progress(total)
    return total


def human_size(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"
