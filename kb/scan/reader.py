"""Opening a log and reading it as chunks of bytes, safely, whatever it turns out to be.

A log comes as a file, a gzip file (whatever its name), a pipe or FIFO (`--stdin`, `<(cmd)`,
`/dev/stdin`), UTF-8 or (PowerShell's `>`) UTF-16. Some inputs never end or only look small: a
device such as /dev/zero, a stream with no line break at all, a gzip bomb. The reader bounds
each of them and says why it stopped; it never hangs, never loops on a device, and opens a path
once (a FIFO opened twice waits forever for a second writer).

Limits (stated in the README):
- a device file (/dev/zero, /dev/urandom, a disk) is refused: it is not a log;
- so is a file of the kernel's (/proc, /sys): /proc/kmsg waits for kernel messages forever, and
  consumes them; nothing there is a log;
- a path is opened without waiting (O_NONBLOCK) and what was opened is checked, so a file
  swapped for a FIFO or a device after it was looked at is refused, never waited on;
- reading stops at a run of MAX_RUN bytes with no line break (a text log has line breaks);
- a gzip stream stops once it has given more than BOMB_MIN bytes at more than BOMB_RATIO times
  its compressed size (real logs compress 5-100x; a bomb of zeros 1000x);
- a truncated gzip stream gives what it held before the cut, with a warning, as `zcat` does.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator

from kb.errors import InputError

TYPE_CHECKING = False  # typing stays unimported at run time (kb lookup's cold start)
if TYPE_CHECKING:
    from typing import IO, BinaryIO

    from kb.scan.extract import Scan
    from kb.scan.triggers import Triggers

CHUNK = 8 << 20
MAX_RUN = 256 << 20  # bytes with no line break after which an input is not a text log
BOMB_RATIO = 500
BOMB_MIN = 256 << 20


_KERNEL_DEVS: set[int] | None = None


def _kernel_devs() -> set[int]:
    """The devices of /proc and /sys (pseudo-files of the kernel's), looked up once."""
    global _KERNEL_DEVS
    if _KERNEL_DEVS is None:
        devs = set()
        for root in ("/proc", "/sys"):
            try:
                devs.add(os.stat(root).st_dev)
            except OSError:
                pass
        _KERNEL_DEVS = devs
    return _KERNEL_DEVS


def not_a_log(st: os.stat_result, path: str, *, fifo: bool = False, resolve: bool = True) -> str:
    """Why what stat says of path is no log file to open, or '' when it is one: a folder, a
    device, a socket, a file of the kernel's (/proc, /sys), a FIFO unless `fifo` (one given
    on purpose: `<(cmd)`, /dev/stdin). resolve: also by where the path leads (a walk that has
    checked its links already passes False: a realpath per file costs a stat per folder)."""
    mode = st.st_mode
    if stat.S_ISDIR(mode):
        return f"{path} is a folder, not a log file"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return f"{path} is a device, not a log file"
    if stat.S_ISFIFO(mode):
        return "" if fifo else f"{path} is a FIFO (a pipe), not a log file"
    if not stat.S_ISREG(mode):
        return f"{path} is not a regular file (a socket?), not a log file"
    if st.st_dev in _kernel_devs() or (
        resolve and os.path.realpath(path).startswith(("/proc/", "/sys/"))
    ):
        return f"{path} is a file of the kernel's (/proc, /sys), not a log file"
    return ""


def open_checked(path: str, *, fifo: bool = False) -> BinaryIO:
    """path opened for reading without waiting on it, then checked (not_a_log): a regular
    file (or, with `fifo`, a FIFO or pipe, then read blocking as usual). Raises InputError.
    A FIFO given on purpose is opened as it always was, waiting for its writer."""
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
    try:
        waits = fifo and stat.S_ISFIFO(os.stat(path).st_mode)
    except OSError:
        waits = False
    if not waits:
        flags |= getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise InputError(f"no such file: {path}") from None
    except PermissionError:
        raise InputError(f"permission denied: {path}") from None
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror or e}") from None
    try:
        why = not_a_log(os.fstat(fd), path, fifo=fifo)
        if why:
            raise InputError(why)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)  # a FIFO is then read as any pipe is
        return open(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def open_log(path: str | os.PathLike[str]) -> BinaryIO:
    """A log file as bytes, gunzipped when it is gzip (whatever its name). A FIFO or pipe is
    opened once and never seeked. Raises InputError for what is no log file."""
    p = os.fspath(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise InputError(f"no such file: {p}") from None
    except OSError as e:
        raise InputError(f"cannot read {p}: {e.strerror or e}") from None
    why = not_a_log(st, p, fifo=True)
    if why:
        raise InputError(why)
    fh = open_checked(p, fifo=True)
    # peek, not read + seek: a pipe cannot seek back.
    if fh.peek(2)[:2] == b"\x1f\x8b":  # type: ignore[attr-defined]
        return Gunzip(fh)  # type: ignore[return-value]
    return fh


class Gunzip:
    """A gzip file's data, read as a stream. Unlike gzip.GzipFile it gives back everything it
    could decompress before a truncated end (GzipFile drops the last read's data and raises),
    keeps at most one chunk in memory, reads every member of a concatenated file, and knows how
    many compressed bytes it has read (for the bomb check). `truncated` says the data ended
    before the stream's end marker; `damaged` names a decompression error."""

    # Compressed input goes to zlib a few KiB at a time: a call that meets damaged data raises
    # and loses its own output, so small calls keep all but the last few KiB before the damage.
    def __init__(self, fh: IO[bytes], chunk: int = 4 << 10):
        self.fileobj = fh
        self.chunk = chunk
        self.packed = 0
        self.truncated = False
        self.damaged = ""
        self.packed_good = False  # some data came out before any damage
        import zlib  # only for gzip input

        self._zlib = zlib
        self._z = zlib.decompressobj(31)
        self._pending = b""  # compressed input not yet given to the decompressor
        self._done = False

    def read(self, size: int = -1) -> bytes:
        size = size if size and size > 0 else CHUNK
        out: list[bytes] = []
        got = 0
        while got < size and not self._done:
            if not self._pending:
                data = self.fileobj.read(self.chunk)
                if not data:
                    self._done = True
                    self.truncated = not self._z.eof
                    break
                self.packed += len(data)
                self._pending = data
            data, self._pending = self._pending, b""
            try:
                piece = self._z.decompress(data, size - got)
            except self._zlib.error as e:
                self.damaged = str(e)
                self._done = True
                break
            self._pending = self._z.unconsumed_tail  # input held back by the size limit
            if piece:
                out.append(piece)
                got += len(piece)
                self.packed_good = True
            if self._z.eof:
                rest = self._z.unused_data + self._pending
                self._pending = b""
                # Another member follows (`cat a.gz b.gz`), or trailing padding.
                if rest.lstrip(b"\x00"):
                    self._z = self._zlib.decompressobj(31)
                    self._pending = rest.lstrip(b"\x00")
                elif not self._more():
                    self._done = True
        return b"".join(out)

    def _more(self) -> bool:
        """After a member's end: whether the file goes on with another member."""
        data = self.fileobj.read(self.chunk)
        if not data:
            return False
        self.packed += len(data)
        self._z = self._zlib.decompressobj(31)
        self._pending = data
        return True

    def close(self) -> None:
        self.fileobj.close()

    def __enter__(self) -> Gunzip:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ChunkReader:
    """Chunks of a stream, bounded as the module says; `warnings` says why reading stopped
    early, and `stopped` whether it did. UTF-16 (a byte-order mark) is decoded to UTF-8."""

    def __init__(self, stream: IO[bytes], name: str = "<input>", size: int | None = None):
        self.stream = stream
        self.name = name
        self.size = size or CHUNK
        self.warnings: list[str] = []
        self.stopped = False

    def _raw(self) -> Iterator[bytes]:
        read = self.stream.read
        while True:
            try:
                b = read(self.size)
            except OSError as e:
                self.warnings.append(f"{self.name}: stopped reading: {e.strerror or e}")
                self.stopped = True
                return
            if not b:
                break
            yield b
        gz = self.stream if isinstance(self.stream, Gunzip) else None
        if gz is not None and gz.damaged and not gz.packed_good:
            raise InputError(f"cannot read {self.name}: not gzip data ({gz.damaged})")
        if gz is not None and gz.damaged:
            self.warnings.append(
                f"{self.name}: stopped at a damaged part of the gzip data ({gz.damaged}); "
                "read what came before it"
            )
            self.stopped = True
        elif gz is not None and gz.truncated:
            self.warnings.append(
                f"{self.name}: the gzip data ends early (a truncated file); read what it held "
                "before the cut"
            )
            self.stopped = True

    def _compressed_pos(self) -> int | None:
        return self.stream.packed if isinstance(self.stream, Gunzip) else None

    def __iter__(self) -> Iterator[bytes]:
        total = 0
        run = 0  # bytes since the last line break
        decoder = None
        first = True
        for b in self._raw():
            if first:
                first = False
                bom = b[:2]
                if bom in (b"\xff\xfe", b"\xfe\xff"):  # UTF-16's byte-order marks
                    import codecs

                    decoder = codecs.getincrementaldecoder("utf-16")("replace")
                    self.warnings.append(f"{self.name}: UTF-16 text, read as such")
            if decoder is not None:
                b = decoder.decode(b).encode("utf-8")
            total += len(b)
            nl = b.rfind(b"\n")
            run = len(b) - nl - 1 if nl != -1 else run + len(b)
            yield b
            if run > MAX_RUN:
                self.warnings.append(
                    f"{self.name}: stopped reading after {MAX_RUN >> 20} MiB with no line break "
                    "(not a text log?)"
                )
                self.stopped = True
                return
            if total > BOMB_MIN:
                packed = self._compressed_pos()
                if packed and total > BOMB_RATIO * packed:
                    self.warnings.append(
                        f"{self.name}: stopped reading: the gzip data grew {total // packed}x "
                        f"({total >> 20} MiB from {max(packed >> 20, 1)} MiB), more than any log "
                        f"does (limit {BOMB_RATIO}x)"
                    )
                    self.stopped = True
                    return


def _chained(first: bytes, second: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    yield first
    if second:
        yield second
    yield from rest


def read_scan(
    stream: IO[bytes],
    name: str = "<input>",
    every_line: bool = False,
    triggers: Triggers | None = None,
) -> Scan:
    """The scan of a stream read through a ChunkReader, with the reader's warnings; `triggers`:
    the knowledge base's trigger set (kb.scan.triggers).

    A stream that turns out as short as a pasted message is read as one (every line kept, as
    kb.scan.extract.scan_text does): the same text gives the same answer whether it came as an
    argument, a pipe or a file."""
    from kb.scan.extract import KEEP_HEAD, SHORT_TEXT_BYTES, scan

    reader = ChunkReader(stream, name)
    chunks: Iterable[bytes] = reader
    if not every_line:
        it = iter(reader)
        first = next(it, b"")
        rest = next(it, None) if len(first) <= SHORT_TEXT_BYTES else b""
        if rest is None:  # the whole input, and short
            every_line = first.count(b"\n") <= KEEP_HEAD
            chunks = [first] if first else []
        else:
            chunks = _chained(first, rest, it)
    s = scan(chunks, every_line=every_line, triggers=triggers)
    s.warnings.extend(reader.warnings)
    return s
