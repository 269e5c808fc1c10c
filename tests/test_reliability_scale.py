"""The candidate-line cap never skips the failure that started it (issue 36): a log of 5,000
ranks, each printing one NCCL warning, with one rank's CUDA error among them and every other
rank's watchdog timeout after, answers the CUDA error; a cap that drops lines says what kind of
lines it dropped."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest
from _repo import REPO

import kb.scan.extract as ex
from kb.diagnosis.engine import Engine

RANKS = 5000
ROOT_RANK = 2500
# NCCL's net_ib warning (transport/net_ib.cc) with ibverbs' event name, torch's CUDA error and
# ProcessGroupNCCL's watchdog line, as their sources print them.
WARN = (
    "[rank{r}]:gpu-{n:03d}:{pid}:{tid} [{d}] transport/net_ib.cc:253 NCCL WARN NET/IB : "
    "mlx5_1:1 Got non-fatal async event: GID table change\n"
)
ROOT = f"[rank{ROOT_RANK}]: RuntimeError: CUDA error: an illegal memory access was encountered\n"
WAITER = (
    "[rank{r}]:[E1126 05:36:00.447879959 ProcessGroupNCCL.cpp:689] [Rank {r}] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
    "Timeout(ms)=600000) ran for 600054 milliseconds before timing out.\n"
)


def _log(root_at: int = ROOT_RANK) -> bytes:
    out = []
    for r in range(RANKS):
        out.append(WARN.format(r=r, n=r // 8, pid=40000 + r, tid=41000 + r, d=r % 8))
        if r == root_at:
            out.append(ROOT)
    out += [WAITER.format(r=r) for r in range(RANKS) if r != ROOT_RANK]
    return "".join(out).encode()


@pytest.fixture(scope="module")
def engine():
    return Engine()


def _answer(data: bytes, engine: Engine):
    s = ex.scan(ex.iter_chunks(io.BytesIO(data)), triggers=engine.triggers)
    return s, engine.lookup_scan(s)


def test_the_cuda_error_among_5000_ranks_warnings_is_the_answer(engine):
    data = _log()
    assert 1 << 20 < len(data) < 3 << 20  # the 1.7 MB stream
    s, r = _answer(data, engine)
    assert ROOT.strip().split(": ", 1)[1] in [ln.text for ln in s.lines]
    assert r.matches and r.matches[0].id == "cuda-illegal-memory-access"


def test_the_same_through_kb_lookup(tmp_path):
    log = tmp_path / "job.log"
    log.write_bytes(_log())
    out = subprocess.run(
        [sys.executable, "-m", "kb", "lookup", "--json", str(log)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    doc = json.loads(out.stdout)
    assert doc["matches"][0]["id"] == "cuda-illegal-memory-access"
    assert doc["root"] is None or doc["root"].get("rank") in (None, ROOT_RANK)


def test_a_cap_that_drops_lines_says_what_kind(engine):
    s, r = _answer(_log(), engine)
    assert s.dropped  # there is a cap, and it dropped lines...
    said = " ".join(r.warnings)
    assert "candidate line(s)" in said
    assert "none of them reads as a failure" in said  # ...and says what kind it dropped
    assert "warning(s), other ranks' waits" in said
