"""A folder is one job or many, by what it holds: per-rank files (rank-numbered names, torchrun's
attempt_N/R/ layout, Slurm %t files, [rankN]: prefixes, Flight Recorder dumps) make one job;
unrelated logs in one folder are one job each, and a log with no rank of its own is never merged
into another's. `kb triage` and `kb lookup DIR` read a folder alike, and say how.

The logs are made of the entries' own example lines (real wordings) and the captured jobs of
tests/fixtures/jobs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _repo import REPO

import kb
from kb.fleet.discover import discover
from kb.fleet.triage import triage
from kb.job.inputs import collect
from kb.job.lookup import lookup_paths

pytestmark = pytest.mark.warm_home  # runs kb as a user would after its first run; tests no cache

JOBS = REPO / "tests" / "fixtures" / "jobs"

# ten single-process failures, each with the entry that answers it
TEN = [
    ("cuda-oom", ("torch.OutOfMemoryError: CUDA out of memory",)),
    ("cuda-illegal-memory-access", ("RuntimeError: CUDA error: an illegal memory",)),
    ("nccl-timeout", ("Watchdog caught collective operation timeout",)),
    ("cuda-device-side-assert", ("device-side assert triggered",)),
    ("autograd-backward-twice", ("Trying to backward through the graph a second time",)),
    ("autograd-inplace-modified", ("modified by an inplace operation",)),
    ("cudnn-error", ("CUDNN_STATUS_NOT_INITIALIZED",)),
    ("checkpoint-weights-only", ("Weights only load failed",)),
    ("autograd-grad-non-scalar", ("grad can be implicitly created only for scalar outputs",)),
    ("broadcast-size-mismatch", ("must match the size of tensor",)),
]


def _example(entry_id: str, *needles: str) -> str:
    for text in kb.load().get(entry_id).examples_match:
        if all(n in text for n in needles):
            return text
    raise AssertionError(f"{entry_id} has no example with {needles}")


def _engine():
    from kb.diagnosis.engine import default_engine

    return default_engine()


@pytest.fixture(scope="module")
def ten(tmp_path_factory) -> tuple[Path, list[str]]:
    """job-001.log ... job-010.log: ten unrelated one-process logs in one folder."""
    d = tmp_path_factory.mktemp("ten")
    ids = []
    for i, (eid, needles) in enumerate(TEN, 1):
        (d / f"job-{i:03d}.log").write_text(
            f"epoch 0 step {i * 10}: loss 2.31\n" + _example(eid, *needles) + "\n"
        )
        ids.append(eid)
    return d, ids


def _kb(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kb", *argv],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "NO_COLOR": "1"},
    )


# ---------------------------------------------------------------- many jobs in one folder
def test_ten_unrelated_logs_are_ten_jobs(ten):
    folder, ids = ten
    jobs = discover([folder])
    assert [(Path(j.path).name, j.kind) for j in jobs] == [
        (f"job-{i:03d}.log", "file") for i in range(1, 11)
    ]
    rows = [triage(j, _engine()) for j in jobs]
    assert [r["id"] for r in rows] == ids  # ten rows, each with its own answer
    # the folder read by the job view says so, and merges no two logs by the numbers in names
    got = collect([str(folder)])
    assert got.reading == [
        f"{folder}: 10 unrelated logs (none of them names a rank of its own): 10 jobs"
    ]
    assert all(s.rank is None for s in got.logs)


def test_kb_lookup_of_the_folder_agrees_with_triage(ten):
    folder, ids = ten
    out = _kb("lookup", "--json", str(folder))
    assert out.returncode == 0, out.stderr
    docs = json.loads(out.stdout)
    assert [d["matches"][0]["id"] for d in docs] == ids
    assert [Path(d["input"]["name"]).name for d in docs] == [
        f"job-{i:03d}.log" for i in range(1, 11)
    ]
    assert "holds 10 jobs" in out.stderr
    text = _kb("lookup", str(folder)).stdout
    assert text.count("==> ") == 10


def test_logs_that_each_say_rank_0_are_not_one_job(tmp_path):
    """Ten one-rank distributed runs: every log's lines say [rank0]:. Ten logs cannot all be
    rank 0 of one job: ten jobs."""
    line = _example("cuda-oom", "torch.OutOfMemoryError: CUDA out of memory")
    for i in range(1, 11):
        (tmp_path / f"run-{i:03d}.log").write_text(f"[rank0]: {line}\n")
    assert len(discover([tmp_path])) == 10
    got = collect([str(tmp_path)])
    assert "two or more logs say they are rank 0" in got.reading[0]


def test_combined_logs_of_ten_jobs_are_ten_jobs(tmp_path):
    """torchrun --tee logs of ten jobs, each holding ranks 0 and 1: one job each."""
    oom = _example("cuda-oom", "torch.OutOfMemoryError: CUDA out of memory")
    for i in range(1, 4):
        (tmp_path / f"train-{i:03d}.log").write_text(f"[default0]:step 1\n[default1]:{oom}\n")
    assert [j.kind for j in discover([tmp_path])] == ["file"] * 3


# ---------------------------------------------------------------- one job
def _waiter(r: int) -> str:
    return _example("nccl-timeout", "Watchdog caught collective operation timeout").replace(
        "[Rank 0]", f"[Rank {r}]"
    )


@pytest.mark.parametrize(
    "names",
    [
        ["rank0.log", "rank1.log", "rank2.log"],  # named by rank
        ["worker-0.out", "worker-1.out", "worker-2.out"],
        ["train-0.log", "train-1.log", "train-2.log"],  # Slurm's %t, counting from 0
        ["slurm-4711_0.out", "slurm-4711_1.out", "slurm-4711_2.out"],  # %j_%t
    ],
)
def test_per_rank_names_make_one_job(tmp_path, names):
    oom = _example("cuda-oom", "torch.OutOfMemoryError: CUDA out of memory")
    for i, n in enumerate(names):
        (tmp_path / n).write_text(oom + "\n" if i == 2 else _waiter(i) + "\n")
    assert [j.kind for j in discover([tmp_path])] == ["folder"]
    jl = lookup_paths(_engine(), [str(tmp_path)])
    assert jl.job is not None and jl.job.root.rank == 2 and jl.job.root.id == "cuda-oom"


def test_lines_carrying_one_rank_each_make_one_job(tmp_path):
    oom = _example("cuda-oom", "torch.OutOfMemoryError: CUDA out of memory")
    (tmp_path / "a.log").write_text(f"[rank0]:{_waiter(0)}\n")
    (tmp_path / "b.log").write_text(f"[rank1]:{oom}\n")
    assert [j.kind for j in discover([tmp_path])] == ["folder"]
    got = collect([str(tmp_path)])
    assert sorted(s.rank for s in got.logs) == [0, 1]
    jl = lookup_paths(_engine(), [str(tmp_path)])
    assert jl.job.root.rank == 1


def test_a_jobs_stdout_and_stderr_are_one_job(tmp_path):
    """Slurm's --output and --error of one job: two combined logs of the same name."""
    oom = _example("cuda-oom", "torch.OutOfMemoryError: CUDA out of memory")
    (tmp_path / "slurm-4711.out").write_text("[rank0]:step 1\n[rank1]:step 1\n")
    (tmp_path / "slurm-4711.err").write_text(f"[rank0]:{_waiter(0)}\n[rank1]:{oom}\n")
    assert [j.kind for j in discover([tmp_path])] == ["folder"]


def test_a_log_of_no_rank_beside_per_rank_logs_is_a_job_of_its_own(tmp_path):
    oom = _example("cuda-oom", "torch.OutOfMemoryError: CUDA out of memory")
    ima = _example("cuda-illegal-memory-access", "RuntimeError: CUDA error: an illegal memory")
    (tmp_path / "rank0.log").write_text(_waiter(0) + "\n")
    (tmp_path / "rank1.log").write_text(oom + "\n")
    (tmp_path / "preprocess.log").write_text(ima + "\n")  # another program's failure
    jobs = [(Path(j.path).name, j.kind) for j in discover([tmp_path])]
    assert jobs == [(tmp_path.name, "folder"), ("preprocess.log", "file")]
    jl = lookup_paths(_engine(), [str(tmp_path)])
    assert jl.job.root.rank == 1 and jl.job.root.id == "cuda-oom"
    assert {v.rank for v in jl.job.ranks} == {0, 1}
    assert any(
        p.endswith("preprocess.log") and "no rank of its own" in why for p, why in jl.left_out
    )
    assert any("preprocess.log" in p for p in jl.job.problems)  # said in the verdict


@pytest.mark.parametrize("job", ["cpu-stall", "cpu-two_groups", "sub_mismatch"])
def test_captured_jobs_are_still_one_job(job):
    """torchrun's layout, kb run's record and the dumps: one job, as before."""
    run = JOBS / job / "run"
    assert [j.kind for j in discover([run])] == ["folder"]
    assert collect([str(run)]).reading == []


def test_a_matrix_job_folder_is_one_job():
    """The fault matrix keeps a gzipped log and a tarball of dumps: one job."""
    runs = sorted((JOBS / "matrix").glob("*/run"))
    if not runs:
        pytest.skip("no matrix capture kept")
    assert [j.kind for j in discover([runs[0]])] == ["folder"]


def test_a_folder_with_a_dump_is_one_job_whatever_its_logs(tmp_path):
    shutil.copy(JOBS / "cpu-stall" / "run" / "fr" / "nccl_trace_rank_0", tmp_path)
    for i in range(1, 3):
        (tmp_path / f"job-{i:03d}.log").write_text("step 1\n")
    assert [j.kind for j in discover([tmp_path])] == ["folder"]
    assert collect([str(tmp_path)]).reading == []
