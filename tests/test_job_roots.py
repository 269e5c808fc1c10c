"""Every root of a job: synthetic Flight Recorder dumps of 16 (and one of 1,024) ranks in four
process-group layouts with faults injected (tests/fr_synth.py), each checked against the ranks it
injected, through the group analysis and through `kb lookup` (text, JSON, GitHub); and failures
that a communicator error only carried (NCCL's "Last error: Cuda failure '...'", the watchdog's
exception naming a CUDA error)."""

import json
import re
import subprocess
import sys

import fr_synth as S
import pytest
from _repo import REPO

import kb
from kb.diagnosis.engine import default_engine
from kb.job.collectives import analyze
from kb.job.lookup import lookup_paths, lookup_text
from kb.job.parsers.flight_recorder import read_bytes

pytestmark = pytest.mark.warm_home  # runs kb as a user would after its first run; tests no cache

ENGINE = default_engine()
CASES = [(lay, name) for lay in S.layouts(16) for name in S.scenarios(lay)]

# The kind each injected fault must be named for.
KIND = {
    "stall": "stalled",
    "gil": "stalled",
    "skip": "stopped-short",
    "stuck": "stuck",
    "mismatch": "mismatch",
}


def _read(dumps: dict) -> list:
    import pickle

    return [
        read_bytes(pickle.dumps(d, protocol=2), f"job/nccl_trace_rank_{r}")
        for r, d in dumps.items()
    ]


@pytest.mark.parametrize("lay,name", CASES, ids=[f"{lay.name}-{name}" for lay, name in CASES])
def test_sixteen_ranks_every_fault_rank_and_no_other(lay, name):
    faults = S.scenarios(lay)[name]
    c = analyze(_read(S.simulate(lay, faults, buffer=24)))
    assert c.roots == sorted({f.rank for f in faults})
    for f in faults:
        assert c.faults[f.rank].kind == KIND[f.kind]
    # every other rank waited for one of them, in some group
    assert set(c.waited) | set(c.faults) == set(range(lay.world))


def test_the_group_and_collective_of_each_root():
    lay = S.layouts(16)[2]  # tensor, pipeline, data and expert parallel
    faults = S.scenarios(lay)["two"]
    c = analyze(_read(S.simulate(lay, faults)))
    stalled, odd = faults[0].rank, faults[1].rank
    f = c.faults[stalled].finding
    # one of the groups it lags in, with the collective its peers there entered and it did not
    assert f.kind == "lag" and f.faulty == (stalled,) and stalled not in f.waiting
    assert f.op and f.waiting and set(f.members) >= set(f.waiting) | {stalled}
    m = c.faults[odd].finding
    assert m.desc == "DATA_PARALLEL_GROUP" and m.kind == "mismatch"
    assert "different sizes" in m.detail and "8192" in m.detail and "4096" in m.detail


@pytest.mark.parametrize("style", ["torch", "json", "folders", "prefix", "tar"])
def test_a_job_folder_of_dumps_names_every_root(tmp_path, style):
    lay = S.layouts(16)[1]
    faults = S.scenarios(lay)["two"]
    S.write(S.simulate(lay, faults), str(tmp_path / "fr"), style)
    jl = lookup_paths(ENGINE, [str(tmp_path)])
    job = jl.job
    want = sorted(f.rank for f in faults)
    assert sorted(r.rank for r in job.roots) == want
    assert job.kind == "desync" and job.root.rank in want
    assert {v.rank for v in job.ranks if v.role == "root"} == set(want)
    assert all(v.part == "waited" for v in job.ranks if v.rank not in want)
    d = {r.rank: r for r in job.roots}
    assert str(d[faults[1].rank].kind) == "mismatch" and d[faults[1].rank].entry is None
    assert d[faults[0].rank].group.endswith("(TENSOR_MODEL_PARALLEL_GROUP)")
    assert d[faults[0].rank].collective.startswith("#")


def test_json_text_and_github_show_all_roots(tmp_path):
    lay = S.layouts(16)[0]
    faults = S.scenarios(lay)["two"]
    S.write(S.simulate(lay, faults), str(tmp_path / "fr"), "json")
    want = sorted(f.rank for f in faults)
    run = lambda *a: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "kb", "lookup", *a, str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**__import__("os").environ, "NO_COLOR": "1"},
    )
    d = json.loads(run("--json").stdout)
    roots = d["job"]["roots"]
    assert [r["rank"] for r in roots] == want
    assert set(roots[0]) >= {"rank", "group", "collective", "kind", "entry"}
    assert {r["kind"] for r in roots} == {"stalled", "mismatch"}
    text = run().stdout
    head = text.split("\n\n")[0]
    for r in want:
        assert re.search(rf"^  rank {r} +root ", head, re.M)
    assert len(re.findall(r"^  \S.*? root  ", head, re.M)) == len(want)
    gh = run("--format", "github").stdout
    assert gh.startswith("::error ") and "and 1 more root rank" in gh


def test_a_thousand_ranks():
    """One 1,024-rank layout, two faults in different groups (scripts/bench_job.py times and
    checks all of them)."""
    lay = S.layouts(1024)[1]
    faults = S.scenarios(lay)["two"]
    c = analyze(_read(S.simulate(lay, faults)))
    assert c.roots == sorted(f.rank for f in faults)


# ---------------------------------------------------------------- carried failures
NCCL_CARRIES_ASSERT = """\
[rank0]:[E1123 10:00:30.000000000 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE, NumelIn=4, NumelOut=4, Timeout(ms)=20000) ran for 20013 milliseconds before timing out.
[default1]:Traceback (most recent call last):
[default1]:  File "/home/kb/jobs/step.py", line 52, in sync_grads
[default1]:    dist.all_reduce(grad, group=dp_group)
[default1]:torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:77, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.27.3
[default1]:Last error:
[default1]:Cuda failure 'device-side assert triggered'
"""

WATCHDOG_CARRIES_IMA = """\
[rank0]:[E1123 10:00:30.000000000 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE, NumelIn=4, NumelOut=4, Timeout(ms)=20000) ran for 20013 milliseconds before timing out.
[rank1]:[E1123 10:00:11.000000000 ProcessGroupNCCL.cpp:1895] [PG ID 2 PG GUID 5(TENSOR_PARALLEL) Rank 1] Process group watchdog thread terminated with exception: CUDA error: an illegal memory access was encountered
"""

TEARDOWN_THEN_FAULT = """\
[rank0]:[E1123 10:00:30.000000000 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE, NumelIn=4, NumelOut=4, Timeout(ms)=20000) ran for 20013 milliseconds before timing out.
[rank1]:[E1123 10:00:11.000000000 ProcessGroupNCCL.cpp:681] [Rank 1] Some NCCL operations have failed or timed out. [...]
[rank1]:[E1123 10:00:11.000000000 ProcessGroupNCCL.cpp:1895] [PG ID 1 PG GUID 3(DATA_PARALLEL) Rank 1] Process group watchdog thread terminated with exception: CUDA error: misaligned address
"""


@pytest.mark.parametrize(
    "log,entry,via",
    [
        (NCCL_CARRIES_ASSERT, "cuda-device-side-assert", "nccl-error"),
        (WATCHDOG_CARRIES_IMA, "cuda-illegal-memory-access", "teardown"),
        (TEARDOWN_THEN_FAULT, "cuda-misaligned-address", "teardown"),
    ],
)
def test_a_carrier_leads_to_its_cause(log, entry, via):
    job = lookup_text(ENGINE, log).job
    root = job.root
    assert root.rank == 1 and root.id == entry and root.cause == "error"
    assert root.surfaced_as is not None and root.surfaced_as.what == via
    assert job.rank(0).role == "consequence"
    assert [r.entry for r in job.roots] == [entry]


def test_a_carried_failure_through_the_cli():
    out = subprocess.run(
        [sys.executable, "-m", "kb", "lookup", "--json", "--stdin"],
        input=NCCL_CARRIES_ASSERT,
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    d = json.loads(out.stdout)
    assert d["matches"][0]["id"] == "cuda-device-side-assert"
    r1 = next(r for r in d["job"]["ranks"] if r["rank"] == 1)
    assert (
        r1["surfaced_as"]["id"] == "nccl-error"
        and "unhandled cuda error" in r1["surfaced_as"]["line"]
    )


# ---------------------------------------------------------------- the public, typed API
def test_the_job_view_is_public_and_typed(tmp_path):
    from enum import Enum

    for name in (
        "JobView",
        "RankVerdict",
        "RootRank",
        "Role",
        "Part",
        "JobKind",
        "FaultKind",
        "Surfaced",
        "GroupFinding",
        "JobLookup",
    ):
        assert name in kb.__all__ and getattr(kb, name) is not None
    assert issubclass(kb.Role, Enum) and kb.Role.ROOT == "root" and f"{kb.Role.ROOT}" == "root"
    jl = kb.lookup_job([str(REPO / "tests" / "fixtures" / "jobs" / "cpu-stall" / "run")])
    assert isinstance(jl, kb.JobLookup) and isinstance(jl.job, kb.JobView)
    v = jl.job.root
    assert isinstance(v, kb.RankVerdict) and v.role is kb.Role.ROOT and v.part is kb.Part.ROOT_CAUSE
    assert jl.job.kind is kb.JobKind.DESYNC and jl.job.roots[0].kind is kb.FaultKind.STALLED
    with pytest.raises(AttributeError):
        v.role = kb.Role.UNKNOWN  # frozen
    assert json.dumps(v.to_dict())  # the enums are their words in JSON
    assert v.to_dict()["role"] == "root"


# torch.distributed.launch in torch >= 2.0 passes --local-rank=N; a script declaring only
# --local_rank exits 2 on argparse's usage error, printed with no rank prefix, after an
# unrelated warning.
LAUNCH_LOCAL_RANK = """\
/opt/venv/lib/python3.11/site-packages/torch/_subclasses/functional_tensor.py:368: UserWarning: Failed to initialize NumPy: No module named 'numpy' (Triggered internally at /pytorch/torch/csrc/utils/tensor_numpy.cpp:84.)
/opt/venv/lib/python3.11/site-packages/torch/distributed/launch.py:207: FutureWarning: The module torch.distributed.launch is deprecated
and will be removed in future. Use torchrun.
usage: train.py [-h] [--local_rank LOCAL_RANK]
train.py: error: unrecognized arguments: --local-rank=0
E1129 11:30:02.934000 18761 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 2) local_rank: 0 (pid: 18770) of binary: /opt/venv/bin/python
"""


def test_a_usage_error_printed_without_a_prefix_is_the_failed_rank_s():
    """The root rank has only an exit code; the one error printed without a rank prefix is
    known to an entry at medium confidence (a usage error): it is taken as the rank's, the
    warning before it is not."""
    jl = lookup_text(default_engine(), LAUNCH_LOCAL_RANK)
    assert jl.job is not None and jl.job.root is not None
    assert jl.job.root.rank == 0
    assert jl.job.root.id == "launcher-local-rank-argument"
    assert "unrecognized arguments" in jl.job.root.line
