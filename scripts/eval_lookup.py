"""Measure lookup quality on labelled cases, against plain Whoosh BM25 in the same run.

    python scripts/eval_lookup.py CASES.yaml [--kb-dir DIR] [--quiet]

CASES.yaml: a list of {id, label, also?, text}; label is the entry id that should come first, or
`none` when no entry should match. Prints top-1 and top-3 accuracy over labelled cases, the share
of `none` cases that correctly get no match, and every miss.
"""

from __future__ import annotations

import argparse
import sys
import time

import yaml

from kb.knowledge import load
from kb.engine import lookup_text


def plain_bm25(kb):
    """The baseline: one BM25 document per entry (title, summary, signatures, examples), the
    whole message as an OR query, no signatures, no thresholds."""
    import tempfile

    from whoosh import index, qparser
    from whoosh.fields import ID, TEXT, Schema

    d = tempfile.mkdtemp(prefix="kb-eval-bm25-")
    ix = index.create_in(d, Schema(id=ID(stored=True), body=TEXT))
    w = ix.writer()
    for e in kb.entries:
        body = " ".join([e.title, e.summary, *(s.pattern for s in e.signatures), *e.examples_match])
        w.add_document(id=e.id, body=body)
    w.commit()
    searcher = ix.searcher()
    parser = qparser.QueryParser("body", ix.schema, group=qparser.OrGroup)

    def search(text: str) -> list[str]:
        words = " ".join(t for t in text.replace(":", " ").split() if t.isascii())[:5000]
        try:
            q = parser.parse(qparser_escape(words))
        except Exception:
            return []
        return [h["id"] for h in searcher.search(q, limit=3)]

    return search


def qparser_escape(text: str) -> str:
    out = []
    for ch in text:
        out.append(" " if ch in '+-&|!(){}[]^"~*?:\\/' else ch)
    return "".join(out)


def score(name: str, results: list[tuple[dict, list[str]]], verbose: bool) -> dict:
    labelled = [(c, r) for c, r in results if c["label"] != "none"]
    nones = [(c, r) for c, r in results if c["label"] == "none"]

    def ok(c, ids, k):
        good = {c["label"], *c.get("also", [])}
        return bool(good & set(ids[:k]))

    top1 = sum(ok(c, r, 1) for c, r in labelled)
    top3 = sum(ok(c, r, 3) for c, r in labelled)
    none_ok = sum(not r for c, r in nones)
    out = {"top1": top1 / max(len(labelled), 1), "top3": top3 / max(len(labelled), 1),
           "none": none_ok / max(len(nones), 1), "n": len(labelled), "n_none": len(nones)}
    print(f"{name:10} top-1 {out['top1']:6.1%} ({top1}/{len(labelled)})   "
          f"top-3 {out['top3']:6.1%} ({top3}/{len(labelled)})   "
          f"none {out['none']:6.1%} ({none_ok}/{len(nones)})")
    if verbose:
        for c, r in results:
            if (c["label"] == "none" and r) or (c["label"] != "none" and not ok(c, r, 1)):
                print(f"    miss {c['id']}: want {c['label']}, got {r[:3] or 'nothing'}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cases")
    ap.add_argument("--kb-dir", action="append", default=[])
    ap.add_argument("--quiet", action="store_true", help="figures only, no list of misses")
    args = ap.parse_args()
    cases = yaml.safe_load(open(args.cases, encoding="utf-8")) or []
    kb = load(args.kb_dir)
    t0 = time.perf_counter()
    ours = [(c, [m.id for m in lookup_text(c["text"], top=3, kb=kb).matches]) for c in cases]
    t_ours = time.perf_counter() - t0
    base = plain_bm25(kb)
    t0 = time.perf_counter()
    theirs = [(c, base(c["text"])) for c in cases]
    t_base = time.perf_counter() - t0
    print(f"{len(cases)} cases, {len(kb.entries)} entries")
    score("kb", ours, not args.quiet)
    score("plain BM25", theirs, False)
    print(f"time: kb {t_ours * 1000 / max(len(cases), 1):.2f} ms/case, "
          f"plain BM25 {t_base * 1000 / max(len(cases), 1):.2f} ms/case")
    return 0


if __name__ == "__main__":
    sys.exit(main())
