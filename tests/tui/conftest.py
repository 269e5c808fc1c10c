"""Fixtures for the TUI tests: fake entries (no GPU needed), a fixed GPU state, an isolated KB_HOME.

The fake entries, not the bundled ones, so these tests and the snapshots do not change when the
knowledge base does.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures"
JOBS = Path(__file__).resolve().parents[1] / "fixtures" / "jobs"  # real CPU jobs (gloo, 2 ranks)
ILLEGAL = "RuntimeError: CUDA error: an illegal memory access was encountered"
OOM_LOG = (
    "epoch 3 step 1200 loss 2.31\n"
    "Traceback (most recent call last):\n"
    '  File "train.py", line 88, in <module>\n'
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total "
    "capacity of 79.15 GiB of which 3.20 GiB is free. Including non-PyTorch memory, this process "
    "has 75.90 GiB memory in use. Of the allocated memory 70.10 GiB is allocated by PyTorch, and "
    "5.10 GiB is reserved by PyTorch but unallocated.\n"
)


@pytest.fixture(autouse=True)
def _tui_env(tmp_path, monkeypatch):
    monkeypatch.setenv("KB_HOME", str(tmp_path / "kb-home"))
    monkeypatch.delenv("KB_PATH", raising=False)
    # Textual pops NO_COLOR when an App is created; the root conftest sets it for the CLI tests.
    # monkeypatch puts it back afterwards.
    monkeypatch.delenv("NO_COLOR", raising=False)


@pytest.fixture(autouse=True)
def _attributes_only(monkeypatch):
    """The TUI reads entry records by attribute: the dict-style shim kept for older scripts
    refuses every read while the TUI tests run."""
    from kb.model.entry import _ReadLikeADict

    def refuse(self, *a, **k):
        raise AssertionError(f"dict-style read of {type(self).__name__} in the TUI")

    monkeypatch.setattr(_ReadLikeADict, "get", refuse)
    monkeypatch.setattr(_ReadLikeADict, "__getitem__", refuse)


@pytest.fixture
def fake_kb():
    from kb import Evidence, KnowledgeBase
    from kb.knowledge.base import load
    from kb.model.record import replace

    loaded = load([str(FIXTURES / "local")], bundled=[FIXTURES / "entries"], use_cache=False)
    # Paths shown on screen (the local-entry confirmation names the file) are made the same in
    # every checkout, so the snapshots are stable without copying the fixtures to a shared place.
    entries = [replace(e, path=f"/home/you/kb-entries/{Path(e.path).name}") for e in loaded.entries]
    kb = KnowledgeBase(
        entries, loaded.problems, content_hash=loaded.content_hash, warnings=loaded.warnings
    )
    kb.evidence = {
        "fake-illegal-access": [
            Evidence(
                entry="fake-illegal-access",
                status="reproduced",
                fix_status="fix-verified",
                gpu="NVIDIA H100 80GB HBM3",
                gpu_memory_mib=81559,
                driver="570.86.15",
                cuda="12.8",
                torch="2.8.0+cu128",
                date="2026-01-15",
                duration_s=2.5,
                matched=(ILLEGAL,),
            )
        ]
    }
    return kb


@pytest.fixture
def job_kb():
    """The fake entries, plus two for the job view: the launcher's line for a rank killed by a
    signal, and a peer's reset connection (the two ranks of tests/fixtures/jobs/cpu-sigkill)."""
    from kb import KnowledgeBase
    from kb.knowledge.base import load

    loaded = load(bundled=[FIXTURES / "entries", FIXTURES / "job-entries"], use_cache=False)
    assert not loaded.problems, loaded.problems
    return KnowledgeBase(
        loaded.entries, loaded.problems, content_hash=loaded.content_hash, warnings=loaded.warnings
    )


@pytest.fixture
def gpu():
    """A machine with one H100 and a CUDA torch: fixed, so no probe runs in the tests."""
    from kb import Environment, GpuInfo

    return Environment(
        python="/opt/venv/bin/python",
        gpu=GpuInfo("NVIDIA H100 80GB HBM3", 81559, 81559 - 1234, "570.86.15", 1, "9.0"),
        torch="2.8.0+cu128",
        cuda="12.8",
    )


@pytest.fixture
def no_gpu_env():
    from kb import Environment

    return Environment(
        python="/opt/venv/bin/python",
        gpu=None,
        gpu_reason="no NVIDIA driver? (NVML: NVML Shared Library Not Found)",
        torch="",
        cuda="",
        torch_error="ModuleNotFoundError: No module named 'torch'",
    )


async def settle(pilot, until=None, timeout: float = 15.0) -> None:
    """Wait for a condition, polling the app; with none, until the debounce has fired and every
    worker (lookup, kb load) is done."""
    app = pilot.app
    end = time.monotonic() + timeout
    while True:
        await pilot.pause()
        if until is None:
            await app.workers.wait_for_complete()
            await pilot.pause()
            if app._debounce is None:
                return
        elif until():
            await pilot.pause()
            return
        if time.monotonic() > end:
            raise AssertionError("timed out waiting for the app")
        await asyncio.sleep(0.03)
