"""The fault matrix of kb's job view: inject each fault into a real multi-process job on CPU ranks
(gloo, Flight Recorder dumps as scripts/capture_jobs.sh --cpu makes them), keep what each job left
behind, trimmed, with the harness's own record of what it injected (truth.json), as fixtures under
tests/fixtures/jobs/matrix/<job>/.

    python scripts/jobs/matrix/run.py --list                 # every job of the matrix
    python scripts/jobs/matrix/run.py 'w4-*'                 # the jobs whose names match
    python scripts/jobs/matrix/run.py --missing 'w16-*'      # only those not captured yet

Each job is `kb run --run-dir <tmp> -- python -m torch.distributed.run --standalone
--nproc_per_node=W --max-restarts=0 --tee 3 scripts/jobs/matrix/train.py`, with the fault in the
environment (train.py says what each does). Jobs run one at a time, each under a time limit: the
matrix is a script for a shared machine, not a test.

The jobs:
  w{4,8,16}-{world,sub}-{fault}-{1,2}   a fault on one or two ranks, before the all_reduce of the
        default group (world) or of the rank's sub-group (sub: pairs at 4 ranks, groups of 4
        at 8 and 16), at step 3
  w{4,8,16}-ctl-healthy       no fault; every rank writes its dump at exit
  w{4,8,16}-ctl-a2a_raise     uneven all_to_all_single / all_to_all every step, then an exception
                              on one rank: only that rank is at fault
  w{4,8,16}-ctl-objects       all_gather_object / gather_object of different sizes; no fault;
                              dumps at exit
  w16-ep-stall                expert parallelism: uneven all_to_all_single in four expert groups
                              every step, then one rank stalls in its tensor-parallel pair

Kept per job (tests/fixtures/jobs/matrix/<job>/): run/output.log.gz (what every rank and torchrun
printed, gzipped), run/error.json (the failure torchrun's agent copied), run/fr.tar.gz (each rank's
dump, trimmed to the keys and entries kb reads: newest FR_KEEP entries, innermost frames), and
truth.json (the fault, the ranks it was injected on, the roots a right answer names, the exit code,
torch's version, the wall time).

Environment: PYTHON (an interpreter with torch, default python3), KB_PYTHON (one that runs kb,
default this one), KB_JOB_TIMEOUT (collective timeout in seconds, default 3).
"""

from __future__ import annotations

import argparse
import fnmatch
import gzip
import io
import json
import os
import pickle
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
TRAIN = os.path.join(REPO, "scripts", "jobs", "matrix", "train.py")
OUT = os.path.join(REPO, "tests", "fixtures", "jobs", "matrix")

FAULTS = (
    "hang",
    "gil",
    "sigkill",
    "sigsegv",
    "sigterm",
    "sigstop",
    "abort",
    "exception",
    "thread_exc",
    "wrong_op",
    "size",
    "skip",
)
WORLDS = (4, 8, 16)
# the faulty ranks per world size and count: spread over the job, rank 0 among them once
FAULTY = {(4, 1): [1], (4, 2): [1, 2], (8, 1): [5], (8, 2): [0, 6], (16, 1): [11], (16, 2): [3, 12]}
FAULT_STEP = 3
FR_KEEP = 24  # entries kept per dump: the fault's step and the rounds before it
FRAMES_KEEP = 2
ENTRY_KEYS = (
    "record_id",
    "pg_id",
    "process_group",
    "collective_seq_id",
    "p2p_seq_id",
    "op_id",
    "profiling_name",
    "time_created_ns",
    "input_sizes",
    "input_dtypes",
    "output_sizes",
    "output_dtypes",
    "state",
    "is_p2p",
    "frames",
)


def jobs(backend: str = "gloo") -> dict[str, dict]:
    """name -> its spec (the environment train.py reads, the world size, the expected roots)."""
    if backend == "nccl":
        return nccl_jobs()
    out: dict[str, dict] = {}
    for w in WORLDS:
        for mode in ("world", "sub"):
            for fault in FAULTS:
                for n in (1, 2):
                    ranks = FAULTY[(w, n)]
                    out[f"w{w}-{mode}-{fault}-{n}"] = {
                        "world": w,
                        "mode": mode,
                        "sub": 2 if w == 4 else 4,
                        "fault": fault,
                        "ranks": ranks,
                        "expected": ranks,
                    }
        one = FAULTY[(w, 1)]
        out[f"w{w}-ctl-healthy"] = {
            "world": w, "mode": "world", "fault": "none", "ranks": [], "expected": [],
            "dump_at_exit": True,
        }  # fmt: skip
        out[f"w{w}-ctl-a2a_raise"] = {
            "world": w, "mode": "a2a", "fault": "raise", "ranks": one, "expected": one,
        }  # fmt: skip
        out[f"w{w}-ctl-objects"] = {
            "world": w, "mode": "objects", "fault": "none", "ranks": [], "expected": [],
            "dump_at_exit": True,
        }  # fmt: skip
    out["w16-ep-stall"] = {
        "world": 16, "mode": "ep", "fault": "hang", "ranks": [6], "expected": [6],
    }  # fmt: skip
    return out


# NCCL on 2 and 4 GPUs (issue 35): the faults only a GPU has, and the ones that read differently
# through NCCL's own Flight Recorder dumps (written by its watchdog on a timeout).
NCCL_FAULTED = {2: [1], 4: [2]}
GPU_ONLY = ("cuda_assert", "illegal_memory")


def nccl_jobs() -> dict[str, dict]:
    out: dict[str, dict] = {}
    for w in (2, 4):
        ranks = NCCL_FAULTED[w]
        for fault in ("cuda_assert", "illegal_memory", "gil", "sigkill", "wrong_op", "size"):
            out[f"nccl-w{w}-world-{fault}-1"] = {
                "world": w, "mode": "world", "fault": fault, "ranks": ranks, "expected": ranks,
            }  # fmt: skip
        # a rank sleeping before its tensor-parallel pair's all_reduce (4 ranks: pairs 0-1, 2-3)
        if w == 4:
            out["nccl-w4-sub-hang-1"] = {
                "world": 4, "mode": "sub", "sub": 2, "fault": "hang", "ranks": ranks,
                "expected": ranks,
            }  # fmt: skip
        # uneven all_to_all_single in the expert-parallel group every step, then one rank stalls
        out[f"nccl-w{w}-ep-stall"] = {
            "world": w, "mode": "ep", "fault": "hang", "ranks": ranks, "expected": ranks,
        }  # fmt: skip
    return out


def run_one(name: str, spec: dict, out_root: str, limit: int, backend: str = "gloo") -> dict:
    python = os.environ.get("PYTHON", "python3")
    kb_python = os.environ.get("KB_PYTHON", sys.executable)
    env = dict(os.environ)
    env.update(
        {
            "KB_MODE": spec["mode"],
            "KB_FAULT": spec["fault"],
            "KB_FAULT_RANKS": ",".join(map(str, spec["ranks"])),
            "KB_FAULT_STEP": str(FAULT_STEP),
            "KB_SUB": str(spec.get("sub", 2)),
            "KB_JOB_TIMEOUT": os.environ.get("KB_JOB_TIMEOUT", "3" if backend == "gloo" else "20"),
            "KB_JOB_BACKEND": backend,
            "OMP_NUM_THREADS": "1",
            "TORCH_FR_BUFFER_SIZE": "64",
            "NO_COLOR": "1",
            "PYTHONPATH": REPO + os.pathsep + env.get("PYTHONPATH", ""),
        }
    )
    if backend == "gloo":
        env["CUDA_VISIBLE_DEVICES"] = ""
    else:
        # as scripts/capture_jobs.sh runs its GPU jobs: NVLink multicast off on a shared host, and
        # the watchdog's wait for the dump short, so a job ends in about a minute
        env.setdefault("NCCL_NVLS_ENABLE", "0")
        env.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
        env.setdefault("TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC", "2000")
        env.setdefault("TORCH_NCCL_ENABLE_TIMING", "1")
    if spec.get("dump_at_exit"):
        env["KB_DUMP_AT_EXIT"] = "1"
    if "KB_HOME" not in env:
        env["KB_HOME"] = tempfile.mkdtemp(prefix="kbhome-matrix-")
    with tempfile.TemporaryDirectory(prefix=f"matrix-{name}-") as tmp:
        run_dir = os.path.join(tmp, "run")
        cmd = [
            kb_python, "-m", "kb", "run", "--run-dir", run_dir, "--",
            python, "-m", "torch.distributed.run", "--standalone",
            f"--nproc_per_node={spec['world']}", "--max-restarts=0", "--tee", "3", TRAIN,
        ]  # fmt: skip
        t0 = time.monotonic()
        try:
            p = subprocess.run(
                cmd, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                timeout=limit,
            )  # fmt: skip
            code = p.returncode
        except subprocess.TimeoutExpired:
            code = None  # kb run forwards the kill to torchrun's process group
        wall = time.monotonic() - t0
        dest = os.path.join(out_root, name)
        shutil.rmtree(dest, ignore_errors=True)
        keep(run_dir, os.path.join(dest, "run"))
        truth = {
            "job": name,
            "fault": spec["fault"],
            "backend": backend,
            "mode": spec["mode"],
            "world": spec["world"],
            "sub_group_size": spec.get("sub") if spec["mode"] == "sub" else None,
            "step": FAULT_STEP,
            "injected_ranks": spec["ranks"],
            "expected_roots": spec["expected"],
            "exit_code": code,
            "wall_s": round(wall, 1),
            "torch": _torch_version(python),
            "captured": time.strftime("%Y-%m-%d"),
        }
        with open(os.path.join(dest, "truth.json"), "w") as fh:
            json.dump(truth, fh, indent=1)
            fh.write("\n")
    return truth


_VERSION: dict[str, str] = {}


def _torch_version(python: str) -> str:
    if python not in _VERSION:
        r = subprocess.run(
            [python, "-c", "import torch; print(torch.__version__)"],
            capture_output=True,
            text=True,
        )
        _VERSION[python] = r.stdout.strip()
    return _VERSION[python]


def keep(run_dir: str, dest: str) -> None:
    """What kb reads of a `kb run` folder, trimmed: the log gzipped, the agent's error file, and
    the dumps, each with the keys and newest entries kb reads, in one tarball (fr.tar.gz). Left
    out: torchrun's per-rank copies of the log (--tee) and of each rank's error (the log holds
    both), and kb's own records."""
    os.makedirs(dest, exist_ok=True)
    log = os.path.join(run_dir, "output.log")
    if os.path.exists(log):
        with open(log, "rb") as src, gzip.open(os.path.join(dest, "output.log.gz"), "wb", 9) as dst:
            dst.write(src.read())
    if os.path.exists(os.path.join(run_dir, "error.json")):
        shutil.copy(os.path.join(run_dir, "error.json"), dest)
    fr = os.path.join(run_dir, "fr")
    names = sorted(f for f in os.listdir(fr) if not f.endswith(".tmp")) if os.path.isdir(fr) else []
    if names:
        dumps = {}
        for f in names:
            with open(os.path.join(fr, f), "rb") as fh:
                dumps[f] = trim_dump(fh.read())
        pack(dumps, os.path.join(dest, "fr.tar.gz"))


def pack(dumps: dict[str, bytes], path: str) -> None:
    """Dumps (name -> bytes) as one gzipped tarball, byte for byte the same for the same dumps."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, raw in sorted(dumps.items(), key=lambda kv: _rank_order(kv[0])):
            info = tarfile.TarInfo(f"fr/{name}")
            info.size, info.mtime, info.mode = len(raw), 0, 0o644
            tar.addfile(info, io.BytesIO(raw))
    with open(path, "wb") as fh, gzip.GzipFile(fileobj=fh, mode="wb", mtime=0) as gz:
        gz.write(buf.getvalue())


def _rank_order(name: str) -> tuple:
    digits = name.rstrip("0123456789")
    tail = name[len(digits) :]
    return (digits, int(tail) if tail else -1)


def repack(job: str) -> None:
    """A job kept by an earlier version of keep() (fr/ of files, torchrun/), in today's shape."""
    run = os.path.join(job, "run")
    fr = os.path.join(run, "fr")
    if os.path.isdir(fr):
        dumps = {}
        for f in sorted(os.listdir(fr)):
            with open(os.path.join(fr, f), "rb") as fh:
                dumps[f] = fh.read()  # already trimmed
        if dumps:
            pack(dumps, os.path.join(run, "fr.tar.gz"))
        shutil.rmtree(fr)
    shutil.rmtree(os.path.join(run, "torchrun"), ignore_errors=True)


def trim_dump(raw: bytes) -> bytes:
    """A dump with only what kb reads: its newest FR_KEEP entries, each with ENTRY_KEYS and its
    innermost FRAMES_KEEP frames. Plain data, pickled as torch's pickler writes it (protocol 2)."""
    data = pickle.loads(raw)  # the harness's own dumps, written a moment ago
    entries = [{k: e[k] for k in ENTRY_KEYS if k in e} for e in data.get("entries", [])[-FR_KEEP:]]
    for e in entries:
        if "frames" in e:
            e["frames"] = [
                {k: f[k] for k in ("name", "filename", "line") if k in f}
                for f in e["frames"][:FRAMES_KEEP]
            ]
    out = {
        k: data[k] for k in ("version", "pg_config", "pg_status", "comm_lib_version") if k in data
    }
    out["entries"] = entries
    return pickle.dumps(out, protocol=2)


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("patterns", nargs="*", help="job names or shell patterns (default: all)")
    ap.add_argument("--list", action="store_true", help="print the jobs and exit")
    ap.add_argument("--missing", action="store_true", help="only jobs without a truth.json yet")
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--limit", type=int, default=180, help="seconds one job may take")
    ap.add_argument("--repack", action="store_true", help="bring kept jobs to today's shape")
    ap.add_argument(
        "--backend",
        choices=("gloo", "nccl"),
        default="gloo",
        help="nccl: the GPU jobs of issue 35, on 2 and 4 GPUs (scripts/jobs/matrix/nccl_matrix.sh)",
    )
    ap.add_argument(
        "--dry-run",
        action="store_true",
        help="with --backend nccl: run its jobs that need no GPU on gloo, to try the harness",
    )
    a = ap.parse_args()
    all_jobs = jobs(a.backend)
    backend = a.backend
    if a.dry_run:
        all_jobs = {n: j for n, j in all_jobs.items() if j["fault"] not in GPU_ONLY}
        backend = "gloo"
    names = [
        n for n in all_jobs if not a.patterns or any(fnmatch.fnmatch(n, p) for p in a.patterns)
    ]
    if a.missing:
        names = [n for n in names if not os.path.exists(os.path.join(a.out, n, "truth.json"))]
    if a.list:
        for n in names:
            print(n)
        return 0
    if a.repack:
        for n in names:
            if os.path.isdir(os.path.join(a.out, n)):
                repack(os.path.join(a.out, n))
        return 0
    for i, n in enumerate(names, 1):
        t = run_one(n, all_jobs[n], a.out, a.limit, backend)
        print(f"[{i}/{len(names)}] {n}: exit {t['exit_code']}, {t['wall_s']} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
