"""`kb coverage`: what kb's message catalog holds, per source and version, and how much of it kb
can name: templates held, mapped to an entry (and of those, at high or medium confidence),
mapped to a known family that has no entry yet, hints that never claim, unmapped, and the
largest unmapped groups (what to write entries for next).

The figures come from the catalog's cache in the state folder (kb.catalog.cache), built with
the lookup's index: once built, the command reads a small pickle instead of mapping 37,000
templates through families.yaml.
"""

from __future__ import annotations

import argparse
import json
import sys

from kb.exit_codes import NOT_FOUND, OK, USAGE


def run_coverage(args: argparse.Namespace) -> int:
    from kb import paths
    from kb.catalog import cache
    from kb.catalog import coverage as cov_mod
    from kb.catalog.families import FamiliesError
    from kb.catalog.store import CatalogError
    from kb.knowledge.base import load
    from kb.render.progress import reading_label, step

    with step(reading_label):
        kb = load(args.kb_dir)
    try:
        with step(
            "reading the message catalog (a first run maps its templates and keeps them in "
            f"{paths.state_folder()})"
        ):
            cov = cache.coverage_figures(paths.state_folder(), cache.codes_of(kb.entries))
    except (CatalogError, FamiliesError, OSError) as exc:
        print(f"kb coverage: {exc}", file=sys.stderr)
        return USAGE
    assert isinstance(cov, cov_mod.Coverage)
    if not cov.sources:
        print("kb coverage: the catalog holds no data (kb/catalog/data is empty)", file=sys.stderr)
        return NOT_FOUND
    if args.source:
        known = sorted({s.source for s in cov.sources})
        if args.source not in known:
            print(
                f"kb coverage: no source {args.source!r}; known: {', '.join(known)}",
                file=sys.stderr,
            )
            return NOT_FOUND
        cov = cov_mod.Coverage(tuple(s for s in cov.sources if s.source == args.source))
    if args.json:
        json.dump(cov.to_json(), sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        print(cov_mod.render_text(cov, detail=not args.brief))
    return OK


def add_arguments(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--json", action="store_true", help="the figures as JSON")
    sp.add_argument(
        "--source", default="", metavar="NAME", help="one project only (pytorch, nccl...)"
    )
    sp.add_argument("--brief", action="store_true", help="the table only, no unmapped groups")
