"""A rank holding the GIL inside a collective loop: at step 3, rank 1 runs one long C call that
never releases the GIL (sum over a huge range: builtins.sum loops in C and checks for nothing).
Its Python thread adds no collective while rank 0 waits in the next all_reduce; it cannot run its
signal handlers either, so torchrun's SIGTERM goes unanswered until SIGKILL."""

import torch
import torch.distributed as dist
from jobcommon import init, say
from torch.distributed.elastic.multiprocessing.errors import record


@record
def main() -> None:
    rank, dev = init()
    for step in range(6):
        if step == 3 and rank == 1:
            say(rank, f"step {step}: computing statistics...")
            sum(range(10**13))  # hours of C code holding the GIL
        x = torch.ones(4, device=dev)
        dist.all_reduce(x)
        if dev.type == "cuda":
            torch.cuda.synchronize()
        say(rank, f"step {step} done")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
