"""How long the TUI takes to list every entry, against a bare Textual app listing as many rows.

    python scripts/bench_tui.py [--runs N] [--size COLSxROWS] [--profile {warm,fresh,floor}]

Each run is a new process, headless (Textual's `App.run_test`), timed from just before the
process is started to the moment its list holds every entry and that frame has been drawn:

- warm: the TUI as `kb tui` builds it (`create_app(prewarm=True)`), KB_HOME already holding
  kb's caches (warmed once, before the runs, by a lookup that opens the full-text index);
- fresh: the same with an empty KB_HOME, new for each run (from a source checkout the entry cache
  is built on first use; an installed wheel ships it);
- floor: a bare Textual app of the same shape, one OptionList, that fills it in on_mount with as
  many rows of plain text (two lines each, as the TUI's rows are).

The child watches its list from the event loop (every millisecond: the same watch in all three)
and, once it holds every row, waits for the next refresh and reports time.time() and its CPU time
(os.times, every thread of the process) at that moment; then it ends at once (os._exit), so
nothing after the fill is counted. The three kinds run interleaved, the order rotating each run;
the figures are medians of the runs, wall and CPU, each also as a ratio to the floor.

--profile KIND runs that kind once under cProfile and prints the top of it (cumulative).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KINDS = ("floor", "warm", "fresh")


# ------------------------------------------------------------------ the child
def child(kind: str, expect: int, size: tuple[int, int], profile: str | None) -> None:
    import asyncio

    prof = None
    if profile:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    if kind == "floor":
        from textual.app import App, ComposeResult
        from textual.widgets import OptionList

        rows = [f"entry-{i:04d}\n  - · area · the title of entry {i}" for i in range(expect)]

        class Floor(App[None]):
            def compose(self) -> ComposeResult:
                yield OptionList(id="results")

            def on_mount(self) -> None:
                self.query_one(OptionList).add_options(rows)

        app: object = Floor()
        widget = "#results"
    else:
        sys.path.insert(0, REPO)
        from tui.app import create_app

        app = create_app(prewarm=True)
        widget = "#results"
    t_import = time.time()

    async def watch() -> tuple[float, float]:
        async with app.run_test(size=size) as _pilot:  # type: ignore[attr-defined]
            lst = app.query_one(widget)  # type: ignore[attr-defined]
            while lst.option_count < expect:
                await asyncio.sleep(0.001)
            drawn = asyncio.Event()
            app.call_after_refresh(drawn.set)  # type: ignore[attr-defined]
            await drawn.wait()
            t = os.times()
            return time.time(), t.user + t.system

    done, cpu = asyncio.run(watch())
    out: dict[str, object] = {"done": done, "cpu": cpu, "import": t_import}
    if prof is not None:
        import io
        import pstats

        prof.disable()
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(45)
        out["profile"] = s.getvalue()
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
    os._exit(0)  # nothing after the fill is timed: no teardown, no waiting for kb's writers


# ------------------------------------------------------------------ the parent
def run_child(
    kind: str, expect: int, home: str, size: str, profile: bool = False
) -> dict[str, float]:
    env = dict(os.environ, KB_HOME=home, PYTHONPATH=REPO)
    env.pop("KB_PATH", None)
    cmd = [sys.executable, os.path.abspath(__file__), "--child", kind, "--expect", str(expect)]
    cmd += ["--size", size] + (["--profile", kind] if profile else [])
    t0 = time.time()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, cwd=REPO)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise SystemExit(f"{kind} run failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["wall"] = out["done"] - t0
    out["import_wall"] = out["import"] - t0
    return out


def count_and_warm(home: str) -> int:
    """Warm KB_HOME as a user's would be (entry cache, full-text index) and count the entries."""
    code = (
        "import kb; e = kb.Engine(); e.lookup('warm up the full text index', top=1); "
        "print(len(e.knowledge.entries))"
    )
    env = dict(os.environ, KB_HOME=home, PYTHONPATH=REPO)
    env.pop("KB_PATH", None)
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, cwd=REPO
    )
    return int(out.stdout.split()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--size", default="120x40")
    ap.add_argument("--profile", choices=KINDS)
    ap.add_argument("--child", choices=KINDS, help=argparse.SUPPRESS)
    ap.add_argument("--expect", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    cols, rows = (int(x) for x in args.size.split("x"))
    if args.child:
        child(args.child, args.expect, (cols, rows), args.profile)
        return

    root = tempfile.mkdtemp(prefix="bench-tui-")
    try:
        warm_home = os.path.join(root, "warm")
        os.makedirs(warm_home)
        expect = count_and_warm(warm_home)
        run_child("warm", expect, warm_home, args.size)  # once more: the TUI's own writes

        def home_for(kind: str, i: int) -> str:
            if kind == "warm":
                return warm_home
            fresh = os.path.join(root, f"{kind}-{i}")
            os.makedirs(fresh)
            return fresh

        if args.profile:
            out = run_child(args.profile, expect, home_for(args.profile, 0), args.size, True)
            print(
                f"{args.profile}: wall {out['wall'] * 1000:.0f} ms, cpu {out['cpu'] * 1000:.0f} ms"
            )
            print(out["profile"])
            return

        got: dict[str, list[dict[str, float]]] = {k: [] for k in KINDS}
        for i in range(args.runs):
            order = KINDS[i % 3 :] + KINDS[: i % 3]
            for kind in order:
                got[kind].append(run_child(kind, expect, home_for(kind, i), args.size))
        load = os.getloadavg()[0]
        print(
            f"TUI entry list filled, {expect} entries, {args.runs} runs each, interleaved, "
            f"headless {args.size}; medians (load average now {load:.1f}, "
            f"{time.strftime('%Y-%m-%d')})"
        )
        med = {
            k: {m: statistics.median(r[m] for r in v) for m in ("wall", "cpu", "import_wall")}
            for k, v in got.items()
        }
        floor = med["floor"]
        print(f"{'':8}{'wall ms':>9}{'cpu ms':>9}{'import ms':>11}{'wall x':>8}{'cpu x':>7}  walls")
        for k in KINDS:
            m = med[k]
            walls = " ".join(f"{r['wall'] * 1000:.0f}" for r in got[k])
            print(
                f"{k:8}{m['wall'] * 1000:9.0f}{m['cpu'] * 1000:9.0f}{m['import_wall'] * 1000:11.0f}"
                f"{m['wall'] / floor['wall']:8.2f}{m['cpu'] / floor['cpu']:7.2f}  {walls}"
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
