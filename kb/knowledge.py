"""The loaded knowledge base: entries, their problems, and their verification evidence.

Loading validates every file against the schema, which is the slow part (jsonschema import and
checks). The result is cached in the state dir under a hash of every entry and evidence file's
content. A lookup after the first one does not even read the files: a small key file, named by
what stat says of every file (size, times, inode), points at the content hash it was last seen
with; only files that changed in the last seconds are read and hashed again (see _stat_key).
"""

from __future__ import annotations

import gc
import hashlib
import os
import pickle
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from . import __version__, paths
from .model import Entry, Evidence, Problem
from .paths import entry_files, evidence_files
from .record import field, record

_CACHE_FORMAT = 9  # the pickled shapes; 5: typed records; 6: any_of; 7: aliases; 8: explained_by;
# 9: kb.record records, signatures' key words


@record
class KnowledgeBase:
    entries: list[Entry]
    problems: list[Problem]
    evidence: dict[str, list[Evidence]] = field(default_factory=dict)
    content_hash: str = ""
    # Said once on stderr by the CLI, shown by the TUI: an unwritable cache, and the like.
    warnings: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.by_id = {e.id: e for e in self.entries}
        # An entry's earlier ids answer too (a renamed entry keeps its old id working).
        self.by_alias = {a: e for e in self.entries for a in e.aliases}

    def get(self, entry_id: str) -> Entry | None:
        return self.by_id.get(entry_id) or self.by_alias.get(entry_id)

    def closest_ids(self, entry_id: str, n: int = 3) -> list[str]:
        import difflib

        return difflib.get_close_matches(entry_id, list(self.by_id), n=n, cutoff=0.4)

    def evidence_for(self, entry_id: str) -> list[Evidence]:
        return self.evidence.get(entry_id, [])


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


def _snapshot(groups: list[tuple[str, list[Path]]]) -> tuple[str, dict[Path, bytes | None]]:
    """(content hash, the bytes hashed). The entries are then parsed from these same bytes, so a
    file edited while kb reads it can never leave a cache whose name promises other content."""
    h = hashlib.blake2b(digest_size=16)
    h.update(f"{__version__}/{_CACHE_FORMAT}".encode())
    h.update(Path(__file__).with_name("schema.json").read_bytes())
    data: dict[Path, bytes | None] = {}
    for tag, files in groups:
        for f in files:
            h.update(f"\0{tag}\0{f}\0".encode())
            try:
                raw: bytes | None = f.read_bytes() if f.stat().st_size <= (1 << 20) else None
            except OSError:
                raw = None
            data[f] = raw
            h.update(raw if raw is not None else b"<unreadable or too large>")
    return h.hexdigest(), data


SETTLED_S = 2.0  # a file changed more recently than this may change again within one clock tick


def _stat_key(groups: list[tuple[str, list[Path]]]) -> str | None:
    """A hash of what stat says of every file (and of the list of files), or None when it cannot
    stand for their content: a file that cannot be stat'ed, or one changed in the last
    SETTLED_S seconds, which a write in the same clock tick could change again without any
    field changing. Every write sets a file's ctime to the current time, which users cannot set
    back, so a settled file with the same stat has the same bytes (what git's index relies on)."""
    import time

    h = hashlib.blake2b(digest_size=16)
    h.update(f"{__version__}/{_CACHE_FORMAT}".encode())
    newest = 0
    for tag, files in [("s", [Path(__file__).with_name("schema.json")]), *groups]:
        for f in files:
            try:
                st = os.stat(f)
            except OSError:
                return None
            newest = max(newest, st.st_mtime_ns, st.st_ctime_ns)
            h.update(
                f"\0{tag}\0{f}\0{st.st_size}/{st.st_mtime_ns}/{st.st_ctime_ns}/{st.st_ino}".encode()
            )
    if newest > time.time_ns() - int(SETTLED_S * 1e9):
        return None
    return h.hexdigest()


def _read_pointer(path: Path) -> str:
    try:
        with open(path, encoding="ascii") as fh:
            return fh.read(64).strip()
    except (OSError, ValueError):
        return ""


def _unpickle(cache: Path, digest: str) -> KnowledgeBase | None:
    try:
        with open(cache, "rb") as fh, gc_paused():
            kb = pickle.load(fh)
    except (
        OSError,
        pickle.UnpicklingError,
        EOFError,
        AttributeError,
        ImportError,
        TypeError,
        ValueError,
    ):
        return None
    if isinstance(kb, KnowledgeBase) and kb.content_hash == digest:
        kb.warnings = []
        return kb
    return None


def load(
    kb_dirs: list[str] | None = None, bundled: list[Path] | None = None, use_cache: bool = True
) -> KnowledgeBase:
    """Load the bundled entries plus the user's folders (--kb-dir, KB_PATH)."""
    bundled = bundled if bundled is not None else [paths.bundled_entries_dir()]
    local = paths.user_entry_dirs(kb_dirs)
    ev_dir = paths.evidence_dir()
    for attempt in range(10):
        groups = [
            ("b", entry_files(bundled)),
            ("l", entry_files(local)),
            ("e", evidence_files(ev_dir)),
        ]
        state = paths.state_dir()
        stat_key = _stat_key(groups) if use_cache else None
        if stat_key:
            seen = _read_pointer(state / f"entries-{stat_key}.key")
            if seen:
                cached = _unpickle(state / f"entries-{seen}.pickle", seen)
                if cached is not None:
                    return cached
        digest, data = _snapshot(groups)
        cache = state / f"entries-{digest}.pickle"
        if use_cache:
            cached = _unpickle(cache, digest)
            if cached is not None:
                if stat_key:
                    _write_pointer(state / f"entries-{stat_key}.key", digest)
                return cached
        # Only on a cache miss: YAML parsing and schema validation cost more than everything else.
        from .entries import load_dirs
        from .evidence import load_evidence

        result = load_dirs(bundled, local, data)
        kb = KnowledgeBase(result.entries, result.problems, load_evidence(ev_dir), digest)
        if not result.unsettled:
            break
        # A broken file that was modified just now is probably being written (an editor or a
        # script saving in place): read it again in a moment; never cache what we got.
        if attempt < 9:
            import time

            time.sleep(0.02)
    else:
        return kb
    if use_cache:
        problem = _write_cache(cache, kb)
        if not problem and stat_key:
            _write_pointer(state / f"entries-{stat_key}.key", digest)
        if problem:
            kb.warnings = [
                f"cannot write kb's cache in {cache.parent} ({problem}); lookups still "
                f"work, only slower (set KB_HOME to a writable folder)"
            ]
    return kb


STALE_DAYS = 14  # caches of other configurations are left alone until unused this long


def _write_pointer(path: Path, digest: str) -> None:
    """Best effort: without it the next lookup only reads and hashes the files again."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        tmp.write_text(digest, encoding="ascii")
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)


def _write_cache(cache: Path, kb: KnowledgeBase) -> str | None:
    """Write the cache atomically; the reason when it cannot be written."""
    import tempfile  # only when (re)writing the cache: it drags shutil in
    import time

    tmp = None
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=cache.parent, prefix=".entries-")
        with os.fdopen(fd, "wb") as fh:
            pickle.dump(kb, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, cache)  # atomic: a concurrent reader sees the old file or the new one
    except OSError as e:
        if tmp:
            Path(tmp).unlink(missing_ok=True)
        return e.strerror or str(e)
    # Another configuration (other KB_PATH, other checkout) may share this folder: only caches
    # nobody has used for a long time are removed.
    cutoff = time.time() - STALE_DAYS * 86400
    for old in [*cache.parent.glob("entries-*.pickle"), *cache.parent.glob("entries-*.key")]:
        try:
            if old != cache and old.stat().st_mtime < cutoff:
                old.unlink()
        except OSError:
            pass
    return None
