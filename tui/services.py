"""The TUI's one door into kb's verification and GPU modules.

Every use of kb.verify and kb.gpu goes through here, so an install without them degrades to
"cannot run repros here" / "GPU state unknown" instead of a crash, and the widgets only ever see
GpuState, plain data. Nothing here imports Textual.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any


@dataclass(frozen=True)
class GpuState:
    """What the status line shows. `available` False means "no NVIDIA GPU", with why in detail."""

    available: bool
    name: str = ""
    memory_used_mib: int | None = None
    memory_total_mib: int | None = None
    driver: str = ""
    count: int = 0
    detail: str = ""


def _module(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def verifier() -> ModuleType | None:
    """kb.verify, or None when this install has no verification."""
    mod = _module("kb.verify")
    return mod if mod is not None and hasattr(mod, "verify_entry") else None


def gpu_state_from(info: Any, reason: str = "") -> GpuState:
    """A kb.gpu.GpuInfo (or None and why), a kb.verify.Environment, or a GpuState -> GpuState."""
    if isinstance(info, GpuState):
        return info
    if info is not None and hasattr(info, "gpu_reason"):  # an Environment
        return gpu_state_from(info.gpu, info.gpu_reason)
    if info is None:
        return GpuState(False, detail=reason or "no NVIDIA GPU")
    total = getattr(info, "memory_total_mib", None)
    free = getattr(info, "memory_free_mib", None)
    used = total - free if total is not None and free is not None else None
    return GpuState(True, str(info.name), used, total, str(getattr(info, "driver", "") or ""),
                    int(getattr(info, "count", 1) or 1))


def read_gpu_state() -> GpuState:
    """Ask NVML (through kb.gpu) now. Never raises: no GPU, no driver, no kb.gpu all give a state."""
    mod = _module("kb.gpu")
    if mod is None or not hasattr(mod, "inspect"):
        return GpuState(False, detail="GPU state unknown: this kb has no kb.gpu")
    try:
        info, reason = mod.inspect()
    except Exception as e:  # kb.gpu promises not to raise; the status line must not die if it does
        return GpuState(False, detail=f"NVML query failed: {e}")
    return gpu_state_from(info, reason)
