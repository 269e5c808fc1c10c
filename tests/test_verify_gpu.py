"""kb.gpu: NVML behind one module, safe with no library, no driver, no GPU; CUDA_VISIBLE_DEVICES."""

from __future__ import annotations

import sys
import types

import pytest

import kb.verify.gpu as gpu


class _Mem:
    def __init__(self, total_mib, free_mib):
        self.total, self.free, self.used = (
            total_mib << 20,
            free_mib << 20,
            (total_mib - free_mib) << 20,
        )


class NVMLError(Exception):
    pass


def fake_pynvml(devices, driver=b"580.159.04", init_error=None, broken=()):
    """A stand-in for pynvml: devices are (name, total MiB, free MiB, (major, minor), uuid)."""
    m = types.ModuleType("pynvml")
    m.NVMLError = NVMLError
    m.calls = []

    def init():
        m.calls.append("init")
        if init_error:
            raise NVMLError(init_error)

    def handle(i):
        if i in broken:
            raise NVMLError("Unknown Error")
        return i

    m.nvmlInit = init
    m.nvmlShutdown = lambda: m.calls.append("shutdown")
    m.nvmlSystemGetDriverVersion = lambda: driver
    m.nvmlDeviceGetCount = lambda: len(devices)
    m.nvmlDeviceGetHandleByIndex = handle
    m.nvmlDeviceGetName = lambda h: devices[h][0]
    m.nvmlDeviceGetMemoryInfo = lambda h: _Mem(devices[h][1], devices[h][2])
    m.nvmlDeviceGetCudaComputeCapability = lambda h: devices[h][3]
    m.nvmlDeviceGetUUID = lambda h: devices[h][4]
    return m


TWO = [
    (b"NVIDIA H100 80GB HBM3", 81559, 80000, (9, 0), "GPU-aaaa-1111"),
    ("NVIDIA A100-SXM4-40GB", 40960, 1000, (8, 0), "GPU-bbbb-2222"),
]


@pytest.fixture(autouse=True)
def _no_cvd(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def test_no_pynvml(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    info, why = gpu.inspect()
    assert info is None and "nvidia-ml-py" in why
    assert gpu.probe() is None and gpu.device_count() == 0 and gpu.driver_version() is None


def test_no_driver(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(TWO, init_error="Driver Not Loaded"))
    info, why = gpu.inspect()
    assert info is None and "Driver Not Loaded" in why


def test_no_devices(monkeypatch):
    fake = fake_pynvml([])
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    assert gpu.inspect() == (None, "NVML found no GPU")
    assert fake.calls == ["init", "shutdown"]


def test_reads_every_field(monkeypatch):
    fake = fake_pynvml(TWO)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    info, why = gpu.inspect()
    assert why == ""
    assert (
        info.name,
        info.memory_total_mib,
        info.memory_free_mib,
        info.driver,
        info.count,
        info.compute_capability,
    ) == ("NVIDIA H100 80GB HBM3", 81559, 80000, "580.159.04", 2, "9.0")
    assert [d.name for d in info.devices] == ["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB"]
    assert info.devices[1].compute_capability == "8.0" and info.devices[1].memory_free_mib == 1000
    assert fake.calls == ["init", "shutdown"]  # always shut down


def test_a_broken_device_is_left_out(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(TWO, broken=(0,)))
    info, _ = gpu.inspect()
    assert info.count == 1 and info.name == "NVIDIA A100-SXM4-40GB"


@pytest.mark.parametrize(
    "cvd,names",
    [
        ("1", ["NVIDIA A100-SXM4-40GB"]),
        ("1,0", ["NVIDIA A100-SXM4-40GB", "NVIDIA H100 80GB HBM3"]),
        ("GPU-aaaa", ["NVIDIA H100 80GB HBM3"]),
        ("0,7,1", ["NVIDIA H100 80GB HBM3"]),  # the runtime stops at the first invalid device
    ],
)
def test_cuda_visible_devices(monkeypatch, cvd, names):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(TWO))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", cvd)
    info, _ = gpu.inspect()
    assert [d.name for d in info.devices] == names and info.count == len(names)


@pytest.mark.parametrize("cvd", ["", "-1", "7"])
def test_no_visible_device(monkeypatch, cvd):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(TWO))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", cvd)
    info, why = gpu.inspect()
    assert info is None and "CUDA_VISIBLE_DEVICES" in why


def test_real_pynvml_never_raises():
    info, why = gpu.inspect()  # whatever this machine has
    assert (info is None) == bool(why)
