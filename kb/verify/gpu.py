"""What GPUs this machine has, through NVML. The only module that imports pynvml.

NVML rather than torch: `kb` itself never imports torch (it only runs inside repro
subprocesses), and NVML answers in milliseconds without creating a CUDA context. Every call is
safe on a machine with no GPU, no driver or no pynvml: it returns None or an empty value, and
`inspect()` says why.

NVML ignores CUDA_VISIBLE_DEVICES, so the devices are filtered here the way the CUDA runtime
would filter them (indices or GPU-/MIG- UUID prefixes), so that `kb verify` judges requirements
against the GPUs a repro will actually see.
"""

from __future__ import annotations

import os

from kb.model.record import record


@record(frozen=True)
class GpuDevice:
    index: int  # NVML index (the machine's numbering, before CUDA_VISIBLE_DEVICES)
    name: str
    memory_total_mib: int
    memory_free_mib: int
    compute_capability: str  # "9.0"; "" when NVML cannot tell
    uuid: str = ""


@record(frozen=True)
class GpuInfo:
    """The visible GPUs; the top-level fields describe the first one, which repros use by default."""

    name: str
    memory_total_mib: int
    memory_free_mib: int
    driver: str
    count: int
    compute_capability: str
    devices: tuple[GpuDevice, ...] = ()


def _text(v) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def _visible(devices: list[GpuDevice], spec: str | None) -> list[GpuDevice]:
    """Apply CUDA_VISIBLE_DEVICES as the CUDA runtime does: stop at the first invalid item."""
    if spec is None:
        return devices
    out: list[GpuDevice] = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            break
        if item.lstrip("-").isdigit():
            idx = int(item)
            found = next((d for d in devices if d.index == idx), None)
        else:
            found = next((d for d in devices if d.uuid and d.uuid.startswith(item)), None)
        if found is None or found in out:
            break
        out.append(found)
    return out


def inspect() -> tuple[GpuInfo | None, str]:
    """(the visible GPUs or None, why None). Never raises."""
    try:
        import pynvml
    except Exception:
        return None, "NVML unavailable (the nvidia-ml-py package is not installed)"
    try:
        pynvml.nvmlInit()
    except Exception as e:
        return None, f"no NVIDIA driver? (NVML: {_text(e) or type(e).__name__})"
    try:
        try:
            driver = _text(pynvml.nvmlSystemGetDriverVersion())
        except Exception:
            driver = ""
        devices: list[GpuDevice] = []
        for i in range(int(pynvml.nvmlDeviceGetCount())):
            try:
                h = pynvml.nvmlDeviceGetHandleByIndex(i)
                name = _text(pynvml.nvmlDeviceGetName(h))
                mem = pynvml.nvmlDeviceGetMemoryInfo(h)
                total, free = int(mem.total) >> 20, int(mem.free) >> 20
            except Exception:
                continue
            try:
                major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(h)
                cc = f"{int(major)}.{int(minor)}"
            except Exception:
                cc = ""
            try:
                uuid = _text(pynvml.nvmlDeviceGetUUID(h))
            except Exception:
                uuid = ""
            devices.append(GpuDevice(i, name, total, free, cc, uuid))
    except Exception as e:
        return None, f"NVML query failed: {_text(e) or type(e).__name__}"
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass
    spec = os.environ.get("CUDA_VISIBLE_DEVICES")
    visible = _visible(devices, spec)
    if not visible:
        if devices:
            return None, f"no GPU visible (CUDA_VISIBLE_DEVICES={spec!r})"
        return None, "NVML found no GPU"
    first = visible[0]
    return GpuInfo(
        first.name,
        first.memory_total_mib,
        first.memory_free_mib,
        driver,
        len(visible),
        first.compute_capability,
        tuple(visible),
    ), ""


def probe() -> GpuInfo | None:
    return inspect()[0]


def device_count() -> int:
    info = probe()
    return info.count if info else 0


def driver_version() -> str | None:
    info = probe()
    return info.driver if info else None
