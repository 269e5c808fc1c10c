"""kb's caches on disk: one pickle per file, written atomically and read without trusting it.

Both the entry cache (kb.knowledge.base) and the catalog's (kb.catalog.cache) are written here:
to a temporary file in the same folder, then renamed over the old one, so a reader running
beside a writer sees the old file or the new one, never half of either. A file that cannot be
read back (cut short, written by another Python, an older kb's classes) is a miss, never an
error: the caller builds it again.

A pickle runs code when read, so a cache is only read when this user wrote it: each file ends in
a MAC of its bytes (HMAC-SHA256) under a key of the user's own, kept in a 0600 file in the
cache folder (KEY_NAME) and made with the first cache. A file whose MAC does not check (planted,
written by an older kb, or under another key), one owned by another user or writable by group or
others, is never unpickled: it is a miss, and the cache is built again over it. The folder
itself is checked by kb.paths.state_folder (a folder others can write is not used).
"""

from __future__ import annotations

import gc
import os

from kb.model.cpickle import pickle

TYPE_CHECKING = False  # typing is not imported on a lookup's start-up
if TYPE_CHECKING:
    from typing import Any

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


class gc_paused:
    """The cyclic garbage collector off while many long-lived objects are made at once
    (unpickling the entries, indexing their signatures): it would walk them again and again
    looking for cycles there are none of. Reference counting frees everything as usual.
    (A class, not contextlib.contextmanager: a cold lookup does not import contextlib.)"""

    def __enter__(self) -> None:
        self.was = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self.was:
            gc.enable()


KEY_NAME = ".kb-cache-key"
_MAGIC = b"\nkb-mac1"  # the trailer's last bytes: the MAC (32 bytes) then this
_TAG = 32
_KEYS: dict[str, bytes] = {}  # folder -> this user's key, once read
# Files refused for their owner or mode (said by the knowledge base's warnings).
REFUSED: list[str] = []


def _mac(data: bytes | bytearray | memoryview, key: bytes, name: str) -> bytes:
    """HMAC-SHA256 of the file's name and bytes (OpenSSL's: twice as fast as BLAKE2b here on
    a 13 MB catalog index)."""
    h = _hmac(key, name)
    h.update(data)
    return h.digest()


def _hmac(key: bytes, name: str) -> Any:
    """An HMAC-SHA256 begun with a name, to be fed its bytes. Straight from _hashlib, as the
    hmac module itself does: importing hmac and hashlib around it cost a cold lookup about a
    millisecond more."""
    head = name.encode("utf-8", "surrogateescape") + b"\0"
    try:
        from _hashlib import hmac_new
    except ImportError:  # a Python built without OpenSSL
        import hmac

        return hmac.new(key, head, "sha256")
    return hmac_new(key, head, digestmod="sha256")


def _read_key(folder: str) -> bytes | None:
    """This user's key in folder: a regular file of 32 bytes that is the user's and no one
    else's (mode 0600 or stricter), else None."""
    import stat

    from kb.paths import _euid

    path = os.path.join(folder, KEY_NAME)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        uid = _euid()
        if not stat.S_ISREG(st.st_mode) or (uid >= 0 and st.st_uid != uid) or st.st_mode & 0o077:
            return None
        key = os.read(fd, _TAG + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    return key if len(key) == _TAG else None


def _key(folder: str, create: bool) -> bytes | None:
    """The key in folder (remembered for reads; read again for each write, so a folder
    emptied and keyed anew by another process is written under its new key)."""
    folder = os.path.abspath(folder)
    key = None if create else _KEYS.get(folder)
    if key is None:
        key = _read_key(folder)
        if key is None and create:
            key = _make_key(folder)
        if key is not None:
            _KEYS[folder] = key
    return key


def _make_key(folder: str) -> bytes | None:
    """A new random key, linked into place whole (two writers: the first one's stands)."""
    import tempfile

    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".kb-cache-key.")  # 0600 whatever the umask
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(os.urandom(_TAG))
        try:
            os.link(tmp, os.path.join(folder, KEY_NAME))
        except FileExistsError:
            pass
    finally:
        os.unlink(tmp)
    return _read_key(folder)


def _check_file(path: str, st: os.stat_result) -> bool:
    """Whether a cache file may be read: a regular file of this user's nobody else can write."""
    import stat

    from kb.paths import _euid

    uid = _euid()
    if not stat.S_ISREG(st.st_mode):
        return False
    if (uid >= 0 and st.st_uid != uid) or st.st_mode & 0o022:
        note = (
            f"refused the cache file {path}: owned by uid {st.st_uid}, mode "
            f"{st.st_mode & 0o7777:04o} (not this user's alone); it is built again"
        )
        if note not in REFUSED:
            REFUSED.append(note)
        return False
    return True


def read(path: str | os.PathLike[str], mark_used: bool = False) -> object | None:
    """The object pickled at path, or None when there is none or it cannot be read back: not
    this user's, its MAC does not check, or damaged. mark_used: touch it (at most once a day)
    so a clean-up by age keeps a cache still read."""
    path = os.fspath(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        if not _check_file(path, os.fstat(fd)):
            return None
        key = _key(os.path.dirname(path) or ".", create=False)
        if key is None:
            return None
        with open(fd, "rb", closefd=False) as fh:
            data = fh.read()
        end = len(data) - len(_MAGIC) - _TAG
        if end < 0 or not data.endswith(_MAGIC):
            return None
        body = memoryview(data)[:end]
        if not _same(_mac(body, key, os.path.basename(path)), data[end : -len(_MAGIC)]):
            return None
        with gc_paused():
            value = pickle.loads(body)
        if mark_used:
            _mark_used(fd)
    except UNREADABLE:
        return None
    finally:
        os.close(fd)
    return value


def _same(a: bytes, b: bytes) -> bool:
    from _operator import _compare_digest  # hmac.compare_digest itself, without hmac

    return _compare_digest(a, b)


def write(path: str | os.PathLike[str], value: object) -> str | None:
    """Pickle value to path atomically, private (0600 in a 0700 folder, whatever the umask) and
    with its MAC; None when written, else why not (the OS's words)."""
    import tempfile  # only when (re)writing a cache: it drags shutil in

    from kb.paths import make_private_folder

    path = os.fspath(path)
    folder = os.path.dirname(path) or "."
    tmp = None
    try:
        make_private_folder(folder)
        key = _key(folder, create=True)
        if key is None:
            return f"its key file {os.path.join(folder, KEY_NAME)} is not this user's alone"
        data = dumps(value)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.write(_mac(data, key, os.path.basename(path)))
            fh.write(_MAGIC)
        os.replace(tmp, path)  # atomic: a concurrent reader sees the old file or the new one
    except (OSError, pickle.PicklingError, RecursionError) as e:
        if tmp:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        return getattr(e, "strerror", None) or str(e) or type(e).__name__
    return None


SEAL_NAME = "kb.seal"  # a folder's MAC (kb.knowledge.index: Whoosh pickles its table of contents)


def _folder_mac(folder: str, key: bytes) -> bytes | None:
    """HMAC-SHA256 of every file in folder (names, sizes and bytes, in name order; the seal
    itself left out), or None when one is not a regular file of this user's alone."""
    names = sorted(n for n in os.listdir(folder) if n != SEAL_NAME)
    h = _hmac(key, os.path.basename(folder))
    h.update(b"kb-folder\0")
    for name in names:
        path = os.path.join(folder, name)
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0))
        try:
            if not _check_file(path, os.fstat(fd)):
                return None
            with open(fd, "rb", closefd=False) as fh:
                data = fh.read()
        finally:
            os.close(fd)
        h.update(name.encode("utf-8", "surrogateescape") + b"\0%d\0" % len(data))
        h.update(data)
    return h.digest()


def seal(folder: str | os.PathLike[str]) -> str | None:
    """Write the MAC of a folder of files kb made (under the key of the folder above it, the
    state folder): read back by sealed() before anything in it is unpickled. None when sealed,
    else why not."""
    folder = os.fspath(folder)
    try:
        key = _key(os.path.dirname(os.path.abspath(folder)), create=True)
        mac = _folder_mac(folder, key) if key is not None else None
        if mac is None:
            return "its files or the key are not this user's alone"
        fd = os.open(
            os.path.join(folder, SEAL_NAME),
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0),
            0o600,
        )
        with os.fdopen(fd, "wb") as fh:
            fh.write(mac + _MAGIC)
    except OSError as e:
        return e.strerror or str(e)
    return None


def sealed(folder: str | os.PathLike[str]) -> bool:
    """Whether a folder's files are, byte for byte, those seal() sealed under this user's key:
    a folder planted or changed by anyone else (a Whoosh table of contents whose pickle runs
    code) is never opened."""
    folder = os.fspath(folder)
    try:
        key = _key(os.path.dirname(os.path.abspath(folder)), create=False)
        if key is None:
            return False
        path = os.path.join(folder, SEAL_NAME)
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0))
        try:
            if not _check_file(path, os.fstat(fd)):
                return False
            want = os.read(fd, _TAG + len(_MAGIC) + 1)
        finally:
            os.close(fd)
        if len(want) != _TAG + len(_MAGIC) or not want.endswith(_MAGIC):
            return False
        got = _folder_mac(folder, key)
    except OSError:
        return False
    return got is not None and _same(got, want[:_TAG])


def _record(cls: type, state: dict) -> object:
    """A record (kb.model.record) as dumps() pickles it: made without __init__, as pickle
    makes any object, in one call instead of pickle's generic two steps."""
    obj: object = object.__new__(cls)
    obj.__dict__.update(state)
    return obj


def _plain_record(cls: type) -> bool:
    """A record class that pickles as its __dict__ alone (kb.model.Entry pickles itself)."""
    return (
        hasattr(cls, "__record_fields__")
        and cls.__reduce_ex__ is object.__reduce_ex__
        and cls.__reduce__ is object.__reduce__
        and getattr(cls, "__getstate__", None) is getattr(object, "__getstate__", None)
        and not hasattr(cls, "__setstate__")
        and not hasattr(cls, "__slots__")
    )


_PLAIN: dict[type, bool] = {}


def _inflate(packed: bytes) -> object:
    """What _Deflated packed: the pickle inside, decompressed (see _smaller)."""
    import zlib

    return pickle.loads(zlib.decompress(packed))


class _Deflated:
    def __init__(self, packed: bytes) -> None:
        self.packed = packed

    def __reduce__(self) -> tuple[object, tuple[bytes]]:
        return (_inflate, (self.packed,))


def _smaller(reduced: object) -> object:
    """An entry's reduction (kb.model.Entry.__reduce__: its summary, and its details as a
    pickle of their own, read when first shown) with the details compressed: unpickling them
    gives the same values through _inflate. Most of an entry cache is details (2 of 3 MB), which
    every cold lookup read, checked and copied; compressed they are a third of that."""
    if not (isinstance(reduced, tuple) and len(reduced) == 2 and isinstance(reduced[1], tuple)):
        return NotImplemented
    make, args = reduced
    if len(args) != 2 or not isinstance(args[1], bytes) or len(args[1]) < 512:
        return reduced
    details = args[1]
    if b"kb.knowledge.pickle_file" in details[:64] and b"_inflate" in details[:96]:
        return reduced  # compressed already (an entry read from a cache)
    packed = _PACKED.get(details)
    if packed is None:
        import zlib

        packed = pickle.dumps(_Deflated(zlib.compress(details, 6)), protocol=-1)
        if len(_PACKED) >= _PACKED_MAX:
            _PACKED.clear()
        _PACKED[details] = packed
    return (make, (args[0], packed)) if len(packed) < len(details) else reduced


# Details already compressed in this process, by their bytes: a process that writes the cache
# again (a TUI or a service while entries are edited) compresses only what changed (~75 ms of
# each rewrite for the bundled entries).
_PACKED: dict[bytes, bytes] = {}
_PACKED_MAX = 4096


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj):
        cls = type(obj)
        plain = _PLAIN.get(cls)
        if plain is None:
            plain = _PLAIN[cls] = _plain_record(cls)
        if plain:
            return (_record, (cls, obj.__dict__))
        if cls.__name__ == "Entry" and cls.__module__ == "kb.model.entry":
            return _smaller(obj.__reduce__())
        return NotImplemented


def dumps(value: object) -> bytes:
    """Pickled for kb's caches: records (kb.model.record) as their class and fields' dict,
    which a cold lookup unpickles in about half the time pickle's generic form takes (the
    ~1,200 signatures of the bundled entries: 3.6 ms against 6.8 ms here)."""
    import io

    buf = io.BytesIO()
    _Pickler(buf, protocol=-1).dump(value)  # -1: the highest protocol
    return buf.getvalue()


def _mark_used(fd: int) -> None:
    """Clean-ups remove caches nobody used for a long time, judged by their mtime: a cache read
    every day but written long ago must not look unused. Touched at most once a day."""
    import time

    try:
        if os.fstat(fd).st_mtime < time.time() - 86400:
            os.utime(fd)
    except (OSError, NotImplementedError):  # read-only folder, or no utime on an fd here
        pass
