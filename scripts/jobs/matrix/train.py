"""A small training loop that a fault is injected into, for kb's job-view fault matrix
(scripts/jobs/matrix/run.py starts it under `kb run -- torchrun`, one process per rank).

What a step runs depends on KB_MODE:
  world   all_reduce of 4 floats over the default group (the collective a fault targets), then a
          broadcast of 2 floats from rank 0 (gloo's broadcast is tree-shaped)
  sub     all_reduce of 4 floats in the rank's sub-group (tensor-parallel style: consecutive
          ranks, KB_SUB of them; the target), then an all_reduce of 2 floats over the world
  a2a     all_to_all_single of uneven splits over the world (every rank sends and receives
          other sizes: what expert parallelism does by design) and all_to_all of a list (uneven
          under NCCL; gloo takes one size only), then an all_reduce
  objects all_gather_object and gather_object of objects of different sizes, then an all_reduce
  ep      all_reduce in a tensor-parallel pair, uneven all_to_all_single and all_to_all in an
          expert-parallel group of 4 (four of them at 16 ranks), all_reduce over the world (the
          loss)

KB_FAULT (on the ranks of KB_FAULT_RANKS, at step KB_FAULT_STEP, just before the target
collective):
  hang        sleeps far past the collective timeout
  gil         a second thread runs one long C call that never releases the GIL
  sigkill     kills itself with SIGKILL
  sigsegv     reads address 0 (a real segmentation fault)
  sigterm     sends itself SIGTERM (nobody else did)
  sigstop     stops itself with SIGSTOP
  abort       os.abort()
  exception   an IndexError in the workload (indexing a batch past its end)
  thread_exc  the data-loading thread raises (a shard that is not there); the main thread waits
              for its batch forever
  wrong_op    runs a broadcast where its peers run the all_reduce
  size        runs the all_reduce with 8 floats where its peers use 4
  skip        skips the collective and goes on to the next
  cuda_assert a class label out of range in cross_entropy on the GPU (a device-side assert)
  illegal_memory  a Triton kernel stores far past its allocation (an illegal memory access)
  none        nothing (a healthy job, or a negative control's own behaviour)
  raise       a2a / objects controls: an exception after the uneven collectives of that step

Every rank writes its Flight Recorder buffer where ProcessGroupNCCL would
(TORCH_FR_DUMP_TEMP_FILE<global rank>) when it dies of an exception or is terminated, and at
exit too with KB_DUMP_AT_EXIT=1: gloo records the entries but never writes them itself. Under
NCCL (KB_JOB_BACKEND=nccl) the recorder writes its own dumps on a timeout as well.
"""

from __future__ import annotations

import atexit
import ctypes
import datetime
import os
import queue
import signal
import sys
import threading
import time

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record

MODE = os.environ.get("KB_MODE", "world")
FAULT = os.environ.get("KB_FAULT", "none")
FAULT_RANKS = {int(r) for r in os.environ.get("KB_FAULT_RANKS", "").split(",") if r.strip()}
FAULT_STEP = int(os.environ.get("KB_FAULT_STEP", "3"))
STEPS = int(os.environ.get("KB_STEPS", "6"))
SUB = int(os.environ.get("KB_SUB", "2"))
TIMEOUT_S = float(os.environ.get("KB_JOB_TIMEOUT", "3"))
# Joining waits for every rank to start (16 interpreters importing torch on two cores take a
# while); the collectives then run under TIMEOUT_S.
JOIN_TIMEOUT_S = float(os.environ.get("KB_JOIN_TIMEOUT", "300"))
BACKEND = os.environ.get("KB_JOB_BACKEND") or ("nccl" if torch.cuda.is_available() else "gloo")


def say(rank: int, msg: str) -> None:
    print(f"rank {rank}: {msg}", flush=True)


# ---------------------------------------------------------------- the Flight Recorder's dump
_PATH: list[str] = []  # where this rank's dump goes, known once it joined the group


def _dump_path() -> str | None:
    prefix = os.environ.get("TORCH_FR_DUMP_TEMP_FILE") or os.environ.get(
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"
    )
    return f"{prefix}{dist.get_rank()}" if prefix else None


def dump() -> None:
    path = _PATH[0] if _PATH else None
    if path is None or os.path.exists(path):
        return
    try:
        if BACKEND == "nccl":
            data = torch._C._distributed_c10d._dump_nccl_trace()
        else:
            data = torch._C._distributed_c10d._dump_fr_trace()
    except Exception as e:  # say so, go on dying as it would
        print(f"flight recorder dump failed: {e}", file=sys.stderr, flush=True)
        return
    tmp = path + ".tmp"
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)


def _dump_on_failure() -> None:
    path = _dump_path()
    if path is not None:
        _PATH.append(path)  # an exit after destroy_process_group can no longer ask the rank

    def on_term(signum, frame):
        dump()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)  # die of the signal, as the launcher expects

    signal.signal(signal.SIGTERM, on_term)
    previous = sys.excepthook

    def on_exception(*exc):
        dump()
        previous(*exc)

    sys.excepthook = on_exception
    if os.environ.get("KB_DUMP_AT_EXIT") == "1":
        atexit.register(dump)


# ---------------------------------------------------------------- groups
def init() -> tuple[int, int, torch.device]:
    if BACKEND == "nccl":
        dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(dev)
        dist.init_process_group(
            "nccl", timeout=datetime.timedelta(seconds=JOIN_TIMEOUT_S), device_id=dev
        )
    else:
        dev = torch.device("cpu")
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=JOIN_TIMEOUT_S))
    _dump_on_failure()
    # every rank is up: one collective under the long timeout, then the short one
    dist.barrier()
    dist.distributed_c10d._set_pg_timeout(datetime.timedelta(seconds=TIMEOUT_S))
    return dist.get_rank(), dist.get_world_size(), dev


def new_groups(blocks: list[list[int]], rank: int) -> tuple[dist.ProcessGroup, list[int]]:
    """Every rank creates every group (torch requires it); returns this rank's and its
    members."""
    mine, members = None, []
    for ranks in blocks:
        g = dist.new_group(ranks, timeout=datetime.timedelta(seconds=TIMEOUT_S))
        if rank in ranks:
            mine, members = g, ranks
    assert mine is not None
    return mine, members


def consecutive(world: int, size: int) -> list[list[int]]:
    return [list(range(s, min(s + size, world))) for s in range(0, world, size)]


# ---------------------------------------------------------------- faults
def _hold_gil() -> None:
    sum(range(10**13))  # hours of C code that never lets the GIL go


def _load_shard(q: queue.Queue, step: int) -> None:
    with open(f"/nonexistent/data/shard-{step:05d}.bin", "rb") as fh:  # raises FileNotFoundError
        q.put(fh.read())


def inject(rank: int, step: int, dev: torch.device) -> str:
    """The fault, where this rank is one of the faulty ones at this step: what to do at the
    target collective ('run', 'skip', 'wrong_op', 'size')."""
    if step != FAULT_STEP or rank not in FAULT_RANKS:
        return "run"
    say(rank, f"step {step}: fault {FAULT}")
    if FAULT == "hang":
        time.sleep(10 * TIMEOUT_S + 600)
    elif FAULT == "gil":
        threading.Thread(target=_hold_gil, name="stats", daemon=True).start()
        time.sleep(0.2)  # the other thread takes the GIL; this one never gets it back
    elif FAULT == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif FAULT == "sigsegv":
        ctypes.string_at(0)
    elif FAULT == "sigterm":
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
    elif FAULT == "sigstop":
        os.kill(os.getpid(), signal.SIGSTOP)
    elif FAULT == "abort":
        os.abort()
    elif FAULT == "exception":
        batch = torch.zeros(3, device=dev)
        batch[5]  # IndexError: index 5 is out of bounds for dimension 0 with size 3
    elif FAULT == "thread_exc":
        q: queue.Queue = queue.Queue()
        threading.Thread(target=_load_shard, args=(q, step), name="prefetch").start()
        q.get()  # the batch never comes
    elif FAULT == "cuda_assert":
        logits = torch.randn(8, 5, device=dev)
        labels = torch.full((8,), 7, device=dev)  # 7 is not a class of a 5-way head
        loss = torch.nn.functional.cross_entropy(logits, labels)
        say(rank, f"loss {loss.item()}")  # .item() synchronises: the assert surfaces here
    elif FAULT == "illegal_memory":
        _store_out_of_bounds(dev)
    elif FAULT in ("wrong_op", "size", "skip"):
        return FAULT
    return "run"


def _store_out_of_bounds(dev: torch.device) -> None:
    import triton
    import triton.language as tl

    @triton.jit
    def copy(src, dst, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(dst + offs + (1 << 40), tl.load(src + offs))  # no mask, far past the end

    x = torch.ones(1024, device=dev)
    y = torch.empty_like(x)
    copy[(1,)](x, y, BLOCK=1024)
    torch.cuda.synchronize()


def target(kind: str, x: torch.Tensor, group, src: int) -> None:
    """The collective a fault targets: an all_reduce of 4 floats in `group`."""
    if kind == "skip":
        return
    if kind == "wrong_op":
        dist.broadcast(x, src=src, group=group)
    elif kind == "size":
        dist.all_reduce(torch.ones(8, device=x.device), group=group)
    else:
        dist.all_reduce(x, group=group)


# ---------------------------------------------------------------- the uneven collectives
def uneven_splits(rank: int, world: int, step: int) -> tuple[list[int], list[int]]:
    """(what this rank sends to each, what it receives from each): rank r sends (r*j + step) % 4
    + 1 elements to rank j, so every rank's total differs."""
    send = [(rank * j + step) % 4 + 1 for j in range(world)]
    recv = [(j * rank + step) % 4 + 1 for j in range(world)]
    return send, recv


def all_to_all_uneven(rank: int, world: int, step: int, dev, group=None, members=None):
    members = members or list(range(world))
    me = members.index(rank)
    send, recv = uneven_splits(me, len(members), step)
    out = torch.empty(sum(recv), device=dev)
    dist.all_to_all_single(
        out, torch.full((sum(send),), float(rank), device=dev), recv, send, group=group
    )
    if BACKEND == "gloo":
        # gloo's list all_to_all takes tensors of one size only (ProcessGroupGloo::alltoall:
        # "invalid tensor size"): the same chunk to everyone, another size every step
        send = recv = [step % 3 + 1] * len(members)
    outs = [torch.empty(n, device=dev) for n in recv]
    ins = [torch.full((n,), float(rank), device=dev) for n in send]
    dist.all_to_all(outs, ins, group=group)
    return out


# ---------------------------------------------------------------- the loop
@record
def main() -> None:
    rank, world, dev = init()
    if MODE == "sub":
        group, members = new_groups(consecutive(world, SUB), rank)
    elif MODE == "ep":
        # tensor-parallel pairs (0-1, 2-3, ...), expert-parallel groups of 4 (0-3, 4-7, ...)
        tp, tp_members = new_groups(consecutive(world, 2), rank)
        ep, ep_members = new_groups(consecutive(world, min(4, world)), rank)
    for step in range(STEPS):
        x = torch.ones(4, device=dev)
        if MODE == "world":
            target(inject(rank, step, dev), x, None, 0)
            dist.broadcast(torch.ones(2, device=dev), src=0)
        elif MODE == "sub":
            target(inject(rank, step, dev), x, group, members[0])
            dist.all_reduce(torch.ones(2, device=dev))
        elif MODE == "a2a":
            all_to_all_uneven(rank, world, step, dev)
            if step == FAULT_STEP and rank in FAULT_RANKS and FAULT == "raise":
                raise RuntimeError(f"loss is nan at step {step}")
            dist.all_reduce(x)
        elif MODE == "objects":
            got: list = [None] * world
            dist.all_gather_object(got, {"rank": rank, "tokens": list(range(rank * 7 + step))})
            dist.gather_object(
                "x" * (rank * 13 + step + 1), [None] * world if rank == 0 else None, dst=0
            )
            dist.all_reduce(x)
        elif MODE == "ep":
            target(inject(rank, step, dev), x, tp, tp_members[0])
            all_to_all_uneven(rank, world, step, dev, ep, ep_members)
            dist.all_reduce(torch.ones(1, device=dev))
        if dev.type == "cuda":
            torch.cuda.synchronize()
        say(rank, f"step {step} done")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
