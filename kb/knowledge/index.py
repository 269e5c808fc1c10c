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
from kb.knowledge.base import KnowledgeBase
from kb.model.record import record

FIELDS = ("title", "wording", "summary", "causes")
MAX_TERMS = 12  # the message's most distinctive terms; a whole pasted log as an OR query is slow
_REGEX_NOISE = re.compile(r"\(\?P<\w+>|\(\?:|\\[dswDSWb]|[\\^$*+?{}\[\]()|]")


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


def _pointer(kb: KnowledgeBase) -> Path:
    return paths.state_dir() / f"index-{kb.content_hash}.current"


def index_dir(kb: KnowledgeBase) -> Path | None:
    """The live index for exactly this knowledge base, or None when there is none yet."""
    try:
        name = _pointer(kb).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    d = paths.state_dir() / name
    return d if name.startswith(f"index-{kb.content_hash}-") and d.is_dir() else None


def ensure_index(kb: KnowledgeBase, force: bool = False) -> tuple[Path, bool]:
    """(path, built?) The index for exactly this knowledge base, built if missing.

    Each build goes into a folder of its own, and a small pointer file is swapped atomically to
    name the live one: a lookup reading the old index while `kb index --rebuild` runs keeps a
    complete index under it, and folders are removed only when superseded for a while. Indexes
    of other configurations sharing KB_HOME are never touched while in use. Raises OSError when
    the state folder cannot be written.
    """
    live = index_dir(kb)
    if live is not None and not force:
        return live, False
    root = paths.state_dir()
    root.mkdir(parents=True, exist_ok=True)
    new = Path(tempfile.mkdtemp(dir=root, prefix=f"index-{kb.content_hash}-"))
    try:
        build(kb, new)
        fd, tmp = tempfile.mkstemp(dir=root, prefix=".pointer-")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(new.name)
        os.replace(tmp, _pointer(kb))
    except BaseException:
        shutil.rmtree(new, ignore_errors=True)
        raise
    _collect(root)
    return new, True


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
            live.add(ptr.read_text(encoding="utf-8").strip())
        except OSError:
            continue
    for d in root.glob("index-*"):
        try:
            if d.is_dir() and d.name not in live and now - d.stat().st_mtime > STALE_S:
                shutil.rmtree(d, ignore_errors=True)
        except OSError:
            continue


def wording_text(entry) -> str:
    sigs = " ".join(_REGEX_NOISE.sub(" ", s.pattern) for s in entry.signatures)
    return sigs + "\n" + "\n".join(entry.examples_match)


def build(kb: KnowledgeBase, where: Path) -> None:
    from whoosh import index as windex

    _fill(kb, windex.create_in(str(where), _schema()))


def _fill(kb: KnowledgeBase, ix) -> None:
    w = ix.writer()
    for e in kb.entries:
        causes = " ".join(f"{c.title} {c.detail}" for c in e.causes)
        w.add_document(
            id=e.id, title=e.title, wording=wording_text(e), summary=e.summary, causes=causes
        )
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
                ix = windex.open_dir(str(path))
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
