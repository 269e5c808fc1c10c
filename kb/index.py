"""The full-text index (Whoosh, BM25F). The only module that imports whoosh.

It answers only where no signature fires: messages no entry has a wording for yet. Built on first
use into the state dir under the knowledge base's content hash, in a temporary folder renamed
into place, so a concurrent lookup sees the old index or the new one, never half of one.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from . import paths
from .knowledge import KnowledgeBase

FIELDS = ("title", "wording", "summary", "causes")
MAX_TERMS = 12  # the message's most distinctive terms; a whole pasted log as an OR query is slow
_REGEX_NOISE = re.compile(r"\(\?P<\w+>|\(\?:|\\[dswDSWb]|[\\^$*+?{}\[\]()|]")


@dataclass(frozen=True)
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
    return Schema(id=ID(stored=True, unique=True), title=TEXT(analyzer=ana, field_boost=2.0),
                  wording=TEXT(analyzer=ana, field_boost=1.5), summary=TEXT(analyzer=ana),
                  causes=TEXT(analyzer=ana, field_boost=0.7))


def index_dir(kb: KnowledgeBase) -> Path:
    return paths.state_dir() / f"index-{kb.content_hash}"


def ensure_index(kb: KnowledgeBase, force: bool = False) -> tuple[Path, bool]:
    """(path, built?) The index for exactly this knowledge base, built if missing."""
    target = index_dir(kb)
    if target.is_dir() and not force:
        return target, False
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".index-build-"))
    try:
        build(kb, tmp)
        if target.is_dir():
            old = target.with_name(f".index-old-{os.getpid()}")
            os.replace(target, old)
            shutil.rmtree(old, ignore_errors=True)
        try:
            os.replace(tmp, target)
        except OSError:
            pass  # another process put an identical index there first
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for stale in target.parent.glob("index-*"):
        if stale != target:
            shutil.rmtree(stale, ignore_errors=True)
    return target, True


def wording_text(entry) -> str:
    sigs = " ".join(_REGEX_NOISE.sub(" ", s.pattern) for s in entry.signatures)
    return sigs + "\n" + "\n".join(entry.examples_match)


def build(kb: KnowledgeBase, where: Path) -> None:
    from whoosh import index as windex

    ix = windex.create_in(str(where), _schema())
    w = ix.writer()
    for e in kb.entries:
        causes = " ".join(f"{c['title']} {c['detail']}" for c in e.causes)
        w.add_document(id=e.id, title=e.title, wording=wording_text(e), summary=e.summary, causes=causes)
    w.commit()


class FullText:
    def __init__(self, kb: KnowledgeBase):
        from whoosh import index as windex

        path, _ = ensure_index(kb)
        self.ix = windex.open_dir(str(path))
        self.analyzer = self.ix.schema["wording"].analyzer
        self.searcher = self.ix.searcher()

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
