"""Two ranks failing in different process groups (4 ranks: tensor-parallel-style groups 0-1 and
2-3, and the world). Each step runs an all_reduce in the rank's group, then one over the world.
At step 2, rank 1 stalls before its group's all_reduce (rank 0 waits for it there), and rank 2,
having finished its group's all_reduce with rank 3, stalls before the world's (rank 3 waits for it
there). Both are roots; ranks 0 and 3 only waited."""

import time

import torch
import torch.distributed as dist
from jobcommon import TIMEOUT_S, init, say, subgroups, world_device
from torch.distributed.elastic.multiprocessing.errors import record


@record
def main() -> None:
    rank, dev = init()
    group, _ = subgroups(2)
    for step in range(5):
        x = torch.ones(4, device=dev)
        if step == 2 and rank == 1:
            say(rank, f"step {step}: loading the next batch...")
            time.sleep(4 * TIMEOUT_S + 30)  # never reaches its group's all_reduce in time
        dist.all_reduce(x, group=group)
        y = torch.ones(2, device=world_device(dev))
        if step == 2 and rank == 2:
            say(rank, f"step {step}: writing a checkpoint...")
            time.sleep(4 * TIMEOUT_S + 30)  # never reaches the world's all_reduce in time
        dist.all_reduce(y)
        if dev.type == "cuda":
            torch.cuda.synchronize()
        say(rank, f"step {step} done")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
