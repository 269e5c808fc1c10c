"""Measure lookup quality on labelled cases, against plain Whoosh BM25 in the same run.

    python scripts/eval_lookup.py CASES.yaml [CASES.yaml ...] [--kb-dir DIR] [--quiet] [--json]

CASES.yaml: a list of {id, label, also?, text}; label is the entry id that should come first, an
id of a class kb has no entry for, or `none` when no entry should match. Per file it prints:

- covered: cases whose label is a kb entry id;
- right on covered: of those, the share whose first match is the label or an `also` id;
- abstained on uncovered: cases whose label is not a kb id (or none) that got no match;
- wrong claims: cases whose first match is a specific entry that is neither the label nor an
  `also` id, as a share of all cases (the errors that cost a user most: a confident wrong answer);
- generic answers: cases whose first match is a generic entry (`generic: true`: a
  FileNotFoundError, a KeyError) that is not the label: an answer about the language or platform,
  never a claim about a specific class, so counted apart from wrong claims;
- named right: all cases whose first match is right, as a share of all cases (a case labelled
  with a class kb lacks can still be named right through an `also` id);
- suggestions: how often a full-text suggestion, shown when nothing matched, was an acceptable
  id (its precision), so the threshold for showing them can be defended.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import yaml

from kb.diagnosis.engine import Engine


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
    return "".join(" " if ch in '+-&|!(){}[]^"~*?:\\/' else ch for ch in text)


def score_file(
    cases: list[dict],
    results: list[tuple[list[str], list[str]]],
    ids: set[str],
    aliases: dict[str, str] | None = None,
    generic: set[str] | None = None,
) -> dict:
    """`aliases`: an entry's earlier ids -> its id; a label written with an earlier id is that
    entry's label. `generic`: the ids of generic entries (their answers are no specific claim)."""
    aliases = aliases or {}
    generic = generic or set()
    n = len(cases)
    covered = right = uncovered = abstained = wrong = named = 0
    sugg_shown = sugg_ok = 0
    generic_answers = 0
    misses = []
    for c, (matches, suggestions) in zip(cases, results):
        label = aliases.get(c["label"], c["label"])
        good = {aliases.get(x, x) for x in (c["label"], *c.get("also", []))} - {"none"}
        first = matches[0] if matches else None
        is_cov = label in ids
        covered += is_cov
        if first is not None and first in good:
            named += 1
            right += is_cov
        elif first is not None and first in generic:
            generic_answers += 1
            misses.append((c["id"], c["label"], first, "generic"))
        elif first is not None:
            wrong += 1
            misses.append((c["id"], c["label"], first, "wrong"))
        elif is_cov:
            misses.append((c["id"], c["label"], None, "missed"))
        if not is_cov:
            uncovered += 1
            abstained += first is None
        if first is None and suggestions:
            sugg_shown += 1
            sugg_ok += suggestions[0] in good
    return {
        "cases": n,
        "covered": covered,
        "right_on_covered": right,
        "uncovered": uncovered,
        "abstained_on_uncovered": abstained,
        "wrong_claims": wrong,
        "generic_answers": generic_answers,
        "named_right": named,
        "suggestions_shown": sugg_shown,
        "suggestions_right": sugg_ok,
        "misses": misses,
    }


def pct(a: int, b: int) -> str:
    return f"{a / b:6.1%}" if b else "   n/a"


def report(name: str, s: dict, verbose: bool) -> None:
    print(f"{name}: {s['cases']} cases")
    print(
        f"  covered                {s['covered']:4}   right on covered {pct(s['right_on_covered'], s['covered'])}"
        f" ({s['right_on_covered']}/{s['covered']})"
    )
    print(
        f"  uncovered              {s['uncovered']:4}   abstained        "
        f"{pct(s['abstained_on_uncovered'], s['uncovered'])} ({s['abstained_on_uncovered']}/{s['uncovered']})"
    )
    print(
        f"  wrong claims           {s['wrong_claims']:4}   of all cases     {pct(s['wrong_claims'], s['cases'])}"
    )
    print(
        f"  generic answers        {s['generic_answers']:4}   of all cases     {pct(s['generic_answers'], s['cases'])}"
    )
    print(
        f"  named right            {s['named_right']:4}   of all cases     {pct(s['named_right'], s['cases'])}"
    )
    print(
        f"  suggestions shown      {s['suggestions_shown']:4}   precision        "
        f"{pct(s['suggestions_right'], s['suggestions_shown'])}"
    )
    if verbose:
        for cid, label, got, kind in s["misses"]:
            print(f"    {kind:6} {cid}: want {label}, got {got or 'nothing'}")


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("cases", nargs="+")
    ap.add_argument("--kb-dir", action="append", default=[])
    ap.add_argument("--quiet", action="store_true", help="figures only, no list of misses")
    ap.add_argument("--json", action="store_true", help="the figures as JSON")
    ap.add_argument("--baseline", action="store_true", help="also score plain BM25 (slower)")
    args = ap.parse_args()
    engine = Engine(args.kb_dir)
    kb = engine.knowledge
    ids = {e.id for e in kb.entries}
    generic = {e.id for e in kb.entries if e.generic}
    aliases = {a: e.id for e in kb.entries for a in e.aliases}
    out = {}
    for path in args.cases:
        cases = yaml.safe_load(open(path, encoding="utf-8")) or []
        t0 = time.perf_counter()
        results = []
        for c in cases:
            r = engine.lookup(c["text"], top=3)
            results.append(([m.id for m in r.matches], [m.id for m in r.suggestions]))
        took = (time.perf_counter() - t0) * 1000 / max(len(cases), 1)
        s = score_file(cases, results, ids, aliases, generic)
        s["ms_per_case"] = round(took, 2)
        if args.baseline:
            base = plain_bm25(kb)
            s["bm25_named_right"] = sum(
                bool(
                    set(base(c["text"])[:1])
                    & {aliases.get(x, x) for x in (c["label"], *c.get("also", []))}
                )
                for c in cases
            )
        out[path] = s
        if not args.json:
            report(f"{path} ({len(kb.entries)} entries, {took:.2f} ms/case)", s, not args.quiet)
            if args.baseline:
                print(
                    f"  plain BM25 named right {s['bm25_named_right']:4}   of all cases     "
                    f"{pct(s['bm25_named_right'], s['cases'])}"
                )
    if args.json:
        json.dump(out, sys.stdout, indent=2)
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
