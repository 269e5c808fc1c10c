"""Does this torch still refuse cuBLAS matmuls under deterministic mode without a fixed workspace?

    env -u CUBLAS_WORKSPACE_CONFIG python3 scripts/check_cublas_determinism.py

Checks the cuBLAS cause of the deterministic-algorithms-error entry on a CUDA machine: with
CUBLAS_WORKSPACE_CONFIG unset and torch.use_deterministic_algorithms(True), it runs nn.Linear
(forward and backward) and the plain matmuls, and prints for each whether it raised and what.
It also says whether the wording is still in torch's libraries. Exit code 0 whatever it finds;
2 when there is no CUDA device or the variable is set (the check would prove nothing).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

WORDING = b"this operation is not deterministic because it uses CuBLAS"


def main() -> int:
    if os.environ.get("CUBLAS_WORKSPACE_CONFIG") is not None:
        print("CUBLAS_WORKSPACE_CONFIG is set; run with it unset (env -u CUBLAS_WORKSPACE_CONFIG)")
        return 2
    import torch
    import torch.nn as nn

    if not torch.cuda.is_available():
        print("no CUDA device")
        return 2
    print(
        f"torch {torch.__version__}, CUDA {torch.version.cuda}, "
        f"{torch.cuda.get_device_name()}, CUBLAS_WORKSPACE_CONFIG unset"
    )
    torch.use_deterministic_algorithms(True)
    dev = "cuda"

    def linear(dtype):
        def run():
            layer = nn.Linear(256, 128).to(dev, dtype)
            x = torch.randn(32, 256, device=dev, dtype=dtype, requires_grad=True)
            layer(x).sum().backward()

        return run

    a = torch.randn(64, 64, device=dev)
    cases = {
        "nn.Linear float32 forward+backward": linear(torch.float32),
        "nn.Linear float16 forward+backward": linear(torch.float16),
        "nn.Linear bfloat16 forward+backward": linear(torch.bfloat16),
        "torch.mm float32": lambda: torch.mm(a, a),
        "torch.bmm float32": lambda: torch.bmm(
            a[None].expand(4, 64, 64), a[None].expand(4, 64, 64)
        ),
        "torch.addmm float32": lambda: torch.addmm(a, a, a),
    }
    raised = 0
    for name, fn in cases.items():
        try:
            fn()
            torch.cuda.synchronize()
            print(f"{name}: no error")
        except RuntimeError as e:  # the refusal is a RuntimeError; anything else is a real fault
            raised += 1
            print(f"{name}: raised RuntimeError: {str(e).splitlines()[0]}")
    lib = Path(torch.__file__).parent / "lib"
    holders = [p.name for p in sorted(lib.glob("lib*.so*")) if WORDING in p.read_bytes()]
    print(f"wording in torch's libraries: {', '.join(holders) or 'none'}")
    print(f"{raised} of {len(cases)} operations raised under deterministic mode")
    return 0


if __name__ == "__main__":
    sys.exit(main())
