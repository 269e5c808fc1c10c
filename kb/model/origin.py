"""Where a log's message is printed in the source of the project that prints it, as kb's message
catalog (kb.catalog) reads it: a frozen record, no I/O.

A lookup attaches one to the root failure (RootFailure.printed_by) when the root's message fits
a catalog template that maps to no entry: kb then knows where the message comes from ("PyTorch's
argument check in index_add_ (aten/src/ATen/native/TensorAdvancedIndexing.cpp)") without
claiming an error class for it.
"""

from __future__ import annotations

from kb.model.record import record

# How a project raises the message, in words (the catalog's `kind`).
_KIND = {
    "TORCH_CHECK": "argument check",
    "STD_TORCH_CHECK": "argument check",
    "TORCH_CHECK_WITH": "argument check",
    "TORCH_SYM_CHECK": "argument check",
    "TORCH_CHECK_ALWAYS_SHOW_CPP_STACKTRACE": "argument check",
    "THArgCheck": "argument check",
    "THCUNN_argCheck": "argument check",
    "check": "check",
    "TORCH_CHECK_VALUE": "value check",
    "TORCH_CHECK_INDEX": "index check",
    "TORCH_CHECK_TYPE": "type check",
    "TORCH_CHECK_LINALG": "linear algebra check",
    "TORCH_CHECK_NOT_IMPLEMENTED": "not-implemented check",
    "TORCH_INTERNAL_ASSERT": "internal assert",
    "AT_ASSERTM": "internal assert",
    "THAssertMsg": "internal assert",
    "AT_ERROR": "error",
    "THError": "error",
    "C10_THROW_ERROR": "error",
    "throw": "C++ exception",
    "warn": "warning",
    "log-error": "error log line",
    "status": "status string",
    "nccl-warn": "NCCL WARN line",
    "message": "message",
}
_PROJECT = {
    "pytorch": "PyTorch",
    "cuda": "CUDA",
    "nccl": "NCCL",
    "triton": "Triton",
    "lightning": "Lightning",
    "deepspeed": "DeepSpeed",
    "apex": "apex",
    "vllm": "vLLM",
    "onnxruntime": "ONNX Runtime",
}


@record(frozen=True)
class MessageOrigin:
    """One catalog template that a log line fits."""

    project: str  # the catalog's source: pytorch, transformers, nccl...
    version: str  # the version whose source was read
    file: str  # the source file that prints it
    line: int = 0  # its line there (0 when not known)
    function: str = ""
    op: str = ""  # the operator, for PyTorch's kernels and checks ("index_add_")
    kind: str = ""  # how it is raised: TORCH_CHECK, raise, warn, status...
    exception: str = ""  # the exception type the source raises, when known
    template: str = ""  # the message with its holes: "index_add_(): self ({}) and source ({}) ..."
    family: str = ""  # the families.yaml family it belongs to, "" for none
    captures: tuple[tuple[str, str], ...] = ()  # the holes' values read from the line
    line_number: int = 0  # the log line it was read in

    def describe(self) -> str:
        """For people: "PyTorch's argument check in index_add_ (aten/src/ATen/native/...)"."""
        who = _PROJECT.get(self.project, self.project)
        how = _KIND.get(self.kind, "")
        if self.kind == "raise":
            how = f"`raise {self.exception}`" if self.exception else "raise"
        where = self.op or self.function
        owner = f"{who}'" if who.endswith("s") else f"{who}'s"
        text = f"{owner} {how}" if how else who
        if where:
            text += f" in {where}"
        return f"{text} ({self.file})" if self.file else text

    def to_dict(self) -> dict[str, object]:
        return {
            "project": self.project,
            "version": self.version,
            "file": self.file,
            "line": self.line,
            "function": self.function,
            "op": self.op,
            "kind": self.kind,
            "exception": self.exception,
            "template": self.template,
            "family": self.family,
            "captures": dict(self.captures),
            "line_number": self.line_number,
            "describe": self.describe(),
        }


__all__ = ["MessageOrigin"]
