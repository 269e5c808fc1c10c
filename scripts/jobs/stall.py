"""(b) Rank 1 stalls (stuck in data loading, say) and never reaches the all_reduce; rank 0's
collective times out. Rank 0 prints the error, but rank 1 is the cause."""

import time

import torch
import torch.distributed as dist
from jobcommon import TIMEOUT_S, init, say
from torch.distributed.elastic.multiprocessing.errors import record


@record
def main() -> None:
    rank, dev = init()
    x = torch.ones(4, device=dev)
    if rank == 1:
        say(rank, "loading the next batch...")
        time.sleep(4 * TIMEOUT_S + 30)  # never reaches the collective before the timeout
    dist.all_reduce(x)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    say(rank, f"all_reduce {x.tolist()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
