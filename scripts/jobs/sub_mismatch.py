"""Mismatched collectives in one sub-group (4 ranks: groups 0-1 and 2-3, and the world). At
step 2, rank 3 runs its group's all_reduce on a tensor of 8 elements where rank 2 uses 4 (a
rank-dependent shape); group 0-1 is fine. No TORCH_DISTRIBUTED_DEBUG: nothing checks the
shapes before the collective runs."""

import torch
import torch.distributed as dist
from jobcommon import init, say, subgroups, world_device
from torch.distributed.elastic.multiprocessing.errors import record


@record
def main() -> None:
    rank, dev = init()
    group, _ = subgroups(2)
    for step in range(5):
        n = 8 if (step == 2 and rank == 3) else 4  # bug: a rank-dependent shape
        x = torch.ones(n, device=dev)
        dist.all_reduce(x, group=group)
        y = torch.ones(2, device=world_device(dev))
        dist.all_reduce(y)
        if dev.type == "cuda":
            torch.cuda.synchronize()
        say(rank, f"step {step} done")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
