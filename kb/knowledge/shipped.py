"""Caches built once, when the wheel is built (hatch_build.py), and shipped inside it: the bundled
entries' cache (entries, signature tables, trigger set with its Hyperscan databases, kb/data's
files, evidence), the parse memo a build with the user's own entries starts from, and the message
catalog's index and coverage figures. A first lookup after `pip install` builds nothing.

An installed package's entries cannot change without installing it again, which replaces these
files too: the bundled part is validated by one stat of the cache file, not one per entry file.
A source checkout (an editable install, where entries change) has no kb/_data folder and no
shipped cache: kb builds its per-user caches there, validated against every file, as before.

A shipped file is trusted like the package's own code, and only on the same terms: a regular
file that neither group nor others can write, owned by root or by this user, or else writable by
no one who cannot already write kb's modules (the same group-writable owner and group as
kb/__init__.py: pip's install under umask 002). Anything else is refused, said once (kb.knowledge.base's warnings), and the per-user cache is built instead. It
carries no MAC: whoever can write it can write kb's modules beside it.

Paths inside (each entry's file, kb/data's files) are those of the build; they are moved to the
installed package's folders when read.
"""

from __future__ import annotations

import os

from kb.version import __version__

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_PKG = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # kb/
FOLDER = os.path.join(_PKG, "_data", "cache")  # in the wheel: kb/_data/cache/
WHEEL_FOLDER = "kb/_data/cache"

ENTRIES = "entries.pickle"  # the bundled knowledge base (kb.knowledge.base.KnowledgeBase)
MEMO = "entries.memo"  # its parse memo: what a build with the user's own entries starts from
CATALOG_INDEX = "catalog.index.pickle"  # kb.catalog.cache.CompactIndex
CATALOG_COVERAGE = "catalog.coverage.pickle"  # kb.catalog.coverage.Coverage
NAMES = (ENTRIES, MEMO, CATALOG_INDEX, CATALOG_COVERAGE)

FORMAT = 1  # the header's shape and the payload's
_MAGIC = b"kb-shipped-cache"

# Shipped files refused for their owner or mode, said once (kb.knowledge.base's warnings).
REFUSED: list[str] = []


def header(tag: str) -> bytes:
    """The first line of a shipped file: what wrote it. `tag`: what its payload's shapes depend
    on besides kb's version (the entry cache's format, the catalog's)."""
    return b"%s %d %s %s\n" % (_MAGIC, FORMAT, __version__.encode(), tag.encode())


def untrusted(st: os.stat_result, folder: bool = False) -> str:
    """Why a shipped file (a folder of them, with `folder`) must not be read (as code would not
    be), or '' when it may: not a regular file (a folder), writable by group or others, or owned
    by neither root nor this user."""
    import stat

    from kb.paths import _euid

    if not (stat.S_ISDIR(st.st_mode) if folder else stat.S_ISREG(st.st_mode)):
        return "not a folder" if folder else "not a regular file"
    writable = st.st_mode & 0o022
    if writable and not (writable == 0o020 and _as_code(st, group=True)):
        who = {0o022: "group and others", 0o020: "group", 0o002: "others"}[writable]
        return f"writable by {who} (mode {st.st_mode & 0o7777:04o})"
    uid = _euid()
    if uid >= 0 and st.st_uid not in (0, uid) and not _as_code(st, group=False):
        return f"owned by uid {st.st_uid}, neither root nor this user (uid {uid})"
    return ""


def _as_code(st: os.stat_result, group: bool) -> bool:
    """Whether whoever may write this file may already write kb's own code beside it (pip under
    umask 002 makes both group-writable by the user's own group; a shared install owned by its
    admin): then refusing it would protect nothing and warn on every lookup."""
    try:
        code = os.stat(os.path.join(_PKG, "__init__.py"))
    except OSError:
        return False
    if group:
        return bool(code.st_mode & 0o020) and code.st_gid == st.st_gid
    return code.st_uid == st.st_uid


def refuse(path: str, why: str) -> None:
    """Say (once) that a shipped file was refused, and why."""
    note = (
        f"refused the cache shipped with kb at {path}: {why}; kb builds its own in its state "
        f"folder instead (`chmod go-w` it if it is yours or root's)"
    )
    if note not in REFUSED:
        REFUSED.append(note)


def _open(name: str, folder: str | None) -> tuple[int, os.stat_result] | None:
    """(fd, its stat) of a shipped file that may be read, else None (absent, or refused and
    said)."""
    where = path(name, folder)
    try:
        fd = os.open(where, os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None  # no shipped cache: a source checkout, or a wheel built without them
    try:
        st = os.fstat(fd)
        why = untrusted(st)
    except OSError as e:
        why = e.strerror or str(e)
    if why:
        os.close(fd)
        refuse(where, why)
        return None
    return fd, st


def path(name: str, folder: str | None = None) -> str:
    return os.path.join(folder or FOLDER, name)


def stat_line(name: str = ENTRIES, folder: str | None = None) -> str:
    """What one stat says of a shipped file that may be read (it stands for every bundled file:
    an install replaces them all together), or '' when there is none to read."""
    got = _open(name, folder)
    if got is None:
        return ""
    fd, st = got
    os.close(fd)
    return (
        f"shipped {st.st_size} {st.st_mtime_ns} {st.st_ctime_ns} {st.st_ino} {path(name, folder)}"
    )


def read(
    name: str,
    tag: str,
    folder: str | None = None,
    relocate: Callable[[Any, list[tuple[str, str]]], None] | None = None,
) -> Any:
    """The payload of a shipped file, or None when there is none, it is refused, or it was
    written by another kb or format (then it is as if absent: the per-user cache is built).
    `relocate(value, moves)` moves the build's paths in it to where kb is installed."""
    got = _open(name, folder)
    if got is None:
        return None
    fd, st = got
    from kb.knowledge.pickle_file import UNREADABLE, gc_paused, pickle

    head = header(tag)
    try:
        # Mapped, not read: what the unpickler copies out of it is all that is copied (a
        # read() first copies the whole file, a millisecond of a cold lookup). An install
        # replaces the file, never rewrites it in place, so the mapping cannot shrink under us.
        with _mapped(fd, st.st_size) as view:
            if view[: len(head)] != head:
                return None
            with gc_paused():
                payload = pickle.loads(view[len(head) :])
    except (OSError, ValueError, *UNREADABLE):
        return None
    finally:
        os.close(fd)
    if not isinstance(payload, dict) or "value" not in payload:
        return None
    value = payload["value"]
    moves = _moves(payload.get("roots") or {})
    if moves and relocate is not None:
        relocate(value, moves)
    return value


class _mapped:
    """A read-only view of a whole file, released and unmapped on exit."""

    def __init__(self, fd: int, size: int) -> None:
        import mmap

        self.map = mmap.mmap(fd, size, access=mmap.ACCESS_READ) if size else None
        self.view = memoryview(self.map if self.map is not None else b"")

    def __enter__(self) -> memoryview:
        return self.view

    def __exit__(self, *exc: object) -> None:
        self.view.release()
        if self.map is not None:
            self.map.close()


def write(where: str, tag: str, value: object, roots: dict[str, str]) -> None:
    """Write a shipped file (at build time): the header, then the payload pickled. `roots`:
    the build's folders (entries, evidence, package), moved to the installed ones when read."""
    from kb.knowledge.pickle_file import dumps

    with open(where, "wb") as fh:
        fh.write(header(tag))
        fh.write(dumps({"roots": roots, "value": value}))


def installed_roots() -> dict[str, str]:
    """Where the files a shipped cache was built from are in this installation."""
    from kb import paths

    return {
        "entries": paths.bundled_entries_folder(),
        "evidence": paths.evidence_folder(),
        "package": _PKG,
    }


def _moves(roots: dict[str, str]) -> list[tuple[str, str]]:
    here = installed_roots()
    moves = []
    for kind, old in roots.items():
        new = here.get(kind)
        if new and old and old != new:
            moves.append((old.rstrip(os.sep) + os.sep, new.rstrip(os.sep) + os.sep))
    # The longest first: a folder inside another one (the build's entries inside its checkout).
    moves.sort(key=lambda m: len(m[0]), reverse=True)
    return moves


def moved(path: str, moves: list[tuple[str, str]]) -> str:
    for old, new in moves:
        if path.startswith(old):
            return new + path[len(old) :]
    return path
