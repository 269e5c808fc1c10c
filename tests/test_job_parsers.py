"""The parts of the job view: launcher prefixes and times, consequence classes, torchrun's summary,
the watchdog's figures, and the scanner keeping each rank's lines apart."""

import pytest
from _repo import REPO

import kb.job.consequences as consequences
import kb.job.parsers.torchrun as torchrun_summary
import kb.job.parsers.watchdog as watchdog
from kb.scan.extract import peel, scan_text
from kb.scan.prefixes import host_of, rank_in_text, rank_of, time_of

FIX = REPO / "tests" / "fixtures" / "jobs"


@pytest.mark.parametrize(
    "line,rank,text",
    [
        ("[rank3]: RuntimeError: x", 3, "RuntimeError: x"),
        (
            "[rank0]:[E1123 10:00:30.1 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog",
            0,
            "[E1123 10:00:30.1 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog",
        ),
        ("[default1]:[rank1]: RuntimeError: x", 1, "RuntimeError: x"),
        ("12: RuntimeError: x", 12, "RuntimeError: x"),
        ("rank5: RuntimeError: x", 5, "RuntimeError: x"),
        ("[1,7]<stderr>: RuntimeError: x", 7, "RuntimeError: x"),
        ("2026-11-23T10:00:02Z [rank1]: RuntimeError: x", 1, "RuntimeError: x"),
        ("2026-11-23 10:00:02,123 RuntimeError: x", None, "RuntimeError: x"),
        ("RuntimeError: x", None, "RuntimeError: x"),
    ],
)
def test_prefix_and_rank(line, rank, text):
    prefix, got = peel(line)
    assert got == text and rank_of(prefix) == rank


def test_rank_in_processgroupnccl_text():
    assert rank_in_text("[PG ID 0 PG GUID 0(default_pg) Rank 3]  failure detected by watchdog") == 3
    assert rank_in_text("[Rank 12] Watchdog caught collective operation timeout") == 12
    assert rank_in_text("RuntimeError: rank mismatch") is None


@pytest.mark.parametrize(
    "text,host",
    [
        ("node-7: RuntimeError: x", "node-7"),
        ("gpu12.cluster: Traceback", "gpu12.cluster"),
        ("RuntimeError: x", None),
        ("libcudart.so.12: cannot open shared object file", None),
        ("step1: loss 0.3", None),
        ("node: no digit", None),
    ],
)
def test_host_prefix(text, host):
    got = host_of(text)
    assert (got[0] if got else None) == host


def test_times():
    iso = time_of("2026-11-23T10:00:02.5Z ", "x")
    assert iso[1] == "iso" and iso[0] % 60 == pytest.approx(2.5)
    g1 = time_of("", "[E1123 10:00:30.100000000 ProcessGroupNCCL.cpp:632] x")
    g2 = time_of("", "[E1123 10:00:31.2 ProcessGroupNCCL.cpp:632] x")
    assert g1[1] == g2[1] == "glog" and g2[0] - g1[0] == pytest.approx(1.1)
    assert (
        time_of(
            "",
            "W1123 03:01:55.995000 4238 torch/distributed/elastic/multiprocessing/api.py:1028] x",
        )[1]
        == "glog"
    )
    assert time_of("", "RuntimeError: x") is None


def test_the_same_line_from_two_ranks_is_kept_twice():
    s = scan_text(
        "[rank0]: RuntimeError: CUDA error: x\n[rank1]: RuntimeError: CUDA error: x\n"
        "[rank1]: RuntimeError: CUDA error: x\n"
    )
    assert [(ln.rank, ln.count) for ln in s.lines] == [(0, 1), (1, 2)]
    s = scan_text("RuntimeError: CUDA error: x\nRuntimeError: CUDA error: x\n")
    assert [(ln.rank, ln.count) for ln in s.lines] == [(None, 2)]


@pytest.mark.parametrize(
    "text,cls",
    [
        (
            "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2, OpType=ALLREDUCE)",
            "timeout",
        ),
        (
            "RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 20000ms for recv operation to complete",
            "timeout",
        ),
        (
            "[Rank 0] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels",
            "teardown",
        ),
        ("RuntimeError: NCCL communicator was aborted on rank 1.", "abort"),
        (
            "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:21892",
            "peer-gone",
        ),
        ("Signal 15 (SIGTERM) received by PID 4361", "sigterm"),
        (
            "[PG ID 0 PG GUID 0(default_pg) Rank 1] Received a dump signal due to a collective timeout from  rank 0 and",
            "told",
        ),
        ("RuntimeError: CUDA error: an illegal memory access was encountered", None),
        ("Signal 9 (SIGKILL) received by PID 4367", None),
    ],
)
def test_consequence_classes(text, cls):
    assert consequences.classify(text) == cls


def test_torchrun_summary_of_a_real_job():
    s = scan_text((FIX / "cpu-stall" / "run" / "output.log").read_bytes())
    block = next(ln.block for ln in s.lines if ln.block)
    summ = torchrun_summary.parse(block)
    by = summ.by_rank()
    assert set(by) == {0, 1} and summ.root.rank == 0
    assert (by[1].exitcode, by[1].signal, by[1].error_file) == (-15, "SIGTERM", None)
    assert by[0].exitcode == 1 and by[0].error_file.endswith("attempt_0/0/error.json")
    assert (
        by[0].traceback.startswith("Traceback")
        and "Timed out waiting" in by[0].traceback.splitlines()[-1]
    )
    assert by[0].time == "2026-11-23_" + by[0].time.split("_")[1]


def test_torchrun_summary_with_srun_labels():
    block = "\n".join(
        "3: " + ln
        for ln in (
            "=" * 60,
            "train.py FAILED",
            "-" * 60,
            "Failures:",
            "  <NO_OTHER_FAILURES>",
            "-" * 60,
            "Root Cause (first observed failure):",
            "[0]:",
            "  time      : 2026-11-23_10:00:04",
            "  host      : n3",
            "  rank      : 13 (local_rank: 1)",
            "  exitcode  : -11 (pid: 77)  (SIGSEGV)",
            "  error_file: <N/A>",
            "  traceback : Signal 11 (SIGSEGV) received by PID 77",
            "=" * 60,
        )
    )
    f = torchrun_summary.parse(block).failures
    assert [(x.rank, x.local_rank, x.signal, x.root) for x in f] == [(13, 1, "SIGSEGV", True)]


def test_watchdog_progress():
    p = watchdog.progress(
        [
            "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=BROADCAST, NumelIn=80, "
            "NumelOut=80, Timeout(ms)=600000) ran for 600027 milliseconds before timing out.",
            "[PG ID 0 PG GUID 0(default_pg) Rank 0]  failure detected by watchdog at work sequence id: 5 PG status: "
            "last enqueued work: 6, last completed work: 4",
        ]
    )
    assert (p.timed_out_seq, p.op, p.numel_in, p.last_enqueued, p.last_completed) == (
        5,
        "BROADCAST",
        80,
        6,
        4,
    )
    q = watchdog.progress(
        [
            "[PG ID 0 PG GUID 0(default_pg) Rank 1] Received a dump signal due to a collective "
            "timeout from  rank 0 and we will try our best to dump the debug info. Last enqueued "
            "NCCL work: 4, last completed NCCL work: 4.This is most likely caused by"
        ]
    )
    assert (q.told_by, q.last_enqueued, q.timed_out_seq) == (0, 4, None)
    d = watchdog.desync_from_progress({0: p, 1: q})
    assert (d.seq, d.op, d.missing, d.waiting) == (5, "BROADCAST", [1], [0])
