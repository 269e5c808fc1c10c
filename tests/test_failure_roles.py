"""What failed first, read one way: each role of a failure event (initiating, consequence,
teardown, a launcher's report, a wrapper) pinned on kb's own logs, in `kb lookup` (text exit code
and JSON), the job view and `kb triage`, which all read the same root failure."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path

import pytest

import kb
from kb.cli.main import main
from kb.fleet.triage import triage

pytestmark = pytest.mark.warm_home  # runs kb as a user would after its first run; tests no cache

WATCHDOG = (
    "[rank0]:[E1129 10:02:11.201 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, "
    "Timeout(ms)=600000) ran for 600045 milliseconds before timing out.\n"
)
TRACE = (
    "[rank1]: Traceback (most recent call last):\n"
    '[rank1]:   File "/home/user/train.py", line 41, in <module>\n'
    "[rank1]:     main()\n"
    '[rank1]:   File "/home/user/train.py", line 33, in main\n'
    "[rank1]:     {code}\n"
    "[rank1]: {exc}\n"
)
# The root rank's own failure, the entry that knows it, and the job's exit code (0: an entry).
ROOT_FAILURES = [
    ('lr = cfg["k"]', "KeyError: 'k'", "python-key-error"),
    (
        "import flash_attn",
        "ModuleNotFoundError: No module named 'flash_attn'",
        "python-module-not-found",
    ),
    (
        'open("/data/labels/train.csv")',
        "FileNotFoundError: [Errno 2] No such file or directory: '/data/labels/train.csv'",
        "file-not-found",
    ),
]


def _lookup(path: Path) -> tuple[int, dict]:
    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = main(["lookup", "--file", str(path), "--json"])
    return rc, json.loads(buf.getvalue())


def _write(tmp_path: Path, text: str, name: str = "train.log") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize(("code", "exc", "entry"), ROOT_FAILURES)
def test_a_root_ranks_own_error_answers_the_job_not_the_timeout_it_caused(
    tmp_path, code, exc, entry
):
    log = _write(tmp_path, TRACE.format(code=code, exc=exc) + WATCHDOG)
    rc, d = _lookup(log)
    assert rc == 0
    assert [m["id"] for m in d["matches"]][:2] == [entry, "nccl-timeout"]
    assert d["root"]["rank"] == 1 and d["root"]["role"] == "initiating"
    job = kb.lookup_job([str(log)]).job
    assert job is not None and job.root is not None
    assert (job.root.rank, job.root.id) == (1, entry)
    row = triage(str(log))
    assert (row["id"], row["root_rank"]) == (entry, 1)
    assert row["root_line"] == exc


def test_a_watchdog_timeout_with_no_other_failure_is_the_answer(tmp_path):
    log = _write(
        tmp_path, WATCHDOG + WATCHDOG.replace("rank0", "rank1").replace("Rank 0", "Rank 1")
    )
    rc, d = _lookup(log)
    assert rc == 0 and d["matches"][0]["id"] == "nccl-timeout"
    assert triage(str(log))["id"] == "nccl-timeout"


SHARD = (
    "epoch 3 step 200 loss 1.234\n"
    "Traceback (most recent call last):\n"
    '  File "/home/user/train.py", line 12, in <module>\n'
    "    data = load_shard(7)\n"
    '  File "/home/user/data.py", line 40, in load_shard\n'
    '    raise ShardError(f"shard {i} missing")\n'
    "mylib.errors.ShardError: shard 7 missing\n"
    "2026-11-29 10:00:01 INFO step 201 loss 1.233\n"
    "2026-11-29 10:00:02 INFO step 202 loss 1.230\n"
)


@pytest.mark.parametrize(
    "killed", ["Killed", "bash: line 1:  1684 Killed                  python3 train.py"]
)
def test_killed_after_an_exception_is_its_teardown_not_the_oom_killer(tmp_path, killed):
    log = _write(tmp_path, SHARD + killed + "\n")
    rc, d = _lookup(log)
    assert rc == 4, "the root failure is known, no entry knows it"
    assert d["matches"] == []
    assert [m["id"] for m in d["followers"]] == ["cpu-oom-killed"]  # said, never the answer
    root = d["root"]
    assert root["exception"] == "mylib.errors.ShardError"
    assert root["message"] == "shard 7 missing", "the message stops where the log goes on"
    row = triage(str(log))
    assert row["id"] is None and row["exception"] == "ShardError"
    assert row["root_line"] == "mylib.errors.ShardError: shard 7 missing"


def test_killed_after_the_jobs_own_watchdog_is_a_teardown(tmp_path):
    log = _write(tmp_path, WATCHDOG.replace("[rank0]:", "") + "Killed\n")
    rc, d = _lookup(log)
    assert rc == 0 and d["matches"][0]["id"] == "nccl-timeout"
    assert d["root"]["role"] != "initiating"


def test_a_real_oom_kill_shown_by_the_kernels_line_is_the_oom_killer(tmp_path):
    log = _write(
        tmp_path,
        "epoch 3 step 200 loss 1.234\n"
        "[12345.678] Out of memory: Killed process 1684 (python3) total-vm:123456kB, "
        "anon-rss:98765kB\nKilled\n",
    )
    rc, d = _lookup(log)
    assert rc == 0 and d["matches"][0]["id"] == "cpu-oom-killed"
    assert d["root"]["kind"] == "kernel"


def test_killed_with_no_earlier_failure_is_still_read_as_the_kill(tmp_path):
    log = _write(tmp_path, "epoch 3 step 200 loss 1.234\nKilled\n")
    rc, d = _lookup(log)
    assert rc == 0 and d["matches"][0]["id"] == "cpu-oom-killed"
    assert d["root"]["role"] == "initiating"


TORCHRUN_ONE = """\
Traceback (most recent call last):
  File "/home/user/train.py", line 22, in <module>
    mesh = build_mesh()
RuntimeError: CUDA error: an illegal memory access was encountered
E1129 10:00:05.123000 4242 torch/distributed/elastic/multiprocessing/api.py:882] failed (exitcode: 1) local_rank: 0 (pid: 4250) of binary: /usr/bin/python3
Traceback (most recent call last):
  File "/usr/bin/torchrun", line 8, in <module>
    sys.exit(main())
  File "/usr/lib/python3.11/site-packages/torch/distributed/launcher/api.py", line 270, in launch_agent
    raise ChildFailedError(
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-29_10:00:05
  host      : node1
  rank      : 0 (local_rank: 0)
  exitcode  : 1 (pid: 4250)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================
"""


def test_torchruns_report_never_leads_over_the_childs_exception(tmp_path):
    log = _write(tmp_path, TORCHRUN_ONE)
    rc, d = _lookup(log)
    assert rc == 0
    ids = [m["id"] for m in d["matches"]]
    assert ids[0] == "cuda-illegal-memory-access" and "torchrun-child-failed" in ids[1:]
    assert triage(str(log))["id"] == "cuda-illegal-memory-access"


def test_a_cascade_gives_the_kernel_assertion_as_the_root_line(tmp_path):
    log = _write(
        tmp_path,
        "/pytorch/aten/src/ATen/native/cuda/Indexing.cu:1553: indexSelectLargeIndex: block: "
        "[12,0,0], thread: [64,0,0] Assertion `srcIndex < srcSelectDimSize` failed.\n"
        "Traceback (most recent call last):\n"
        '  File "/home/user/train.py", line 88, in <module>\n'
        "    out = model(ids)\n"
        "RuntimeError: cuDNN error: CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED\n",
    )
    rc, d = _lookup(log)
    assert rc == 0 and d["matches"][0]["id"] == "cuda-device-side-assert"
    assert d["root"]["line_number"] == 1 and "Assertion `srcIndex" in d["root"]["line"]


def test_an_assertion_after_another_cuda_error_is_not_its_root(tmp_path):
    # Only a device-side assert reaches back to an assertion printed after it.
    log = _write(
        tmp_path,
        "Traceback (most recent call last):\n"
        '  File "/home/user/train.py", line 88, in <module>\n'
        "    out = model(ids)\n"
        "RuntimeError: cuDNN error: CUDNN_STATUS_EXECUTION_FAILED\n"
        "/home/user/kernels/check.cu:12: k: block: [0,0,0], thread: [0,0,0] Assertion `x` failed.\n",
    )
    _, d = _lookup(log)
    assert d["root"]["line_number"] == 4


def test_the_failure_wordings_are_data_checked_by_lint(tmp_path):
    import shutil

    from kb.knowledge.data import _DATA, load_data
    from kb.lint import _check_failure_events

    data = load_data()
    assert data.events is not None and not _check_failure_events(data.events)
    # A rule whose example another rule reads first is named, with its file.
    for f in Path(_DATA).iterdir():
        shutil.copy(f, tmp_path / f.name)
    text = (tmp_path / "failure-events.yaml").read_text()
    text = text.replace(
        'examples: ["srun: error: node17: task 3: Killed"',
        'examples: ["Killed", "srun: error: node17: task 3: Killed"',
    )
    (tmp_path / "failure-events.yaml").write_text(text)
    problems = _check_failure_events(load_data(str(tmp_path)).events)
    assert [
        (p.code, "'Killed' of line rule 'srun' is read by 'shell-signal'" in p.message)
        for p in problems
    ] == [("KB009", True)]
    assert problems[0].path.endswith("failure-events.yaml")


ROLES = Path(__file__).parent / "fixtures" / "roles"


@pytest.mark.parametrize(
    ("name", "first", "after", "root_line"),
    [
        # A real cascade on an H200: the index kernel's assertion, then cuDNN's error.
        ("cuda-assert-then-cudnn", "cuda-device-side-assert", "cudnn-error", "Assertion `srcIndex"),
        # A KeyError, then bash's report of the SIGKILL that ended the process.
        ("keyerror-then-killed", "python-key-error", "cpu-oom-killed", "KeyError: 7"),
        # torchrun --nproc_per_node=1: the child's own failure leads over the launcher's report.
        (
            "torchrun-one-worker-triton",
            "triton-compilation-error",
            "torchrun-child-failed",
            "CompilationError",
        ),
        (
            "torchrun-one-worker-mesh",
            "device-mesh-world-size",
            "torchrun-child-failed",
            "Mesh should not",
        ),
    ],
)
def test_real_captures_are_answered_by_their_root(name, first, after, root_line):
    rc, d = _lookup(ROLES / f"{name}.log")
    ids = [m["id"] for m in d["matches"]]
    assert rc == 0 and ids[0] == first and after in ids[1:]
    assert root_line in d["root"]["line"] and d["root"]["role"] == "initiating"
    assert triage(str(ROLES / f"{name}.log"))["id"] == first


def test_old_mp_spawns_bare_exception_is_a_report_of_the_worker(tmp_path):
    # torch < 1.8: spawn.py raised Exception("process 3 terminated with signal SIGKILL").
    log = _write(
        tmp_path,
        "Traceback (most recent call last):\n"
        '  File "train.py", line 213, in main\n'
        "    mp.spawn(main_worker, nprocs=4)\n"
        '  File "/opt/conda/lib/python3.6/site-packages/torch/multiprocessing/spawn.py", line 107, in join\n'
        "    (error_index, name)\n"
        "Exception: process 3 terminated with signal SIGKILL\n",
    )
    _, d = _lookup(log)
    assert d["root"]["role"] == "report" and d["root"]["signal"] == "SIGKILL"
    assert d["root"]["kind"] == "launcher"


def test_rays_worker_prefix_is_peeled_so_its_lines_are_read(tmp_path):
    log = _write(
        tmp_path,
        "(RayWorkerVllm pid=7046) Fatal Python error: Aborted\n"
        "(RayWorkerVllm pid=7046, ip=10.0.0.3) Current thread 0x00007f (most recent call first):\n",
    )
    _, d = _lookup(log)
    assert d["root"] is not None and d["root"]["line"] == "Fatal Python error: Aborted"
    assert d["root"]["rank"] is None  # a pid is no rank


def test_a_job_whose_root_rank_failed_of_an_unknown_error_shows_that_error(tmp_path):
    code, exc = "load_shard(7)", "mylib.errors.ShardError: shard 7 missing"
    log = _write(tmp_path, TRACE.format(code=code, exc=exc) + WATCHDOG)
    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = main(["lookup", "--file", str(log)])
    out = buf.getvalue()
    assert rc == 4, "no entry knows the root's failure"
    lines = out.splitlines()
    assert lines[0].startswith("job  root cause: rank 1")
    assert "root failure  mylib.errors.ShardError" in out
    assert out.index("rank 1  root") < out.index("rank 0  consequence")
    assert "nccl-timeout" in out.split("root failure", 1)[1]  # the other ranks' entries, after


def test_a_line_logged_at_error_level_is_a_failure_when_nothing_stronger_is(tmp_path):
    # pip's own failure line: no entry knows this one, and it is still a failure (exit 4).
    log = _write(
        tmp_path,
        "Processing /home/user/proj\n"
        "ERROR: Directory '.' is not installable. Neither 'setup.py' nor 'pyproject.toml' found.\n",
    )
    rc, d = _lookup(log)
    assert rc == 4 and d["matches"] == []
    assert d["root"]["kind"] == "logged error" and d["root"]["line_number"] == 2
    # Plain log records are no failure; an exception outranks an ERROR record before it.
    assert _lookup(_write(tmp_path, "INFO starting\nINFO done\n", "ok.log"))[0] == 1
    rc, d = _lookup(_write(tmp_path, "ERROR: retrying the shard\n" + SHARD, "both.log"))
    assert d["root"]["exception"] == "mylib.errors.ShardError"
