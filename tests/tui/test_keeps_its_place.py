"""A view keeps its place across a resize (issue 38): the line gone to (f7) in a long log stays
in view when the terminal is made 80x24, in the paste box and in the run log."""

from __future__ import annotations

import asyncio

from conftest import ILLEGAL, run_repro, settle
from textual.geometry import Region
from textual.widget import Widget

from tui.app import create_app
from tui.run_panel import RunPanel
from tui.verifier import Verifier

LINE = 25012


def shown(widget: Widget) -> list[str]:
    """The lines a widget draws now, as text."""
    region = Region(0, 0, widget.size.width, widget.size.height)
    return [strip.text for strip in widget.render_lines(region)]


def long_log(path):
    """30,000 lines, the error at LINE; the others wrap at 80 columns but not at 120."""
    with path.open("w", encoding="utf-8") as fh:
        for i in range(1, 30001):
            fh.write(
                ILLEGAL + "\n" if i == LINE else f"step {i} loss 0.{i % 97:02d} lr 3e-4 gn 1\n"
            )
    return path


def test_the_line_gone_to_stays_in_view_when_the_terminal_shrinks(fake_kb, gpu, tmp_path):
    log = long_log(tmp_path / "train.log")

    async def go():
        app = create_app(kb=fake_kb, environment=gpu, log=log)
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot, until=lambda: app.result is not None)
            await settle(pilot)
            await pilot.press("escape", "f7")
            await settle(pilot, until=lambda: app.query_one("#paste").show_line_numbers)
            await settle(pilot)
            area = app.query_one("#paste")
            assert f"{LINE}  RuntimeError" in " ".join(shown(area)), shown(area)
            for size in ((80, 24), (120, 40), (100, 30)):
                await pilot.resize_terminal(*size)
                await settle(pilot)
                await pilot.pause()
                rows = shown(area)
                # the line's number and its first words, not a line of the window far above it
                assert any(r.lstrip("│").startswith(f"{LINE}  RuntimeError") for r in rows), (
                    size,
                    rows,
                )

    asyncio.run(go())


class LongRun(Verifier):
    """A repro whose error is in the middle of pages of output."""

    def verify_entry(self, entry, kb, env, *, python, on_line, cancel, trust):
        from kb import Outcome

        out = "\n".join(
            [
                *(f"warming up {i}" for i in range(100)),
                ILLEGAL,
                *(f"  frame {i}" for i in range(100)),
            ]
        )
        for line in out.splitlines():
            on_line(line)
        return Outcome(
            entry.id,
            "reproduced",
            duration_s=1.0,
            output=out,
            matched=("torch-modern",),
            lines=(ILLEGAL,),
            exit_code=1,
            detail="matched torch-modern; exit code 1",
        )


def test_the_run_logs_matched_line_stays_in_view_when_the_terminal_shrinks(fake_kb, gpu):
    async def go():
        app = create_app(kb=fake_kb, environment=gpu, text=ILLEGAL, verifier=LongRun())
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            await run_repro(pilot)
            panel = app.query_one(RunPanel)
            await settle(pilot, until=lambda: panel.outcome is not None)
            await settle(pilot)
            await pilot.press("escape", "f7")  # the run log is in front: its matched line
            await settle(pilot)
            log = panel.run_log
            assert ILLEGAL in " ".join(shown(log)) and log.max_scroll_y > 0
            for size in ((80, 24), (120, 40)):
                await pilot.resize_terminal(*size)
                await settle(pilot)
                await pilot.pause()
                words = " ".join(" ".join(shown(log)).replace("│", " ").split())
                assert ILLEGAL in words, (size, words)

    asyncio.run(go())
