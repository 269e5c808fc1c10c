"""Lookup speed, as ratios against baselines measured in the same run.

    python scripts/bench_lookup.py [--log-mib 1024] [--synthetic 10000] [--skip-big-log]
    python scripts/bench_lookup.py --cold-only [--runs 30] [--local-entries 150] [--no-wheel]

1. start-up, the child's CPU time (user + system), median of interleaved runs, against
   `python -c pass` of the same interpreter (the floor), for the kb of this interpreter (a
   checkout's editable install: per-user caches checked against every entry file) and for the
   wheel built from this checkout installed in a temporary venv (kb.knowledge.shipped):
   `kb lookup "<one line>"`, `kb lookup --json "<one line>"`, `kb --version`,
   `kb show --help`, and the lookup with --local-entries synthetic entries through KB_PATH
                                                                          target <= 2.5x
   first lookup after install (an empty KB_HOME each time) against a warm lookup, CPU and wall,
   for the installed wheel, and for the checkout (where the first lookup builds the per-user
   caches)                                                                target <= 2x
2. `kb lookup --stdin` over a synthetic log vs `grep -c` of the same log, bundled and with
   --local-entries synthetic entries added through KB_PATH      target >= 500 MB/s, peak RSS < 200 MB
3. warm in-process lookup p50, bundled entries                            target < 1 ms
4. 10,000 synthetic entries: signature path p50 (< 10 ms), full-text-only p50 (< 100 ms), index
   build time
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MSG = "CUDA error: an illegal memory access was encountered"


def kb_command() -> list[str]:
    """The `kb` script installed beside this interpreter (what a user runs), else `-m kb`; never
    a kb of another interpreter found on PATH, or the ratio would compare two Pythons."""
    script = Path(sys.executable).with_name("kb")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "kb"]


def write_local_entries(folder: Path, n: int) -> None:
    """n valid entry files (kb lint passes them), each with its own wording, as a user's
    KB_PATH folder would hold."""
    import json

    area = folder / "synthetic"
    area.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        word = f"Synthetic{i}Error"
        doc = {
            "id": f"local-synthetic-{i}",
            "title": f"{word}: a synthetic failure number {i}",
            "summary": f"Entry {i} of a synthetic local knowledge base, for timing only.",
            "tags": ["synthetic"],
            "signatures": [{"id": "main", "pattern": rf"{word}: widget (?P<widget>\w+) broke"}],
            "causes": [{"title": "A synthetic cause", "detail": "It exists to be loaded."}],
            "diagnostics": [],
            "fixes": [{"title": "Nothing to fix", "detail": "Timing only."}],
            "examples": {
                "match": [f"{word}: widget w{j} broke" for j in range(3)],
                "no_match": [
                    {"text": f"{word}: widget", "belongs": "none"},
                    {"text": "widget broke", "belongs": "none"},
                ],
            },
            "references": [],
        }
        # JSON is YAML: no YAML writer needed here.
        (area / f"local-synthetic-{i}.yaml").write_text(json.dumps(doc, indent=1))


def _timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one run of a command: its user and system time, read
    from the children's usage before and after (nothing else runs a child meanwhile)."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def interleaved(
    cases: list[tuple[str, list[str], dict[str, str]]], runs: int
) -> list[tuple[float, float]]:
    """Median (CPU, wall) of each case, the cases taking turns run after run: a machine that
    slows down or speeds up meanwhile moves every case alike."""
    cpu: list[list[float]] = [[] for _ in cases]
    wall: list[list[float]] = [[] for _ in cases]
    for _ in range(runs):
        for k, (_, cmd, env) in enumerate(cases):
            c, w = _timed(cmd, env)
            cpu[k].append(c)
            wall[k].append(w)
    return [(statistics.median(c), statistics.median(w)) for c, w in zip(cpu, wall)]


def start_up_cases(
    python: str, kb: list[str], env: dict[str, str], local: Path | None
) -> list[tuple[str, list[str], dict[str, str]]]:
    """The floor first, then each start-up kb is timed for."""
    cases = [
        ("python -c pass (the floor)", [python, "-c", "pass"], env),
        ("kb lookup MSG", [*kb, "lookup", MSG], env),
        ("kb lookup --json MSG", [*kb, "lookup", "--json", MSG], env),
        ("kb --version", [*kb, "--version"], env),
        ("kb show --help", [*kb, "show", "--help"], env),
    ]
    if local is not None:
        n = len(list(local.rglob("*.yaml")))
        cases.append(
            (
                f"kb lookup MSG, +{n} via KB_PATH",
                [*kb, "lookup", MSG],
                {**env, "KB_PATH": str(local)},
            )
        )
    return cases


def print_start_up(title: str, cases, got: list[tuple[float, float]], runs: int) -> None:
    floor = got[0][0]
    print(f"   {title}: CPU time, median of {runs} interleaved runs (wall beside it)")
    for k, ((label, _, _), (c, w)) in enumerate(zip(cases, got)):
        ratio = f"   ratio {c / floor:5.2f}x" if k else ""
        print(f"     {label:34} {c * 1000:6.1f} ms CPU {w * 1000:7.1f} ms wall{ratio}")
    print("     (target <= 2.5x for the lookups)")


def bench_cold(runs: int, local_entries: int, wheel: bool) -> None:
    """Start-up against the interpreter's own, for the kb of this interpreter and for the wheel
    installed in a venv of its own; then a first lookup after install against a warm one."""
    env = dict(os.environ)
    env.pop("KB_PATH", None)
    local = None
    if local_entries:
        local = Path(tempfile.mkdtemp(prefix="kb-bench-local-"))
        write_local_entries(local, local_entries)
    print(f"1. start-up against `python -c pass`; MSG = {MSG!r}")
    cases = start_up_cases(sys.executable, kb_command(), env, local)
    for _, cmd, e in cases[1:]:
        # entries cache, full-text index and regex table built once, as after any first runs
        subprocess.run(kb_command() + ["index"], stdout=subprocess.DEVNULL, env=e, check=True)
        for _ in range(2):
            subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=e)
    print_start_up("this interpreter's kb", cases, interleaved(cases, runs), runs)
    if wheel:
        venv = install_wheel()
        if venv is not None:
            python, kb = str(venv / "bin" / "python"), [str(venv / "bin" / "kb")]
            home = tempfile.mkdtemp(prefix="kb-bench-home-")
            e = {**env, "KB_HOME": home}
            cases = start_up_cases(python, kb, e, local)
            for _, cmd, ce in cases[1:]:
                for _ in range(2):
                    subprocess.run(
                        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ce
                    )
            print_start_up(f"the wheel installed in {venv}", cases, interleaved(cases, runs), runs)
            first_use("the installed wheel", kb, env, 3)
            shutil.rmtree(venv, ignore_errors=True)
    first_use("this interpreter's kb (a checkout builds its caches)", kb_command(), env, 3)
    if local is not None:
        shutil.rmtree(local, ignore_errors=True)


# A message no entry's signature knows: the message catalog answers it (dtype-mismatch), so a
# first lookup of it needs the catalog's index too.
CATALOG_MSG = (
    "RuntimeError: index_add_(): self (Float) and source (BFloat16) must have the same scalar type"
)


# No entry knows it: the full-text index is consulted for suggestions.
UNKNOWN_MSG = "ValueError: the frobnicator refused to initialise the widget cache (gizmo detached)"


def first_use(title: str, kb: list[str], env: dict[str, str], runs: int) -> None:
    """A lookup in an empty KB_HOME (a new user's first) against one in a KB_HOME a lookup
    used before (a warm one), taking turns; a fresh KB_HOME for every first one. For a message
    a signature claims, one the catalog answers and one only the full-text index can."""
    print(f"   first lookup after install against a warm one, {title}: median of {runs}")
    messages = (
        ("claimed by a signature", MSG),
        ("answered by the catalog", CATALOG_MSG),
        ("full-text index consulted", UNKNOWN_MSG),
    )
    for label, msg in messages:
        warm_home = tempfile.mkdtemp(prefix="kb-bench-warm-")
        cmd = [*kb, "lookup", msg]
        warm_env = {**env, "KB_HOME": warm_home}
        for _ in range(3):
            subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=warm_env)
        first: list[tuple[float, float]] = []
        warm: list[tuple[float, float]] = []
        for _ in range(runs):
            home = tempfile.mkdtemp(prefix="kb-bench-first-")
            shutil.rmtree(home)  # absent, as for a new user
            first.append(_timed(cmd, {**env, "KB_HOME": home}))
            shutil.rmtree(home, ignore_errors=True)
            warm.append(_timed(cmd, warm_env))
        shutil.rmtree(warm_home, ignore_errors=True)
        fc, fw = (statistics.median(x) for x in zip(*first))
        wc, ww = (statistics.median(x) for x in zip(*warm))
        print(
            f"     {label:24} first {fc * 1000:7.1f} ms CPU {fw * 1000:7.1f} ms wall   warm "
            f"{wc * 1000:6.1f} ms CPU {ww * 1000:6.1f} ms wall   ratio {fc / wc:5.2f}x CPU, "
            f"{fw / ww:5.2f}x wall"
        )
    print("     (target <= 2x)")


def install_wheel() -> Path | None:
    """The wheel built from this checkout (its build hook makes the caches it ships), installed
    with pip into a new venv of this interpreter; its dependencies are this environment's own
    (a .pth line: nothing is downloaded). None when it cannot be built here."""
    repo = Path(__file__).resolve().parent.parent
    out = Path(tempfile.mkdtemp(prefix="kb-bench-wheel-"))
    venv = out / "venv"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
        + ["-w", str(out), str(repo)],
        capture_output=True,
        text=True,
    )
    wheels = list(out.glob("*.whl"))
    if build.returncode != 0 or not wheels:
        print(f"   (no wheel: {build.stderr.strip()[-300:]})")
        return None
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "-q",
            "--no-deps",
            str(wheels[0]),
        ],
        check=True,
    )
    import sysconfig

    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    here = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    Path(site, "kb-bench-deps.pth").write_text("".join(f"{p}\n" for p in sorted(here)))
    # kb trusts what stat says of a file only once it has not changed for 2 s (SETTLED_S):
    # timed lookups must not fall in the seconds just after the install.
    time.sleep(2.5)
    return venv


NOISE = [
    "Epoch {e} step {s}/5000 loss={l:.4f} lr=3.0e-04 grad_norm={g:.3f} tokens/s=51234\n",
    "[2026-11-01 12:{m:02d}:{sec:02d}] INFO train.py:212 - throughput 412.3 samples/s\n",
    "[rank{r}]: iteration {s} | consumed samples {c} | elapsed time per iteration (ms): 812.4\n",
    '  warnings.warn("The given NumPy array is not writable")\n',
    "Loading checkpoint shard {s} of 8 from /data/ckpt/model-{s:05d}.safetensors\n",
    "moving batch to cuda:0, dtype=torch.bfloat16, shape=[8, 4096]\n",
    "wandb: logging metrics step={s} eval/accuracy={l:.3f}\n",
]


def make_log(path: Path, mib: int) -> int:
    rnd = random.Random(0)
    block = "".join(
        rnd.choice(NOISE).format(
            e=i % 90, s=i, l=rnd.random(), g=rnd.random(), m=i % 60, sec=i % 60, r=i % 8, c=i * 64
        )
        for i in range(20000)
    ).encode()
    target = mib << 20
    with open(path, "wb") as fh:
        n = 0
        while n < target - len(block):
            fh.write(block)
            n += len(block)
        tail = (
            b'Traceback (most recent call last):\n  File "train.py", line 88, in <module>\n'
            b"    loss.backward()\n[rank3]: RuntimeError: " + MSG.encode() + b"\n"
            b"CUDA kernel errors might be asynchronously reported at some other API call\n"
        )
        fh.write(tail)
        n += len(tail)
    return n


_MEASURED = """
import resource, subprocess, sys, time
with open(sys.argv[1], "rb") as fh:
    t0 = time.perf_counter()
    p = subprocess.run(sys.argv[2:], stdin=fh, capture_output=True)
    took = time.perf_counter() - t0
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
sys.stdout.write(f"{took} {rss} {int(b'cuda-illegal-memory-access' in p.stdout)}")
"""


def run_measured(cmd: list[str], stdin: Path, env: dict[str, str]) -> tuple[float, float, bool]:
    """Seconds, peak RSS (MB) and whether the answer was right, for one command alone: a fresh
    parent process measures it, so one run's peak never leaks into the next one's figure."""
    out = subprocess.run(
        [sys.executable, "-c", _MEASURED, str(stdin), *cmd],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout.split()
    return float(out[0]), int(out[1]) / 1024, out[2] == "1"


def bench_big_log(mib: int, local_entries: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="kb-bench-"))
    log = tmp / "train.log"
    size = make_log(log, mib)
    mb = size / 1e6
    t0 = time.perf_counter()
    subprocess.run(["grep", "-c", "CUDA error", str(log)], stdout=subprocess.DEVNULL)
    t_grep = time.perf_counter() - t0
    print(
        f"2. --stdin over a {size / (1 << 20):.0f} MiB log; grep -c {mb / t_grep:6.0f} MB/s ({t_grep:.2f} s)"
    )
    env = dict(os.environ)
    env.pop("KB_PATH", None)
    configs = [("bundled", env)]
    if local_entries:
        folder = tmp / "local"
        write_local_entries(folder, local_entries)
        configs.append((f"+{local_entries} via KB_PATH", {**env, "KB_PATH": str(folder)}))
    for label, e in configs:
        subprocess.run(kb_command() + ["index"], stdout=subprocess.DEVNULL, env=e, check=True)
        t_kb, rss, ok = run_measured(kb_command() + ["lookup", "--stdin", "--json"], log, e)
        print(
            f"   kb, {label:22} {mb / t_kb:6.0f} MB/s ({t_kb:.2f} s)   kb/grep time "
            f"{t_kb / t_grep:4.1f}x   peak RSS {rss:.0f} MB   found={ok}  (targets >= 500 MB/s, < 200 MB)"
        )
    shutil.rmtree(tmp, ignore_errors=True)


def p50(fn, n: int) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench_warm() -> None:
    from kb.diagnosis.engine import default_engine, lookup_text

    kb = default_engine().knowledge
    lookup_text(MSG, kb=kb)
    t = p50(lambda: lookup_text(MSG, kb=kb), 2000)
    t_log = p50(
        lambda: lookup_text("Traceback...\n  File x.py\nRuntimeError: " + MSG + "\n", kb=kb), 2000
    )
    print(
        f"3. warm lookup p50     {t * 1e3:7.3f} ms (one line), {t_log * 1e3:.3f} ms (short traceback), "
        f"{len(kb.entries)} entries  (target < 1 ms)"
    )


def synthetic_kb(n: int):
    from kb.knowledge.base import KnowledgeBase
    from kb.knowledge.regex_literal import required_literal
    from kb.model.entry import Cause, Entry, Signature

    rnd = random.Random(1)
    vocab = [
        f"{a}{b}"
        for a in ("frob", "quux", "zorg", "blip", "wump", "snark", "glim", "trel", "vosk", "pell")
        for b in ("ator", "ifier", "ulon", "ette", "ism", "ode", "ine", "ary", "ix", "ant")
    ] * 3
    entries = []
    for i in range(n):
        words = rnd.sample(vocab, 6)
        pat = f"Synthetic error {i}: the {words[0]} {words[1]} failed"
        entries.append(
            Entry(
                id=f"synthetic-{i}",
                area="synthetic",
                path="",
                title=f"{words[0]} {words[1]} failure {i}",
                summary=" ".join(words) + " went wrong in a synthetic way",
                tags=("synthetic",),
                codes=(),
                signatures=(Signature(id="s", pattern=pat, literal=required_literal(pat)),),
                causes=(Cause(words[2], " ".join(words[3:])),),
                diagnostics=(),
                fixes=(),
                examples_match=(pat,),
                examples_no_match=(),
                references=(),
            )
        )
    return KnowledgeBase(entries, [], {}, content_hash=f"synthetic-{n}-{rnd.random()}"), vocab


def bench_synthetic(n: int) -> None:
    from kb.diagnosis.engine import lookup_text
    from kb.knowledge.index import ensure_index

    kb, _vocab = synthetic_kb(n)
    t0 = time.perf_counter()
    ensure_index(kb)
    t_build = time.perf_counter() - t0
    msg_sig = (
        f"RuntimeError: Synthetic error {n // 2}: the "
        + " ".join(kb.entries[n // 2].signatures[0].pattern.split()[4:6])
        + " failed"
    )
    hit = lookup_text(msg_sig, kb=kb).matches
    assert hit and hit[0].id == f"synthetic-{n // 2}", hit
    t_sig = p50(lambda: lookup_text(msg_sig, kb=kb), 200)
    e = kb.entries[n // 3]
    msg_ft = f"ValueError: {e.title} happened while {e.causes[0].title} {e.causes[0].detail}"
    lookup_text(msg_ft, kb=kb)  # opens the index once
    t_ft = p50(lambda: lookup_text(msg_ft, kb=kb), 50)
    print(
        f"4. {n} synthetic entries: index build {t_build:.1f} s   signature path p50 {t_sig * 1e3:.2f} ms "
        f"(< 10 ms)   full-text path p50 {t_ft * 1e3:.1f} ms (< 100 ms)"
    )


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--log-mib", type=int, default=1024)
    ap.add_argument("--synthetic", type=int, default=10000)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--skip-big-log", action="store_true")
    ap.add_argument("--local-entries", type=int, default=150)
    ap.add_argument("--cold-only", action="store_true")
    ap.add_argument(
        "--no-wheel", action="store_true", help="skip building and installing the wheel"
    )
    args = ap.parse_args()
    os.environ.setdefault("KB_HOME", tempfile.mkdtemp(prefix="kb-bench-home-"))
    # Timed as installed: pip writes every module's bytecode at install time. Without it (a
    # checkout run with PYTHONDONTWRITEBYTECODE set, or modules edited since their .pyc was
    # written) each cold run compiles the edited modules again, a cost no user pays.
    import compileall

    compileall.compile_dir(str(Path(__file__).resolve().parent.parent / "kb"), quiet=1)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} cores, KB_HOME={os.environ['KB_HOME']}"
    )
    bench_cold(args.runs, args.local_entries, wheel=not args.no_wheel)
    if args.cold_only:
        return 0
    if not args.skip_big_log:
        bench_big_log(args.log_mib, args.local_entries)
    bench_warm()
    bench_synthetic(args.synthetic)
    return 0


if __name__ == "__main__":
    sys.exit(main())
