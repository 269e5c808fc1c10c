#!/usr/bin/env python3
"""Dump the CUDA runtime and driver error-code tables by asking the libraries themselves.

Runs on a GPU machine (or any machine with libcudart and libcuda). Uses ctypes only, so it works
without torch or the CUDA toolkit headers. Output is the JSON that kb/data/cuda_codes.json is
built from:

    {"source": "...", "runtime": {"N": {"name", "text"}}, "driver": {"N": {"name", "text"}}}

Usage: python3 scripts/dump_cuda_codes.py [OUT.json]     (default: stdout)
"""

from __future__ import annotations

import ctypes
import glob
import json
import os
import sys

# The enums are sparse but all values sit below ~1100, plus cudaErrorApiFailureBase = 10000.
VALUES = list(range(1101)) + [10000]
CUDA_ERROR_UNKNOWN_RUNTIME = 999
UNRECOGNIZED = "unrecognized error code"


def _load_cudart() -> ctypes.CDLL:
    candidates = ["libcudart.so.13", "libcudart.so"]
    # The pip wheel (nvidia-cuda-runtime) keeps its copy inside site-packages; torch's wheels
    # depend on it, so on a torch machine it is usually there even without a system toolkit.
    for base in sys.path:
        for pattern in ("nvidia/cu13/lib/libcudart.so*", "nvidia/cuda_runtime/lib/libcudart.so*"):
            candidates += sorted(glob.glob(os.path.join(base, pattern)), reverse=True)
    errors = []
    for name in candidates:
        try:
            lib = ctypes.CDLL(name)
        except OSError as e:
            errors.append(f"{name}: {e}")
            continue
        lib._kb_path = name  # remembered for the "source" line
        return lib
    raise SystemExit("cannot load libcudart:\n  " + "\n  ".join(errors))


def _cstr(p) -> str:
    return p.decode("utf-8", "replace") if p else ""


def runtime_codes(rt: ctypes.CDLL) -> dict[str, dict[str, str]]:
    rt.cudaGetErrorName.restype = ctypes.c_char_p
    rt.cudaGetErrorName.argtypes = [ctypes.c_int]
    rt.cudaGetErrorString.restype = ctypes.c_char_p
    rt.cudaGetErrorString.argtypes = [ctypes.c_int]
    out = {}
    for v in VALUES:
        name = _cstr(rt.cudaGetErrorName(v))
        text = _cstr(rt.cudaGetErrorString(v))
        # cudart answers unknown values with cudaErrorUnknown / "unrecognized error code"
        # rather than failing, so those answers mean "no such code".
        if name == "cudaErrorUnknown" and v != CUDA_ERROR_UNKNOWN_RUNTIME:
            continue
        if not name or UNRECOGNIZED in text.lower():
            continue
        out[str(v)] = {"name": name, "text": text}
    return out


def driver_codes(cu: ctypes.CDLL) -> dict[str, dict[str, str]]:
    for fn in (cu.cuGetErrorName, cu.cuGetErrorString):
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
    out = {}
    for v in VALUES:
        name, text = ctypes.c_char_p(), ctypes.c_char_p()
        # The driver API returns CUDA_ERROR_INVALID_VALUE for values it does not know.
        if cu.cuGetErrorName(v, ctypes.byref(name)) != 0:
            continue
        if cu.cuGetErrorString(v, ctypes.byref(text)) != 0:
            continue
        out[str(v)] = {"name": _cstr(name.value), "text": _cstr(text.value)}
    return out


def _version(v: int) -> str:
    # CUDA encodes versions as 1000*major + 10*minor.
    return f"{v // 1000}.{(v % 1000) // 10}"


def _mapped_path(fragment: str) -> str | None:
    # The file actually mapped (e.g. libcudart.so.13.0.88) names the exact patch release,
    # which cudaRuntimeGetVersion (major.minor only) does not.
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                if fragment in line and "/" in line:
                    return line[line.index("/") :].strip()
    except OSError:
        pass
    return None


def _nvidia_driver_version() -> str | None:
    try:
        with open("/proc/driver/nvidia/version") as f:
            line = f.readline()
    except OSError:
        return None
    for tok in line.split():
        if tok.count(".") >= 1 and tok.replace(".", "").isdigit():
            return tok
    return None


def main(argv: list[str]) -> int:
    rt = _load_cudart()
    rt_ver = ctypes.c_int()
    rt.cudaRuntimeGetVersion(ctypes.byref(rt_ver))
    runtime = runtime_codes(rt)

    driver: dict[str, dict[str, str]] = {}
    drv_desc, gpu = "libcuda.so.1 not loaded", None
    try:
        cu = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        print(f"warning: {e}; driver table left empty", file=sys.stderr)
    else:
        # cuGetErrorName/String work before cuInit, so the table does not depend on a GPU.
        driver = driver_codes(cu)
        drv_ver = ctypes.c_int()
        cu.cuDriverGetVersion(ctypes.byref(drv_ver))
        drv_desc = f"driver API {_version(drv_ver.value)}"
        if kmd := _nvidia_driver_version():
            drv_desc += f", driver {kmd}"
        if cu.cuInit(0) == 0:
            dev, buf = ctypes.c_int(), ctypes.create_string_buffer(256)
            if (
                cu.cuDeviceGet(ctypes.byref(dev), 0) == 0
                and cu.cuDeviceGetName(buf, len(buf), dev) == 0
            ):
                gpu = _cstr(buf.value)

    rt_file = os.path.basename(_mapped_path("libcudart") or rt._kb_path)
    source = (
        f"cudaGetErrorName/cudaGetErrorString ({rt_file}, "
        f"CUDA runtime {_version(rt_ver.value)}) and cuGetErrorName/cuGetErrorString "
        f"({drv_desc}), read on {gpu or 'a machine without a usable GPU'}"
    )
    doc = {
        "source": source,
        "runtime": dict(sorted(runtime.items(), key=lambda kv: int(kv[0]))),
        "driver": dict(sorted(driver.items(), key=lambda kv: int(kv[0]))),
    }
    text = json.dumps(doc, indent=1, ensure_ascii=False) + "\n"
    if len(argv) > 1 and argv[1] != "-":
        with open(argv[1], "w", encoding="utf-8") as f:
            f.write(text)
        print(
            f"{source}\nruntime: {len(runtime)} codes, driver: {len(driver)} codes -> {argv[1]}",
            file=sys.stderr,
        )
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
