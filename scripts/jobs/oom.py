"""(c) Rank 1 runs out of GPU memory (it allocates in 2 GiB blocks until the allocator refuses,
a bounded number of times); rank 0 waits in a collective and is terminated by torchrun."""

import torch
import torch.distributed as dist
from jobcommon import init, say
from torch.distributed.elastic.multiprocessing.errors import record

BLOCK = 2 << 30


@record
def main() -> None:
    rank, dev = init()
    if rank == 1:
        if dev.type != "cuda":
            raise SystemExit("oom.py needs a GPU (there is no bounded host OOM to provoke)")
        total = torch.cuda.get_device_properties(dev).total_memory
        held = []
        for _ in range(total // BLOCK + 2):  # more than the GPU has, then stop
            held.append(torch.empty(BLOCK, dtype=torch.uint8, device=dev))
        say(rank, f"held {len(held)} blocks without running out?")
    x = torch.ones(4, device=dev)
    dist.all_reduce(x)
    say(rank, f"all_reduce {x.tolist()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
