"""f5 on a machine where the selected entry's repro cannot run (issue 38): no "Run the repro?"
whose yes could only end in "skipped", but why it cannot (kb verify's own reason, consistent
with the header) and what would let it, in a toast and in the entry's run log. The check is
the entry's, not the machine's: a repro that needs neither a GPU nor torch still runs."""

from __future__ import annotations

import asyncio

import pytest
from conftest import ILLEGAL, OOM_LOG, log_text, settle
from textual.widgets import TabbedContent

from tui.app import create_app
from tui.confirm_screen import ConfirmScreen
from tui.machine_status import MachineStatus
from tui.run_panel import RunPanel
from tui.verifier import Verifier


class Recording(Verifier):
    """Records every repro the app asks to run (none should be, here)."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    def verify_entry(self, entry, kb, env, **kw):
        self.ran.append(entry.id)
        return super().verify_entry(entry, kb, env, **kw)


def toasts(app) -> list[str]:
    return [str(n.message) for n in app._notifications]


def machine(kind: str):
    from kb import Environment, GpuInfo

    no_torch = "ModuleNotFoundError: No module named 'torch'"
    h100 = GpuInfo("NVIDIA H100 80GB HBM3", 81559, 80000, "570.86.15", 1, "9.0")
    return {
        "no GPU, no torch": Environment(
            python="/opt/venv/bin/python",
            gpu=None,
            gpu_reason="no NVIDIA driver? (NVML: NVML Shared Library Not Found)",
            torch_error=no_torch,
        ),
        "no GPU, CPU torch": Environment(
            python="/opt/venv/bin/python", gpu=None, gpu_reason="NVML found no GPU", torch="2.8.0"
        ),
        "GPU, no torch": Environment(python="/opt/venv/bin/python", gpu=h100, torch_error=no_torch),
    }[kind]


@pytest.mark.parametrize(
    "kind,header,why,then",
    [
        (
            "no GPU, no torch",
            "No NVIDIA GPU",
            "no GPU: no NVIDIA driver? (NVML: NVML Shared Library Not Found)",
            "It needs a GPU: `kb verify fake-gpu-oom` on a machine with a GPU and torch runs it",
        ),
        (
            "no GPU, CPU torch",
            "only CPU repros run",
            "no GPU: NVML found no GPU",
            "It needs a GPU: `kb verify fake-gpu-oom` on a machine with a GPU",
        ),
        (
            "GPU, no torch",
            "no torch",
            "needs torch, /opt/venv/bin/python cannot import torch (ModuleNotFoundError",
            "Install torch there, or run `kb verify fake-gpu-oom` on a machine that has it.",
        ),
    ],
    ids=["no-gpu-no-torch", "no-gpu-cpu-torch", "gpu-no-torch"],
)
def test_f5_says_why_a_repro_cannot_run_here_instead_of_offering_to_run_it(
    fake_kb, kind, header, why, then
):
    verifier = Recording()

    async def go():
        app = create_app(kb=fake_kb, environment=machine(kind), text=OOM_LOG, verifier=verifier)
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            assert header in str(app.query_one(MachineStatus).render())
            await pilot.press("f5")
            said = lambda: any("cannot run here" in t for t in toasts(app))  # noqa: E731
            await settle(pilot, until=said, timeout=10)
            await pilot.pause(0.4)  # a question would be on the screen by now
            assert not isinstance(app.screen, ConfirmScreen)
            said = next(t for t in toasts(app) if "cannot run here" in t)
            assert said.startswith(f"fake-gpu-oom's repro cannot run here: {why}"), said
            assert then in said, said
            panel = app.query_one(RunPanel)
            assert not panel.running and panel.outcome is None and verifier.ran == []
            # the entry's run log says the same, for after the toast has gone
            app.query_one(TabbedContent).active = "run"
            await pilot.pause()
            log = log_text(app)
            assert log.startswith("fake-gpu-oom's repro cannot run here") and then in log, log

    asyncio.run(go())


def test_a_repro_that_needs_neither_a_gpu_nor_torch_is_still_offered(fake_kb):
    async def go():
        app = create_app(kb=fake_kb, environment=machine("no GPU, no torch"), text=ILLEGAL)
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            await pilot.press("f5")
            await settle(pilot, until=lambda: isinstance(app.screen, ConfirmScreen), timeout=10)
            assert not any("cannot run here" in t for t in toasts(app))

    asyncio.run(go())
