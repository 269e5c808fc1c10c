"""Fixtures for the TUI tests: fake entries (no GPU needed), a fixed GPU state, an isolated KB_HOME.

The fake entries, not the bundled ones, so these tests and the snapshots do not change when the
knowledge base does.
"""

from __future__ import annotations

import asyncio
import html
import re
import time
from pathlib import Path

import pytest

from tui.verifier import Verifier

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


@pytest.fixture(scope="session")
def _kb_home(tmp_path_factory):
    """One state folder for the TUI tests, away from the user's: the caches kb builds on first
    use (the full-text index, the catalog's) are built once, not once per test."""
    return tmp_path_factory.mktemp("kb-home")


@pytest.fixture(autouse=True)
def _tui_env(_kb_home, monkeypatch):
    monkeypatch.setenv("KB_HOME", str(_kb_home))
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


async def settle(pilot, until=None, timeout: float = 90.0) -> None:
    """Wait for a condition, polling the app; with none, until nothing is in flight: no held
    key, no debounce, no background thread (lookup, kb load, input), no worker."""
    app = pilot.app
    end = time.monotonic() + timeout
    while True:
        await pilot.pause()
        if until is None:
            await app.workers.wait_for_complete()
            await pilot.pause()
            if not app.busy:
                return
        elif until():
            await pilot.pause()
            return
        if time.monotonic() > end:
            raise AssertionError("timed out waiting for the app")
        await asyncio.sleep(0.03)


# ---------------------------------------------------------------- reading the app
def option_ids(app) -> list[str]:
    from tui.results_list import NO_MATCH, ResultsList

    results = app.query_one(ResultsList)
    return [o.id for o in results.options if not o.disabled and o.id != NO_MATCH]


def footer_keys(app) -> dict[str, str]:
    """What the footer shows: action -> the key it names."""
    out: dict[str, str] = {}
    for ab in app.screen.active_bindings.values():
        if ab.binding.show:
            out.setdefault(ab.binding.action, app.get_key_display(ab.binding))
    return out


def detail_text(app) -> str:
    """The detail pane's text, laid out 200 columns wide (a sentence stays on one line)."""
    from tui.detail_pane import DetailPane

    return app.query_one(DetailPane).plain()


def log_text(app) -> str:
    """The run log, joined and re-spaced (it wraps long lines at the panel's width)."""
    return " ".join(" ".join(app.query_one("#run-log").plain_lines).split())


def banner(app) -> str:
    return str(app.query_one("#run-verdict").content)


def screen_text(app) -> str:
    """What the terminal shows as one run of words (from the SVG screenshot's text), box edges
    dropped so that a sentence wrapped inside a bordered box reads whole."""
    svg = app.export_screenshot()
    runs = re.findall(r"<text[^>]*>(.*?)</text>", svg)
    text = " ".join(html.unescape(r).replace("\xa0", " ") for r in runs)
    return " ".join(text.replace("│", " ").split())


# ---------------------------------------------------------------- driving the app
async def letter(pilot, *names: str) -> None:
    """Press letters one at a time, as a person does: the app holds a letter a moment to see
    whether more keys follow (a paste), so each waits until it has acted."""
    from tui.keys import BURST_S

    for name in names:
        await pilot.press(name)
        await asyncio.sleep(BURST_S * 2)
        await settle(pilot, until=lambda: pilot.app._held is None and pilot.app._replay is None)
        await pilot.pause()


async def paste_keys(pilot, text: str) -> None:
    """What a terminal without bracketed paste sends for a paste: one key per character, all
    at once (the driver reads them in one go), not a person's keys spread over seconds."""
    from textual import events
    from textual.keys import _character_to_key

    for char in text:
        key = "enter" if char == "\n" else _character_to_key(char)
        pilot.app.post_message(events.Key(key, "\r" if char == "\n" else char))
    await settle(pilot)


async def answer(pilot, key: str) -> None:
    """Answer a confirmation once it has been on screen long enough to be read (it drops the
    keys of a paste that opened it)."""
    from tui.confirm_screen import GUARD_S

    await asyncio.sleep(GUARD_S + 0.05)
    await pilot.press(key)
    await pilot.pause()


async def run_repro(pilot) -> None:
    """f5, then yes: the selected entry's repro starts."""
    from tui.confirm_screen import ConfirmScreen

    await pilot.press("f5")
    await settle(pilot, until=lambda: isinstance(pilot.app.screen, ConfirmScreen))
    await answer(pilot, "y")


class StubVerify(Verifier):
    """A fixed outcome (a real run's duration varies)."""

    def verify_entry(self, entry, kb, env, *, python, on_line, cancel, trust):
        from kb import Outcome

        out = "step 1: launching kernel\n" + ILLEGAL
        for line in out.splitlines():
            on_line(line)
        return Outcome(
            entry.id,
            "reproduced",
            "fix-verified",
            duration_s=1.5,
            output=out,
            matched=("torch-modern",),
            lines=(ILLEGAL,),
            exit_code=1,
            fix_output="step 1: launching kernel with a mask\nok",
            fix_exit_code=0,
            detail="matched torch-modern; exit code 1; fix_check exit code 0, "
            "entry no longer matched",
        )
