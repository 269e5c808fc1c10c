"""The TUI's repro run on a real GPU, headless (Textual's pilot): paste a CUDA out-of-memory error,
run its entry's repro (f5, then yes) and print what the run panel and the header show, as JSON:
the verdict banner (does it name the signature the pasted line matched?), the lines the run log
shows when the run ends (the repro's first error, or the end of its output?), and the header's
GPU memory before, during and after the run (read again when the run ends?). A screenshot of
the end goes to OUT when given.

    python scripts/tui/gpu_run.py [OUT]

Needs a GPU, torch and kb's dependencies (scripts/device_verify.sh shows how they travel to a
machine with no network); pytest for the TUI tests' pilot helpers.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [os.path.join(REPO, "tests", "tui"), REPO]

from conftest import OOM_LOG, banner, run_repro, settle  # noqa: E402
from textual.geometry import Region  # noqa: E402
from textual.widget import Widget  # noqa: E402

from tui.app import create_app  # noqa: E402
from tui.machine_status import MachineStatus  # noqa: E402
from tui.run_panel import RunPanel  # noqa: E402


def shown(widget: Widget) -> list[str]:
    """The lines a widget draws now."""
    region = Region(0, 0, widget.size.width, widget.size.height)
    return [s.text.rstrip() for s in widget.render_lines(region)]


async def go(out: str | None) -> dict:
    app = create_app(text=OOM_LOG)
    async with app.run_test(size=(120, 40)) as pilot:
        status = app.query_one(MachineStatus)
        await settle(pilot, until=lambda: status.torch_known, timeout=300)
        await settle(pilot, timeout=300)
        before = str(status.render())
        best = app.result.matches[0] if app.result and app.result.matches else None
        await run_repro(pilot)
        panel = app.query_one(RunPanel)
        during: list[str] = []
        start = time.monotonic()
        while panel.outcome is None and time.monotonic() - start < 500:
            await asyncio.sleep(1.0)
            await pilot.pause()
            header = str(status.render())
            if not during or during[-1] != header:
                during.append(header)
        took = time.monotonic() - start
        await settle(pilot, timeout=120)
        await settle(pilot, until=lambda: not app.background.busy, timeout=60)
        await pilot.pause()
        log = app.query_one("#run-log")
        result = {
            "entry": best.id if best else None,
            "pasted_line_signature": best.signature if best else None,
            "status": panel.outcome.status if panel.outcome else None,
            "fix_status": panel.outcome.fix_status if panel.outcome else None,
            "matched": list(panel.outcome.matched) if panel.outcome else [],
            "run_s": round(took, 1),
            "banner": banner(app),
            "header_before": before,
            "header_during": during,
            "header_after": str(status.render()),
            "run_log_view": shown(log),
            "run_log_scroll": [log.scroll_y, log.max_scroll_y],
        }
        if out:
            app.save_screenshot(filename="tui-gpu-run.svg", path=out)
    return result


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else None
    print(json.dumps(asyncio.run(go(out)), indent=1))
