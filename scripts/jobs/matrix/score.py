"""Score kb's job view on the fault matrix (tests/fixtures/jobs/matrix/<job>/, made by
scripts/jobs/matrix/run.py): for every job, the ranks kb names as roots against the ranks the
harness injected a fault on (truth.json), as a user would judge it.

    python scripts/jobs/matrix/score.py            # a line per job, then the figures
    python scripts/jobs/matrix/score.py --wrong    # only the jobs kb gets wrong
    python scripts/jobs/matrix/score.py --json     # the figures as JSON

The figures:
  exact            jobs whose root set is exactly the injected set (a negative control's is
                   empty, or only the rank that raised)
  top-1            jobs whose root cause (the first rank kb names) is an injected rank; a job
                   with nothing injected counts when kb names no rank
  injected found   injected ranks kb named, of all injected ranks
  innocent named   ranks kb named that nothing was injected on (summed over the jobs)
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
MATRIX = os.path.join(REPO, "tests", "fixtures", "jobs", "matrix")


def verdict(engine, folder: str) -> tuple[int | None, list[int], str]:
    """(the root cause's rank, every root rank, kb's one-line summary) of a job folder."""
    from kb.job.lookup import lookup_paths

    jl = lookup_paths(engine, [folder])
    job = jl.job
    if job is None:
        return None, [], "not read as a job"
    roots = sorted({r.rank for r in job.roots if r.rank is not None})
    top = job.root.rank if job.root is not None else None
    return top, roots, job.summary


def score(rows: list[dict]) -> dict:
    n = len(rows)
    exact = sum(1 for r in rows if r["roots"] == r["expected"])
    top1 = sum(
        1
        for r in rows
        if ((r["top"] in r["expected"]) if r["expected"] else (r["top"] is None and not r["roots"]))
    )
    injected = sum(len(r["expected"]) for r in rows)
    found = sum(len(set(r["roots"]) & set(r["expected"])) for r in rows)
    innocent = sum(len(set(r["roots"]) - set(r["expected"])) for r in rows)
    controls = [r for r in rows if r["kind"] == "control"]
    return {
        "jobs": n,
        "exact": exact,
        "top1": top1,
        "injected_ranks": injected,
        "injected_found": found,
        "innocent_named": innocent,
        "controls": len(controls),
        "controls_innocent_named": sum(len(set(r["roots"]) - set(r["expected"])) for r in controls),
    }


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("patterns", nargs="*", help="job names or shell patterns (default: all)")
    ap.add_argument("--dir", default=MATRIX)
    ap.add_argument("--wrong", action="store_true", help="print only the jobs kb gets wrong")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    sys.path.insert(0, REPO)
    from kb.diagnosis.engine import default_engine

    engine = default_engine()
    rows = []
    t0 = time.monotonic()
    for name in sorted(os.listdir(a.dir)):
        if a.patterns and not any(fnmatch.fnmatch(name, p) for p in a.patterns):
            continue
        truth_path = os.path.join(a.dir, name, "truth.json")
        if not os.path.exists(truth_path):
            continue
        with open(truth_path) as fh:
            truth = json.load(fh)
        top, roots, summary = verdict(engine, os.path.join(a.dir, name, "run"))
        row = {
            "job": name,
            "kind": "control" if truth["fault"] in ("none", "raise") else "fault",
            "fault": truth["fault"],
            "expected": sorted(truth["expected_roots"]),
            "top": top,
            "roots": roots,
            "summary": summary,
        }
        rows.append(row)
        ok = row["roots"] == row["expected"]
        if not a.json and (not a.wrong or not ok):
            mark = "ok   " if ok else "WRONG"
            print(f"{mark} {name:28} injected {row['expected']} named {roots} (first {top})")
            if not ok:
                print(f"      {summary[:220]}")
    s = score(rows)
    s["seconds"] = round(time.monotonic() - t0, 1)
    if a.json:
        print(json.dumps({"figures": s, "jobs": rows}, indent=1))
        return 0
    n = s["jobs"] or 1
    print()
    print(f"jobs                 {s['jobs']} ({s['controls']} negative controls)")
    print(f"exact root set       {s['exact']}/{s['jobs']} ({100 * s['exact'] / n:.1f}%)")
    print(f"top-1 rank           {s['top1']}/{s['jobs']} ({100 * s['top1'] / n:.1f}%)")
    print(
        f"injected ranks found {s['injected_found']}/{s['injected_ranks']}"
        + (
            f" ({100 * s['injected_found'] / s['injected_ranks']:.1f}%)"
            if s["injected_ranks"]
            else ""
        )
    )
    print(
        f"innocent ranks named {s['innocent_named']} (in negative controls: "
        f"{s['controls_innocent_named']})"
    )
    print(f"read and judged in   {s['seconds']} s")
    by: dict[str, list[dict]] = {}
    for r in rows:
        by.setdefault(r["fault"] if r["kind"] == "fault" else r["job"].split("-", 1)[1], []).append(
            r
        )
    print("\nper fault (exact root set / jobs):")
    for k in sorted(by):
        rs = by[k]
        print(f"  {k:16} {sum(1 for r in rs if r['roots'] == r['expected'])}/{len(rs)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
