"""A repro run on a GPU, as on an H200 (issue 38), with a verifier that stands in for the machine:
the verdict says which signature the pasted line matched and counts the rest, the run log opens
at the repro's first error (and keeps it in view when the terminal shrinks), and the header's
GPU memory is read again when the run ends."""

from __future__ import annotations

import asyncio
import threading

from conftest import OOM_LOG, banner, run_repro, settle
from textual.geometry import Region
from textual.widget import Widget

import tui.app as tui_app
from tui.app import create_app
from tui.machine_status import MachineStatus
from tui.run_panel import RunPanel, hit_words, verdict_of
from tui.verifier import Verifier

ERROR = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total "
    "capacity of 139.81 GiB of which 3.20 GiB is free. Including non-PyTorch memory, this "
    "process has 136.60 GiB memory in use. Of the allocated memory 130.10 GiB is allocated by "
    "PyTorch, and 5.10 GiB is reserved by PyTorch but unallocated."
)
# What a repro prints after its error: the rest of the story, pages of it
SUMMARY = [f"|  Allocated memory      | {i:>5} MiB | pool {i % 7} |" for i in range(120)]
OUTPUT = "\n".join(
    [
        "allocating 20 GiB on cuda:0",
        "Traceback (most recent call last):",
        '  File "repro.py", line 3, in <module>',
        ERROR,
        "memory summary:",
        *SUMMARY,
    ]
)
HIT = ("torch-2x-breakdown", "torch-2x-in-use", "torch-2x")  # every signature the output hit
TOTAL_MIB = 143771


def shown(widget: Widget) -> str:
    """What a widget draws now, as one run of words."""
    region = Region(0, 0, widget.size.width, widget.size.height)
    text = " ".join(strip.text for strip in widget.render_lines(region))
    return " ".join(text.replace("│", " ").split())  # a wrapped sentence reads whole


class H200(Verifier):
    """One H200 whose memory the repro fills while it runs; the run waits for `release`."""

    def __init__(self) -> None:
        self.used_mib = 600
        self.release = threading.Event()
        self.running = threading.Event()

    def read_gpu(self):
        from kb import GpuInfo

        free = TOTAL_MIB - self.used_mib
        return GpuInfo("NVIDIA H200", TOTAL_MIB, free, "575.51.03", 1, "9.0"), ""

    def probe_torch(self, python):
        return "2.8.0+cu128", "12.8", ""

    def verify_entry(self, entry, kb, env, *, python, on_line, cancel, trust):
        from kb import Outcome

        self.used_mib = 137000
        self.running.set()
        for line in OUTPUT.splitlines():
            on_line(line)
        self.release.wait(30)
        self.used_mib = 600  # the repro ended: its memory is free again
        return Outcome(
            entry.id,
            "reproduced",
            "fix-verified",
            duration_s=12.0,
            output=OUTPUT,
            matched=HIT,
            lines=(ERROR[:200],),
            exit_code=1,
            fix_output="allocating 2 GiB in chunks\nok",
            fix_exit_code=0,
            detail=f"matched {', '.join(HIT)}; exit code 1; fix_check exit code 0",
        )


def test_the_verdict_names_the_signature_of_the_pasted_line_and_counts_the_rest():
    from kb import Outcome

    nine = tuple(f"sig-{i}" for i in range(9))
    o = Outcome("cuda-oom", "reproduced", "fix-verified", duration_s=3.0, matched=nine)
    text, _ = verdict_of(o, yours="sig-4")
    assert text == (
        "REPRODUCED: matched sig-4, as your line did, and 8 other signatures · FIX VERIFIED"
        "  (3.0 s)"
    )
    assert not any(s in text for s in nine if s != "sig-4")  # the list is in the log, not here
    # the repro's output did not hit the pasted line's signature: said so
    assert (
        hit_words(nine, "other")
        == "sig-0 and 8 other signatures; not other, which your line matched"
    )
    # nothing pasted (an entry browsed): the first hit and the count
    assert hit_words(nine) == "sig-0 and 8 other signatures"
    assert hit_words(("only",), "only") == "only, as your line did"
    assert hit_words(("a", "b"), "b") == "b, as your line did, and 1 other signature"


def test_a_run_names_the_pasted_lines_signature_opens_at_the_error_and_reads_the_gpu_again(
    fake_kb, monkeypatch
):
    # No periodic read of the GPU in this test: only the ones the app makes for a reason
    monkeypatch.setattr(tui_app, "GPU_REFRESH_S", 3600.0)
    h200 = H200()

    async def go():
        app = create_app(kb=fake_kb, verifier=h200, text=OOM_LOG)
        async with app.run_test(size=(120, 40)) as pilot:
            status = app.query_one(MachineStatus)
            await settle(pilot, until=lambda: status.torch_known)
            await settle(pilot)
            assert "0.6/140.4 GiB" in str(status.render())
            yours = app.result.matches[0].signature
            assert app.result.matches[0].id == "fake-gpu-oom" and yours in HIT
            await run_repro(pilot)
            panel = app.query_one(RunPanel)
            await settle(pilot, until=lambda: h200.running.is_set())
            # the GPU is read while the repro holds its memory (every GPU_REFRESH_S, here now)
            app.background.start(app._reread_gpu, "gpu")
            await settle(pilot, until=lambda: "133.8/140.4 GiB" in str(status.render()))
            h200.release.set()
            await settle(pilot, until=lambda: panel.outcome is not None)
            await settle(pilot)
            await pilot.pause()

            # (a) the pasted line's signature, the others as a count
            said = banner(app)
            assert said.startswith(
                f"REPRODUCED: matched {yours}, as your line did, and 2 other signatures · "
                "FIX VERIFIED"
            ), said
            assert not any(s in said for s in HIT if s != yours)
            # (b) the log shows the repro's first error, not the end of its memory summary
            log = app.query_one("#run-log")
            assert "CUDA out of memory. Tried to allocate 20.00 GiB" in shown(log), shown(log)
            assert log.max_scroll_y > 0  # the log is longer than the view: the test means something
            # ...and keeps it in view when the terminal shrinks
            await pilot.resize_terminal(80, 24)
            await settle(pilot)
            await pilot.pause()
            assert "CUDA out of memory. Tried" in shown(log), shown(log)
            # (c) the GPU read again once the repro ended: its memory is free
            await settle(pilot, until=lambda: not app.background.busy)
            assert "0.6/140.4 GiB" in str(status.render()), str(status.render())

    asyncio.run(go())
