"""How often users meet the catalog's templates: error lines read from public issue threads, each
attributed to the template it fits, written to kb/catalog/frequency.json for `kb coverage`.

    python scripts/catalog_frequency.py SAMPLE.tsv QUERIES.tsv [--date YYYY-MM-DD] [--out PATH]

SAMPLE.tsv: one row per error line, `query-id<TAB>thread-url<TAB>line`, under the first query
that found the thread: every line of a thread's title and excerpt that reads `<Name>Error: text`
(or Exception, Warning), `ERROR: text` or `error: text`, as printed. QUERIES.tsv:
`query-id<TAB>library<TAB>results<TAB>query` (results: how many threads the search returned); a
library of `excluded` keeps that query out (a query that named a message's words, or a subsystem
kb covers well, would favour kb). The sample itself is third-party text and stays
outside the repository; only what it comes to is written: each thread's URL with the catalog
template (kb's own text) its lines fit, and the counts.

A line is attributed as a lookup would read it (kb.diagnosis.catalog_match): the best fit with
enough literal text, the whole message rather than a phrase inside another, and an exception
type the template can raise. A thread counts once per template.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kb.catalog import store
from kb.catalog.coverage import FREQUENCY_FILE
from kb.catalog.matcher import Matcher


def attribute(matcher: Matcher, line: str):
    """The template a lookup would read in `line`, or None."""
    from kb.diagnosis.catalog_match import _fits

    got = _fits(matcher, [line], None)
    return got[0].template if got else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sample")
    ap.add_argument("queries")
    ap.add_argument("--date", default="")
    ap.add_argument("--out", default=FREQUENCY_FILE)
    args = ap.parse_args(argv)

    queries: dict[str, tuple[str, str, int]] = {}
    with open(args.queries, encoding="utf-8") as fh:
        for row in fh:
            if row.strip() and not row.startswith("#"):
                qid, lib, results, text = row.rstrip("\n").split("\t", 3)
                queries[qid] = (lib, text.split("   (")[0].strip(), int(results))
    rows: list[tuple[str, str, str]] = []
    with open(args.sample, encoding="utf-8") as fh:
        for row in fh:
            if row.strip() and not row.startswith("#"):
                qid, url, line = row.rstrip("\n").split("\t", 2)
                rows.append((qid, url, line))

    cat = store.load()
    matcher = Matcher(cat.templates)
    threads: dict[str, str] = {}  # url -> first query that found it
    fits: dict[tuple[str, str, str, str], str] = {}  # (url, source, version, text) -> query
    lines = fitted = 0
    for qid, url, line in rows:
        lib = queries.get(qid, ("excluded", "", 0))[0]
        if lib == "excluded" or line == "-":
            continue
        threads.setdefault(url, qid)
        lines += 1
        t = attribute(matcher, line)
        if t is None:
            continue
        fitted += 1
        fits.setdefault((url, t.source, t.version, t.text), qid)
    included = [q for q in sorted(queries) if queries[q][0] != "excluded"]
    doc = {
        "about": "error lines of public issue threads, each attributed to the catalog template "
        "it fits; see docs/performance.md, 'How often users meet the catalog's templates'",
        "date": args.date,
        "queries": [
            {"id": q, "library": queries[q][0], "query": queries[q][1], "results": queries[q][2]}
            for q in included
        ],
        "excluded_queries": [
            {"id": q, "query": queries[q][1]}
            for q in sorted(queries)
            if queries[q][0] == "excluded"
        ],
        "results_read": sum(queries[q][2] for q in included),
        "threads": len(threads),
        "lines": lines,
        "lines_fitting_a_template": fitted,
        "fits": [
            {"thread": url, "query": q, "source": s, "version": v, "text": text}
            for (url, s, v, text), q in sorted(fits.items())
        ],
    }
    with open(args.out, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=1, ensure_ascii=False)
        fh.write("\n")
    per = Counter(s for (_u, s, _v, _t) in fits)
    print(
        f"{sum(queries[q][2] for q in included)} results read, {len(threads)} threads with "
        f"error lines, {lines} error lines, {fitted} fit a template "
        f"({len(fits)} thread-template pairs): {dict(per.most_common())}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
