"""(e) Rank 1 is killed by a signal (SIGKILL, as the kernel's OOM killer would do) in the middle
of training; rank 0 is left in a collective. Nothing in Python runs on rank 1: the only trace is
its exit status."""

import os
import signal

import torch
import torch.distributed as dist
from jobcommon import init, say
from torch.distributed.elastic.multiprocessing.errors import record


@record
def main() -> None:
    rank, dev = init()
    if rank == 1:
        say(rank, "step 1")
        os.kill(os.getpid(), signal.SIGKILL)
    x = torch.ones(4, device=dev)
    dist.all_reduce(x)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    say(rank, f"all_reduce {x.tolist()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
