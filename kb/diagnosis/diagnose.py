"""Facts -> advice specific to the numbers in this log.

An entry says what the error class is; this says what *this* occurrence is: which OOM case (one
allocation bigger than the card, fragmentation, memory held outside PyTorch or by other
processes, or simply too much work), which era a bare CUDA code belongs to, what a kernel
assertion means.

The diagnoses that read a match's captures are named by the signature that captures them
(`diagnosis:` in the entry, DIAGNOSES here), and every finding names the entry and signature it
came from: no entry is known here by its id.
"""

from __future__ import annotations

from kb.diagnosis.facts import Facts, OomFigures, oom_from_captures, richer
from kb.model.record import asdict, field, record

TYPE_CHECKING = False  # typing stays unimported at run time (kb lookup's cold start)
if TYPE_CHECKING:
    from typing import Any

    from kb.model.entry import Signature

GiB = 1 << 30
MiB = 1 << 20


@record
class Finding:
    topic: str  # oom | cuda-code | assertion | location
    verdict: str  # one sentence
    lines: list[str] = field(default_factory=list)  # the arithmetic / the evidence
    advice: list[str] = field(default_factory=list)
    entries: list[str] = field(default_factory=list)  # entry ids this finding points to
    # What produced it: "entry/signature" for a diagnosis of a signature's captures, "" for one
    # read from the log's facts (a CUDA code, a location).
    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def human(n: int | None) -> str:
    if n is None:
        return "?"
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", 1024)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} B"


def diagnose(facts: Facts, owners: dict[tuple[str, int], str] | None = None) -> list[Finding]:
    """The findings of the log's facts: CUDA codes and where a call failed. (The memory figures
    and a kernel's assertion come from signatures' captures: read_captures.)"""
    return diagnose_codes(facts, owners) + diagnose_location(facts)


def diagnose_codes(facts: Facts, owners: dict[tuple[str, int], str] | None = None) -> list[Finding]:
    owners = owners or {}
    out: list[Finding] = []
    for code in facts.cuda_codes:
        f = _diagnose_code(code, facts, owners)
        if f:
            out.append(f)
    return out


@record(frozen=True)
class Reading:
    """What a matched entry's signatures captured on one line, for the diagnosis they name."""

    diagnosis: str  # a name of DIAGNOSES
    entry: str
    line_number: int
    captures: tuple[dict[str, str], ...]  # of every match of those signatures on the line
    signatures: tuple[Signature, ...]


def read_captures(readings: list[Reading], facts: Facts) -> dict[str, Finding]:
    """Each diagnosis named by the readings' signatures -> its finding, from the fullest reading
    (the first of equals). Sets the facts they state (facts.oom)."""
    out: dict[str, Finding] = {}
    memory: OomFigures | None = None
    owner = ""
    for r in readings:
        source = f"{r.entry}/" + "+".join(s.id for s in r.signatures)
        if r.diagnosis == "gpu-memory":
            # A wording only PyTorch < 1.0 printed (its signature says so) has no figures.
            legacy = any(
                s.versions.get("torch", "").replace(" ", "") == "<1.0" for s in r.signatures
            )
            o = oom_from_captures(r.captures, r.line_number, legacy, source)
            if memory is None or richer(o, memory):
                memory, owner = o, r.entry
        elif r.diagnosis == "kernel-assertion" and r.diagnosis not in out:
            text = next((c["assertion"] for c in r.captures if c.get("assertion")), "")
            if text:
                out[r.diagnosis] = diagnose_assertion(text, r.entry, source)
    if memory is not None:
        facts.oom = memory
        if memory.gpu is not None:
            facts.gpu = memory.gpu
        out["gpu-memory"] = diagnose_oom(memory, owner)
    return out


def diagnose_location(facts: Facts) -> list[Finding]:
    out: list[Finding] = []
    if facts.location and facts.location.startswith("THCBlas.cu"):
        out.append(
            Finding(
                "location",
                f"{facts.location} is where PyTorch called cuBLAS, not where the bug is.",
                advice=[
                    "The GEMM usually failed because of an earlier asynchronous error or bad "
                    "input; rerun with CUDA_LAUNCH_BLOCKING=1 to find the first failing kernel."
                ],
            )
        )
    return out


def _row(label: str, value: str) -> str:
    return f"{label:<23}{value}"


def diagnose_oom(o: OomFigures, entry: str = "") -> Finding:
    """The memory figures of one OOM message (kb.diagnosis.facts.oom_from_captures) -> which case
    it is. `entry`: the entry whose signature read them."""
    entries = [entry] if entry else []
    lines: list[str] = []
    advice: list[str] = []
    if o.format == "legacy" and o.requested is None:
        return Finding(
            "oom",
            "Out of memory (legacy THC wording: no figures printed).",
            advice=[
                "Measure with torch.cuda.memory_summary() on a current PyTorch, then reduce "
                "batch size or use mixed precision / activation checkpointing."
            ],
            entries=entries,
            source=o.source,
        )
    if o.requested is None and o.total is None and o.allocated is None and o.reserved is None:
        # "CUDA out of memory." with nothing after it (cut logs, wrappers, other frameworks):
        # which case this is cannot be read from the log, so the finding does not guess.
        return Finding(
            "oom",
            "Out of memory, but the log prints no memory figures to tell which case it is.",
            advice=[
                "Print torch.cuda.memory_summary() where it fails (or read the full "
                "torch.OutOfMemoryError text) and nvidia-smi for other processes, then reduce "
                "the batch size or use mixed precision / activation checkpointing."
            ],
            entries=entries,
            source=o.source,
        )
    if o.requested is not None:
        lines.append(_row("requested", human(o.requested)))
    if o.total is not None:
        lines.append(_row(f"GPU {o.gpu if o.gpu is not None else '?'} total", human(o.total)))
    if o.free is not None:
        lines.append(_row("free on the GPU", human(o.free)))
    if o.allocated is not None:
        lines.append(_row("in live tensors", f"{human(o.allocated)}  (allocated by PyTorch)"))
    if o.reserved is not None:
        lines.append(_row("reserved by PyTorch", human(o.reserved)))
    slack = None
    if o.reserved_unallocated is not None:
        slack = o.reserved_unallocated
    elif o.reserved is not None and o.allocated is not None:
        slack = max(o.reserved - o.allocated, 0)
    if slack is not None:
        lines.append(_row("reserved - allocated", f"{human(slack)}  (cached, not in tensors)"))
    outside_pytorch = None
    if o.process_in_use is not None and o.reserved is not None:
        outside_pytorch = max(o.process_in_use - o.reserved, 0)
        lines.append(
            _row(
                "outside the allocator",
                f"{human(o.process_in_use)} this process - "
                f"{human(o.reserved)} reserved = {human(outside_pytorch)}",
            )
        )
    # PyTorch 2.1 lists every process on the GPU, this one too ("Process N has X memory in
    # use"); from 2.2 this process's own use is said apart ("Including non-PyTorch memory, this
    # process has..."), and only then are the listed processes others for certain.
    others = sum(p["bytes"] for p in o.other_processes) if o.process_in_use is not None else 0
    elsewhere = None
    used = None  # on the whole GPU, by every process: what the message's total and free say
    if o.total is not None and o.free is not None:
        in_use = used = o.total - o.free
        mine = o.process_in_use if o.process_in_use is not None else o.reserved
        if mine is None:
            lines.append(
                _row("in use", f"{human(o.total)} - {human(o.free)} free = {human(in_use)}")
            )
        else:
            elsewhere = max(in_use - mine, 0)
            lines.append(
                _row(
                    "used by others",
                    f"{human(o.total)} - {human(o.free)} free - "
                    f"{human(mine)} this process = {human(elsewhere)}",
                )
            )
    for p in o.other_processes:
        lines.append(_row(f"process {p['pid']}", human(p["bytes"])))

    # Decide the case. Order matters: the first that holds is what to fix first.
    if o.requested is not None and o.total is not None and o.requested > o.total:
        verdict = (
            f"One allocation of {human(o.requested)} is larger than the whole GPU "
            f"({human(o.total)}): no batch-size tweak around it will help."
        )
        advice = [
            "Find the tensor: often an accidental outer product / broadcast, a huge attention "
            "matrix (use scaled_dot_product_attention), or a wrong reshape.",
            "Split the work into chunks, or shard it across GPUs.",
        ]
    elif o.total and (
        others >= 0.1 * o.total or (elsewhere is not None and elsewhere >= 0.1 * o.total)
    ):
        amount = max(others, elsewhere or 0)
        verdict = (
            f"{human(amount)} of the GPU is held by other processes: this process cannot get it."
        )
        advice = [
            "nvidia-smi --query-compute-apps=pid,used_memory --format=csv shows who holds it; "
            "stop stale jobs, zombie DataLoader workers or notebooks still holding the GPU.",
            "Pin jobs to separate GPUs with CUDA_VISIBLE_DEVICES.",
        ]
    elif (
        slack is not None
        and o.requested is not None
        and slack >= o.requested
        and (o.total is None or slack >= 0.05 * o.total)
    ):
        verdict = (
            f"Fragmentation: {human(slack)} is reserved by PyTorch but not in tensors, more than "
            f"the {human(o.requested)} requested, yet no free block is large enough."
        )
        advice = [
            "Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (PyTorch >= 2.1) before the "
            "process starts; on older versions max_split_size_mb:128.",
            "Avoid varying tensor shapes between steps (pad to buckets).",
        ]
    elif outside_pytorch is not None and o.total and outside_pytorch >= max(2 * GiB, 0.1 * o.total):
        verdict = (
            f"{human(outside_pytorch)} of this process's GPU memory is outside PyTorch's "
            f"allocator (CUDA context, cuBLAS/cuDNN workspaces, NCCL buffers, other libraries)."
        )
        advice = [
            "Look for other CUDA libraries in the process (CuPy, JAX preallocating 75% by default: "
            "XLA_PYTHON_CLIENT_PREALLOCATE=false, TensorFlow, NCCL buffers).",
            "torch.cuda.memory_summary() shows PyTorch's share; nvidia-smi shows the process total.",
        ]
    elif o.allocated is not None and (used is None or o.allocated >= used / 2):
        verdict = "The work simply needs more memory than the GPU has: the live tensors fill it."
        advice = list(_SMALLER_STEP)
    else:
        # The message leaves out what holds the memory (a cut message, a wrapper's summary):
        # say what it does show, and what to run to see the rest, never a guess.
        if o.allocated is None:
            verdict = (
                "The message does not say what holds the GPU's memory (this process's tensors, "
                "PyTorch's cache, or other processes)"
                + (f": {human(used)} is in use, {human(o.free)} free." if used else ".")
            )
        else:
            verdict = (
                f"Live tensors hold {human(o.allocated)} of the {human(used)} in use; the "
                "message does not say what holds the rest."
            )
        advice = [
            "In the failing process, print(torch.cuda.memory_summary()) where it fails: memory "
            "in live tensors (allocated) against PyTorch's cache (reserved).",
            "nvidia-smi --query-compute-apps=pid,used_memory --format=csv: how much each "
            "process holds on the GPU.",
            "If this process's own tensors fill it: a smaller batch (with gradient "
            "accumulation), bf16/fp16 autocast or activation checkpointing.",
        ]
    return Finding("oom", verdict, lines, advice, entries, o.source)


# What makes a step fit when its own tensors fill the GPU.
_SMALLER_STEP = (
    "Reduce the batch size (keep the effective batch with gradient accumulation).",
    "Use bf16/fp16 autocast, activation checkpointing, or a memory-efficient optimizer.",
    "Free references you keep across steps (e.g. accumulate loss.item(), not loss).",
)


def _diagnose_code(code, facts: Facts, owners) -> Finding | None:
    interp = code.interpretations
    if code.api != "unknown" and (code.api, code.value) not in owners:
        return Finding(
            "cuda-code",
            f'CUDA error {code.value} is {code.name} ({code.api} API): "{code.text}". '
            "No entry of the knowledge base covers this code yet.",
            advice=[
                "Search the message with the code name; CUDA_LAUNCH_BLOCKING=1 shows which call "
                "returned it."
            ],
        )
    if code.api != "unknown" or len(interp) < 2:
        if code.api == "unknown" and len(interp) == 1:
            i = interp[0]
            owner = owners.get((i["api"], i["value"]))
            return Finding(
                "cuda-code",
                f'CUDA error {code.value} is {i["name"]} ({i["api"]}): "{i["text"]}".',
                entries=[owner] if owner else [],
            )
        return None
    if len({i["text"].casefold() for i in interp}) == 1:
        # Every era and API that numbers it so reads it alike (700 is an illegal address in
        # the runtime and the driver API): one meaning, whatever the numbering.
        names = list(dict.fromkeys(i["name"] for i in interp))
        owner = next((o for i in interp if (o := owners.get((i["api"], i["value"])))), None)
        return Finding(
            "cuda-code",
            f'CUDA error {code.value} is "{interp[0]["text"]}" in every API and CUDA version '
            f"that has it ({', '.join(names)}).",
            entries=[owner] if owner else [],
        )
    legacy_first = bool(facts.legacy_hints)
    ranked = sorted(
        interp,
        key=lambda i: (
            (i["api"] != "runtime-legacy")
            if legacy_first
            else {"runtime": 0, "driver": 1, "runtime-legacy": 2}[i["api"]]
        ),
    )
    lines = []
    entries = []
    for i in ranked:
        era = {
            "runtime": "runtime API, CUDA >= 10.1",
            "runtime-legacy": "runtime API, CUDA < 10.1",
            "driver": "driver API",
        }[i["api"]]
        owner = owners.get((i["api"], i["value"]))
        lines.append(f"{era:28} {i['name']}: {i['text']}" + (f"  -> {owner}" if owner else ""))
        if owner and owner not in entries:
            entries.append(owner)
    why = (
        ("the log looks legacy (" + "; ".join(facts.legacy_hints) + ")")
        if legacy_first
        else "no legacy markers in the log, so today's numbering is ranked first"
    )
    return Finding(
        "cuda-code",
        f"CUDA error {code.value} without its text is ambiguous across numbering eras; {why}.",
        lines,
        [
            "Look for the message text next to the number, or the CUDA version the program "
            "was built with (python -m torch.utils.collect_env)."
        ],
        entries,
    )


_ASSERT_HINTS = [
    (
        "n_classes",
        "A class label is outside [0, num_classes): check the targets' min/max and the "
        "model's output size (labels counted from 1, or an ignore label like -1/255 without ignore_index).",
    ),
    (
        "index out of bounds",
        "An index is outside the tensor's size: compare max(index) with the "
        "dimension (embedding vocab size vs tokenizer, gather/scatter indices).",
    ),
    (
        "srcIndex < srcSelectDimSize",
        "index_select / embedding got an index >= the table size: vocab "
        "mismatch between tokenizer and embedding is the usual cause.",
    ),
    (
        "input_val >= zero && input_val <= one",
        "binary_cross_entropy got an input outside [0, 1]: apply "
        "sigmoid, or use BCEWithLogitsLoss on raw logits.",
    ),
    (
        "idx_dim >= 0 && idx_dim < index_size",
        "gather/scatter got an index outside the dimension size.",
    ),
]


def diagnose_assertion(text: str, entry: str = "", source: str = "") -> Finding:
    """A kernel's failed assertion (a signature's `assertion` capture) -> what it usually means."""
    advice = [hint for key, hint in _ASSERT_HINTS if key in text]
    advice = advice or [
        "Check the kernel's condition against your inputs' ranges; rerun on CPU for a "
        "Python-level error with the exact index."
    ]
    return Finding(
        "assertion",
        f"A kernel assertion failed: `{text}`.",
        advice=advice,
        entries=[entry] if entry else [],
        source=source,
    )


# Diagnoses a signature can name (`diagnosis:` in schema.json): what reads its captures. The
# engine calls them with the captures of every match of those signatures on the line read.
DIAGNOSES = ("gpu-memory", "kernel-assertion")
