"""A device-side assert on one rank under NCCL, surfacing through the collective: rank 1 runs a
loss with a class label out of range and hands the result straight to all_reduce, with no
synchronising call between. The assert fires on the GPU while NCCL launches its kernel, so the
error rank 1 sees is NCCL's ("unhandled cuda error", "Last error: Cuda failure ...") or the
watchdog's, not the assert's own traceback (GPU only)."""

import torch
import torch.distributed as dist
import torch.nn.functional as F
from jobcommon import init, say
from torch.distributed.elastic.multiprocessing.errors import record


@record
def main() -> None:
    rank, dev = init()
    if dev.type != "cuda":
        raise SystemExit("nccl_assert.py needs GPUs and NCCL")
    logits = torch.randn(8, 5, device=dev)
    labels = torch.full((8,), 7 if rank == 1 else 1, device=dev)  # bug on rank 1: 7 of 5 classes
    loss = F.cross_entropy(logits, labels).reshape(1)
    dist.all_reduce(loss)  # no .item() before: the assert is still in flight
    torch.cuda.synchronize()
    say(rank, f"loss {loss.item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
