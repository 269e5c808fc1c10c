"""(a) Rank 1 hits a device-side assert (a class label out of range); rank 0 waits in a
collective and is terminated by torchrun. The root cause is rank 1's assertion."""

import torch
import torch.distributed as dist
import torch.nn.functional as F
from jobcommon import init, say
from torch.distributed.elastic.multiprocessing.errors import record


@record
def main() -> None:
    rank, dev = init()
    if rank == 1:
        logits = torch.randn(8, 5, device=dev)
        labels = torch.full((8,), 7, device=dev)  # bug: 7 is not a class of a 5-way head
        loss = F.cross_entropy(logits, labels)
        say(rank, f"loss {loss.item()}")  # .item() synchronises: the assert surfaces here
    x = torch.ones(4, device=dev)
    dist.all_reduce(x)
    say(rank, f"all_reduce {x.tolist()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
