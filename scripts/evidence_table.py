"""Rewrite the README's verification table from the evidence records.

    python scripts/evidence_table.py           # rewrite the block in README.md
    python scripts/evidence_table.py --check   # exit 1 when README.md is not what the records say
    python scripts/evidence_table.py --print   # the table on stdout

The block sits between <!-- verification-table:start --> and <!-- verification-table:end -->.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from a checkout without installing

from kb.knowledge.evidence import load_evidence  # noqa: E402
from kb.render.evidence_table import current_block, render_table, replace_block  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--readme", type=Path, default=REPO / "README.md")
    ap.add_argument("--evidence", type=Path, default=REPO / "evidence")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true")
    mode.add_argument("--print", action="store_true")
    args = ap.parse_args()
    table = render_table(load_evidence(args.evidence))
    if args.print:
        sys.stdout.write(table)
        return 0
    text = args.readme.read_text(encoding="utf-8")
    try:
        new = replace_block(text, table)
    except ValueError as e:
        print(f"{args.readme}: {e}", file=sys.stderr)
        return 2
    if args.check:
        if current_block(text) != table:
            print(f"{args.readme}: the verification table is stale; run {sys.argv[0]}")
            return 1
        return 0
    if new != text:
        args.readme.write_text(new, encoding="utf-8")
        print(f"{args.readme}: verification table rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
