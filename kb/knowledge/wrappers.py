"""CUDA errors in any wrapper: the same error, printed by PyTorch, Triton, ROCm/HIP, CuPy,
JAX/XLA, TensorRT, TransformerEngine, NCCL, cuda-gdb, compute-sanitizer or a custom extension.

Each wrapper puts the CUDA error's text, name or number in its own frame. Reading the frame
tells which part is the error; the code table (kb/data/cuda_codes.json) then says which code it
is, and the entry that owns the code answers. The wrapper itself is kept as a fact.

A message text is only read inside a frame that says CUDA (or HIP): "invalid argument" alone is
every other OSError. A text cut off at the end of a line (an excerpt, a paste) still counts when
what is left names one code, as a partial sighting.
"""

from __future__ import annotations

import re
from functools import lru_cache

import kb.knowledge.cuda_codes as cuda_codes
from kb.model.record import record


@record(frozen=True)
class Sighting:
    api: str  # runtime | driver
    value: int
    name: str
    text: str
    wrapper: str
    partial: bool = False


# (wrapper, cheap substring that must be in the line (lowercased), frame). Frames capture `text`
# (the error's message text), `name` (cudaError*/CUDA_ERROR_*/hipError*) or `num` + `text`.
_FRAMES: tuple[tuple[str, str, str], ...] = (
    ("triton", "triton error [cuda]", r"triton error \[cuda\]:\s*(?P<text>[^\n]+)"),
    ("hip", "hip error", r"\bhip error:\s*(?P<text>[^\n]+)"),
    ("cuda-warning", "cuda warning", r"\bcuda warning:\s*(?P<text>[^\n(]+)"),
    ("extension", "cuda error (", r"\bcuda error \((?P<where>[^()\s]+:\d+)\):\s*(?P<text>[^\n]+)"),
    ("driver-number", "curesult", r"\bcuresult(?: error)?:?\s*(?P<num>\d+)\s*\((?P<text>[^)\n]+)"),
    ("tensorrt", "cuda runtime (", r"\bcuda runtime \((?P<text>[^)\n]+)\)"),
    ("nccl", "cuda failure", r"\bcuda failure (?:\d+ )?'(?P<text>[^'\n]+)'"),
    ("gpuassert", "gpuassert", r"\bgpuassert:\s*(?P<text>[^\n]+)"),
    ("kernel-failed", "cuda kernel failed", r"\bcuda kernel failed\s*:\s*(?P<text>[^\n]+)"),
    # A CUDA call "failed with error <text>" / a launch that "failed: <text>" (tiny-cuda-nn,
    # ComfyUI, many extensions).
    ("call-failed", "failed", r"\bfailed with error:?\s*(?P<text>[^\n]+)"),
    # A driver or runtime call named, then its error text: PyCUDA "cuInit failed: unknown error",
    # MXNet and C++ checks "cudaMalloc failed: out of memory".
    ("api-call-failed", "failed:", r"\b(?-i:cu(?:da)?[A-Z]\w*) failed:\s*(?P<text>[^\n]+)"),
    # numba: "CudaAPIError: [716] Call to cuMemcpyDtoH results in UNKNOWN_CUDA_ERROR" (the
    # bracket holds the driver's CUresult; its name is printed only when numba knows it).
    ("numba", "cudaapierror", r"\bcudaapierror:\s*\[(?P<num>\d+)\]"),
    ("launch-failed", "launch failed", r"\bcuda kernel launch failed:\s*(?P<text>[^\n]+)"),
    # PyTorch's own "CUDA error: text", any case, and the many "CUDA Error: text" /
    # "cuda runtime error: text" / "CUDA runtime error in <call>: text" of libraries and
    # extensions: the text follows one of the colons after the head (see _after_colons).
    ("cuda", "cuda", r"\bcuda(?: runtime| driver| rt)? (?:error|failure)\b(?P<rest>[^\n]*)"),
)
_COMPILED: list[tuple[str, str, re.Pattern]] = []

_NAME = re.compile(r"\b(cudaError[A-Z]\w+|CUDA_ERROR_[A-Z_]+|hipError[A-Z]\w+)\b")
# cuda-gdb: "CUDA Exception: Warp Illegal Address" / "CUDA_EXCEPTION_14, Warp Illegal Address".
_GDB = re.compile(r"CUDA_EXCEPTION_(?P<n>\d+)|CUDA Exception:\s*(?P<desc>[A-Za-z -]+)")
_GDB_CODES = {  # cuda-gdb exception -> the runtime error the program sees
    1: 700,
    2: 714,
    3: 714,
    4: 715,
    5: 700,
    6: 716,
    7: 717,
    8: 718,
    9: 714,
    10: 700,
    11: 700,
    12: 710,
    14: 700,
    15: 700,
    17: 700,
    18: 700,
}
_GDB_WORDS = (
    ("illegal instruction", 715),
    ("misaligned", 716),
    ("assert", 710),
    ("invalid pc", 718),
    ("address space", 717),
    ("stack overflow", 714),
    ("illegal address", 700),
    ("out-of-range", 700),
    ("out of range", 700),
)
# compute-sanitizer memcheck: "========= Invalid __global__ read of size 4 bytes".
_SANITIZER = re.compile(r"^=+\s+Invalid __(?:global|shared|local)__ (?:read|write|atomic)")
# HIP names that differ from the CUDA name of the same error.
_HIP_ALIASES = {
    "hipErrorOutOfMemory": "cudaErrorMemoryAllocation",
    "hipErrorNoBinaryForGpu": "cudaErrorNoKernelImageForDevice",
    "hipErrorNotInitialized": "cudaErrorInitializationError",
    "hipErrorInvalidDeviceFunction": "cudaErrorInvalidDeviceFunction",
    "hipErrorInvalidImage": "cudaErrorInvalidKernelImage",
    "hipErrorInvalidHandle": "cudaErrorInvalidResourceHandle",
}
CUT_MIN = 14  # characters of a cut-off text needed before it can name one code


def _frames() -> list[tuple[str, str, re.Pattern]]:
    if not _COMPILED:
        _COMPILED.extend((w, key, re.compile(rx, re.IGNORECASE)) for w, key, rx in _FRAMES)
    return _COMPILED


@lru_cache(maxsize=1)
def _texts() -> tuple[tuple[str, cuda_codes.CodeInfo], ...]:
    """(lowercased text, code) for modern runtime then driver codes, longest text first, so the
    longest known text that a frame's text starts with wins."""
    seen: dict[str, cuda_codes.CodeInfo] = {}
    for api in ("runtime", "driver"):
        for value in sorted(int(v) for v in cuda_codes.table()[api.replace("-", "_")]):
            info = cuda_codes.get(api, value)
            if info and info.value != 0 and info.text:
                seen.setdefault(info.text.casefold().rstrip("."), info)
    return tuple(sorted(seen.items(), key=lambda kv: -len(kv[0])))


def code_for_text(text: str) -> tuple[cuda_codes.CodeInfo, bool] | None:
    """(code, partial) for a frame's text: a known text it starts with, else (when the text was
    cut off) the one known text that starts with it."""
    t = text.strip().casefold()
    for known, info in _texts():
        if t.startswith(known) and (len(t) == len(known) or not t[len(known)].isalnum()):
            return info, False
    t = t.rstrip(" .")
    if len(t) >= CUT_MIN:
        # (A text that is itself a whole message returned above: "operation not permitted" is
        # code 800, not a cut-off "operation not permitted when stream is capturing".)
        cut = [info for known, info in _texts() if known.startswith(t) and len(known) > len(t)]
        if len(cut) == 1:
            return cut[0], True
    return None


def _by_name(name: str) -> cuda_codes.CodeInfo | None:
    if name.startswith("hipError"):
        name = _HIP_ALIASES.get(name, "cudaError" + name[len("hipError") :])
    return cuda_codes.by_name(name)


def sightings(line: str) -> list[Sighting]:
    """Every CUDA error this line states, with the wrapper that printed it."""
    low = line.lower()
    out: list[Sighting] = []
    if "cudaerror" in low or "cuda_error_" in low or "hiperror" in low:
        for name in _NAME.findall(line):
            info = _by_name(name)
            if info:
                wrapper = "hip" if name.startswith("hip") else "name"
                out.append(Sighting(info.api, info.value, info.name, info.text, wrapper))
        if out:
            return out
    if "cuda_exception" in low or "cuda exception" in low:
        m = _GDB.search(line)
        if m:
            value = _GDB_CODES.get(int(m.group("n"))) if m.group("n") else None
            desc = (m.group("desc") or line[m.end() :]).lower()
            if value is None or m.group("n") is None:
                value = next((v for w, v in _GDB_WORDS if w in desc), value)
            info = cuda_codes.get("runtime", value) if value is not None else None
            if info:
                return [Sighting("runtime", info.value, info.name, info.text, "cuda-gdb")]
    if "invalid __" in low and _SANITIZER.search(line):
        info = cuda_codes.get("runtime", 700)
        if info:
            return [Sighting("runtime", 700, info.name, info.text, "compute-sanitizer")]
    framed = any(k in low for k in ("cuda", "hip", "gpuassert", "failed", "curesult"))
    for wrapper, key, rx in _frames() if framed else ():
        if key not in low:
            continue
        m = rx.search(line)
        if not m:
            continue
        d = m.groupdict()
        if d.get("num"):
            info = cuda_codes.get("driver", int(d["num"]))
            if info:
                return [Sighting("driver", info.value, info.name, info.text, wrapper)]
        if d.get("rest") is not None:
            found = _after_colons(d["rest"])
        else:
            found = code_for_text(d.get("text") or "")
        if found:
            info, partial = found
            return [Sighting(info.api, info.value, info.name, info.text, wrapper, partial)]
    if not out:
        bare = _distinctive(low)
        if bare:
            out.append(Sighting(bare.api, bare.value, bare.name, bare.text, "bare"))
    return out


def _after_colons(rest: str) -> tuple[cuda_codes.CodeInfo, bool] | None:
    """The code whose text follows one of the colons in `rest` (at most the first few)."""
    pos = 0
    for _ in range(6):
        pos = rest.find(":", pos)
        if pos == -1:
            return None
        pos += 1
        found = code_for_text(rest[pos:])
        if found:
            return found
    return None


DISTINCTIVE_MIN = 24  # a message text this long means its code even with no CUDA frame around it


@lru_cache(maxsize=1)
def _distinctive_texts() -> tuple[tuple[str, cuda_codes.CodeInfo], ...]:
    return tuple((t, i) for t, i in _texts() if len(t) >= DISTINCTIVE_MIN and i.api == "runtime")


def _distinctive(low: str) -> cuda_codes.CodeInfo | None:
    """A long, unmistakable CUDA message text anywhere in the line ("an illegal memory access
    was encountered" quoted in prose, after another library's prefix...)."""
    for text, info in _distinctive_texts():
        if text in low:
            return info
    return None
