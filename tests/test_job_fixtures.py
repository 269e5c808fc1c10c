"""Real failing jobs, captured with scripts/capture_jobs.sh --cpu (torch 2.13 CPU, gloo, two ranks
under torchrun, through `kb run`): the job view names the rank that caused the failure, not the
one torchrun saw fail first. tests/fixtures/jobs/<name>/run/ is the `kb run` folder as it was left.

The entry ids for these failures are being written elsewhere (collective-mismatch, cpu-oom-killed,
a gloo timeout...); the tests hold the root rank and the roles, and that the victim's timeout is
never called the cause.
"""

import json
import subprocess
import sys

import pytest
from _repo import REPO

from kb.diagnosis.engine import default_engine
from kb.job.lookup import lookup_paths

JOBS = REPO / "tests" / "fixtures" / "jobs"


def job_of(*paths):
    jl = lookup_paths(default_engine(), [str(p) for p in paths])
    assert jl.job is not None
    return jl


def roles(jl):
    return {v.rank: v.role for v in jl.job.ranks}


@pytest.mark.parametrize("what", ["run", "run/output.log"])
def test_stall_root_is_the_rank_that_never_arrived(what):
    """(b) Rank 1 sleeps; rank 0's all_reduce times out; torchrun's Root Cause names rank 0."""
    jl = job_of(JOBS / "cpu-stall" / what)
    job = jl.job
    assert job.torchrun.root.rank == 0  # torchrun blames the victim...
    assert job.root.rank == 1 and job.kind == "desync"  # ...kb names the straggler
    assert roles(jl) == {0: "consequence", 1: "root"}
    assert job.ranks[0].cause == "timeout"
    assert job.desync.missing == [1] and job.desync.waiting == [0]
    if what == "run":  # with the Flight Recorder dumps: which collective, and its op
        assert job.desync.by == "flight-recorder"
        assert (job.desync.seq, job.desync.op) == (2, "gloo:all_reduce")
    else:  # the log alone: rank 1 never timed out while rank 0 did
        assert job.desync.by == "no-timeout"
    assert any("Root Cause" in n for n in job.notes)


def test_sigkill_root_is_the_killed_rank():
    """(e) Rank 1 dies of SIGKILL; rank 0 loses its peer (gloo: Connection closed by peer)."""
    jl = job_of(JOBS / "cpu-sigkill" / "run")
    job = jl.job
    assert job.root.rank == 1 and job.kind == "signal"
    assert job.root.signal == "SIGKILL" and job.root.exitcode == -9
    assert roles(jl) == {0: "consequence", 1: "root"}
    assert job.ranks[0].cause == "peer-gone"
    assert job.root.id != "nccl-timeout"


def test_mismatch_is_reported_by_both_ranks():
    """(d) all_reduce of shape [10] on rank 0 and [20] on rank 1 under TORCH_DISTRIBUTED_DEBUG=DETAIL:
    each rank raises "Detected mismatch between collectives on ranks"; both are roots of one error."""
    jl = job_of(JOBS / "cpu-mismatch" / "run")
    job = jl.job
    assert job.root.rank == 0 and job.root.role == "root"
    assert roles(jl) == {0: "root", 1: "root"}
    assert "Detected mismatch between collectives" in job.root.line
    assert job.root.id != "nccl-timeout"
    assert all(v.cause in ("error", "exception") for v in job.ranks)


def test_fixture_json_through_the_cli():
    out = subprocess.run(
        [sys.executable, "-m", "kb", "lookup", "--json", str(JOBS / "cpu-stall" / "run")],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert out.returncode in (0, 1), out.stderr
    d = json.loads(out.stdout)
    assert d["job"]["root"]["rank"] == 1 and d["job"]["root"]["kind"] == "desync"
    assert d["job"]["root"]["evidence_rank"] == 0
    assert [(r["rank"], r["role"]) for r in d["job"]["ranks"]] == [(0, "consequence"), (1, "root")]
    assert d["job"]["desync"]["missing_ranks"] == [1]
    assert d["job"]["torchrun"]["root_rank"] == 0
    assert {f["rank"] for f in d["job"]["torchrun"]["failures"]} == {0, 1}
    assert len(d["job"]["flight_recorder"]) == 2


def test_fixture_text_leads_with_the_root():
    out = subprocess.run(
        [sys.executable, "-m", "kb", "lookup", str(JOBS / "cpu-sigkill" / "run")],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    first = out.stdout.splitlines()[0]
    assert first.startswith("job") and "rank 1" in first


def test_readme_job_example_is_real():
    """The README's job example shows what `kb lookup` prints for this fixture."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = readme.split("$ kb lookup tests/fixtures/jobs/cpu-stall/run\n", 1)[1].split("```", 1)[0]
    out = subprocess.run(
        [sys.executable, "-m", "kb", "lookup", "tests/fixtures/jobs/cpu-stall/run"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**__import__("os").environ, "NO_COLOR": "1"},
    )
    shown = block.strip().splitlines()
    assert out.stdout.splitlines()[: len(shown)] == shown


# The same jobs on GPUs (NCCL), once scripts/capture_jobs.sh has been run on a 2-GPU machine and its
# $OUT/jobs/<name>/ folders committed here; skipped until then. What each must show:
GPU_EXPECT = {
    "device_assert": (1, {"cuda-device-side-assert"}),
    "oom": (1, {"cuda-oom"}),
    "stall": (1, None),  # a desync: the root is the rank that never reached the collective
    "sigkill": (1, None),
    "mismatch": (None, None),  # every rank reports it; any root but the victim's timeout
}


@pytest.mark.parametrize("name", sorted(GPU_EXPECT))
def test_gpu_jobs(name):
    run = JOBS / name / "run"
    if not run.is_dir():
        pytest.skip(f"no GPU capture of {name} yet (scripts/capture_jobs.sh)")
    jl = job_of(run)
    rank, ids = GPU_EXPECT[name]
    root = jl.job.root
    assert root is not None and root.role == "root"
    if rank is not None:
        assert root.rank == rank
    if ids is not None:
        assert root.id in ids
    if name in ("device_assert", "oom", "sigkill", "mismatch"):
        assert root.id != "nccl-timeout"
    if name == "stall":
        assert jl.job.kind == "desync" and jl.job.desync.missing == [1]
