"""Error lines -> structured facts: CUDA codes (with their numbering era), exception type,
file:line, kernel assertion, GPU index, rank, torch version hints; and the OOM figures, read from
the captures of the signatures that state them (oom_from_captures), never from the line again."""

from __future__ import annotations

import re
from collections.abc import Iterable

from kb.knowledge.wrappers import sightings
from kb.model.record import asdict, field, record
from kb.scan.extract import Line

TYPE_CHECKING = False  # typing stays unimported at run time (kb lookup's cold start)
if TYPE_CHECKING:
    from typing import Any

    from kb.knowledge.data import WrapperForms

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


def size_of(text: str) -> int | None:
    """A size as a log prints it ("2.00 GiB", "0 bytes") in bytes; None when it is none."""
    m = _SIZE_RX.fullmatch(text.strip())
    return to_bytes(m.group(1), m.group(2)) if m else None


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
    # The entry and signatures whose captures gave the figures ("<entry>/<sig>+<sig>").
    source: str = ""


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

_SIZE_RX = re.compile(_SIZE)


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


def extract_facts(lines: Iterable[Line], wrappers: WrapperForms | None = None) -> Facts:
    """The facts of a scan's lines; `wrappers`: the knowledge base's wrapper forms (the bundled
    ones by default). The OOM figures are not among them: they come from the signatures' captures
    once the lines are matched (oom_from_captures)."""
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
        for s in sightings(t, wrappers):
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
        if f.gpu is None and ("GPU" in t or "cuda:" in t) and ("rror" in t or "memory" in t):
            m = _GPU.search(t)
            if m:
                f.gpu = int(m.group("gpu") or m.group("dev"))
    return f


def richer(a: OomFigures, b: OomFigures) -> bool:
    """a states more of the five main figures than b."""

    def n(o: OomFigures) -> int:
        return sum(v is not None for v in (o.requested, o.total, o.free, o.allocated, o.reserved))

    return n(a) > n(b)


def oom_from_captures(
    captures: Iterable[dict[str, str]], line_number: int, legacy: bool = False, source: str = ""
) -> OomFigures:
    """The OOM figures one message states, from the named captures of every match of the
    signatures that read it (a signature's `diagnosis: gpu-memory`, schema.json names the
    captures): requested, total, free, allocated, reserved (1.x's "reserved in total"), cached
    (the oldest wording's memory held but not in tensors), reserved_unallocated (2.x), gpu, and
    in_use: this process's, or with pid another process's. `legacy`: a wording of PyTorch < 1.0,
    which printed no figures."""
    o = OomFigures(line_number=line_number, source=source)
    cached = None
    for caps in captures:
        caps = {k: v for k, v in caps.items() if v is not None}
        if "in_use" in caps:
            size = size_of(caps["in_use"])
            if size is not None and "pid" in caps:
                proc = {"pid": int(caps["pid"]), "bytes": size}
                if proc not in o.other_processes:
                    o.other_processes.append(proc)
            elif size is not None and o.process_in_use is None:
                o.process_in_use = size
        for name in ("requested", "total", "free", "allocated", "reserved", "reserved_unallocated"):
            if name in caps and getattr(o, name) is None:
                setattr(o, name, size_of(caps[name]))
        if "cached" in caps and cached is None:
            cached = size_of(caps["cached"])
        if "gpu" in caps and o.gpu is None:
            o.gpu = int(caps["gpu"])
    if cached is not None:
        # The oldest wording: "cached" counted memory held by the allocator but not in tensors.
        o.format = "1.x-cached"
        if o.allocated is not None:
            o.reserved = o.allocated + cached
    elif o.reserved is not None:
        o.format = "1.x"
    elif o.total is not None:
        o.format = "2.x"
        if o.allocated is not None and o.reserved_unallocated is not None:
            o.reserved = o.allocated + o.reserved_unallocated
    else:
        # 2.x's second half without its first (total, free): not read as this message's.
        o.allocated = o.process_in_use = o.reserved_unallocated = None
        o.format = "legacy" if legacy else "plain"
    return o
