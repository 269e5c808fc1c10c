"""What the machine offers repros (Environment), and the torch probe: torch is read from the
interpreter the repros run in, never imported by kb itself. kb.verify.probe_environment adds the
GPUs, read through NVML in this process."""

from __future__ import annotations

import json
import sys

from kb.model.record import record
from kb.verify.gpu import GpuInfo
from kb.verify.sandbox import run_program

PROBE_CODE = (
    "import json, torch; "
    'print(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda}))'
)


@record(frozen=True)
class Environment:
    """Where repros run: the GPUs (from NVML, in this process) and torch (from the child)."""

    python: str = sys.executable
    gpu: GpuInfo | None = None
    gpu_reason: str = ""  # why gpu is None
    torch: str = ""  # "" when the interpreter cannot import torch
    cuda: str = ""  # torch.version.cuda; "" for a CPU build
    torch_error: str = ""


def probe_torch(python: str = sys.executable, timeout: float = 120.0) -> tuple[str, str, str]:
    """(torch version, CUDA runtime, error) as the given interpreter sees them."""
    res = run_program(PROBE_CODE, {}, timeout, python)
    if res.error:
        return "", "", res.error
    if res.timed_out:
        return "", "", f"`import torch` took over {timeout:g}s"
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    if res.rc == 0 and lines:
        try:
            data = json.loads(lines[-1])
            return str(data.get("torch") or ""), str(data.get("cuda") or ""), ""
        except (ValueError, AttributeError):
            pass
    return "", "", (lines[-1] if lines else f"exit code {res.rc}")[:200]
