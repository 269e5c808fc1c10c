"""A rank that exits early: at step 2, rank 1 leaves the training loop (a bad `break` on its
own condition) and the process ends with status 0, while rank 0 goes on into the next
all_reduce. Rank 1 prints no error and its exit status is success: only the others' waiting and
the collectives show it."""

import torch
import torch.distributed as dist
from jobcommon import init, say
from torch.distributed.elastic.multiprocessing.errors import record


@record
def main() -> None:
    rank, dev = init()
    for step in range(6):
        if step == 2 and rank == 1:
            say(rank, f"step {step}: no more data on this rank, stopping")
            return  # no destroy_process_group: it just leaves
        x = torch.ones(4, device=dev)
        dist.all_reduce(x)
        if dev.type == "cuda":
            torch.cuda.synchronize()
        say(rank, f"step {step} done")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
