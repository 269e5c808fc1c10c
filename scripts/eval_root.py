"""Measure the root failure on labelled cases: how often its line is the case's labelled root line.

    python scripts/eval_root.py CASES.yaml [CASES.yaml ...] [--kb-dir DIR] [--list] [--json]

CASES.yaml: a list of {id, label, root_line?, text}. Cases with a `root_line` are failure logs
whose first failure is that line; label `none` marks a log with no failure. Each case is looked
up as `kb lookup --stdin` reads it (kb.job.lookup.lookup_stream: one stream, a job when its lines
come from several ranks). Per file it prints:

- cases given a root: all cases whose lookup has a `root` (any file, labelled or not);
- with root line: the cases that have one;
- root given: of those, how many got a `root` at all;
- root on the line: how many got a root whose line contains the root line (whitespace folded; a
  line kb kept short counts when it is a prefix of at least 30 characters of the root line);
- root elsewhere: a root was given, on another line (a wrong line is worse than none);
- answered: an entry matched, or the root is on the line (what a user gets either way);
- none cases with a root: logs labelled `none` that got a root (a failure where there is none),
  in files that label root lines (elsewhere `none` means only "no entry should match").
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time

import yaml

from kb.diagnosis.engine import Engine
from kb.job.lookup import lookup_stream


def norm(s: str) -> str:
    return " ".join(s.split())


def on_line(line: str, want: str) -> bool:
    line, want = norm(line), norm(want)
    if not line or not want:
        return False
    if want in line:
        return True
    cut = line.rstrip(" .…")
    return len(cut) >= 30 and want.startswith(cut)


def score(engine: Engine, cases: list[dict]) -> dict:
    n_root_line = given = right = elsewhere = answered = any_root = 0
    nones = none_root = 0
    misses: list[dict] = []
    t0 = time.perf_counter()
    for c in cases:
        result = lookup_stream(engine, io.BytesIO(c["text"].encode("utf-8"))).result
        root = result.root
        any_root += root is not None
        if c.get("label") == "none":
            nones += 1
            none_root += root is not None
            continue
        want = c.get("root_line")
        if not want:
            continue
        n_root_line += 1
        hit = root is not None and on_line(root.line, want)
        given += root is not None
        right += hit
        elsewhere += root is not None and not hit
        answered += hit or bool(result.matches)
        if not hit:
            misses.append(
                {
                    "id": c.get("id"),
                    "label": c.get("label"),
                    "want": want,
                    "got": root.line if root is not None else None,
                    "entry": result.matches[0].id if result.matches else None,
                }
            )
    return {
        "cases": len(cases),
        "cases_with_a_root": any_root,
        "with_root_line": n_root_line,
        "root_given": given,
        "root_on_line": right,
        "root_elsewhere": elsewhere,
        "answered": answered,
        "none_cases": nones,
        "none_cases_with_root": none_root,
        "ms_per_case": round(1000 * (time.perf_counter() - t0) / max(len(cases), 1), 2),
        "misses": misses,
    }


def pct(a: int, b: int) -> str:
    return f"{a / b:6.1%} ({a}/{b})" if b else "   n/a"


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("cases", nargs="+")
    ap.add_argument("--kb-dir", action="append", default=[])
    ap.add_argument("--list", action="store_true", help="list the cases whose root line was missed")
    ap.add_argument("--json", action="store_true", help="the figures as JSON")
    args = ap.parse_args()
    engine = Engine(args.kb_dir)
    out = {}
    for path in args.cases:
        try:
            with open(path, encoding="utf-8") as fh:
                cases = yaml.safe_load(fh) or []
        except (OSError, yaml.YAMLError) as e:
            print(f"eval_root: cannot read {path}: {e}", file=sys.stderr)
            return 2
        s = out[path] = score(engine, cases)
        if args.json:
            continue
        n = s["with_root_line"]
        print(f"{path}: {s['cases']} cases ({s['ms_per_case']} ms/case)")
        print(f"  cases given a root     {pct(s['cases_with_a_root'], s['cases'])}")
        print(f"  with root line         {n}")
        print(f"  root given             {pct(s['root_given'], n)}")
        print(f"  root on the line       {pct(s['root_on_line'], n)}")
        print(f"  root elsewhere         {s['root_elsewhere']}")
        print(f"  answered (entry/root)  {pct(s['answered'], n)}")
        nones = f"{s['none_cases_with_root']}/{s['none_cases']}" if n else "n/a"
        print(f"  none cases with a root {nones}")
        if args.list:
            for m in s["misses"]:
                print(f"    {m['id']} {m['label']:26} want {m['want'][:80]!r}")
                print(f"    {'':32} got  {(m['got'] or '-')[:80]!r}  entry {m['entry']}")
    if args.json:
        json.dump(out, sys.stdout, indent=2)
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
