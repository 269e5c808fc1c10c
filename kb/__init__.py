"""kb: a knowledge base of PyTorch and CUDA failures.

    >>> import kb
    >>> kb.lookup("RuntimeError: CUDA error: an illegal memory access was encountered")[0].id
    'cuda-illegal-memory-access'
    >>> engine = kb.Engine()
    >>> engine.lookup("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB").best.id
    'cuda-oom'
    >>> kb.lookup_job(["tests/fixtures/jobs/cpu-stall/run"]).job.root.rank   # a whole job's files
    1

The public API is what this module exports (see __all__). Importing kb is cheap and never imports
torch or textual: the names below are loaded on first use.
"""

from __future__ import annotations

from collections.abc import Iterable

from kb.version import __version__

TYPE_CHECKING = False  # typing stays unimported at run time (kb lookup's cold start)


__all__ = [
    "Cause",
    "ChainLink",
    "Diagnostic",
    "Engine",
    "Entry",
    "Environment",
    "Evidence",
    "Facts",
    "FaultKind",
    "Finding",
    "Fix",
    "Frame",
    "GpuInfo",
    "GroupFinding",
    "HitRef",
    "JobKind",
    "JobLookup",
    "JobView",
    "KnowledgeBase",
    "LookupResult",
    "Match",
    "MessageOrigin",
    "NotReproducible",
    "Origin",
    "Outcome",
    "Part",
    "RankVerdict",
    "Reference",
    "Relation",
    "Role",
    "RootFailure",
    "RootKind",
    "RootRank",
    "Surfaced",
    "__version__",
    "evidence_line",
    "inert",
    "inspect_gpu",
    "load",
    "lookup",
    "lookup_job",
    "open_log",
    "probe_environment",
    "probe_torch",
    "replace",
    "verification_status",
    "verify_entry",
    "verify_many",
]

if TYPE_CHECKING:  # for type checkers; at run time the names load lazily below
    from typing import Any

    from kb.diagnosis.diagnose import Finding
    from kb.diagnosis.engine import Engine, LookupResult
    from kb.diagnosis.facts import Facts
    from kb.job.collectives import GroupFinding
    from kb.job.lookup import JobLookup
    from kb.job.view import (
        FaultKind,
        JobKind,
        JobView,
        Part,
        RankVerdict,
        Role,
        RootRank,
        Surfaced,
    )
    from kb.knowledge.base import KnowledgeBase
    from kb.model.entry import (
        Cause,
        Diagnostic,
        Entry,
        Evidence,
        Fix,
        HitRef,
        Match,
        NotReproducible,
        Reference,
    )
    from kb.model.origin import MessageOrigin
    from kb.model.record import replace
    from kb.model.root import ChainLink, Frame, Origin, Relation, RootFailure, RootKind
    from kb.render.style import evidence_line, verification_status
    from kb.render.terminal import inert
    from kb.scan.reader import open_log
    from kb.verify.gpu import GpuInfo
    from kb.verify.gpu import inspect as inspect_gpu
    from kb.verify.verifier import (
        Environment,
        Outcome,
        probe_environment,
        probe_torch,
        verify_entry,
        verify_many,
    )

_LAZY = {
    "Engine": "diagnosis.engine",
    "LookupResult": "diagnosis.engine",
    "open_log": "scan.reader",
    "Match": "model.entry",
    "HitRef": "model.entry",
    "Entry": "model.entry",
    "Evidence": "model.entry",
    "Cause": "model.entry",
    "Diagnostic": "model.entry",
    "Fix": "model.entry",
    "Reference": "model.entry",
    "RootFailure": "model.root",  # the log's first failure, known to an entry or not
    "RootKind": "model.root",
    "Frame": "model.root",
    "ChainLink": "model.root",
    "Origin": "model.root",
    "Relation": "model.root",
    "MessageOrigin": "model.origin",  # where a root failure's message is printed (RootFailure.printed_by)
    "NotReproducible": "model.entry",
    "KnowledgeBase": "knowledge.base",
    "Facts": "diagnosis.facts",
    "Finding": "diagnosis.diagnose",
    "Outcome": "verify.verifier",
    "Environment": "verify.verifier",
    "verify_entry": "verify.verifier",
    "verify_many": "verify.verifier",
    "probe_environment": "verify.verifier",
    "probe_torch": "verify.verifier",
    "GpuInfo": "verify.gpu",
    "inspect_gpu": "verify.gpu:inspect",  # name: "module" or "module:its name there"
    "verification_status": "render.style",
    "evidence_line": "render.style",
    "inert": "render.terminal",  # text from input made safe for a terminal (kb.render.terminal)
    "replace": "model.record",  # a copy of a record (a Match, an Entry...) with some fields changed
    # a whole job's verdict (kb.lookup_job(...).job) and its parts
    "JobLookup": "job.lookup",
    "JobView": "job.view",
    "RankVerdict": "job.view",
    "RootRank": "job.view",
    "Surfaced": "job.view",
    "Role": "job.view",
    "Part": "job.view",
    "JobKind": "job.view",
    "FaultKind": "job.view",
    "GroupFinding": "job.collectives",
}


def __getattr__(name: str) -> Any:
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'kb' has no attribute {name!r}")
    import importlib

    module, _, attr = where.partition(":")
    value = getattr(importlib.import_module(f"kb.{module}"), attr or name)
    globals()[name] = value  # later look-ups skip this function
    return value


def lookup(text: str | bytes, top: int = 5, kb_dirs: Iterable[str] | None = None) -> list[Match]:
    """Entries matching an error message or log, best first."""
    from kb.diagnosis.engine import default_engine

    return default_engine(kb_dirs).lookup(text, top=top).matches


def lookup_job(
    paths: Iterable[str],
    top: int = 3,
    kb_dirs: Iterable[str] | None = None,
    engine: Engine | None = None,
) -> JobLookup:
    """A whole job: log files and folders (per-rank logs, torchrun's --log-dir, a `kb run`
    folder, error files, Flight Recorder dumps and tarballs of them). Returns a JobLookup:
    .result (a LookupResult led by the root rank's entry when it has one) and .job (a JobView:
    .root, .roots, .ranks, .groups, .problems; None when the input is one process's log).
    `engine` reuses a loaded Engine."""
    from kb.diagnosis.engine import default_engine
    from kb.job.lookup import lookup_paths

    return lookup_paths(engine or default_engine(kb_dirs), list(paths), top=top)


def load(kb_dirs: Iterable[str] | None = None) -> KnowledgeBase:
    """The knowledge base (bundled entries plus the user's folders)."""
    from kb.diagnosis.engine import default_engine

    return default_engine(kb_dirs).knowledge
