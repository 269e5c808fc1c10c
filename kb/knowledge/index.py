"""The full-text index (Whoosh, BM25F). The only module that imports whoosh.

It answers only where no signature fires: messages no entry has a wording for yet, and then only
with suggestions. Built on first use into the state dir under the knowledge base's content hash
(see ensure_index for how concurrent rebuilds stay safe); in memory when that folder cannot be
written.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from pathlib import Path

from kb import paths
from kb.knowledge import pickle_file
from kb.knowledge.base import KnowledgeBase
from kb.knowledge.documents import compute_key, documents
from kb.model.record import record

FIELDS = ("title", "wording", "summary", "causes")
MAX_TERMS = 12  # the message's most distinctive terms; a whole pasted log as an OR query is slow


@record(frozen=True)
class TextHit:
    id: str
    score: float
    matched: int  # distinct query terms found in the entry
    asked: int  # distinct terms in the query (known to the index or not)

    @property
    def coverage(self) -> float:
        return self.matched / self.asked if self.asked else 0.0


def _schema():
    from whoosh.analysis import StemmingAnalyzer
    from whoosh.fields import ID, TEXT, Schema

    ana = StemmingAnalyzer()
    return Schema(
        id=ID(stored=True, unique=True),
        title=TEXT(analyzer=ana, field_boost=2.0),
        wording=TEXT(analyzer=ana, field_boost=1.5),
        summary=TEXT(analyzer=ana),
        causes=TEXT(analyzer=ana, field_boost=0.7),
    )


STALE_S = 600  # a superseded index is removed once no lookup can still be opening it


def index_key(kb: KnowledgeBase) -> str:
    """What the index is named by: a hash of exactly the text it holds (each entry's id, title,
    wordings, summary and causes). An edit elsewhere in an entry file (a comment, a fix, an
    example's neighbour) changes the knowledge base's content hash but not this, so lookups
    during the edits of a file do not each build an index of their own. Worked out when a
    cache is made and kept with it (kb.knowledge.base: `fulltext_key`); a copy of a knowledge
    base made with other entries has none and works it out."""
    kept = kb.__dict__.get("fulltext_key")
    if isinstance(kept, str) and kept:
        return kept
    return compute_key(kb.entries)


def _pointer(key: str) -> Path:
    return paths.state_dir() / f"index-{key}.current"


_NAME = re.compile(r"index-[0-9a-f]+-[A-Za-z0-9_]+")


def _read_name(ptr: Path) -> str | None:
    """The index folder a pointer file names, or None when it cannot be read or holds anything
    but one such name (a file cut short, garbled bytes, a path): read as absent, so the index is
    built again and the pointer replaced, instead of failing every lookup after it."""
    try:
        raw = ptr.read_bytes()[:256]
    except OSError:
        return None
    name = raw.decode("ascii", "replace").strip()
    return name if _NAME.fullmatch(name) else None


def index_dir(kb: KnowledgeBase, key: str | None = None) -> Path | None:
    """The live index for exactly this knowledge base, or None when there is none yet."""
    key = key or index_key(kb)
    name = _read_name(_pointer(key))
    if name is None or not name.startswith(f"index-{key}-"):
        return None
    d = paths.state_dir() / name
    # Opening an index unpickles its table of contents: one this user's kb did not build and
    # seal (planted, or changed since) is read as absent, and built again.
    return d if d.is_dir() and pickle_file.sealed(d) else None


SHIPPED_PREFIX = "fulltext-"  # kb/_data/cache/fulltext-<key>/: the wheel's index


def shipped_index(key: str) -> Path | None:
    """The index the wheel ships for this key (hatch_build.py), when every file of it may be read:
    Whoosh pickles its table of contents, so each is held to the rule of the other shipped
    caches (kb.knowledge.shipped.untrusted: not writable by group or others, root's or this
    user's); anything else is refused, said, and the index built in the state folder."""
    from kb.knowledge import shipped

    folder = os.path.join(shipped.FOLDER, SHIPPED_PREFIX + key)
    try:
        names = os.listdir(folder)
        for name in ["", *names]:
            where = os.path.join(folder, name) if name else folder
            why = shipped.untrusted(os.stat(where, follow_symlinks=False), folder=not name)
            if why:
                shipped.refuse(where, why)
                return None
    except OSError:
        return None  # none shipped for this key: a source checkout, or the user's own entries
    return Path(folder) if names else None


def ensure_index(kb: KnowledgeBase, force: bool = False) -> tuple[Path, bool]:
    """(path, built?) The index for exactly this knowledge base, built if missing.

    Each build goes into a folder of its own, and a small pointer file is swapped atomically to
    name the live one: a lookup reading the old index while `kb index --rebuild` runs keeps a
    complete index under it, and folders are removed only when superseded for a while. Indexes
    of other configurations sharing KB_HOME are never touched while in use. Raises OSError when
    the state folder cannot be written.
    """
    key = index_key(kb)
    if not force:
        ready = shipped_index(key)  # built with the wheel: nothing to build here
        if ready is not None:
            return ready, False
        from kb.knowledge import shipped

        kb.warnings.extend(n for n in shipped.REFUSED if n not in kb.warnings)  # said by lookups
    live = index_dir(kb, key)
    if live is not None and not force:
        return live, False
    root = paths.state_dir()
    paths.make_private_folder(str(root))
    with _BuildLock(root / f".index-{key}.lock") as waited:
        if waited and not force:
            live = index_dir(kb, key)  # built by the process we waited for
            if live is not None:
                return live, False
        new = Path(tempfile.mkdtemp(dir=root, prefix=f"index-{key}-"))
        try:
            build(kb, new)
            for f in new.iterdir():  # Whoosh makes its files as the umask says: kb's are private
                f.chmod(0o600)
            why = pickle_file.seal(new)  # Whoosh pickles its table of contents: only ours is read
            if why:
                raise OSError(13, f"cannot seal the index: {why}")
            fd, tmp = tempfile.mkstemp(dir=root, prefix=".pointer-")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(new.name)
        except BaseException:
            shutil.rmtree(new, ignore_errors=True)
            raise
        # Past this point the folder is whole: an interrupt must not remove one a pointer names.
        try:
            os.replace(tmp, _pointer(key))
        except OSError:
            os.unlink(tmp)
            shutil.rmtree(new, ignore_errors=True)
            raise
    _collect(root)
    return new, True


BUILD_WAIT_S = 30.0


class _BuildLock:
    """An advisory lock per index while one process builds it: lookups started together after
    an edit wait for that one build (at most BUILD_WAIT_S) instead of each building the same
    index. `with` gives whether another process held it. Best effort: without flock, or where
    the lock cannot be made, no lock."""

    def __init__(self, path: Path):
        self.path = path
        self.fd: int | None = None

    def __enter__(self) -> bool:
        try:
            import fcntl

            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except (OSError, ImportError):
            return False
        waited = False
        deadline = time.monotonic() + BUILD_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self.fd = fd
                return waited
            except BlockingIOError:
                waited = True
                if time.monotonic() >= deadline:
                    os.close(fd)
                    return waited
                time.sleep(0.02)
            except OSError:
                os.close(fd)
                return waited

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _collect(root: Path) -> None:
    """Remove index folders no pointer names once they have been superseded for STALE_S, and
    whole indexes of configurations nobody has used for knowledge.STALE_DAYS."""
    from kb.knowledge.base import STALE_DAYS

    now = time.time()
    live: set[str] = set()
    for ptr in root.glob("index-*.current"):
        try:
            if now - ptr.stat().st_mtime > STALE_DAYS * 86400:
                ptr.unlink()
                continue
        except OSError:
            continue
        name = _read_name(ptr)
        if name is not None:
            live.add(name)
    for d in root.glob("index-*"):
        try:
            if d.is_dir() and d.name not in live and now - d.stat().st_mtime > STALE_S:
                shutil.rmtree(d, ignore_errors=True)
        except OSError:
            continue
    for lock in root.glob(".index-*.lock"):  # a lock is only held during a build
        try:
            if now - lock.stat().st_mtime > STALE_DAYS * 86400:
                lock.unlink()
        except OSError:
            continue


def build(kb: KnowledgeBase, where: Path) -> None:
    from whoosh import index as windex

    _fill(kb, windex.create_in(str(where), _schema()))


def _fill(kb: KnowledgeBase, ix) -> None:
    w = ix.writer()
    for doc in documents(kb.entries):
        w.add_document(**doc)
    w.commit()


class FullText:
    def __init__(self, kb: KnowledgeBase):
        self.ix, self.searcher = self._open(kb)
        self.analyzer = self.ix.schema["wording"].analyzer

    @staticmethod
    def _open(kb: KnowledgeBase):
        from whoosh import index as windex
        from whoosh.filedb.filestore import RamStorage

        for _ in range(3):  # a rebuild elsewhere can swap the index between reading and opening
            try:
                path, _built = ensure_index(kb)
                # The wheel's own (in the installed package) is only read, never locked.
                readonly = path.name.startswith(SHIPPED_PREFIX)
                ix = windex.open_dir(str(path), readonly=readonly)
                return ix, ix.searcher()
            except PermissionError:
                break
            except OSError as e:
                if e.errno in (13, 30, 28):  # EACCES, EROFS, ENOSPC: not worth retrying
                    break
            except windex.EmptyIndexError:
                continue
        # No writable state folder: an index in memory (it takes a moment, every process).
        ix = RamStorage().create_index(_schema())
        _fill(kb, ix)
        return ix, ix.searcher()

    def terms(self, text: str) -> tuple[list[str], int]:
        """The query's most distinctive known terms (rarest first) and how many distinct terms
        the text has in all."""
        seen: list[str] = []
        for t in self.analyzer(text[:20000]):
            w = t.text
            if len(w) < 3 or w.isdigit() or w in seen:
                continue
            seen.append(w)
        r = self.searcher.reader()
        known = []
        for w in seen:
            df = max(r.doc_frequency(f, w) for f in FIELDS)
            if df:
                known.append((df, w))
        known.sort()
        return [w for _, w in known[:MAX_TERMS]], len(seen)

    def search(self, text: str, limit: int = 5) -> list[TextHit]:
        from whoosh import query as Q

        terms, asked = self.terms(text)
        if not terms:
            return []
        q = Q.Or([Q.Term(f, t) for t in terms for f in FIELDS])
        hits = self.searcher.search(q, limit=limit, terms=True)
        out = []
        for h in hits:
            matched = {t.decode() if isinstance(t, bytes) else t for _, t in h.matched_terms()}
            out.append(TextHit(h["id"], float(h.score), len(matched), min(asked, MAX_TERMS * 2)))
        return out
