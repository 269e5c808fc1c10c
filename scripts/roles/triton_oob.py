"""A Triton kernel that stores past the end of its output (no mask), far enough to fault."""

import torch
import triton
import triton.language as tl


@triton.jit
def fill(out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK) + (1 << 36)  # far past any allocation
    tl.store(out_ptr + offs, 1.0)


out = torch.empty(1024, device="cuda")
fill[(4,)](out, out.numel(), BLOCK=256)
torch.cuda.synchronize()
print("done")
