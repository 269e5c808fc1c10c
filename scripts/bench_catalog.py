"""How fast the message catalog reads log lines, against kb's own signature scan of the same lines.

    python scripts/bench_catalog.py [--lines N] [--files GLOB ...] [--runs N] [--no-lookup]

The lines are a realistic mix: every line of the real logs kept in the repository (job fixtures,
docs/examples: mostly ordinary output with an error here and there) plus every entry's own
example messages, then the same error lines in the shapes logs give them (cut at 60%, lower-cased,
without their exception prefix). The baseline is kb.Engine().lookup(line, fulltext=False) on
each line: the plain signature scan, timed in the same run. Figures are printed as lines/s and as
ratios to the baseline, so they compare across machines.

Then `kb lookup` itself, as a user runs it (a new process each time): a message a signature
claims (the catalog is never loaded) against one only the catalog answers, with the catalog's
cache built, and on first use in a state folder without it (the cache is built then); and the
same two lookups in-process, engine warm.
"""

from __future__ import annotations

import argparse
import glob
import itertools
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def log_lines(patterns: list[str]) -> list[str]:
    out: list[str] = []
    for pat in patterns:
        for path in sorted(glob.glob(os.path.join(REPO, pat), recursive=True)):
            with open(path, encoding="utf-8", errors="replace") as fh:
                out.extend(line.rstrip("\n") for line in fh if line.strip())
    return out


def example_lines() -> list[str]:
    import yaml

    out: list[str] = []
    for path in sorted(glob.glob(os.path.join(REPO, "entries", "*", "*.yaml"))):
        try:
            with open(path, encoding="utf-8") as fh:
                data = yaml.safe_load(fh) or {}
        except (OSError, yaml.YAMLError):
            continue
        for ex in (data.get("examples") or {}).get("match") or []:
            text = ex.get("text") if isinstance(ex, dict) else ex
            if isinstance(text, str):
                out.extend(line for line in text.splitlines() if line.strip())
    return out


def shapes(lines: list[str]) -> list[str]:
    """The same messages as logs mangle them: cut, lower-cased, prefix dropped."""
    out: list[str] = []
    for line in lines:
        out.append(line[: max(20, int(len(line) * 0.6))])
        out.append(line.lower())
        out.append(re.sub(r"^\s*[\w.]+(?:Error|Exception):\s*", "", line))
    return out


def timed(fn, lines: list[str], repeat: int = 1) -> tuple[float, int]:
    hits = 0
    t0 = time.perf_counter()
    for _ in range(repeat):
        for line in lines:
            if fn(line):
                hits += 1
    return time.perf_counter() - t0, hits // repeat


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--files",
        nargs="*",
        default=["tests/fixtures/**/*.log", "docs/examples/*.log", "docs/*.log"],
    )
    ap.add_argument("--lines", type=int, default=0, help="use at most N lines (0: all)")
    ap.add_argument("--runs", type=int, default=15, help="kb lookup processes per kind of line")
    ap.add_argument("--no-lookup", action="store_true", help="skip timing kb lookup itself")
    args = ap.parse_args(argv)

    import kb
    from kb.catalog.matcher import Matcher
    from kb.catalog.store import load

    logs = log_lines(args.files)
    examples = example_lines()
    mix = logs + examples + shapes(examples)
    if args.lines:
        mix = mix[: args.lines]
    print(
        f"lines: {len(mix)} ({len(logs)} log lines, {len(examples)} entry examples, "
        f"{3 * len(examples)} cut / lower-cased / prefix-less variants)"
    )

    t0 = time.perf_counter()
    catalog = load()
    t_load = time.perf_counter() - t0
    t0 = time.perf_counter()
    matcher = Matcher(catalog.templates)
    t_index = time.perf_counter() - t0
    print(
        f"catalog: {len(catalog.templates)} templates; load {t_load:.2f} s, index {t_index:.2f} s"
    )

    engine = kb.Engine()
    engine.lookup("warm up", fulltext=False)  # entries loaded and compiled before timing

    # first pass compiles the candidates' patterns; the second is the steady state
    t_cold, _ = timed(lambda s: matcher.match(s, limit=1), mix)
    t_cat, hits = timed(lambda s: matcher.match(s, limit=1), mix)
    t_base, base_hits = timed(lambda s: engine.lookup(s, top=1, fulltext=False).matches, mix)
    cands = sum(len(matcher.candidates(s)) for s in mix) / max(1, len(mix))
    pair_lines = list(itertools.pairwise(mix))[:2000]
    t0 = time.perf_counter()
    for a, b in pair_lines:
        matcher.match_pair(a, b, limit=1)
    t_pair = time.perf_counter() - t0

    def rate(t: float, n: int) -> float:
        return n / t if t else float("inf")

    print(f"{'':<34} {'lines/s':>10} {'x baseline':>11} {'lines with a fit':>17}")
    print(
        f"{'kb signature scan (baseline)':<34} {rate(t_base, len(mix)):>10.0f} {1.0:>11.2f} {base_hits:>17}"
    )
    print(
        f"{'catalog match, first pass':<34} {rate(t_cold, len(mix)):>10.0f} {t_base / t_cold:>11.2f}"
    )
    print(
        f"{'catalog match, steady':<34} {rate(t_cat, len(mix)):>10.0f} {t_base / t_cat:>11.2f} {hits:>17}"
    )
    print(
        f"{'catalog match_pair (two lines)':<34} {rate(t_pair, len(pair_lines)):>10.0f} "
        f"{(t_base / len(mix)) / (t_pair / max(1, len(pair_lines))):>11.2f}"
    )
    print(
        f"candidates per line (regex-free prefilter passed): {cands:.1f} of {len(matcher)} templates"
    )
    if not args.no_lookup:
        bench_lookup(args.runs)
    return 0


# A message no entry's signature knows; the catalog maps it (dtype-mismatch, family same-dtype).
CATALOG_MSG = (
    "RuntimeError: index_add_(): self (Float) and source (BFloat16) must have the same scalar type"
)
CLAIMED_MSG = "CUDA error: an illegal memory access was encountered"


def bench_lookup(runs: int) -> None:
    """What a lookup that needs the catalog pays, against one that does not, in the same run:
    `kb lookup` as a user runs it (a new process), with the catalog's cache built (warm) and in
    a state folder without it (first use: the build); then in-process lookups (p50)."""
    import shutil
    import statistics
    import subprocess
    import tempfile
    from pathlib import Path

    script = Path(sys.executable).with_name("kb")
    kb_cmd = [str(script)] if script.is_file() else [sys.executable, "-m", "kb"]
    home = tempfile.mkdtemp(prefix="kb-bench-catalog-")
    env = dict(os.environ, KB_HOME=home)

    def run(msg: str, e: dict[str, str]) -> float:
        t0 = time.perf_counter()
        subprocess.run([*kb_cmd, "lookup", msg], env=e, stdout=subprocess.DEVNULL, check=False)
        return time.perf_counter() - t0

    run(CLAIMED_MSG, env)  # the entry cache
    first = run(CATALOG_MSG, env)  # builds the catalog's cache in this state folder
    claimed: list[float] = []
    catalog: list[float] = []
    for _ in range(runs):  # taking turns, so a machine that slows down slows both
        claimed.append(run(CLAIMED_MSG, env))
        catalog.append(run(CATALOG_MSG, env))
    fresh: list[float] = []
    for _ in range(max(1, runs // 5)):
        other = tempfile.mkdtemp(prefix="kb-bench-catalog-")
        e = dict(os.environ, KB_HOME=other)
        run(CLAIMED_MSG, e)
        fresh.append(run(CATALOG_MSG, e))
        shutil.rmtree(other, ignore_errors=True)
    c, k = statistics.median(claimed), statistics.median(catalog)
    print()
    print(f"kb lookup, one line, median of {runs} runs each (new process, cache built):")
    print(f"  {'claimed by a signature (catalog not loaded)':<46} {c * 1e3:8.1f} ms")
    print(
        f"  {'answered through the catalog (cached index)':<46} {k * 1e3:8.1f} ms   +{(k - c) * 1e3:.1f} ms"
    )
    print(
        f"  {'through the catalog, first use (index built)':<46} {statistics.median([first, *fresh]) * 1e3:8.1f} ms"
    )

    import kb
    from kb.diagnosis import catalog_match

    engine = kb.Engine()
    engine.lookup(CATALOG_MSG, fulltext=False)  # the reader made once per process

    def p50(msg: str) -> float:
        ts = []
        for _ in range(200):
            t0 = time.perf_counter()
            engine.lookup(msg, fulltext=False)
            ts.append(time.perf_counter() - t0)
        return statistics.median(ts)

    assert catalog_match._READERS, "the catalog was not read"
    print("in-process lookup p50 (engine warm):")
    print(f"  {'claimed by a signature':<46} {p50(CLAIMED_MSG) * 1e3:8.3f} ms")
    print(f"  {'answered through the catalog':<46} {p50(CATALOG_MSG) * 1e3:8.3f} ms")
    shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
