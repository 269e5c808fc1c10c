"""(d) The ranks call all_reduce with different shapes. Under TORCH_DISTRIBUTED_DEBUG=DETAIL each
collective is first checked across ranks, and the mismatch is reported instead of a hang or a
silent wrong result."""

import os

os.environ.setdefault("TORCH_DISTRIBUTED_DEBUG", "DETAIL")  # read when the group is created

import torch
import torch.distributed as dist
from jobcommon import init, say
from torch.distributed.elastic.multiprocessing.errors import record


@record
def main() -> None:
    rank, dev = init()
    x = torch.ones(10 if rank == 0 else 20, device=dev)  # bug: a rank-dependent shape
    dist.all_reduce(x)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    say(rank, f"all_reduce sum {x.sum().item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
