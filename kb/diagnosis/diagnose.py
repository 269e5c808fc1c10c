"""Facts -> advice specific to the numbers in this log.

An entry says what the error class is; this says what *this* occurrence is: which OOM case (one
allocation bigger than the card, fragmentation, memory held outside PyTorch or by other
processes, or simply too much work), which era a bare CUDA code belongs to, what a kernel
assertion means.
"""

from __future__ import annotations

from kb.diagnosis.facts import Facts, OomFigures
from kb.model.record import asdict, field, record

TYPE_CHECKING = False  # typing stays unimported at run time (kb lookup's cold start)
if TYPE_CHECKING:
    from typing import Any

GiB = 1 << 30
MiB = 1 << 20


@record
class Finding:
    topic: str  # oom | cuda-code | assertion | location
    verdict: str  # one sentence
    lines: list[str] = field(default_factory=list)  # the arithmetic / the evidence
    advice: list[str] = field(default_factory=list)
    entries: list[str] = field(default_factory=list)  # entry ids this finding points to

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
    owners = owners or {}
    out: list[Finding] = []
    if facts.oom:
        out.append(diagnose_oom(facts.oom))
    for code in facts.cuda_codes:
        f = _diagnose_code(code, facts, owners)
        if f:
            out.append(f)
    if facts.assertion:
        out.append(_diagnose_assertion(facts.assertion))
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


def diagnose_oom(o: OomFigures) -> Finding:
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
            entries=["cuda-oom"],
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
    others = sum(p["bytes"] for p in o.other_processes)
    elsewhere = None
    if o.total is not None and o.free is not None:
        in_use = o.total - o.free
        mine = o.process_in_use if o.process_in_use is not None else o.reserved
        if mine is not None:
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
    else:
        verdict = "The work simply needs more memory than the GPU has: the live tensors fill it."
        advice = [
            "Reduce the batch size (keep the effective batch with gradient accumulation).",
            "Use bf16/fp16 autocast, activation checkpointing, or a memory-efficient optimizer.",
            "Free references you keep across steps (e.g. accumulate loss.item(), not loss).",
        ]
    return Finding("oom", verdict, lines, advice, ["cuda-oom"])


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


def _diagnose_assertion(text: str) -> Finding:
    advice = [hint for key, hint in _ASSERT_HINTS if key in text]
    advice = advice or [
        "Check the kernel's condition against your inputs' ranges; rerun on CPU for a "
        "Python-level error with the exact index."
    ]
    return Finding(
        "assertion",
        f"A kernel assertion failed: `{text}`.",
        advice=advice,
        entries=["cuda-device-side-assert"],
    )
