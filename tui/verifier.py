"""Verifier: the TUI's one door to the machine, through kb's public API.

Reading the GPUs (NVML), asking the repro interpreter for torch, and running a repro all block,
so the app calls these from worker threads only. Tests pass a subclass with fixed answers.
Nothing here imports Textual.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from kb import (
    Entry,
    Environment,
    GpuInfo,
    KnowledgeBase,
    Outcome,
    inspect_gpu,
    probe_torch,
    verify_entry,
    verify_many,
)


class Verifier:
    def read_gpu(self) -> tuple[GpuInfo | None, str]:
        """(the visible GPUs or None, why None), from NVML. Never raises."""
        return inspect_gpu()

    def probe_torch(self, python: str) -> tuple[str, str, str]:
        """(torch version, its CUDA, why not) as the repro interpreter sees them; seconds."""
        return probe_torch(python)

    def cannot_run(self, entry: Entry, kb: KnowledgeBase, env: Environment) -> str | None:
        """Why the entry's repro cannot run here, in kb verify's words ("no GPU: ...", "needs
        torch, PYTHON cannot import torch"), or None when it can (or has none: the caller says
        that). The trust a local entry needs is not asked here: the run asks it first. Starts
        nothing and takes milliseconds: kb.verify_many skips an entry whose requirements this
        machine does not meet before anything runs, and with its cancel already set starts
        none of the others. The packages a repro names are checked when it runs (that asks the
        interpreter, which takes seconds)."""
        if entry.repro is None:
            return None
        stop = threading.Event()
        stop.set()
        (outcome,) = verify_many([entry], kb, env, python=env.python, trust=True, cancel=stop)
        if outcome.status != "skipped":
            return None
        return outcome.detail or "this machine lacks what it needs"

    def verify_entry(
        self,
        entry: Entry,
        kb: KnowledgeBase,
        env: Environment,
        *,
        python: str,
        on_line: Callable[[str], None],
        cancel: threading.Event,
        trust: bool,
    ) -> Outcome:
        """Run the repro, then its fix check; blocks until both end, time out or are cancelled."""
        return verify_entry(
            entry, kb, env, python=python, on_line=on_line, cancel=cancel, trust=trust, run_fix=True
        )
