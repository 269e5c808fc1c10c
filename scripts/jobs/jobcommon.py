"""Set-up shared by the failing jobs: backend and device per rank, a short collective timeout, and
flight-recorder dumps where the backend does not write them itself.

Each job is started by torchrun (one process per rank) and is meant to fail in under a minute.
The backend is NCCL on a GPU machine and gloo elsewhere (KB_JOB_BACKEND overrides it), so the
same programs give real multi-rank failures on a laptop too.
"""

from __future__ import annotations

import datetime
import os
import signal
import sys

import torch
import torch.distributed as dist

# Short enough that every job ends well inside a minute, long enough for a loaded CI machine to
# reach the first collective.
TIMEOUT_S = float(os.environ.get("KB_JOB_TIMEOUT", "20"))


def backend() -> str:
    return os.environ.get("KB_JOB_BACKEND") or ("nccl" if torch.cuda.is_available() else "gloo")


def shared_gpus() -> bool:
    """More ranks than GPUs (4 ranks on a 2-GPU host): the world group runs on gloo, and only
    sub-groups whose members each have a GPU of their own run on NCCL (a communicator refuses
    two ranks on one GPU)."""
    return (
        backend() == "nccl" and int(os.environ.get("WORLD_SIZE", "1")) > torch.cuda.device_count()
    )


def init() -> tuple[int, torch.device]:
    """Join the process group; returns (rank, device). NCCL communicators are created eagerly
    (device_id=) and warmed up with one collective on every rank: on torch 2.11 / NCCL 2.28 a
    rank missing from the very first collective left its peer blocked before the watchdog ever
    saw the work (see entries/nccl/nccl-timeout.yaml), and the jobs must end in a timeout."""
    timeout = datetime.timedelta(seconds=TIMEOUT_S)
    if backend() == "nccl" and shared_gpus():
        local = int(os.environ.get("LOCAL_RANK", "0"))
        dev = torch.device("cuda", local % torch.cuda.device_count())
        torch.cuda.set_device(dev)
        dist.init_process_group("gloo", timeout=timeout)
        _dump_on_failure()
        _dump_folder_per_rank()
        warm = torch.ones(1)
        dist.all_reduce(warm)
        return dist.get_rank(), dev
    if backend() == "nccl":
        dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(dev)
        dist.init_process_group("nccl", timeout=timeout, device_id=dev)
    else:
        dev = torch.device("cpu")
        dist.init_process_group("gloo", timeout=timeout)
        _dump_on_failure()
    warm = torch.ones(1, device=dev)
    dist.all_reduce(warm)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    return dist.get_rank(), dev


def world_device(dev: torch.device) -> torch.device:
    """Where tensors for the world group live: the CPU when it runs on gloo beside NCCL
    sub-groups."""
    return torch.device("cpu") if shared_gpus() else dev


def subgroups(size: int) -> tuple[dist.ProcessGroup, list[int]]:
    """Split the world into consecutive groups of `size` ranks (tensor-parallel style: ranks
    0-1, 2-3, ...); every rank creates every group, as torch requires. Returns this rank's group
    and its members."""
    world = dist.get_world_size()
    rank = dist.get_rank()
    mine = None
    members: list[int] = []
    timeout = datetime.timedelta(seconds=TIMEOUT_S)
    for start in range(0, world, size):
        ranks = list(range(start, min(start + size, world)))
        g = dist.new_group(ranks, timeout=timeout, backend=backend())
        if rank in ranks:
            mine, members = g, ranks
    assert mine is not None
    return mine, members


def _dump_folder_per_rank() -> None:
    """With a default group that is not NCCL, ProcessGroupNCCL names its dump by the rank of the
    first NCCL group the process created, not by the global rank: rank 0 of group 0-1 and rank 2
    (rank 0 of group 2-3) both write <prefix>0, and one overwrites the other. A folder per global
    rank keeps every dump; the name inside still carries the rank within the group, as torch
    writes it. The writer reads the prefix at its first dump, so setting it here is in time."""
    prefix = os.environ.get("TORCH_FR_DUMP_TEMP_FILE") or os.environ.get(
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"
    )
    if not prefix:
        return
    folder, base = os.path.split(prefix)
    mine = os.path.join(folder, f"rank{dist.get_rank()}")
    os.makedirs(mine, exist_ok=True)
    for var in ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"):
        os.environ[var] = os.path.join(mine, base)


def say(rank: int, msg: str) -> None:
    print(f"rank {rank}: {msg}", flush=True)


# ---------------------------------------------------------------- flight recorder under gloo
def _dump_on_failure() -> None:
    """ProcessGroupNCCL dumps its flight recorder on a timeout (TORCH_NCCL_DUMP_ON_TIMEOUT) from
    every rank; gloo records the same entries (TORCH_FR_BUFFER_SIZE) but never writes them. Here
    each rank writes its own dump where NCCL would (TORCH_FR_DUMP_TEMP_FILE or
    TORCH_NCCL_DEBUG_INFO_TEMP_FILE + global rank) when it is terminated or dies of an
    exception, so the CPU jobs leave the same evidence as the GPU ones."""
    prefix = os.environ.get("TORCH_FR_DUMP_TEMP_FILE") or os.environ.get(
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"
    )
    if not prefix:
        return
    path = f"{prefix}{dist.get_rank()}"

    def dump() -> None:
        if os.path.exists(path):
            return
        try:
            data = torch._C._distributed_c10d._dump_fr_trace()
        except Exception as e:  # an older torch without the generic recorder: say so, go on
            print(f"flight recorder dump failed: {e}", file=sys.stderr)
            return
        with open(path, "wb") as fh:
            fh.write(data)

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
