"""Write real-log fixtures for entries: tests/logs/<entry>/<name>.log, each a log that kb itself
captured (a repro's output kept in an evidence record from a GPU run, or a log given with --log),
with the line the lookup must name marked in place by a trailing MARK.

    python scripts/capture_log_fixtures.py                 # from every evidence record's output
    python scripts/capture_log_fixtures.py --log ID FILE   # a captured log of your own, for ID

A fixture is written only when today's lookup names its entry first; the marked line is the one
that lookup showed. Review the marks before committing: tests/test_log_fixtures.py then holds
every later change of kb to the same entry and the same line.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import kb  # noqa: E402
from kb.knowledge.evidence import slug  # noqa: E402

MARK = "  #=MATCH=#"
LOGS = REPO / "tests" / "logs"


def marked(engine: kb.Engine, entry_id: str, text: str) -> str | None:
    r = engine.lookup(text, top=3)
    if not r.matches or r.matches[0].id != entry_id:
        return None
    n = r.matches[0].line_number
    lines = text.splitlines()
    if not 1 <= n <= len(lines):
        return None
    lines[n - 1] += MARK
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log", nargs=2, metavar=("ID", "FILE"), help="one captured log for ID")
    args = ap.parse_args()
    engine = kb.Engine()
    if args.log:
        entry_id, path = args.log
        text = Path(path).read_text(encoding="utf-8", errors="replace")
        out = marked(engine, entry_id, text)
        if out is None:
            print(f"kb does not name {entry_id} first for {path}: not written", file=sys.stderr)
            return 1
        dest = LOGS / entry_id / (Path(path).stem + ".log")
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(out, encoding="utf-8")
        print(dest)
        return 0
    written = skipped = 0
    done: set[str] = set()  # one fixture per entry: the H100 record's when there is one
    for rec in sorted((REPO / "evidence").glob("*/*.yaml"), key=lambda p: "h100" not in p.name):
        data = yaml.safe_load(rec.read_text(encoding="utf-8"))
        if data.get("status") != "reproduced" or not data.get("output") or data["entry"] in done:
            continue
        out = marked(engine, data["entry"], data["output"])
        if out is None:
            print(f"skipped {rec.relative_to(REPO)}: not named first today", file=sys.stderr)
            skipped += 1
            continue
        dest = LOGS / data["entry"] / f"{slug(data['gpu'])}.log"
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(out, encoding="utf-8")
        done.add(data["entry"])
        written += 1
    print(f"{written} fixture(s) written, {skipped} skipped")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
