"""`kb coverage [--json] [--source NAME] [--brief]`: what the message catalog holds and maps."""

from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="kb coverage", description=__doc__)
    ap.add_argument("--json", action="store_true", help="print JSON")
    ap.add_argument("--source", default="", help="only this project (pytorch, nccl, ...)")
    ap.add_argument("--brief", action="store_true", help="the table only, no unmapped groups")
    try:
        args = ap.parse_args(argv)
    except SystemExit as exc:  # argparse printed the usage; keep the exit code a number
        return int(exc.code or 0) if isinstance(exc.code, int) else 2

    from . import cache, coverage, families, store

    try:
        cat = store.load()
        fams = cache.mapped(cat)
    except (store.CatalogError, families.FamiliesError, OSError) as exc:
        print(f"kb coverage: {exc}", file=sys.stderr)
        return 2
    if not cat.sources:
        print("kb coverage: the catalog holds no data (kb/catalog/data is empty)", file=sys.stderr)
        return 1
    if args.source:
        known = sorted({s.source for s in cat.sources})
        if args.source not in known:
            print(
                f"kb coverage: no source {args.source!r}; known: {', '.join(known)}",
                file=sys.stderr,
            )
            return 1
        cat = store.Catalog(
            tuple(s for s in cat.sources if s.source == args.source),
            tuple(t for t in cat.templates if t.source == args.source),
        )
    cov = coverage.compute(cat, fams, coverage.load_frequency())
    if args.json:
        print(json.dumps(cov.to_json(), indent=2, ensure_ascii=False))
    else:
        print(coverage.render_text(cov, detail=not args.brief))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
