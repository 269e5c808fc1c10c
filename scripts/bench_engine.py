"""One log through a warm `kb.Engine`, in process, against a 15-rule regex classifier of failure
classes over the same logs, measured in the same run.

    python scripts/bench_engine.py                      # kb's own captured logs (tests/logs)
    python scripts/bench_engine.py --yaml CASES.yaml    # also the `text:` of each case of a file
    python scripts/bench_engine.py --profile 30         # and the 30 costliest functions of kb

The logs are the repros' real outputs captured on GPUs and CPUs (tests/logs/<id>/*.log) and any
`--yaml` file of cases (the labelled real-log sets' format: a list of mappings with `text`). The
floor is what the simplest tool of the kind does: 15 regular expressions of common failure
classes, searched in turn over the whole log until one fits (the first fit names the class). kb
does more for each log (the root failure, every signature, facts, the catalog for what no
signature claims, the ranking), so the figure says what that costs per log.

Each round times every log once through each (the order of the two alternating by round), after
one warm-up round; the figures are the medians over the rounds of the per-log mean and of the
per-log p50, in CPU time of this process (`time.process_time`), the wall clock beside.
"""

from __future__ import annotations

import argparse
import cProfile
import glob
import os
import pstats
import re
import statistics
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

# The baseline: failure classes as a hand-written classifier would spell them (kb's own words).
RULES = [
    ("cuda-oom", r"CUDA out of memory|OutOfMemoryError"),
    ("cuda-illegal-memory-access", r"illegal memory access"),
    ("cuda-device-side-assert", r"device-side assert"),
    ("nccl-timeout", r"Watchdog caught collective operation timeout|timed out after \d+ ?ms"),
    ("nccl-error", r"NCCL error|ncclInternalError|ncclUnhandledCudaError|NCCL WARN"),
    ("cuda-not-available", r"no CUDA GPUs are available|Torch not compiled with CUDA"),
    ("cuda-no-kernel-image", r"no kernel image is available"),
    ("cudnn-error", r"CUDNN_STATUS_\w+"),
    ("cublas-execution-failed", r"CUBLAS_STATUS_\w+"),
    ("shape-mismatch", r"shapes cannot be multiplied|size mismatch|must match the size"),
    ("cuda-device-mismatch", r"Expected all tensors to be on the same device"),
    ("python-module-not-found", r"ModuleNotFoundError|No module named"),
    ("cpu-oom-killed", r"Out of memory: Killed process|oom-kill"),
    ("segfault", r"Segmentation fault|SIGSEGV"),
    ("dtype-mismatch", r"expected scalar type \w+ but found \w+|should be the same"),
]


def classifier():
    rules = [(name, re.compile(rx)) for name, rx in RULES]

    def classify(text: str) -> str | None:
        for name, rx in rules:
            if rx.search(text):
                return name
        return None

    return classify


def logs(yaml_files: list[str]) -> list[str]:
    out = []
    for path in sorted(glob.glob(os.path.join(REPO, "tests", "logs", "*", "*.log"))):
        with open(path, encoding="utf-8", errors="replace") as fh:
            out.append(fh.read())
    for path in yaml_files:
        import yaml

        with open(path, encoding="utf-8") as fh:
            cases = yaml.safe_load(fh)
        out.extend(c["text"] for c in cases if isinstance(c, dict) and c.get("text"))
    return out


def one_round(fn, texts: list[str]) -> tuple[float, float, float]:
    """(mean CPU ms, p50 CPU ms, wall ms in all) of fn over the texts."""
    per = []
    w0 = time.perf_counter()
    for t in texts:
        c0 = time.process_time()
        fn(t)
        per.append(time.process_time() - c0)
    wall = time.perf_counter() - w0
    return 1e3 * sum(per) / len(per), 1e3 * statistics.median(per), 1e3 * wall


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--yaml", action="append", default=[], help="cases file (may repeat)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--profile", type=int, default=0, metavar="N")
    args = ap.parse_args(argv)

    import kb

    texts = logs(args.yaml)
    engine = kb.Engine()
    classify = classifier()

    def run_kb(text: str) -> None:
        engine.lookup(text)

    # Warm-up: every lazy part of the engine (catalog, data, regex compiles) built once.
    for t in texts:
        run_kb(t)
        classify(t)
    named = sum(1 for t in texts if engine.lookup(t).best is not None)
    base_named = sum(1 for t in texts if classify(t) is not None)

    kb_rounds, base_rounds = [], []
    for i in range(args.rounds):
        order = [(run_kb, kb_rounds), (classify, base_rounds)]
        if i % 2:
            order.reverse()
        for fn, sink in order:
            sink.append(one_round(fn, texts))

    def med(rounds, k):
        return statistics.median(r[k] for r in rounds)

    size = sum(len(t) for t in texts) / len(texts)
    print(
        f"{len(texts)} logs (mean {size / 1024:.1f} KiB), {args.rounds} rounds, "
        f"python {sys.version.split()[0]}, kb {kb.__version__}"
    )
    print(f"{'':28} {'mean CPU/log':>12} {'p50 CPU/log':>12} {'wall/round':>11} {'named':>7}")
    for label, rounds, n in (
        ("warm kb.Engine.lookup", kb_rounds, named),
        ("15-rule regex classifier", base_rounds, base_named),
    ):
        print(
            f"{label:28} {med(rounds, 0):9.3f} ms {med(rounds, 1):9.3f} ms "
            f"{med(rounds, 2):8.0f} ms {n:>4}/{len(texts)}"
        )
    print(
        f"ratio kb / classifier: mean {med(kb_rounds, 0) / med(base_rounds, 0):.1f}x, "
        f"p50 {med(kb_rounds, 1) / med(base_rounds, 1):.1f}x  (goal <= 2x)"
    )
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        for t in texts:
            run_kb(t)
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(args.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
