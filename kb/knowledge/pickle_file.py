"""kb's caches on disk: one pickle per file, written atomically and read without trusting it.

Both the entry cache (kb.knowledge.base) and the catalog's (kb.catalog.cache) are written here:
to a temporary file in the same folder, then renamed over the old one, so a reader running
beside a writer sees the old file or the new one, never half of either. A file that cannot be
read back (cut short, written by another Python, an older kb's classes) is a miss, never an
error: the caller builds it again.
"""

from __future__ import annotations

import gc
import os
import pickle
from collections.abc import Iterator
from contextlib import contextmanager

# What reading a damaged or foreign pickle raises: each means "not a usable cache".
UNREADABLE = (
    OSError,
    pickle.UnpicklingError,
    EOFError,
    AttributeError,
    ImportError,
    TypeError,
    ValueError,
    IndexError,
    KeyError,
    MemoryError,
)


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off while many long-lived objects are made at once
    (unpickling the entries, indexing their signatures): it would walk them again and again
    looking for cycles there are none of. Reference counting frees everything as usual."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def read(path: str | os.PathLike[str], mark_used: bool = False) -> object | None:
    """The object pickled at path, or None when there is none or it cannot be read back.
    mark_used: touch it (at most once a day) so a clean-up by age keeps a cache still read."""
    try:
        with open(path, "rb") as fh, gc_paused():
            value = pickle.load(fh)
            if mark_used:
                _mark_used(fh.fileno())
    except UNREADABLE:
        return None
    return value


def write(path: str | os.PathLike[str], value: object) -> str | None:
    """Pickle value to path atomically; None when written, else why not (the OS's words)."""
    import tempfile  # only when (re)writing a cache: it drags shutil in

    folder = os.path.dirname(os.fspath(path)) or "."
    tmp = None
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            pickle.dump(value, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)  # atomic: a concurrent reader sees the old file or the new one
    except (OSError, pickle.PicklingError, RecursionError) as e:
        if tmp:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        return getattr(e, "strerror", None) or str(e) or type(e).__name__
    return None


def _mark_used(fd: int) -> None:
    """Clean-ups remove caches nobody used for a long time, judged by their mtime: a cache read
    every day but written long ago must not look unused. Touched at most once a day."""
    import time

    try:
        if os.fstat(fd).st_mtime < time.time() - 86400:
            os.utime(fd)
    except (OSError, NotImplementedError):  # read-only folder, or no utime on an fd here
        pass
