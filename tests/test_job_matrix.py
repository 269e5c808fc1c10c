"""The fault matrix: real multi-process jobs on CPU ranks (gloo, torchrun through `kb run`, Flight
Recorder dumps), each with a fault the harness injected on chosen ranks at world sizes 4, 8 and
16, in the default group and in a sub-group, on one and two ranks: a hang, a held GIL, SIGKILL,
SIGSEGV, SIGTERM, SIGSTOP, os.abort(), an exception, an exception in a thread, a wrong
collective, a size mismatch, a skipped collective; and negative controls where no rank is at
fault, or only the rank that raised (a healthy job that dumps at exit, uneven all_to_all then an
exception, object collectives of different sizes), and an expert-parallel job of 16 ranks whose
one stalled rank must be named alone.

Each job's ground truth is the harness's own record of what it injected (truth.json);
scripts/jobs/matrix/run.py captures them again, scripts/jobs/matrix/score.py prints the figures.
kb's root set must be the injected set exactly: every injected rank found, no innocent rank."""

from __future__ import annotations

import json

import pytest
from _repo import REPO

from kb.diagnosis.engine import default_engine
from kb.job.lookup import lookup_paths

MATRIX = REPO / "tests" / "fixtures" / "jobs" / "matrix"
JOBS = sorted(p.parent for p in MATRIX.glob("*/truth.json"))


def _truth(job):
    return json.loads((job / "truth.json").read_text())


@pytest.fixture(scope="module")
def engine():
    return default_engine()


@pytest.mark.parametrize("job", JOBS, ids=[j.name for j in JOBS])
def test_roots_are_the_injected_ranks(job, engine):
    truth = _truth(job)
    jl = lookup_paths(engine, [str(job / "run")])
    view = jl.job
    assert view is not None, "not read as a job"
    roots = sorted({r.rank for r in view.roots})
    assert roots == sorted(truth["expected_roots"]), view.summary
    if truth["expected_roots"]:
        assert view.root.rank in truth["expected_roots"]
    else:
        assert view.root is None


def test_the_matrix_is_whole():
    """Every fault, world size, group and count of faulty ranks has its job, and the controls."""
    if not JOBS:
        pytest.skip("no matrix capture kept")
    names = {j.name for j in JOBS}
    faults = [
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
    ]
    missing = [
        f"w{w}-{m}-{f}-{n}"
        for w in (4, 8, 16)
        for m in ("world", "sub")
        for f in faults
        for n in (1, 2)
        if f"w{w}-{m}-{f}-{n}" not in names
    ]
    missing += [
        f"w{w}-ctl-{c}"
        for w in (4, 8, 16)
        for c in ("healthy", "a2a_raise", "objects")
        if f"w{w}-ctl-{c}" not in names
    ]
    missing += [] if "w16-ep-stall" in names else ["w16-ep-stall"]
    assert not missing


# ---------------------------------------------------------------- the same harness on NCCL
# Jobs of scripts/jobs/matrix/nccl_matrix.sh on two H200s (2026-11-29, NCCL 2.28.9, torch
# 2.11.0+cu130; env.txt, SCORE.txt): dumps written by NCCL's own Flight Recorder on a timeout.
MATRIX_NCCL = REPO / "tests" / "fixtures" / "jobs" / "matrix-nccl"
NCCL_JOBS = sorted(p.parent for p in MATRIX_NCCL.glob("*/truth.json"))


@pytest.mark.parametrize("job", NCCL_JOBS, ids=[j.name for j in NCCL_JOBS])
def test_nccl_jobs_name_exactly_their_injected_ranks(job, engine):
    truth = _truth(job)
    assert truth["backend"] == "nccl"
    view = lookup_paths(engine, [str(job / "run")]).job
    assert view is not None, "not read as a job"
    assert sorted({r.rank for r in view.roots}) == sorted(truth["expected_roots"]), view.summary
    assert view.root is not None and view.root.rank in truth["expected_roots"]


def test_the_nccl_device_assert_job_is_named_by_its_kernel_assertion(engine):
    jl = lookup_paths(engine, [str(MATRIX_NCCL / "nccl-w2-world-cuda_assert-1" / "run")])
    assert jl.job is not None and jl.job.root.rank == 1
    assert jl.result.best is not None and jl.result.best.id == "cuda-device-side-assert"
