"""The collective each rank was in, read from ProcessGroupNCCL's watchdog lines: which sequence
number timed out (and its op), and how far each rank had got (last enqueued / completed work).

The wordings, from torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp across releases:
  WorkNCCL::checkTimeout            "[Rank 0] Watchdog caught collective operation timeout:
                                     WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=4, NumelOut=4,
                                     Timeout(ms)=20000) ran for 20012 milliseconds before timing out."
  Watchdog::runLoop (>= 2.5)        "[PG ID 0 PG GUID 0(default_pg) Rank 0]  failure detected by
                                     watchdog at work sequence id: 2 PG status: last enqueued work:
                                     2, last completed work: 1"
  watchdog (2.2 - 2.4)              "Exception (either an error or timeout) detected by watchdog at
                                     work: 2, last enqueued NCCL work: 2, last completed NCCL work: 1."
                                    "Timeout at NCCL work: 2, last enqueued NCCL work: 2, last
                                     completed NCCL work: 1."
  HeartbeatMonitor (>= 2.3)         "Received a dump signal due to a collective timeout from  rank 0
                                     and we will try our best to dump the debug info. Last enqueued
                                     NCCL work: 1, last completed NCCL work: 1."
  periodic INFO                     "NCCL Work update periodically: last enqueued NCCL work: 1, last
                                     completed NCCL work: 1."
  ProcessGroupGloo::monitoredBarrier "[Rank 0]: Ranks 1, 3 failed to pass monitoredBarrier in 10000 ms"
"""

from __future__ import annotations

import re

from kb.model.record import field, record

_TIMEOUT = re.compile(
    r"(?:Watchdog c|\bC)aught collective operation timeout: WorkNCCL\((?:SeqNum=(?P<seq>\d+), )?"
    r"OpType=(?P<op>\w+)(?:, NumelIn=(?P<numel_in>\d+), NumelOut=(?P<numel_out>\d+))?"
    r"|Work WorkNCCL\(SeqNum=(?P<bseq>\d+), OpType=(?P<bop>\w+).*timed out in blocking wait"
)
_STATUS = re.compile(
    r"(?:failure detected by watchdog at work sequence id: (?P<seq>-?\d+) PG status: "
    r"|detected by watchdog at work: (?P<seq2>-?\d+), |Timeout at NCCL work: (?P<seq3>-?\d+), "
    r"|Received a dump signal due to a collective timeout from\s+(?:rank (?P<from>-?\d+)|this local rank)"
    r".*?|NCCL Work update periodically: )"
    r"[Ll]ast enqueued (?:NCCL )?work: (?P<enq>-?\d+), last completed (?:NCCL )?work: (?P<done>-?\d+)"
)
_BARRIER = re.compile(r"Ranks? (?P<ranks>\d+(?:, ?\d+)*) failed to pass monitoredBarrier")
# distributed_c10d.py _store_based_barrier: "... (world_size=8, worker_count=7, timeout=0:30:00)"
# (num_workers_joined= in later torch)
_STORE_WORLD = re.compile(r"\(world_size=(\d+), (?:worker_count|num_workers_joined)=\d+")


@record
class RankProgress:
    """What one rank's lines say about its collectives."""

    timed_out_seq: int | None = None  # the SeqNum its watchdog timed out on
    op: str | None = None
    numel_in: int | None = None
    last_enqueued: int | None = None
    last_completed: int | None = None
    told_by: int | None = None  # the rank whose timeout it was told about (dump signal)
    barrier_missing: list[int] = field(default_factory=list)  # ranks its monitoredBarrier named
    # The store-based barrier at init_process_group: the world size it waits for, when this rank
    # said it was waiting there (or timed out there).
    store_world: int | None = None


def progress(texts) -> RankProgress:
    """Fold a rank's lines (in order) into its progress; later figures replace earlier ones."""
    p = RankProgress()
    for t in texts:
        if "ollective operation timeout" in t or "blocking wait" in t:
            m = _TIMEOUT.search(t)
            if m:
                seq = m.group("seq") or m.group("bseq")
                if seq is not None and p.timed_out_seq is None:
                    p.timed_out_seq = int(seq)
                    p.op = m.group("op") or m.group("bop")
                    if m.group("numel_in"):
                        p.numel_in = int(m.group("numel_in"))
        if "ast enqueued" in t:
            m = _STATUS.search(t)
            if m:
                p.last_enqueued, p.last_completed = int(m.group("enq")), int(m.group("done"))
                seq = m.group("seq") or m.group("seq2") or m.group("seq3")
                if seq is not None and p.timed_out_seq is None and int(seq) >= 0:
                    p.timed_out_seq = int(seq)
                if m.group("from") is not None:
                    p.told_by = int(m.group("from"))
        if "store based barrier" in t:
            m = _STORE_WORLD.search(t)
            if m:
                p.store_world = int(m.group(1))
        if "monitoredBarrier" in t:
            m = _BARRIER.search(t)
            if m:
                p.barrier_missing = [int(r) for r in re.split(r",\s*", m.group("ranks"))]
    return p


@record
class Desync:
    """The collective some ranks never reached, as far as the evidence shows it."""

    seq: int | None
    op: str | None
    missing: list[int]  # ranks that did not reach it
    waiting: list[int]  # ranks that were in it (and timed out)
    by: str  # watchdog | flight-recorder | monitored-barrier | store-barrier | no-timeout
    pg: str | None = None
    detail: str = ""

    def to_dict(self) -> dict:
        d = {
            "seq": self.seq,
            "op": self.op,
            "missing_ranks": self.missing,
            "waiting_ranks": self.waiting,
            "by": self.by,
        }
        if self.pg is not None:
            d["pg"] = self.pg
        if self.detail:
            d["detail"] = self.detail
        return d


def desync_from_progress(ranks: dict[int, RankProgress]) -> Desync | None:
    """Which ranks did not reach the collective the others timed out in. A rank whose last
    enqueued work is below the timed-out sequence number never issued it; with no figures from
    a rank at all, a monitoredBarrier report naming it is the evidence."""
    named = sorted({r for p in ranks.values() for r in p.barrier_missing})
    if named:
        waiting = sorted(r for r, p in ranks.items() if p.barrier_missing)
        return Desync(None, None, named, waiting, "monitored-barrier")
    # The store-based barrier at init: every rank that reached it says so with its rank; the
    # ranks of the world that never did are the ones the others wait for.
    worlds = {p.store_world for p in ranks.values() if p.store_world}
    if len(worlds) == 1:
        world = worlds.pop()
        joined = sorted(r for r, p in ranks.items() if p.store_world)
        absent = sorted(set(range(world)) - set(joined))
        if absent and len(joined) > len(absent):
            return Desync(None, "init_process_group", absent, joined, "store-barrier")
    # rank -> the sequence number it timed out in, for ranks whose own watchdog said so
    timed = {
        r: p.timed_out_seq
        for r, p in ranks.items()
        if p.timed_out_seq is not None and p.told_by is None
    }
    if not timed:
        return None
    seq = min(timed.values())
    op = next((ranks[r].op for r, s in timed.items() if s == seq and ranks[r].op), None)
    missing = sorted(
        r
        for r, p in ranks.items()
        if r not in timed and p.last_enqueued is not None and p.last_enqueued < seq
    )
    return Desync(seq, op, missing, sorted(timed), "watchdog")


def names_other_collective(line: str, seq: int | None) -> bool:
    """A watchdog line that names another collective than seq ("WorkNCCL(SeqNum=3" while the
    collective asked about is #4): a rank waiting in two groups at once timed out in the
    other one, about another root."""
    at = line.find("SeqNum=")
    if at < 0 or seq is None:
        return False
    digits = line[at + 7 : at + 17].split(",", 1)[0].split(")", 1)[0]
    return digits.isdigit() and int(digits) != seq
