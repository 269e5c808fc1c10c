"""Error lines -> structured facts: CUDA codes (with their numbering era), OOM figures, exception
type, file:line, kernel assertion, GPU index, rank, torch version hints."""

from __future__ import annotations

import re
from collections.abc import Iterable

from kb.knowledge.wrappers import sightings
from kb.model.record import asdict, field, record
from kb.scan.extract import Line

TYPE_CHECKING = False  # typing stays unimported at run time (kb lookup's cold start)
if TYPE_CHECKING:
    from typing import Any

_UNITS = {
    "b": 1,
    "bytes": 1,
    "kib": 1 << 10,
    "mib": 1 << 20,
    "gib": 1 << 30,
    "tib": 1 << 40,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
}
_SIZE = r"(\d+(?:\.\d+)?)\s*([KMGT]i?B|bytes|B)"


def to_bytes(num: str, unit: str) -> int:
    return int(float(num) * _UNITS[unit.lower()])


@record
class CudaCode:
    value: int
    api: str  # runtime | runtime-legacy | driver | unknown: how the log numbered it, when it tells
    name: str = ""
    text: str = ""
    line_number: int = 0
    interpretations: list[dict[str, Any]] = field(default_factory=list)  # every era it could be
    wrapper: str = ""  # what printed it: torch, triton, hip, nccl, cuda-gdb, extension...
    partial: bool = False  # the text was cut off, and what is left names this code alone
    line: str = ""  # the line that stated it


@record
class OomFigures:
    requested: int | None = None
    total: int | None = None
    free: int | None = None
    allocated: int | None = None  # by PyTorch's caching allocator, in live tensors
    reserved: int | None = None  # by PyTorch's caching allocator, in total (cached included)
    process_in_use: int | None = None  # this process, including non-PyTorch memory (2.x wording)
    reserved_unallocated: int | None = None  # 2.x states it directly
    other_processes: list[dict[str, Any]] = field(default_factory=list)
    gpu: int | None = None
    format: str = ""  # legacy | 1.x | 1.x-cached | 2.x | plain
    line_number: int = 0


@record
class Facts:
    cuda_codes: list[CudaCode] = field(default_factory=list)
    oom: OomFigures | None = None
    exception: str | None = None
    location: str | None = None  # file:line as printed (e.g. THCBlas.cu:450)
    assertion: str | None = None  # a kernel's Assertion `...` failed text
    gpu: int | None = None
    rank: int | None = None
    torch_version: str | None = None
    legacy_hints: list[str] = field(
        default_factory=list
    )  # why the log looks pre-1.x / pre-CUDA-10.1

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        return {k: v for k, v in d.items() if v not in (None, [], {})}


# ---------------------------------------------------------------- patterns
class _Lazy:
    """A regex compiled on first use. A cold `kb lookup` touches only the few patterns its input
    needs (every line is first tested for a cheap substring), so compiling all ~25 patterns at
    import, ~15 ms, would be wasted."""

    __slots__ = ("args", "rx")

    def __init__(self, pattern: str, flags: int = 0):
        self.args, self.rx = (pattern, flags), None

    def __getattr__(self, name):
        if self.rx is None:
            self.rx = re.compile(*self.args)
        return getattr(self.rx, name)


_LEGACY_RT = _Lazy(
    r"cuda runtime error \((?P<code>\d+)\)\s*:\s*(?P<text>.+?)(?: at (?P<loc>\S+:\d+))?\s*$"
)
# glog CHECK macros (Caffe, many C++ extensions): "Check failed: error == cudaSuccess (77 vs. 0)  text"
_CHECK_EQ = _Lazy(r"cudaSuccess \((?P<code>\d+) vs\. 0\)\s*(?P<text>[^\n]*?)\s*$")
_THC_CHECK = _Lazy(
    # The text may be missing: logs cut after "error=N :", or the text wrapped onto the next line.
    r"THCudaCheck FAIL file=(?P<file>\S+) line=(?P<line>\d+) error=(?P<code>\d+)(?:\s*:\s*(?P<text>.*?))?\s*$"
)
_CUDA_NUM = _Lazy(r"\bcuda(?: runtime| driver)? error(?: code)?\s*[:=(#]?\s*(?P<code>\d+)\b", re.I)
_BARE_CODE = _Lazy(
    r"^\s*(?:cuda\s*)?(?:error|err|code|cudaError)?\s*[:=#(]?\s*(?P<code>\d{1,5})\)?\s*$", re.I
)
_EXC = _Lazy(r"^(?:[\w.]+\.)?(?P<exc>[A-Z]\w*(?:Error|Exception|Warning))\b(?::|$)")
_EXC_Q = _Lazy(r"\b(?P<exc>torch\.(?:\w+\.)*[A-Z]\w*Error|[A-Z]\w*Error)\s*:")
_LOC = _Lazy(r"(?P<loc>[\w./-]+\.(?:cu|cpp|cuh|h|c|py)):(?P<line>\d+)")
_ASSERT = _Lazy(r"Assertion [`'](?P<a>.+?)[`'] failed")
_GPU = _Lazy(r"\bGPU (?P<gpu>\d+)\b|cuda:(?P<dev>\d+)")
_RANK = _Lazy(r"\[(?:Rank|rank) ?(?P<rank>\d+)\]|\brank (?P<rank2>\d+)\b")
_TORCH_VER = _Lazy(r"\b(?:torch|pytorch|PyTorch)[ =/-]?v?(?P<v>\d+\.\d+(?:\.\d+)?(?:\+\w+)?)")

# OOM, every wording PyTorch has used.
_OOM_TRIED = _Lazy(r"Tried to allocate " + _SIZE)
_OOM_1X = _Lazy(
    r"\(GPU (?P<gpu>\d+); " + r"(?P<t>\d+(?:\.\d+)?) (?P<tu>[KMGT]i?B) total capacity; "
    r"(?P<a>\d+(?:\.\d+)?) (?P<au>[KMGT]i?B) already allocated; "
    r"(?P<f>\d+(?:\.\d+)?) (?P<fu>[KMGT]i?B|bytes) free; "
    r"(?:(?P<r>\d+(?:\.\d+)?) (?P<ru>[KMGT]i?B) reserved in total by PyTorch|"
    r"(?P<c>\d+(?:\.\d+)?) (?P<cu>[KMGT]i?B|bytes) cached)"
)
_OOM_2X_TOTAL = _Lazy(
    r"GPU (?P<gpu>\d+) has a total capacit(?:y|ies) of "
    + _SIZE
    + r" of which "
    + _SIZE
    + r" is free"
)
_OOM_2X_PROC = _Lazy(r"this process has " + _SIZE + r" memory in use")
_OOM_2X_ALLOC = _Lazy(r"Of the allocated memory " + _SIZE + r" is allocated by PyTorch")
_OOM_2X_RESUNALLOC = _Lazy(_SIZE + r" is reserved by PyTorch but unallocated")
_OOM_OTHER = _Lazy(r"Process (?P<pid>\d+) has " + _SIZE + r" memory in use")
_OOM_LEGACY = _Lazy(r"cuda runtime error \(2\) : out of memory")


def _codes_module():
    import kb.knowledge.cuda_codes as cuda_codes

    return cuda_codes


def _interpretations(value: int, text: str | None) -> list[dict[str, Any]]:
    """Every era's reading of `value`; when the log printed the text too, only readings whose text
    agrees."""
    cc = _codes_module()
    out = []
    for info in cc.by_value(value):
        agrees = text is None or info.text.lower() == text.strip().rstrip(".").lower()
        if agrees:
            out.append({"api": info.api, "value": info.value, "name": info.name, "text": info.text})
    return out


def extract_facts(lines: Iterable[Line]) -> Facts:
    f = Facts()
    seen_codes: set[tuple[int, str]] = set()
    lines = list(lines)

    def add_code(
        value: int,
        api: str,
        name: str,
        text: str,
        ln: Line,
        interp=None,
        wrapper: str = "",
        partial: bool = False,
    ) -> None:
        key = (value, api)
        if key in seen_codes:
            return
        seen_codes.add(key)
        f.cuda_codes.append(
            CudaCode(value, api, name, text, ln.number, interp or [], wrapper, partial, ln.text)
        )

    single = len(lines) == 1
    for ln in lines:
        t = ln.text
        # Each pattern runs only on lines holding its cheap substring: most lines hold none.
        # ---- CUDA codes
        m = None
        if "cuda runtime error" in t:
            m = _LEGACY_RT.search(t)
        elif "THCudaCheck" in t:
            m = _THC_CHECK.search(t)
        elif "vs. 0)" in t and "cudaSuccess" in t:
            m = _CHECK_EQ.search(t)
        if m:
            value, text = int(m.group("code")), (m.group("text") or "").strip()
            interp = _interpretations(value, text or None)
            api = interp[0]["api"] if len(interp) == 1 else "unknown"
            name = interp[0]["name"] if len(interp) == 1 else ""
            add_code(value, api, name, text, ln, interp or _interpretations(value, None))
            if "THC" in t:
                f.legacy_hints.append(f"line {ln.number}: THC-era wording")
        else:
            m = _CUDA_NUM.search(t) if "cuda" in t.lower() and "rror" in t.lower() else None
            if m and "cuda runtime error (" in t:
                # THC's format, whatever follows it: PyTorch < 1.x, and numbers read as CUDA < 10.1.
                f.legacy_hints.append(f"line {ln.number}: THC-era 'cuda runtime error (N)' wording")
            if m is None and single and any(c.isdigit() for c in t) and len(t) < 40:
                m = _BARE_CODE.match(t)
            if m:
                value = int(m.group("code"))
                interp = _interpretations(value, None)
                if interp:
                    add_code(value, "unknown", "", "", ln, interp)
        for s in sightings(t):
            add_code(s.value, s.api, s.name, s.text, ln, wrapper=s.wrapper, partial=s.partial)
        # ---- exception, location, assertion, gpu, rank, version
        if f.exception is None and ("Error" in t or "Exception" in t or "Warning" in t):
            m = _EXC.match(t) or _EXC_Q.search(t)
            if m:
                f.exception = m.group("exc")
        if f.location is None and ("THC" in t or "rror" in t or "Assert" in t) and ":" in t:
            m = _LOC.search(t)
            if m:
                f.location = f"{m.group('loc').rsplit('/', 1)[-1]}:{m.group('line')}"
        if f.assertion is None and "Assertion" in t:
            m = _ASSERT.search(t)
            if m:
                f.assertion = m.group("a")
        if f.rank is None and "ank" in t:
            m = _RANK.search(t)
            if m:
                f.rank = int(m.group("rank") or m.group("rank2"))
        if f.torch_version is None and ("torch" in t or "Torch" in t):
            m = _TORCH_VER.search(t)
            if m:
                f.torch_version = m.group("v")
        # ---- OOM
        oom = _parse_oom(t + (" " + ln.after if ln.after else ""), ln.number)
        if oom and (f.oom is None or _richer(oom, f.oom)):
            f.oom = oom
        if f.gpu is None and ("GPU" in t or "cuda:" in t) and ("rror" in t or "memory" in t):
            m = _GPU.search(t)
            if m:
                f.gpu = int(m.group("gpu") or m.group("dev"))
    if f.oom and f.oom.gpu is not None:
        f.gpu = f.oom.gpu
    return f


def _richer(a: OomFigures, b: OomFigures) -> bool:
    def n(o):
        return sum(v is not None for v in (o.requested, o.total, o.free, o.allocated, o.reserved))

    return n(a) > n(b)


def _parse_oom(t: str, number: int) -> OomFigures | None:
    if "out of memory" not in t and "OutOfMemoryError" not in t:
        return None
    o = OomFigures(line_number=number)
    if _OOM_LEGACY.search(t):
        o.format = "legacy"
    m = _OOM_TRIED.search(t)
    if m:
        o.requested = to_bytes(*m.groups())
    m = _OOM_1X.search(t)
    if m:
        o.gpu = int(m.group("gpu"))
        o.total = to_bytes(m.group("t"), m.group("tu"))
        o.allocated = to_bytes(m.group("a"), m.group("au"))
        o.free = to_bytes(m.group("f"), m.group("fu"))
        if m.group("r"):
            o.reserved = to_bytes(m.group("r"), m.group("ru"))
            o.format = "1.x"
        else:
            # The oldest wording: "cached" counted memory held by the allocator but not in tensors.
            o.reserved = o.allocated + to_bytes(m.group("c"), m.group("cu"))
            o.format = "1.x-cached"
    m = _OOM_2X_TOTAL.search(t)
    if m:
        o.gpu = int(m.group("gpu"))
        o.total = to_bytes(m.group(2), m.group(3))
        o.free = to_bytes(m.group(4), m.group(5))
        o.format = "2.x"
        m = _OOM_2X_PROC.search(t)
        if m:
            o.process_in_use = to_bytes(*m.groups())
        m = _OOM_2X_ALLOC.search(t)
        if m:
            o.allocated = to_bytes(*m.groups())
        m = _OOM_2X_RESUNALLOC.search(t)
        if m:
            o.reserved_unallocated = to_bytes(*m.groups())
            if o.allocated is not None:
                o.reserved = o.allocated + o.reserved_unallocated
    for m in _OOM_OTHER.finditer(t):
        o.other_processes.append(
            {"pid": int(m.group("pid")), "bytes": to_bytes(m.group(2), m.group(3))}
        )
    if not o.format:
        o.format = "plain"
    return o
