"""The loaded knowledge base: entries, their problems, and their verification evidence.

Loading validates every file against the schema, which is the slow part (jsonschema import and
checks). The result is cached in the state dir under a hash of every entry and evidence file's
content. A lookup after the first one does not even read the files: a small key file, named by
what stat says of every file (size, times, inode), points at the content hash it was last seen
with; only files that changed in the last seconds are read and hashed again (see _stat_key).
"""

from __future__ import annotations

import gc
import os
import pickle
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from kb import paths
from kb.model.entry import Entry, Evidence, Problem
from kb.model.record import field, record
from kb.paths import entry_file_names, evidence_file_names
from kb.version import __version__

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

    from kb.knowledge.signatures import Tables

_SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "schema.json")

_CACHE_FORMAT = 11  # the pickled shapes; 5: typed records; 6: any_of; 7: aliases; 8: explained_by;
# 9: kb.record records, signatures' key words; 10: where they are filed, entries' details
# pickled apart; 11: announces


@record
class KnowledgeBase:
    entries: list[Entry]
    problems: list[Problem]
    evidence: dict[str, list[Evidence]] = field(default_factory=dict)
    content_hash: str = ""
    # Said once on stderr by the CLI, shown by the TUI: an unwritable cache, and the like.
    warnings: list[str] = field(default_factory=list)
    # kb.knowledge.signatures.file_signatures(entries), worked out when the cache is written (None until then,
    # and for a knowledge base made in memory: the engine works them out itself).
    signature_tables: Tables | None = None

    def __post_init__(self) -> None:
        self.by_id = {e.id: e for e in self.entries}
        # An entry's earlier ids answer too (a renamed entry keeps its old id working).
        self.by_alias = {a: e for e in self.entries for a in e.aliases}
        # Tables filed for other entries (a copy made with replace(kb, entries=...)) would
        # answer for entries this knowledge base no longer has: they are dropped, and the engine
        # files these entries itself. (Unpickling does not come here: the cache's tables fit.)
        t = self.signature_tables
        if t is not None:
            have = [(id(e), id(s)) for e in self.entries for s in e.signatures]
            if have != [(id(e), id(s)) for e, s in t.pairs]:
                self.signature_tables = None

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
    import hashlib  # here, not at the top: a settled knowledge base is found without it

    h = hashlib.blake2b(digest_size=16)
    h.update(f"{__version__}/{_CACHE_FORMAT}".encode())
    with open(_SCHEMA, "rb") as fh:
        h.update(fh.read())
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


def _stat_key(groups: list[tuple[str, list[str]]]) -> tuple[str, str] | None:
    """(key file name, what stat says of every file), or None when stat cannot stand for the
    files' content: a file that cannot be stat'ed, or one changed in the last SETTLED_S seconds,
    which a write in the same clock tick could change again without any field changing. Every
    write sets a file's ctime to the current time, which users cannot set back, so a settled
    file whose size, times and inode are unchanged has the same bytes (git's index relies on
    the same). The name is a CRC of the file list (one key file per configuration); the key
    file holds the whole description, which must match to the byte, so no hash is needed."""
    import time
    from zlib import crc32

    lines = [f"{__version__}/{_CACHE_FORMAT}"]
    newest = 0
    for tag, files in [("s", [_SCHEMA]), *groups]:
        for f in files:
            try:
                st = os.stat(f)
            except OSError:
                return None
            newest = max(newest, st.st_mtime_ns, st.st_ctime_ns)
            lines.append(f"{tag} {st.st_size} {st.st_mtime_ns} {st.st_ctime_ns} {st.st_ino} {f}")
    if newest > time.time_ns() - int(SETTLED_S * 1e9):
        return None
    names = "\n".join(line.split(" ", 5)[-1] for line in lines[1:])
    return f"entries-{crc32(names.encode('utf-8', 'surrogateescape')):08x}.key", "\n".join(lines)


def _mark_used(fd: int) -> None:
    """Clean-up removes caches nobody used for STALE_DAYS, judged by their mtime: a cache read
    every day but written long ago must not look unused. Touched at most once a day."""
    import time

    try:
        if os.fstat(fd).st_mtime < time.time() - 86400:
            os.utime(fd)
    except (OSError, NotImplementedError):  # read-only folder, or no utime on an fd here
        pass


def _read_pointer(path: str, described: str) -> str:
    """The content hash the key file recorded for exactly these files, else ''."""
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as fh:
            digest, _, seen = fh.read().partition("\n")
            if seen == described and len(digest) == 32:
                _mark_used(fh.fileno())
                return digest
    except (OSError, ValueError):
        pass
    return ""


def _unpickle(cache: str | Path, digest: str) -> KnowledgeBase | None:
    try:
        with open(cache, "rb") as fh, gc_paused():
            kb = pickle.load(fh)
            _mark_used(fh.fileno())
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
    """Load the bundled entries plus the user's folders (--kb-dir, KB_PATH).

    Until the cache is found, names are plain strings (paths' *_folder and *_names forms): a
    lookup that finds it never imports pathlib."""
    bundled_names = (
        [os.fspath(b) for b in bundled] if bundled is not None else [paths.bundled_entries_folder()]
    )
    local_names = paths.user_entry_folders(kb_dirs)
    ev_name = paths.evidence_folder()
    for attempt in range(10):
        names = [
            ("b", entry_file_names(bundled_names)),
            ("l", entry_file_names(local_names)),
            ("e", evidence_file_names(ev_name)),
        ]
        state = paths.state_folder()
        stat_key = _stat_key(names) if use_cache else None
        if stat_key:
            seen = _read_pointer(os.path.join(state, stat_key[0]), stat_key[1])
            if seen:
                cached = _unpickle(os.path.join(state, f"entries-{seen}.pickle"), seen)
                if cached is not None:
                    return cached
        from pathlib import Path

        groups = [(tag, [Path(f) for f in files]) for tag, files in names]
        digest, data = _snapshot(groups)
        cache = Path(state) / f"entries-{digest}.pickle"
        if use_cache:
            cached = _unpickle(cache, digest)
            if cached is not None:
                if stat_key:
                    _write_pointer(cache.with_name(stat_key[0]), f"{digest}\n{stat_key[1]}")
                return cached
        # Only on a cache miss: YAML parsing and schema validation cost more than everything else.
        from kb.knowledge.evidence import load_evidence
        from kb.knowledge.load import load_dirs

        result = load_dirs([Path(b) for b in bundled_names], [Path(d) for d in local_names], data)
        kb = KnowledgeBase(result.entries, result.problems, load_evidence(Path(ev_name)), digest)
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
        from kb.knowledge.signatures import file_signatures

        with gc_paused():
            kb.signature_tables = file_signatures(kb.entries)
        problem = _write_cache(cache, kb)
        if not problem and stat_key:
            _write_pointer(cache.with_name(stat_key[0]), f"{digest}\n{stat_key[1]}")
        if problem:
            kb.warnings = [
                f"cannot write kb's cache in {cache.parent} ({problem}); lookups still "
                f"work, only slower (set KB_HOME to a writable folder)"
            ]
    return kb


STALE_DAYS = 14  # caches of other configurations are left alone until unused this long


def _write_pointer(path: Path, text: str) -> None:
    """Best effort: without it the next lookup only reads and hashes the files again."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        tmp.write_text(text, encoding="utf-8", errors="surrogateescape")
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
            with suppress(OSError):
                os.unlink(tmp)
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
