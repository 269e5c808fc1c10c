"""The job view on small hand-made job logs. Every line uses a wording PyTorch prints; the file
that prints it is named beside it. The real captured jobs are in test_job_fixtures.py.

  [rankN]: on Python tracebacks     torch/distributed/distributed_c10d.py (_distributed_excepthook)
  [rankN]:[E1123 ...] C++ lines      c10 logging, ranks' glog prefix
  watchdog / heartbeat lines         torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp
  agent lines, ChildFailedError      torch/distributed/elastic/multiprocessing/api.py,
                                     torch/distributed/elastic/multiprocessing/errors/__init__.py
  error files                        torch/distributed/elastic/multiprocessing/errors/error_handler.py
"""

import json

import pytest

from kb.diagnosis.engine import default_engine
from kb.job.lookup import lookup_paths, lookup_text

ENGINE = default_engine()
AGENT_HEAD = """\
W1123 10:00:00.000000 100 torch/distributed/run.py:874] *****************************************
W1123 10:00:00.000000 100 torch/distributed/run.py:874] Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being overloaded, please further tune the variable for optimal performance in your application as needed.
"""


def summary(failures: list[str], root: str, name: str = "train.py") -> str:
    """torchrun's ChildFailedError text (errors/__init__.py: _MSG_FORMAT_TEMPLATE)."""
    return (
        "Traceback (most recent call last):\n"
        '  File "/usr/local/bin/torchrun", line 8, in <module>\n'
        "    sys.exit(main())\n"
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
        + "=" * 60
        + f"\n{name} FAILED\n"
        + "-" * 60
        + "\nFailures:\n"
        + ("\n".join(failures) if failures else "  <NO_OTHER_FAILURES>")
        + "\n"
        + "-" * 60
        + "\nRoot Cause (first observed failure):\n"
        + root
        + "\n"
        + "=" * 60
        + "\n"
    )


def failure(
    idx,
    rank,
    exitcode,
    pid,
    sig=None,
    error_file="<N/A>",
    traceback=None,
    time="2026-11-23_10:00:05",
    local=None,
):
    """One failure (errors/__init__.py: _FAILURE_FORMAT_TEMPLATE)."""
    tb = traceback or (
        f"Signal {-exitcode} ({sig}) received by PID {pid}"
        if sig
        else "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"
    )
    return (
        f"[{idx}]:\n  time      : {time}\n  host      : node-1\n  rank      : {rank} (local_rank: {rank if local is None else local})\n"
        f"  exitcode  : {exitcode} (pid: {pid}) {f' ({sig})' if sig else ''}\n  error_file: {error_file}\n"
        f"  traceback : {tb}"
    )


# (a) of the issue: rank 1 hits a device-side assert, the agent SIGTERMs rank 0, and torchrun's Root
# Cause names rank 1 with error_file <N/A> (no @record). The kernel's printf has no rank prefix.
DEVICE_ASSERT = (
    AGENT_HEAD
    + """\
/pytorch/aten/src/ATen/native/cuda/Loss.cu:245: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], thread: [0,0,0] Assertion `t >= 0 && t < n_classes` failed.
[rank1]: Traceback (most recent call last):
[rank1]:   File "/work/train.py", line 21, in <module>
[rank1]:     print(loss.item())
[rank1]: RuntimeError: CUDA error: device-side assert triggered
[rank1]: CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
[rank1]: For debugging consider passing CUDA_LAUNCH_BLOCKING=1
W1123 10:00:05.000000 100 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 201 closing signal SIGTERM
E1123 10:00:05.100000 100 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1) local_rank: 1 (pid: 202) of binary: /usr/bin/python3
"""
    + summary(
        [failure(1, 0, -15, 201, "SIGTERM")], failure(0, 1, 1, 202, time="2026-11-23_10:00:04")
    )
)


def test_device_side_assert_on_rank_1():
    jl = lookup_text(ENGINE, DEVICE_ASSERT)
    job = jl.job
    assert job.root.rank == 1 and job.root.id == "cuda-device-side-assert"
    assert {v.rank: (v.role, v.cause) for v in job.ranks} == {
        0: ("consequence", "sigterm"),
        1: ("root", "error"),
    }
    assert job.torchrun.root.rank == 1 and not job.notes  # torchrun agrees here
    assert jl.result.matches[0].id == "cuda-device-side-assert"


# (b) of the issue with NCCL: rank 1 stalls in data loading, rank 0's watchdog times out on SeqNum 2
# and aborts (SIGABRT); rank 1's heartbeat monitor is told through the store (ProcessGroupNCCL.cpp:
# HeartbeatMonitor::getNCCLWatchdogTimeoutErrorMsg, "from " + " rank 0": two spaces). torchrun's
# Root Cause names rank 0, the victim.
NCCL_STALL = (
    AGENT_HEAD
    + """\
rank 1: loading the next batch...
[rank0]:[E1123 10:00:30.100000000 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=4, NumelOut=4, Timeout(ms)=20000) ran for 20012 milliseconds before timing out.
[rank0]:[E1123 10:00:30.100100000 ProcessGroupNCCL.cpp:2271] [PG ID 0 PG GUID 0(default_pg) Rank 0]  failure detected by watchdog at work sequence id: 2 PG status: last enqueued work: 2, last completed work: 1
[rank0]:[E1123 10:00:30.100200000 ProcessGroupNCCL.cpp:670] Stack trace of the failed collective not found, potentially because FlightRecorder is disabled. You can enable it by setting TORCH_NCCL_TRACE_BUFFER_SIZE to a non-zero value.
[rank0]:[E1123 10:00:30.100300000 ProcessGroupNCCL.cpp:2106] [PG ID 0 PG GUID 0(default_pg) Rank 0] First PG on this rank to signal dumping.
[rank1]:[E1123 10:00:31.200000000 ProcessGroupNCCL.cpp:1746] [PG ID 0 PG GUID 0(default_pg) Rank 1] Received a dump signal due to a collective timeout from  rank 0 and we will try our best to dump the debug info. Last enqueued NCCL work: 1, last completed NCCL work: 1.This is most likely caused by incorrect usages of collectives, e.g., wrong sizes used across ranks, the order of collectives is not same for all ranks or the scheduled collective, for some reason, didn't run. Additionally, this can be caused by GIL deadlock or other reasons such as network errors or bugs in the communications library (e.g. NCCL), etc.
[rank0]:[E1123 10:00:38.300000000 ProcessGroupNCCL.cpp:684] [PG ID 0 PG GUID 0(default_pg) Rank 0] Some NCCL operations have failed or timed out.
[rank0]:[E1123 10:00:38.300100000 ProcessGroupNCCL.cpp:698] [Rank 0] To avoid data inconsistency, we are taking the entire process down.
[rank0]:[E1123 10:00:38.300200000 ProcessGroupNCCL.cpp:1899] [PG ID 0 PG GUID 0(default_pg) Rank 0] Process group watchdog thread terminated with exception: [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=4, NumelOut=4, Timeout(ms)=20000) ran for 20012 milliseconds before timing out.
terminate called after throwing an instance of 'c10::DistBackendError'
  what():  [PG ID 0 PG GUID 0(default_pg) Rank 0] Process group watchdog thread terminated with exception: [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=4, NumelOut=4, Timeout(ms)=20000) ran for 20012 milliseconds before timing out.
W1123 10:00:39.000000 100 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 202 closing signal SIGTERM
E1123 10:00:39.100000 100 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: -6) local_rank: 0 (pid: 201) of binary: /usr/bin/python3
"""
    + summary(
        [failure(1, 1, -15, 202, "SIGTERM")],
        failure(0, 0, -6, 201, "SIGABRT", time="2026-11-23_10:00:38"),
    )
)


def test_nccl_stall_names_the_rank_that_did_not_reach_the_collective():
    jl = lookup_text(ENGINE, NCCL_STALL)
    job = jl.job
    assert job.kind == "desync"
    # a straggler has no entry of its own: the waiting rank's timeout is its evidence, not its id
    assert job.root.rank == 1 and job.root.id is None and job.evidence.id == "nccl-timeout"
    assert job.evidence.rank == 0 and "SeqNum=2" in job.evidence.line
    d = job.desync
    assert (d.seq, d.op, d.missing, d.waiting, d.by) == (2, "ALLREDUCE", [1], [0], "watchdog")
    assert {v.rank: v.role for v in job.ranks} == {0: "consequence", 1: "root"}
    assert job.ranks[1].cause == "told"  # it only heard of the timeout from rank 0
    assert job.torchrun.root.rank == 0 and job.torchrun.root.signal == "SIGABRT"
    assert job.notes and "rank 0" in job.notes[0]


def test_an_unprefixed_error_goes_to_the_one_rank_that_failed():
    # Before torch 2.2 a rank's traceback had no "[rankN]:" prefix; without @record, torchrun's
    # summary only says rank 1 exited with 1.
    log = (
        AGENT_HEAD + 'Traceback (most recent call last):\n  File "train.py", line 10, in <module>\n'
        "RuntimeError: CUDA error: an illegal memory access was encountered\n"
        + summary([failure(1, 0, -15, 201, "SIGTERM")], failure(0, 1, 1, 202))
    )
    jl = lookup_text(ENGINE, log)
    job = jl.job
    assert job.root.rank == 1 and job.kind == "exit"
    assert job.root.id == "cuda-illegal-memory-access" and "CUDA error" in job.root.line
    assert job.notes and "no rank prefix" in job.notes[0]
    assert jl.result.matches[0].id == "cuda-illegal-memory-access"


@pytest.mark.parametrize(
    ("code", "local", "kind"), [(1, 2, "exit"), (-9, 0, "signal"), (-11, 5, "signal")]
)
def test_torchrun_agent_line_alone_names_the_rank(code, local, kind):
    """The log ends at torchrun's agent line, without its ChildFailedError summary (cut off, or
    a paste up to there): the agent names the first rank it saw fail, as a local rank, and the
    unprefixed traceback before it is that rank's."""
    log = (
        AGENT_HEAD + 'Traceback (most recent call last):\n  File "train.py", line 10, in <module>\n'
        "RuntimeError: CUDA error: an illegal memory access was encountered\n"
        f"E1126 10:00:01.000000 140 torch/distributed/elastic/multiprocessing/api.py:874] failed "
        f"(exitcode: {code}) local_rank: {local} (pid: 2101) of binary: /usr/bin/python3\n"
    )
    jl = lookup_text(ENGINE, log)
    job = jl.job
    assert job is not None and job.root.rank == local and job.kind == kind
    assert [r.rank for r in job.roots] == [local]
    assert job.root.id == "cuda-illegal-memory-access"
    assert any("local ranks" in n for n in job.notes)
    assert jl.result.matches[0].id == "cuda-illegal-memory-access"


def test_the_launcher_line_is_the_ranks_evidence_and_a_generic_error_is_its_own():
    agent = (
        "E1126 10:00:01.000000 140 torch/distributed/elastic/multiprocessing/api.py:874] failed "
        "(exitcode: {code}) local_rank: 1 (pid: 2101) of binary: /usr/bin/python3\n"
    )
    # only the launcher's line: it is what shows the rank's end, not a paraphrase of it
    job = lookup_text(ENGINE, AGENT_HEAD + agent.format(code=-9)).job
    assert job.root.rank == 1 and job.root.evidence_from == "launcher"
    assert job.root.line == agent.format(code=-9).strip()
    # an unprefixed exception no specific entry knows is still that rank's, with its generic entry
    log = (
        AGENT_HEAD + 'Traceback (most recent call last):\n  File "train.py", line 10, in <module>\n'
        "KeyError: 'label_ids'\n" + agent.format(code=1)
    )
    job = lookup_text(ENGINE, log).job
    assert job.root.rank == 1 and job.root.id == "python-key-error"
    assert (
        job.root.line == "KeyError: 'label_ids'" and "no error in the logs" not in job.root.reason
    )


def test_a_summary_pasted_from_its_root_cause_part_names_that_rank():
    """Only the end of torchrun's summary was pasted (no ChildFailedError line): its Root Cause
    part still names the rank; with the whole summary, the whole summary is what is read."""
    whole = summary(
        [failure(1, 0, -6, 301, "SIGABRT"), failure(2, 2, -6, 303, "SIGABRT")],
        failure(0, 5, -6, 305, "SIGABRT", time="2026-11-23_10:00:01"),
    )
    tail = whole[whole.index("Root Cause (first observed failure)") :]
    job = lookup_text(ENGINE, tail).job
    assert job is not None and job.root.rank == 5 and job.root.signal == "SIGABRT"
    job = lookup_text(ENGINE, whole).job
    assert job.root.rank == 5 and {f.rank for f in job.torchrun.failures} == {0, 2, 5}


def test_the_rank_that_never_joined_the_store_based_barrier():
    """init_process_group's store-based barrier: each rank that reached it says so with its rank
    and the world size; the rank of the world that never did is the one the others wait for."""
    wait = (
        "INFO:root:Waiting in store based barrier to initialize process group for rank: {r}, key: "
        "store_based_barrier_key:1 (world_size=6, worker_count=5, timeout=0:30:00)\n"
    )
    log = "".join(wait.format(r=r) for r in (0, 4, 1, 3, 5)) + (
        "RuntimeError: Timed out initializing process group in store based barrier on rank: 0, "
        "for key: store_based_barrier_key:1 (world_size=6, worker_count=5, timeout=0:30:00)\n"
    )
    job = lookup_text(ENGINE, log).job
    assert job is not None and [r.rank for r in job.roots] == [2] and job.desync.missing == [2]
    assert job.desync.by == "store-barrier" and "never joined" in job.summary
    assert {v.rank for v in job.ranks if v.role == "consequence"} == {0, 1, 3, 4, 5}


def test_mp_spawn_names_the_process_that_failed():
    """torch.multiprocessing.spawn reports the first process that failed by its index, the rank
    of an mp.spawn(fn, nprocs=world_size) job: with its exception after the marker, or, when it
    died without one, by its exit code or signal."""
    log = (
        "Traceback (most recent call last):\n"
        '  File "/home/u/train.py", line 88, in <module>\n'
        "    mp.spawn(run, args=(4,), nprocs=4)\n"
        "torch.multiprocessing.spawn.ProcessRaisedException:\n\n"
        "-- Process 3 terminated with the following error:\n"
        "Traceback (most recent call last):\n"
        '  File "/home/u/train.py", line 51, in run\n'
        "    out = model(x)\n"
        "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    )
    jl = lookup_text(ENGINE, log)
    job = jl.job
    assert job is not None and job.root.rank == 3 and [r.rank for r in job.roots] == [3]
    assert job.root.id == "cuda-illegal-memory-access"
    assert job.torchrun.launcher == "mp.spawn"
    died = (
        "torch.multiprocessing.spawn.ProcessExitedException: process 2 terminated with signal "
        "SIGKILL\n"
    )
    job = lookup_text(ENGINE, died).job
    assert job is not None and job.root.rank == 2 and job.root.signal == "SIGKILL"


def test_deepspeed_launcher_names_the_worker_that_failed():
    """DeepSpeed's launcher logs the first worker that exited non-zero by its command line,
    `--local_rank=N` inside it (and the return code, unless the line was cut before it)."""
    log = (
        "[2026-11-26 10:00:00,000] [INFO] [launch.py:146:main] WORLD INFO DICT: "
        "{'localhost': [0, 1, 2, 3]}\n"
        "[2026-11-26 10:05:00,000] [ERROR] [launch.py:321:sigkill_handler] ['/opt/env/bin/python',"
        " '-u', 'train.py', '--local_rank=2', '--deepspeed', 'ds.json'] exits with return code ="
        " -11\n"
    )
    job = lookup_text(ENGINE, log).job
    assert job is not None and job.root.rank == 2 and job.root.signal == "SIGSEGV"
    assert job.torchrun.launcher == "deepspeed"
    assert any("local ranks" in n for n in job.notes)


def test_local_ranks_of_error_files_map_to_global_ranks(tmp_path):
    """Node 2 of a 2-node job: torchrun's folders are local ranks 0, 1; its summary says local rank
    1 is global rank 3."""
    attempt = tmp_path / "run" / "torchrun" / "abc_1" / "attempt_0"
    (attempt / "1").mkdir(parents=True)
    (attempt / "1" / "error.json").write_text(
        json.dumps(
            {
                "message": {
                    "message": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
                    "extraInfo": {
                        "py_callstack": "Traceback (most recent call last):\ntorch.OutOfMemoryError: CUDA out of "
                        "memory. Tried to allocate 2.00 GiB.\n",
                        "timestamp": "1795402831",
                    },
                }
            }
        )
    )
    (tmp_path / "run" / "output.log").write_text(
        summary(
            [failure(1, 2, -15, 201, "SIGTERM", local=0)],
            failure(0, 3, 1, 202, error_file=str(attempt / "1" / "error.json"), local=1),
        )
    )
    job = lookup_paths(ENGINE, [str(tmp_path / "run")]).job
    assert (
        job.root.rank == 3 and job.root.id == "cuda-oom" and job.root.evidence_from == "error-file"
    )
    assert {v.rank for v in job.ranks} == {2, 3}


def test_every_rank_timed_out_in_the_same_collective_is_a_desync_with_no_straggler():
    # Both ranks issued SeqNum 7 (last enqueued 7) and both timed out: nobody is missing.
    log = "".join(
        f"[rank{r}]:[E1123 10:00:30.00000000{r} ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective "
        f"operation timeout: WorkNCCL(SeqNum=7, OpType=ALLGATHER, NumelIn=8, NumelOut=16, Timeout(ms)=600000) ran "
        f"for 600012 milliseconds before timing out.\n"
        f"[rank{r}]:[E1123 10:00:30.10000000{r} ProcessGroupNCCL.cpp:2271] [PG ID 0 PG GUID 0(default_pg) Rank {r}]  "
        f"failure detected by watchdog at work sequence id: 7 PG status: last enqueued work: 7, last completed work: 6\n"
        for r in (0, 1)
    )
    job = lookup_text(ENGINE, log).job
    assert job.kind == "desync" and job.root is None
    assert job.desync.seq == 7 and job.desync.waiting == [0, 1] and job.desync.missing == []
    assert all(v.role == "consequence" for v in job.ranks)
    d = job.to_dict()
    assert d["root"]["rank"] is None and d["root"]["kind"] == "desync"


def test_torch_2_2_watchdog_wording():
    # ProcessGroupNCCL.cpp in 2.2 - 2.4: "Exception (either an error or timeout) detected by watchdog at
    # work: N, last enqueued NCCL work: N, last completed NCCL work: N-1." Rank 1 printed nothing and
    # was stopped by torchrun: it is the one that never timed out.
    log = (
        "[rank0]:[E1003 18:37:01.832146912 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=6463, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) "
        "ran for 1800017 milliseconds before timing out.\n"
        "[rank0]:[E1003 18:37:01.833575187 ProcessGroupNCCL.cpp:1664] [PG 0 (default_pg) Rank 0] Exception (either "
        "an error or timeout) detected by watchdog at work: 6463, last enqueued NCCL work: 6463, last completed "
        "NCCL work: 6462.\n"
        "[rank0]:[E1003 18:37:01.833621509 ProcessGroupNCCL.cpp:1709] [PG 0 (default_pg) Rank 0] Timeout at NCCL "
        "work: 6463, last enqueued NCCL work: 6463, last completed NCCL work: 6462.\n"
        + summary([failure(1, 1, -15, 202, "SIGTERM")], failure(0, 0, -6, 201, "SIGABRT"))
    )
    job = lookup_text(ENGINE, log).job
    assert job.root.rank == 1 and job.kind == "desync"
    assert (job.desync.seq, job.desync.op, job.desync.missing, job.desync.by) == (
        6463,
        "ALLREDUCE",
        [1],
        "no-timeout",
    )


def test_monitored_barrier_names_the_missing_rank():
    # ProcessGroupGloo.cpp (monitoredBarrier under TORCH_DISTRIBUTED_DEBUG=DETAIL).
    log = (
        "[rank0]:[E1121 06:40:57.823273929 ProcessGroupGloo.cpp:67] [Rank 0]: Ranks 2 failed to pass "
        "monitoredBarrier in 10000 ms\n"
        "[rank1]:[E1121 06:40:57.900000000 ProcessGroupGloo.cpp:67] [Rank 1]: Ranks 2 failed to pass "
        "monitoredBarrier in 10000 ms\n"
    )
    job = lookup_text(ENGINE, log).job
    assert job.root.rank == 2 and job.kind == "desync" and job.desync.by == "monitored-barrier"
    assert job.root.id is None and job.evidence.id == "nccl-timeout"


def test_the_earliest_time_wins_over_the_order_of_the_log():
    # Two ranks with errors of their own, the later one printed first in the merged log.
    log = (
        "2026-11-23T10:00:09Z [rank0]: RuntimeError: CUDA error: an illegal memory access was encountered\n"
        "2026-11-23T10:00:02Z [rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
        "GPU 1 has a total capacity of 79.10 GiB of which 1.06 GiB is free.\n"
    )
    job = lookup_text(ENGINE, log).job
    assert job.root.rank == 1 and job.root.id == "cuda-oom"
    assert {v.rank: v.role for v in job.ranks} == {0: "unknown", 1: "root"}


def test_without_times_a_known_error_beats_an_unknown_one():
    log = (
        "[rank0]: ValueError: batch 3 has no labels\n"
        "[rank1]: RuntimeError: CUDA error: an illegal memory access was encountered\n"
    )
    job = lookup_text(ENGINE, log).job
    assert job.root.rank == 1 and job.root.id == "cuda-illegal-memory-access"


def test_srun_labels_and_a_dead_peer():
    # srun --label "N: "; NCCL's "remote process exited" on the ranks that lost rank 3
    # (torch/csrc/distributed/c10d/NCCLUtils.hpp, ncclRemoteError).
    log = "".join(
        f"{r}: torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
        f"ProcessGroupNCCL.cpp:3356, remote process exited or there was a network error, NCCL version 2.23.4\n"
        for r in (0, 1, 2)
    )
    log += (
        "3: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB. GPU 3 has a total "
        "capacity of 79.10 GiB of which 3.06 GiB is free.\n"
    )
    job = lookup_text(ENGINE, log).job
    assert job.root.rank == 3 and job.root.id == "cuda-oom"
    assert all(v.cause == "peer-gone" for v in job.ranks if v.rank != 3)


def test_default_prefix_of_torchrun_tee():
    log = (
        "[default0]:[rank0]: RuntimeError: CUDA error: an illegal memory access was encountered\n"
        "[default1]:[E1123 10:00:30.1 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for "
        "600001 milliseconds before timing out.\n"
    )
    job = lookup_text(ENGINE, log).job
    assert job.root.rank == 0 and job.ranks[1].role == "consequence"


def test_pdsh_host_prefixes():
    log = (
        "node-1: RuntimeError: CUDA error: an illegal memory access was encountered\n"
        "node-2: [E1123 10:00:30.1 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for "
        "600001 milliseconds before timing out.\n"
    )
    job = lookup_text(ENGINE, log).job
    # node-2's line names its rank itself ("[Rank 1]"); node-1's is keyed by its host.
    assert job.root.host == "node-1" and job.root.id == "cuda-illegal-memory-access"


def test_a_single_process_log_has_no_job_view():
    jl = lookup_text(ENGINE, "RuntimeError: CUDA error: an illegal memory access was encountered\n")
    assert jl.job is None
    jl = lookup_text(
        ENGINE, "[rank0]: RuntimeError: CUDA error: an illegal memory access was encountered\n"
    )
    assert jl.job is None  # one rank only


# ---------------------------------------------------------------- files and folders
def test_per_rank_files(tmp_path):
    (tmp_path / "rank0.log").write_text(
        "[E1123 10:00:30.1 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=3, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600001 "
        "milliseconds before timing out.\n"
    )
    (tmp_path / "rank1.log").write_text(
        "step 10\nRuntimeError: CUDA error: an illegal memory access was encountered\n"
    )
    jl = lookup_paths(ENGINE, [str(tmp_path / "rank0.log"), str(tmp_path / "rank1.log")])
    assert (
        jl.job.root.rank == 1
        and jl.job.root.path.endswith("rank1.log")
        and jl.job.root.line_number == 2
    )
    jl2 = lookup_paths(ENGINE, [str(tmp_path)])  # the folder: the same job
    assert jl2.job.root.rank == 1
    assert jl2.result.matches[0].id == "cuda-illegal-memory-access"


def test_slurm_task_files(tmp_path):
    (tmp_path / "slurm-123_0.out").write_text("epoch 1\n")
    (tmp_path / "slurm-123_1.out").write_text(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    )
    jl = lookup_paths(ENGINE, [str(tmp_path)])
    assert jl.job.root.rank == 1 and jl.job.root.id == "cuda-oom"


def test_torchrun_log_dir_with_error_files(tmp_path):
    """torchrun --log-dir: <log_dir>/<run_id>/attempt_0/<local_rank>/{stderr.log,error.json}; the
    error file carries the real traceback (ErrorHandler.record_exception's shape)."""
    attempt = tmp_path / "7f3c_abc" / "attempt_0"
    for r in (0, 1):
        (attempt / str(r)).mkdir(parents=True)
        (attempt / str(r) / "stdout.log").write_text("")
        (attempt / str(r) / "stderr.log").write_text("")
    tb = (
        'Traceback (most recent call last):\n  File "train.py", line 40, in main\n    loss.backward()\n'
        "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    )
    (attempt / "1" / "error.json").write_text(
        json.dumps(
            {
                "message": {
                    "message": "RuntimeError: CUDA error: an illegal memory access was encountered",
                    "extraInfo": {"py_callstack": tb, "timestamp": "1795402831"},
                }
            }
        )
    )
    jl = lookup_paths(ENGINE, [str(tmp_path)])
    job = jl.job
    assert job.root.rank == 1 and job.root.id == "cuda-illegal-memory-access"
    assert job.root.evidence_from == "error-file"
    assert job.error_files and job.error_files[0].timestamp == 1795402831
    assert jl.result.matches[0].id == "cuda-illegal-memory-access"


def test_an_error_file_alone(tmp_path):
    f = tmp_path / "error.json"
    f.write_text(
        json.dumps(
            {
                "message": "RuntimeError: CUDA error: an illegal memory access was encountered",
                "timestamp": 1795402831,
            }
        )
    )
    jl = lookup_paths(ENGINE, [str(f)])
    assert jl.result.matches[0].id == "cuda-illegal-memory-access"


def test_a_gzipped_rank_log(tmp_path):
    import gzip

    with gzip.open(tmp_path / "rank1.log.gz", "wt") as fh:
        fh.write("RuntimeError: CUDA error: an illegal memory access was encountered\n")
    (tmp_path / "rank0.log").write_text("[rank0]: Signal 15 (SIGTERM) received by PID 201\n")
    jl = lookup_paths(ENGINE, [str(tmp_path)])
    assert jl.job.root.rank == 1


@pytest.mark.parametrize(
    "exitcode,sig,role",
    [(-9, "SIGKILL", "root"), (-11, "SIGSEGV", "root"), (-15, "SIGTERM", "consequence")],
)
def test_signal_deaths_from_the_summary(exitcode, sig, role):
    log = summary([failure(1, 0, -15, 201, "SIGTERM")], failure(0, 1, exitcode, 202, sig))
    job = lookup_text(ENGINE, log).job
    v = next(v for v in job.ranks if v.rank == 1)
    assert v.role == role and v.signal == sig
    if role == "consequence":  # every rank stopped from outside: cancelled, not failed
        assert job.kind == "terminated" and job.root is None


def test_a_sigkill_the_agent_sent_itself_is_not_a_root():
    log = (
        "W1123 10:01:00.000000 100 torch/distributed/elastic/multiprocessing/api.py:1040] Unable to shutdown "
        "process 202 via Signals.SIGTERM, forcefully exiting via Signals.SIGKILL\n"
        "[rank0]: RuntimeError: CUDA error: an illegal memory access was encountered\n"
        + summary([failure(1, 1, -9, 202, "SIGKILL")], failure(0, 0, 1, 201))
    )
    job = lookup_text(ENGINE, log).job
    assert job.root.rank == 0
    assert next(v for v in job.ranks if v.rank == 1).role == "consequence"


def test_json_shape():
    from kb.render.job import lookup_dict

    d = lookup_dict(lookup_text(ENGINE, DEVICE_ASSERT))
    assert {"matches", "suggestions", "facts", "diagnosis", "input", "warnings", "job"} <= set(d)
    assert d["matches"][0]["id"] == d["job"]["root"]["id"] == "cuda-device-side-assert"
    root = d["job"]["root"]
    assert set(root) >= {"rank", "id", "line", "line_number", "path", "kind", "reason"}
    for r in d["job"]["ranks"]:
        assert set(r) >= {"rank", "id", "role", "cause", "line", "reason"}
        assert r["role"] in ("root", "consequence", "unknown")
    json.dumps(d)  # serialisable


def test_jsonl_and_github_formats():
    from kb.render.job import lookup_github, lookup_jsonl

    jl = lookup_text(ENGINE, DEVICE_ASSERT)
    line = lookup_jsonl(jl)
    assert line.endswith("\n") and "\n" not in line[:-1]
    assert json.loads(line)["job"]["root"]["rank"] == 1
    gh = lookup_github(jl)
    assert gh.startswith("::error title=kb%3A cuda-device-side-assert (rank 1)::")
    assert gh.count("\n") == 1 and "%0A" in gh  # one annotation; newlines escaped


def test_github_escaping():
    from kb.render.job import _esc_data, _esc_prop

    assert _esc_data("50% a\r\nb") == "50%25 a%0D%0Ab"
    assert _esc_prop("a:b,c%") == "a%3Ab%2Cc%25"


def test_a_large_job_reads_in_a_few_lines():
    from kb.render.job import job_lines
    from kb.render.style import Style

    log = "".join(
        f"[rank{r}]:[E1123 10:00:30.1 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective "
        f"operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
        f"ran for 600001 milliseconds before timing out.\n"
        for r in range(64)
        if r != 17
    )
    log += "[rank17]: RuntimeError: CUDA error: an illegal memory access was encountered\n"
    job = lookup_text(ENGINE, log).job
    assert job.root.rank == 17
    lines = job_lines(job, Style(False))
    assert len(lines) <= 6
    assert any("ranks 0-16, 18-63" in ln and "consequence" in ln for ln in lines)


def test_a_folder_skips_what_is_not_a_log(tmp_path):
    (tmp_path / "stderr").write_text(
        "[rank1]: RuntimeError: CUDA error: an illegal memory access was encountered\n"
    )
    (tmp_path / "core").write_bytes(b"\x7fELF" + bytes(range(256)) * 64)
    (tmp_path / "model.pt").write_bytes(b"PK\x03\x04" + b"\x00" * 100)
    (tmp_path / "config.json").write_text('{"lr": 0.1}')
    (tmp_path / "rank0.log").write_text("[rank0]: Signal 15 (SIGTERM) received by PID 7\n")
    jl = lookup_paths(ENGINE, [str(tmp_path)])
    assert sorted(p.rsplit("/", 1)[1] for p in jl.paths) == ["rank0.log", "stderr"]
    assert jl.job.root.rank == 1


def test_ranks_read_as_spans_and_a_long_list_is_counted():
    from kb.job.analyze import ranges

    assert ranges([9, 0, 1, 2, 3]) == "0-3, 9"
    assert ranges(list(range(0, 1024, 2))) == "0, 2, 4, 6, 8, 10, 12, 14 and 504 more (512 ranks)"
    assert ranges(list(range(0, 20, 2)), cap=None).count(",") == 9


def test_half_of_1024_ranks_straggling_reads_in_a_few_short_lines():
    """Every odd rank never reached the collective the even ranks timed out in: the verdict
    names them as spans, counted past a few (it was one 5,000-character line, and a row for
    each of 512 roots)."""
    lines = []
    for r in range(1024):
        if r % 2:
            lines.append(
                f"[rank{r}]:[I1123 09:50:30.000000000 ProcessGroupNCCL.cpp:900] [Rank {r}] ProcessGroupNCCL initialized"
            )
        else:
            lines.append(
                f"[rank{r}]:[E1123 10:00:30.000000000 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog "
                "caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, "
                "NumelIn=4, NumelOut=4, Timeout(ms)=600000) ran for 600013 milliseconds before "
                "timing out."
            )
    from kb.render.job import job_lines
    from kb.render.style import Style

    jl = lookup_text(ENGINE, "\n".join(lines) + "\n")
    assert jl.job is not None and jl.job.root is not None and jl.job.root.rank == 1
    assert "(512 ranks) did not reach collective #9" in jl.job.summary
    assert len(jl.job.summary) < 300
    head = job_lines(jl.job, Style(False))
    assert len(head) < 16, head
    assert "roots too: ranks 3, 5, 7, 9, 11, 13, 15, 17 and 503 more (511 ranks)" in head[0]
    assert any(r.lstrip().startswith("ranks 17, 19, 21, 23 and 500 more (504 ranks)") for r in head)
