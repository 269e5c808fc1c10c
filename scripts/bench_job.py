"""The job view of a 1,024-rank job: how long `kb lookup` takes to read and judge its Flight
Recorder dumps, and how much memory it holds, for every synthetic scenario of
tests/fr_synth.py (four process-group layouts, each fault injected), with each verdict checked
against the ranks the scenario injected.

    python scripts/bench_job.py                 # 1,024 ranks, every layout and scenario
    python scripts/bench_job.py --ranks 16 --scenarios stall,two

Each case is written to a temporary folder as torch writes its dumps (nccl_trace_rank_<r>
pickles), then read in a fresh process by `kb lookup --json <folder>` (the cold command, the
knowledge base's start included) and, in the same process, by kb.lookup_job a second time (warm:
the folder read, the dumps unpickled and compared, the verdict built). The figures are wall
seconds, CPU seconds (what a busy shared machine inflates least: the child's own and its
workers', as kb reads many dumps in a pool of processes; "workers" says how much of it was
theirs) and its peak resident memory.

    python scripts/bench_job.py --workers 1     # the dumps read in one process (KB_FR_WORKERS)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests"))

import fr_synth as S  # noqa: E402

CHILD = """
import json, resource, sys, time
def cpu():
    # this process and the workers it waited for (the dumps' pool): all the CPU the view took
    u = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime + c.ru_utime + c.ru_stime
def children():
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return c.ru_utime + c.ru_stime
t0, c0 = time.monotonic(), cpu()
import kb
jl = kb.lookup_job([sys.argv[1]])
cold, cold_cpu = time.monotonic() - t0, cpu() - c0
t1, c1, k1 = time.monotonic(), cpu(), children()
jl = kb.lookup_job([sys.argv[1]])
warm, warm_cpu, warm_workers = time.monotonic() - t1, cpu() - c1, children() - k1
# The floor: every dump read with plain pickle.load, nothing checked or compared (what any
# reader of these files pays at least), in the same process and the same run.
import os, pickle
fr = os.path.join(sys.argv[1], "fr")
t2, c2 = time.monotonic(), cpu()
for name in sorted(os.listdir(fr)):
    with open(os.path.join(fr, name), "rb") as fh:
        pickle.load(fh)
floor, floor_cpu = time.monotonic() - t2, cpu() - c2
print(json.dumps({
    "cold": cold, "warm": warm, "cold_cpu": cold_cpu, "warm_cpu": warm_cpu,
    "warm_workers_cpu": warm_workers,
    "floor": floor, "floor_cpu": floor_cpu,
    "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    "roots": sorted(r.rank for r in jl.job.roots),
    "kinds": sorted(str(r.kind) for r in jl.job.roots),
    "problems": list(jl.job.problems),
}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--ranks", type=int, default=1024, choices=(16, 1024))
    ap.add_argument("--scenarios", default="", help="comma-separated (default: all)")
    ap.add_argument("--at", type=int, default=20, help="the step the faults come at")
    ap.add_argument(
        "--workers",
        default="",
        help="processes that read the dumps (KB_FR_WORKERS; default: kb decides, 1: none)",
    )
    args = ap.parse_args()
    wanted = set(filter(None, args.scenarios.split(",")))
    rows = []
    bad = 0
    for lay in S.layouts(args.ranks):
        for name, faults in S.scenarios(lay, at=args.at).items():
            if wanted and name not in wanted:
                continue
            with tempfile.TemporaryDirectory() as tmp:
                dumps = S.simulate(lay, faults, steps=args.at + 4)
                S.write(dumps, os.path.join(tmp, "fr"), "torch")
                size = sum(
                    os.path.getsize(os.path.join(tmp, "fr", f))
                    for f in os.listdir(os.path.join(tmp, "fr"))
                )
                entries = statistics.mean(len(d["entries"]) for d in dumps.values())
                del dumps
                env = {**os.environ, "PYTHONPATH": REPO}
                if args.workers:
                    env["KB_FR_WORKERS"] = args.workers
                out = subprocess.run(
                    [sys.executable, "-c", CHILD, tmp], capture_output=True, text=True, env=env
                )
                if out.returncode != 0:
                    print(out.stderr[-3000:], file=sys.stderr)
                    return 2
                r = json.loads(out.stdout.strip().splitlines()[-1])
                want = sorted({f.rank for f in faults})
                ok = r["roots"] == want
                bad += not ok
                rows.append((lay.name, name, want, r, size, entries, ok))
                print(
                    f"{lay.name:18} {name:9} roots {r['roots']} (want {want}) {'ok' if ok else 'WRONG'}  "
                    f"{r['kinds']}  cold {r['cold']:.2f}s (cpu {r['cold_cpu']:.2f}s) "
                    f"warm {r['warm']:.2f}s (cpu {r['warm_cpu']:.2f}s, "
                    f"workers {r['warm_workers_cpu']:.2f}s)  "
                    f"pickle.load {r['floor_cpu']:.2f}s cpu: warm/floor "
                    f"{r['warm_cpu'] / max(r['floor_cpu'], 1e-3):.1f}x  "
                    f"peak {r['rss_mib']:.0f} MiB  dumps {size / 1e6:.1f} MB, {entries:.0f} entries/rank",
                    flush=True,
                )
    if rows:

        def fig(key: str) -> str:
            xs = [r[3][key] for r in rows]
            return f"median {statistics.median(xs):.2f}s, max {max(xs):.2f}s"

        rss = [r[3]["rss_mib"] for r in rows]
        ratios = [r[3]["warm_cpu"] / max(r[3]["floor_cpu"], 1e-3) for r in rows]
        print(
            f"\nwarm CPU (this process and its workers) against plain pickle.load of the same "
            f"dumps (the floor, same process): median {statistics.median(ratios):.2f}x, "
            f"max {max(ratios):.2f}x; the floor's CPU {fig('floor_cpu')}"
        )
        print(
            f"\n{len(rows)} cases, {bad} wrong; cold wall {fig('cold')} (cpu {fig('cold_cpu')}); "
            f"warm wall {fig('warm')} (cpu {fig('warm_cpu')}); peak RSS max {max(rss):.0f} MiB; "
            f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
        )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
