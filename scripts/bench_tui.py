"""How long the TUI takes to list every entry, against a bare Textual app listing as many rows.

    python scripts/bench_tui.py [--runs N] [--size COLSxROWS] [--compare CHECKOUT]
                                [--no-bytecode-cache] [--profile {warm,fresh,floor}]

Each run is a new process, headless (`App.run(headless=True)`: `kb tui` runs the app with
App.run), timed from just before the process is started to the moment its list holds every entry
and that frame has been drawn:

- warm: the TUI as `kb tui` builds it (`create_app(prewarm=True)`), KB_HOME already holding
  kb's caches (warmed once, before the runs, by a lookup that opens the full-text index);
- fresh: the same with an empty KB_HOME, new for each run (from a source checkout the entry cache
  is built on first use; an installed wheel ships it);
- floor: a bare Textual app of the same shape, one OptionList, that fills it in on_mount with as
  many rows of plain text (two lines each, as the TUI's rows are);
- kb-fresh: no TUI, `kb.Engine().knowledge` alone in an empty KB_HOME: the entry cache's build,
  which the fresh TUI cannot list its entries before (kb's public API has no lighter listing).

The child watches its list (OptionList.add_options, which both apps fill it through, tells an
event in Textual's auto pilot when the list holds every row: nothing polls), then waits for the
next refresh and reports time.time() and its CPU time (os.times, every thread of the process)
at that moment; then it ends at once (os._exit), so nothing after the fill is counted. The
kinds run interleaved, the order rotating each run;
the figures are medians of the runs, wall and CPU, each also as a ratio to the floor.

Bytecode: every child runs with its compiled modules cached (PYTHONPYCACHEPREFIX, a folder of
the run's own, filled by untimed runs first), as an installed kb or a checkout's __pycache__ has
them. With PYTHONDONTWRITEBYTECODE set and no cache, the checkout's modules (kb/, tui/) are
compiled from source at every start while Textual's come compiled: --no-bytecode-cache measures
that state (the environment as it is).

--wheel times the wheel built from this checkout, installed into a venv of its own
(scripts/bench_lookup.py's install_wheel), for every kind: what `pip install` gives a user,
whose first TUI reads the entry cache the wheel ships instead of building one.

--compare CHECKOUT times the TUI of another checkout (e.g. `git archive REV | tar -x -C DIR`)
in the same runs, interleaved, as warm@other and fresh@other: before and after under one load.

--profile KIND runs that kind once under cProfile and prints the top of it (cumulative; the main
thread only).
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
KINDS = ("floor", "warm", "fresh", "kb-fresh")


# ------------------------------------------------------------------ the child
def child(kind: str, expect: int, size: tuple[int, int], profile: str | None) -> None:
    import asyncio

    prof = None
    if profile:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    if kind == "kb-fresh":  # kb's own first use: the entries loaded into an empty KB_HOME
        import kb

        t_import = time.time()
        kb.Engine().knowledge  # noqa: B018
        t = os.times()
        out = {"done": time.time(), "cpu": t.user + t.system, "import": t_import}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()
        os._exit(0)
    from textual.app import App
    from textual.widgets import OptionList

    # The moment the list holds every row: both apps fill it through OptionList.add_options
    # (set_options calls it), which is watched here; nothing polls.
    full: list[asyncio.Event] = []
    add_options = OptionList.add_options

    def watched_add_options(self: OptionList, options):
        out = add_options(self, options)
        if self.id == "results" and self.option_count >= expect and full:
            full[0].set()
        return out

    OptionList.add_options = watched_add_options  # type: ignore[method-assign,assignment]

    app: App
    if kind == "floor":
        from textual.app import ComposeResult
        from textual.widgets import OptionList

        rows = [f"entry-{i:04d}\n  - · area · the title of entry {i}" for i in range(expect)]

        class Floor(App[None]):
            def compose(self) -> ComposeResult:
                yield OptionList(id="results")

            def on_mount(self) -> None:
                self.query_one(OptionList).add_options(rows)

        t_import = time.time()
        app = Floor()
    else:
        try:
            from tui.app import create_app  # the checkout's: PYTHONPATH names it
        except ImportError:  # an installed wheel (--wheel) ships it as kb.tui
            from kb.tui.app import create_app

        t_import = time.time()
        app = create_app(prewarm=True)

    async def watch(_pilot: object) -> None:
        full.append(asyncio.Event())
        if app.query_one("#results", OptionList).option_count < expect:
            await full[0].wait()
        drawn = asyncio.Event()
        app.call_after_refresh(drawn.set)
        await drawn.wait()
        t = os.times()
        out: dict[str, object] = {"done": time.time(), "cpu": t.user + t.system, "import": t_import}
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

    # App.run, as `kb tui` runs it, headless; the watch starts once the app is ready
    app.run(headless=True, size=size, auto_pilot=watch)
    raise SystemExit(f"the {kind} app ended before its list held {expect} rows")


# ------------------------------------------------------------------ the parent
PYTHON = [sys.executable]  # the children's interpreter: another venv's with --wheel


def _cwd(repo: str) -> str:
    """Where a child runs: the checkout, or (the wheel) a folder without a kb/ to shadow it."""
    return repo if PYTHON[0] == sys.executable else tempfile.gettempdir()


def child_env(home: str, repo: str, pycache: str | None) -> dict[str, str]:
    env = dict(os.environ, KB_HOME=home, PYTHONPATH=repo)
    if PYTHON[0] != sys.executable:  # the wheel's venv: its installed kb, not the checkout's
        env.pop("PYTHONPATH")
    env.pop("KB_PATH", None)
    if pycache is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = pycache
    return env


def run_child(
    kind: str,
    expect: int,
    home: str,
    size: str,
    repo: str = REPO,
    pycache: str | None = None,
    profile: bool = False,
) -> dict[str, float]:
    env = child_env(home, repo, pycache)
    child_kind = kind.split("@")[0]
    script = os.path.abspath(__file__)
    cmd = [PYTHON[0], script, "--child", child_kind, "--expect", str(expect)]
    cmd += ["--size", size] + (["--profile", child_kind] if profile else [])
    t0 = time.time()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, cwd=_cwd(repo))
    if proc.returncode != 0 or not proc.stdout.strip():
        raise SystemExit(f"{kind} run failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["wall"] = out["done"] - t0
    out["import_wall"] = out["import"] - t0
    return out


def count_and_warm(home: str, repo: str, pycache: str | None) -> int:
    """Warm KB_HOME as a user's would be (entry cache, full-text index) and count the entries."""
    code = (
        "import kb; e = kb.Engine(); e.lookup('warm up the full text index', top=1); "
        "print(len(e.knowledge.entries))"
    )
    out = subprocess.run(
        [PYTHON[0], "-c", code],
        env=child_env(home, repo, pycache),
        capture_output=True,
        text=True,
        check=True,
        cwd=_cwd(repo),
    )
    return int(out.stdout.split()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--size", default="120x40")
    ap.add_argument("--compare", metavar="CHECKOUT", help="another checkout's TUI, interleaved")
    ap.add_argument("--no-bytecode-cache", action="store_true")
    ap.add_argument("--wheel", action="store_true", help="time the wheel built from this checkout")
    ap.add_argument("--profile", choices=KINDS)
    ap.add_argument("--child", choices=KINDS, help=argparse.SUPPRESS)
    ap.add_argument("--expect", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    cols, rows = (int(x) for x in args.size.split("x"))
    if args.child:
        child(args.child, args.expect, (cols, rows), args.profile)
        return

    if args.wheel:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from bench_lookup import install_wheel

        venv = install_wheel()
        if venv is None:
            raise SystemExit("no wheel could be built here")
        PYTHON[0] = str(venv / "bin" / "python")
        print(f"the wheel installed in {venv}")
    root = tempfile.mkdtemp(prefix="bench-tui-")
    try:
        pycache = None if args.no_bytecode_cache else os.path.join(root, "pycache")
        kinds = KINDS + (("warm@other", "fresh@other") if args.compare else ())
        repos = {k: os.path.abspath(args.compare) if "@" in k else REPO for k in kinds}
        warm_homes: dict[str, str] = {}
        counts = set()
        for repo in sorted(set(repos.values())):
            warm_homes[repo] = os.path.join(root, f"warm-{len(warm_homes)}")
            os.makedirs(warm_homes[repo])
            counts.add(count_and_warm(warm_homes[repo], repo, pycache))
        if len(counts) != 1:
            raise SystemExit(f"the checkouts list different numbers of entries: {counts}")
        expect = counts.pop()

        def home_for(kind: str, i: int) -> str:
            if kind.startswith("warm"):
                return warm_homes[repos[kind]]
            fresh = os.path.join(root, f"{kind}-{i}")
            os.makedirs(fresh)
            return fresh

        for kind in kinds:  # untimed: the TUI's own writes into the warm homes, the bytecode
            run_child(kind, expect, home_for(kind, -1), args.size, repos[kind], pycache)

        if args.profile:
            kind = args.profile
            home = home_for(kind, 0)
            out = run_child(kind, expect, home, args.size, REPO, pycache, profile=True)
            print(
                f"{args.profile}: wall {out['wall'] * 1000:.0f} ms, cpu {out['cpu'] * 1000:.0f} ms"
            )
            print(out["profile"])
            return

        got: dict[str, list[dict[str, float]]] = {k: [] for k in kinds}
        for i in range(args.runs):
            r = i % len(kinds)
            for kind in kinds[r:] + kinds[:r]:
                home = home_for(kind, i)
                got[kind].append(run_child(kind, expect, home, args.size, repos[kind], pycache))
        load = os.getloadavg()[0]
        print(
            f"TUI entry list filled, {expect} entries, {args.runs} runs each, interleaved, "
            f"headless {args.size}, bytecode {'not ' if pycache is None else ''}cached; "
            f"medians (load average now {load:.1f}, {time.strftime('%Y-%m-%d %H:%M')})"
        )
        if args.compare:
            print(f"@other: {repos['warm@other']}")
        med = {
            k: {m: statistics.median(r[m] for r in v) for m in ("wall", "cpu", "import_wall")}
            for k, v in got.items()
        }
        floor = med["floor"]
        print(
            f"{'':12}{'wall ms':>9}{'cpu ms':>9}{'import ms':>11}{'wall x':>8}{'cpu x':>7}  walls"
        )
        for k in kinds:
            m = med[k]
            walls = " ".join(f"{r['wall'] * 1000:.0f}" for r in got[k])
            print(
                f"{k:12}{m['wall'] * 1000:9.0f}{m['cpu'] * 1000:9.0f}{m['import_wall'] * 1000:11.0f}"
                f"{m['wall'] / floor['wall']:8.2f}{m['cpu'] / floor['cpu']:7.2f}  {walls}"
            )
        own = med["kb-fresh"]
        for k in [k for k in kinds if k.startswith("fresh")]:
            print(
                f"{k} against kb-fresh (the entry cache's build alone): wall "
                f"{med[k]['wall'] / own['wall']:.2f}x, cpu {med[k]['cpu'] / own['cpu']:.2f}x"
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
