"""Safe to type into (issue 27): keys typed on the start screen are text wherever the focus is; a
burst of keys (a paste without bracketed paste) is text, never commands; a letter alone outside
the box is its command; a repro always asks first, with its command; quitting during a run asks,
stops the run and leaves at once; an endless pipe never holds the app open."""

from __future__ import annotations

import asyncio
import os
import threading
import time

import pytest
from conftest import ILLEGAL, answer, letter, paste_keys, run_repro, screen_text, settle
from textual.widgets import TextArea

from tui.app import QUIT_WAIT_S, create_app
from tui.confirm_screen import ConfirmScreen
from tui.results_list import ResultsList
from tui.run_panel import RunPanel
from tui.verifier import Verifier

pytestmark = pytest.mark.warm_home  # runs kb as a user would after its first run; tests no cache

HANG = "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE)"


def run(coro):
    return asyncio.run(coro)


class Blocking(Verifier):
    """A repro that runs until cancelled (or, stubborn, ignores the cancel for 20 s)."""

    def __init__(self, stubborn: bool = False) -> None:
        self.stubborn = stubborn
        self.cancelled = threading.Event()

    def verify_entry(self, entry, kb, env, *, python, on_line, cancel, trust):
        from kb import Outcome

        on_line("waiting for the other ranks")
        cancel.wait(30)
        self.cancelled.set()
        if self.stubborn:
            time.sleep(20)
        return Outcome(entry.id, "cancelled", duration_s=0.1)


def test_every_key_typed_on_the_start_screen_goes_to_the_box(fake_kb, gpu):
    async def go():
        app = create_app(kb=fake_kb, environment=gpu)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            area = app.query_one("#paste", TextArea)
            # every command letter, typed alone with the focus away from the box
            for key, char in [
                ("r", "r"),
                ("o", "o"),
                ("q", "q"),
                ("y", "y"),
                ("c", "c"),
                ("question_mark", "?"),
                ("slash", "/"),
                ("i", "i"),
                ("m", "m"),
            ]:
                area.load_text("")
                await settle(pilot)
                for where in ("#results", "#detail"):
                    area.load_text("")
                    await settle(pilot)
                    app.query_one(where).focus()
                    await pilot.pause()
                    await letter(pilot, key)
                    assert app.is_running, key
                    assert area.text == char, (key, where, area.text)
                    assert app.focused is area  # and the next key goes straight there
                    assert len(app.screen_stack) == 1, (key, app.screen)  # no dialog
                    assert not app.query_one(RunPanel).running

    run(go())


def test_a_burst_of_keys_outside_the_box_is_text_not_commands(fake_kb, gpu):
    """A paste from a terminal without bracketed paste arrives as keys, faster than anyone
    types: outside the box, off the start screen, it is text all the same."""

    async def go():
        app = create_app(kb=fake_kb, environment=gpu, text=ILLEGAL + "\n")
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            await pilot.press("escape")
            assert isinstance(app.focused, ResultsList)
            await paste_keys(pilot, "run quantized::linear_dynamic failed\noops")
            area = app.query_one("#paste", TextArea)
            assert area.text.endswith("run quantized::linear_dynamic failed\noops"), area.text
            assert app.is_running and len(app.screen_stack) == 1
            assert not app.query_one(RunPanel).running

    run(go())


def test_a_letter_alone_outside_the_box_asks_before_running_showing_the_command(fake_kb, gpu):
    async def go():
        app = create_app(kb=fake_kb, environment=gpu, text=ILLEGAL)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            await pilot.press("escape")
            await letter(pilot, "r")
            assert isinstance(app.screen, ConfirmScreen)
            assert "$ kb verify fake-illegal-access" in screen_text(app)
            app.screen._opened = time.monotonic()  # as if it had just opened (a busy machine)
            await pilot.press("y")  # too soon: a paste's next key, not an answer
            assert isinstance(app.screen, ConfirmScreen)
            await answer(pilot, "n")
            assert not isinstance(app.screen, ConfirmScreen)
            panel = app.query_one(RunPanel)
            assert not panel.running and panel.outcome is None

    run(go())


def test_quitting_during_a_run_asks_then_stops_it_and_leaves(fake_kb, gpu):
    verifier = Blocking()

    async def go():
        app = create_app(kb=fake_kb, environment=gpu, text=HANG, verifier=verifier)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            await run_repro(pilot)
            panel = app.query_one(RunPanel)
            await settle(pilot, until=lambda: panel.running)
            await pilot.press("ctrl+q")
            assert isinstance(app.screen, ConfirmScreen) and app.is_running
            await answer(pilot, "n")  # no: it goes on
            assert panel.running and app.is_running
            await pilot.press("ctrl+q")
            await asyncio.sleep(0.35)
            t0 = time.monotonic()
            await pilot.press("y")
            while app.is_running and time.monotonic() - t0 < 10:
                await asyncio.sleep(0.02)
            took = time.monotonic() - t0
            assert not app.is_running
        assert verifier.cancelled.is_set()  # the repro was told to stop
        assert app.quit_with_run  # kb tui kills what is left of its group on the way out
        return took

    took = run(go())
    assert took < QUIT_WAIT_S + 2, took  # the run's end, not its 30 s


def test_quitting_does_not_wait_for_a_repro_that_ignores_the_cancel(fake_kb, gpu):
    verifier = Blocking(stubborn=True)

    async def go():
        app = create_app(kb=fake_kb, environment=gpu, text=HANG, verifier=verifier)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            await run_repro(pilot)
            panel = app.query_one(RunPanel)
            await settle(pilot, until=lambda: panel.running)
            await pilot.press("ctrl+q")
            await asyncio.sleep(0.35)
            t0 = time.monotonic()
            await pilot.press("y")
            while app.is_running and time.monotonic() - t0 < 15:
                await asyncio.sleep(0.02)
            return time.monotonic() - t0, panel.running

    took, still_running = run(go())
    assert still_running  # it had not ended: the app left without it
    assert took < QUIT_WAIT_S + 2, took  # not its 20 s


def test_an_endless_pipe_never_holds_the_app(fake_kb, gpu):
    """A pipe whose writer never closes it: the reader waits in a daemon thread, and quitting
    is at once."""
    read, write = os.pipe()
    os.write(write, b"step 1 loss 0.5\n" * 100)

    async def go():
        app = create_app(kb=fake_kb, environment=gpu, stream=os.fdopen(read, "rb"))
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot, until=lambda: app._streaming and app.result is not None)
            t0 = time.monotonic()
            await pilot.press("ctrl+q")
            while app.is_running and time.monotonic() - t0 < 10:
                await asyncio.sleep(0.02)
            took = time.monotonic() - t0
            assert not app.is_running
        return took

    try:
        took = run(go())
    finally:
        os.close(write)
    assert took < 2, took  # the pipe's reader did not hold it (the real process: test_tmux)
