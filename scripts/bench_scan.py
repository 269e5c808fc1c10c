"""The log scan against grep: `kb lookup --stdin` / `--file` beside `grep -c error`.

    python scripts/bench_scan.py [--runs 5] [--mib 256] [--line-mib 4] [--keep DIR]

Builds its inputs in a temporary folder (deterministic, synthetic, written here):

- a realistic training log of --mib MiB: loss lines, logging records, tqdm progress bars (each
  line many carriage-return updates), repeated and distinct warnings, rank-prefixed launcher
  lines, NCCL set-up lines, and near the end a CUDA error's traceback followed by the launcher's
  shutdown lines;
- single lines of --line-mib MiB: a progress-bar flood (carriage returns, no line break for the
  whole size), and a JSON record on one line (a structured logger's dump), each followed by the
  same error.

Each input is read by kb and by grep taking turns, --runs times (interleaved, so a machine that
slows down moves both alike); each command's CPU time (user + system) and peak RSS come from
wait4 on that child alone, its wall time from the clock. A pipe is fed by this process (its
cost is not the child's), the same way for kb and grep; --file gives kb the path (and grep
the path). The floor rows: the same commands over a one-line input, so the scan's own cost
(the "net" columns: a row's median minus its floor's) can be told from start-up.

kb is the `kb` script installed beside this interpreter (else `python -m kb`), with its caches
warmed in a KB_HOME of the bench's own before anything is timed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ENTRY = "cuda-illegal-memory-access"
MSG = "CUDA error: an illegal memory access was encountered"


def kb_command() -> list[str]:
    script = Path(sys.executable).with_name("kb")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "kb"]


# ------------------------------------------------------------------------------- the inputs
_WARNINGS = [
    "/opt/venv/lib/python3.11/site-packages/torch/utils/data/dataloader.py:557: UserWarning: "
    "This DataLoader will create 16 worker processes in total. Our suggested max number of "
    "worker in current system is 8, which is smaller than what this DataLoader is going to "
    "create. Please be aware that excessive worker creation might get DataLoader running slow "
    "or even freeze, lower the worker number to avoid potential slowness/freeze if necessary.\n"
    "  warnings.warn(_create_warning_msg(\n",
    "/opt/venv/lib/python3.11/site-packages/torch/nn/modules/module.py:1511: FutureWarning: "
    "`torch.cuda.amp.autocast(args...)` is deprecated. Please use "
    "`torch.amp.autocast('cuda', args...)` instead.\n  with torch.cuda.amp.autocast():\n",
    "wandb: WARNING Step cannot be set when using syncing with tensorboard. Please log your "
    "step values as a metric such as 'global_step'\n",
]
# Printed once per process (transformers warns once per tokenizer): in the head, once a rank.
_ONCE = (
    "Token indices sequence length is longer than the specified maximum sequence length for "
    "this model (2048 > 1024). Running this sequence through the model will result in "
    "indexing errors\n"
)

_BAR = "▏▎▍▌▋▊▉█"


def _tqdm_line(rnd: random.Random, epoch: int, total: int) -> str:
    """One line of a tqdm bar written to a file: many updates joined by carriage returns."""
    parts = []
    start = rnd.randrange(0, total - 60)
    for i in range(start, start + rnd.randrange(20, 60)):
        frac = i / total
        full = int(frac * 10)
        bar = "█" * full + (_BAR[int(frac * 80) % 8] if full < 10 else "") + " " * (9 - full)
        rate = 30 + rnd.random() * 10
        parts.append(
            f"Epoch {epoch}: {int(frac * 100):3d}%|{bar[:10]}| {i}/{total} "
            f"[{i // 36:02d}:{i % 60:02d}<{(total - i) // 36:02d}:{(total - i) % 60:02d}, "
            f"{rate:.2f}it/s, loss={rnd.random() * 3:.3f}, v_num=0]"
        )
    return "\r".join(parts) + "\n"


def _noise_block(rnd: random.Random, step: int, lines: int) -> tuple[str, int]:
    out = []
    for _ in range(lines):
        step += 1
        r = rnd.random()
        if r < 0.40:
            out.append(
                f"Epoch {step // 5000} | step {step}/500000 | loss {rnd.random() * 4:.4f} | "
                f"lr {3e-4 * (1 - step / 5e5):.3e} | grad_norm {rnd.random():.3f} | "
                f"{40000 + rnd.randrange(20000)} tok/s\n"
            )
        elif r < 0.62:
            out.append(
                f"[2026-11-01 {step // 3600 % 24:02d}:{step // 60 % 60:02d}:{step % 60:02d},"
                f"{rnd.randrange(1000):03d}][train.py:{rnd.choice((212, 240, 318))}][INFO] - "
                f"throughput {300 + rnd.random() * 200:.1f} samples/s, "
                f"mem {20 + rnd.random() * 40:.2f} GiB\n"
            )
        elif r < 0.77:
            out.append(
                f"[rank{step % 8}]: iteration {step} | consumed samples {step * 64} | "
                f"elapsed time per iteration (ms): {700 + rnd.random() * 200:.1f} | "
                f"learning rate: {3e-4:.3E} | global batch size: 64 |\n"
            )
        elif r < 0.87:
            out.append(_tqdm_line(rnd, step // 5000, 1000))
        elif r < 0.93:
            out.append(
                f"wandb: logging step={step} eval/accuracy={rnd.random():.4f} "
                f"eval/perplexity={1 + rnd.random() * 20:.3f}\n"
            )
        elif r < 0.985:
            out.append(rnd.choice(_WARNINGS))
        else:
            out.append(
                f"Saving checkpoint to /data/ckpt/step-{step:07d}/model-{rnd.randrange(8):05d}"
                "-of-00008.safetensors\n"
            )
    return "".join(out), step


_HEAD = (
    "[W1101 12:00:00.123456 ProcessGroupNCCL.cpp:1234] Warning: TORCH_NCCL_AVOID_RECORD_STREAMS"
    "=1 has no effect for point-to-point collectives.\n"
    + "".join(
        f"node-0:{1000 + r}:{1000 + r} [{r}] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
        f"node-0:{1000 + r}:{1000 + r} [{r}] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>\n"
        f"node-0:{1000 + r}:{1000 + r} [{r}] NCCL INFO cudaDriverVersion 12040\n"
        for r in range(8)
    )
    + "".join(f"[rank{r}]: {_ONCE}" for r in range(8))
    + "TrainingArguments(ddp_timeout=1800, fp16=False, bf16=True, "
    "save_on_each_node=False, dataloader_num_workers=16)\n"
)

_ERROR = (
    "Traceback (most recent call last):\n"
    '  File "/workspace/train.py", line 318, in <module>\n'
    "    main()\n"
    '  File "/workspace/train.py", line 301, in main\n'
    "    loss.backward()\n"
    '  File "/opt/venv/lib/python3.11/site-packages/torch/_tensor.py", line 521, in backward\n'
    "    torch.autograd.backward(\n"
    f"[rank3]: RuntimeError: {MSG}\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, so the "
    "stacktrace below might be incorrect.\n"
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n\n"
)


def make_realistic(path: Path, mib: int) -> int:
    """The realistic log: --mib MiB, the error in its last ~64 KiB."""
    rnd = random.Random(39)
    target = mib << 20
    n = 0
    step = 0
    with open(path, "wb") as fh:
        fh.write(_HEAD.encode())
        n += len(_HEAD)
        while n < target - (64 << 10):
            text, step = _noise_block(rnd, step, 2000)
            data = text.encode()
            fh.write(data)
            n += len(data)
        for data in (_ERROR.encode(), _noise_block(rnd, step, 300)[0].encode()):
            fh.write(data)
            n += len(data)
    return n


def make_progress_line(path: Path, mib: int) -> int:
    """One line of --mib MiB of progress-bar updates (carriage returns, no line break), then
    the error."""
    rnd = random.Random(40)
    parts = []
    size = 0
    while size < mib << 20:
        s = _tqdm_line(rnd, 1, 100000).rstrip("\n")
        parts.append(s)
        size += len(s.encode()) + 1
    data = ("\r".join(parts) + "\n" + _ERROR).encode()
    path.write_bytes(data)
    return len(data)


def make_json_line(path: Path, mib: int) -> int:
    """One JSON record of --mib MiB on one line (a structured logger's metrics dump), then the
    error."""
    rnd = random.Random(41)
    rows = []
    size = 0
    while size < mib << 20:
        row = {
            "step": len(rows),
            "loss": round(rnd.random() * 4, 5),
            "lr": 3e-4,
            "grad_norm": round(rnd.random(), 4),
            "tokens": rnd.randrange(1 << 20),
            "note": "ok",
        }
        rows.append(row)
        size += 90
    data = (json.dumps({"event": "metrics", "rows": rows}) + "\n" + _ERROR).encode()
    path.write_bytes(data)
    return len(data)


# ------------------------------------------------------------------------------- timing
# The scan alone, in a child: the knowledge base's trigger set loaded, then the scan of its
# standard input (or of a file) timed by the child's own CPU clock; prints the CPU seconds of
# the scan and whether the error's line was kept. Tells the scan's cost from what a lookup does
# with the lines it keeps (signature matching, the job view).
_SCAN_ONLY = """
import sys, time
import kb
from kb.scan.reader import open_log, read_scan
trig = kb.Engine().triggers
t0 = time.process_time()
if sys.argv[1] == "-":
    s = read_scan(sys.stdin.buffer, "<stdin>", triggers=trig)
else:
    with open_log(sys.argv[1]) as fh:
        s = read_scan(fh, sys.argv[1], triggers=trig)
took = time.process_time() - t0
found = any("illegal memory access" in ln.text for ln in s.lines)
sys.stdout.write(f"{took} {int(found)} {s.total_lines} {s.skimmed} {len(s.lines)}")
"""


def run_one(
    cmd: list[str], env: dict[str, str], feed: Path | None
) -> tuple[float, float, int, bytes]:
    """(CPU s, wall s, peak RSS KiB, stdout) of one run; `feed`: a file written to its stdin
    through a pipe by this process."""
    t0 = time.perf_counter()
    p = subprocess.Popen(
        cmd,
        stdin=subprocess.PIPE if feed else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    out: list[bytes] = []
    reader = threading.Thread(target=lambda: out.append(p.stdout.read()))  # type: ignore[union-attr]
    reader.start()
    if feed is not None:
        assert p.stdin is not None
        try:
            with open(feed, "rb") as fh:
                shutil.copyfileobj(fh, p.stdin, 1 << 20)
        except BrokenPipeError:
            pass
        try:
            p.stdin.close()
        except BrokenPipeError:
            pass
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    reader.join()
    return ru.ru_utime + ru.ru_stime, wall, ru.ru_maxrss, out[0] if out else b""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--mib", type=int, default=256, help="size of the realistic log")
    ap.add_argument("--line-mib", type=int, default=4, help="size of each single line")
    ap.add_argument("--keep", help="build the inputs in this folder and keep them")
    ap.add_argument("--only", default="", help="comma-separated input names to run")
    ap.add_argument(
        "--modes",
        default="",
        help="comma-separated: --stdin, --file, scan| (the scan alone, "
        "piped), scan (the scan alone, of the file); all by default",
    )
    ap.add_argument("--before", help="a tree of another commit to time beside this one")
    args = ap.parse_args()

    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="kb-bench-scan-"))
    tmp.mkdir(parents=True, exist_ok=True)
    inputs = {
        "realistic": (tmp / f"train-{args.mib}.log", make_realistic, args.mib),
        "progress-line": (tmp / f"progress-{args.line_mib}.log", make_progress_line, args.line_mib),
        "json-line": (tmp / f"json-{args.line_mib}.log", make_json_line, args.line_mib),
    }
    if args.only:
        inputs = {k: v for k, v in inputs.items() if k in args.only.split(",")}
    for path, make, mib in inputs.values():
        if not path.exists():
            make(path, mib)
    floor = tmp / "one-line.log"
    floor.write_text("starting epoch 1\n")

    env = dict(os.environ)
    env.setdefault("KB_HOME", str(tmp / "kb-home"))
    env.pop("KB_PATH", None)
    kb = kb_command()
    # Variants of kb timed side by side: this checkout's, and with --before, a copy of another
    # commit's tree (kb/ and entries/, e.g. `git archive COMMIT kb entries | tar -x -C DIR`)
    # put first on PYTHONPATH, with a KB_HOME of its own. (Run the bench from outside the
    # checkout then, or `python -c` finds the checkout's kb in the working folder first.)
    variants = [("kb", env)]
    if args.before:
        before = str(Path(args.before).resolve())
        benv = {**env, "PYTHONPATH": before, "KB_HOME": str(tmp / "kb-home-before")}
        variants.append(("before", benv))
    for _, e in variants:
        # Bytecode compiled first (with PYTHONDONTWRITEBYTECODE set, a tree on PYTHONPATH is
        # compiled again by every run, which is no installed kb's start-up).
        code = "import compileall, kb, os; compileall.compile_dir(os.path.dirname(kb.__file__), quiet=1)"
        cenv = {k: v for k, v in e.items() if k != "PYTHONDONTWRITEBYTECODE"}
        subprocess.run([sys.executable, "-c", code], env=cenv, check=True)
        subprocess.run(kb + ["index"], stdout=subprocess.DEVNULL, env=e, check=True)
    genv = {**env, "LC_ALL": "C"}  # grep's fastest (and usual in scripts) locale

    print(f"kb: {' '.join(kb)}; {os.cpu_count()} cores; {time.strftime('%Y-%m-%d %H:%M')}")
    print(f"runs: {args.runs}, interleaved; medians; CPU = user + system of the child (wait4)")
    print("grep: grep -c error, LC_ALL=C; net: minus the same command over a one-line input")
    if args.before:
        print(f"before: {args.before} (PYTHONPATH)")
    scan_only = [sys.executable, "-c", _SCAN_ONLY]
    grep = ["grep", "-c", "error"]
    modes = [
        ("--stdin", lambda p: kb + ["lookup", "--stdin", "--json"], True),
        ("--file", lambda p: kb + ["lookup", "--json", "--file", str(p)], False),
        ("scan|", lambda p: scan_only + ["-"], True),
        ("scan", lambda p: scan_only + [str(p)], False),
    ]
    if args.modes:
        modes = [m for m in modes if m[0] in args.modes.split(",")]
    header = (
        f"{'input':14} {'mode':7} {'kb':6} {'MiB':>5} | {'kb wall':>8} {'kb CPU':>7} {'RSS MB':>6} "
        f"{'found':5} | {'grep wall':>9} {'grep CPU':>8} | {'CPU x':>6} {'wall x':>6} | "
        f"{'net kb':>7} {'net grep':>8} {'net x':>6} {'MB/s':>6}"
    )
    for mode, kcmd, piped in modes:
        print()
        print(header)
        cases = [("floor", floor)] + [(name, path) for name, (path, _, _) in inputs.items()]
        res: dict[str, dict[str, list]] = {}
        for _ in range(args.runs):
            for name, path in cases:
                r = res.setdefault(name, {})
                feed = path if piped else None
                for label, e in variants:
                    r.setdefault(label, []).append(run_one(kcmd(path), e, feed))
                gcmd = grep + ([] if piped else [str(path)])
                r.setdefault("grep", []).append(run_one(gcmd, genv, feed))
        scan_mode = mode.startswith("scan")

        def found(out: bytes, scan_mode: bool = scan_mode) -> bool:
            if scan_mode:
                return out.split()[1:2] == [b"1"]
            return ENTRY.encode() in out

        def med(runs: list, scan_mode: bool = scan_mode) -> tuple[float, float, float, bool, float]:
            inner = statistics.median(float(x[3].split()[0]) for x in runs) if scan_mode else 0.0
            return (
                statistics.median(x[0] for x in runs),
                statistics.median(x[1] for x in runs),
                max(x[2] for x in runs) / 1024,
                all(found(x[3]) for x in runs),
                inner,
            )

        fg = med(res["floor"]["grep"])
        for name, path in cases:
            g = med(res[name]["grep"])
            for label, _ in variants:
                k, fk = med(res[name][label]), med(res["floor"][label])
                size = path.stat().st_size
                # The scan alone: its own clock in the child (no start-up); else minus floor.
                nk = k[4] if scan_mode else k[0] - fk[0]
                ng = g[0] - fg[0]
                net = f"{nk / ng:6.2f}" if name != "floor" and ng > 0.0005 else "     -"
                rate = f"{size / 1e6 / nk:6.0f}" if name != "floor" and nk > 0 else "     -"
                ok = ("yes" if k[3] else "NO") if name != "floor" else "-"
                print(
                    f"{name:14} {mode:7} {label:6} {size / (1 << 20):5.1f} | {k[1]:8.3f} "
                    f"{k[0]:7.3f} {k[2]:6.0f} {ok:5} | {g[1]:9.3f} {g[0]:8.4f} | "
                    f"{k[0] / max(g[0], 1e-6):6.2f} {k[1] / max(g[1], 1e-6):6.2f} | "
                    f"{nk:7.3f} {ng:8.4f} {net} {rate}"
                )
    if not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
