"""Snapshots of the main screens at 80x24 and 120x40 (pytest-textual-snapshot).

Deterministic on purpose: the fake fixture entries (not the bundled ones), a fixed GPU state, and
for the finished run a stub verifier with a fixed outcome (a real run's duration varies).
Regenerate with `pytest --snapshot-update tests/tui` and look at the SVGs in __snapshots__/.
"""

from __future__ import annotations

import pytest
from conftest import ILLEGAL, JOBS, OOM_LOG, settle
from textual.widgets import Input, RichLog, TextArea

from tui.app import create_app
from tui.run_panel import RunPanel
from tui.verifier import Verifier

SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((120, 40), id="120x40")]
MIXED_LOG = (
    OOM_LOG
    + "During handling of the above exception, another exception occurred:\n"
    + ILLEGAL
    + "\n"
)


NO_MATCH_TEXT = "watchdog operation timeout in the collective allreduce of the ranks"


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


def run_shown(app) -> bool:
    """The run is over and its log has scrolled to the verdict: RichLog scrolls after the next
    refresh, so "outcome set" alone can catch the log still at its top on a busy machine."""
    log = app.query_one("#run-log", RichLog)
    return app.query_one(RunPanel).outcome is not None and log.scroll_y >= log.max_scroll_y


def still(*keys, until=None):
    async def before(pilot):
        await settle(pilot)
        for key in keys:
            await pilot.press(key)
        if until is not None:
            await settle(pilot, until=lambda: until(pilot.app))
        for w in pilot.app.query(TextArea).results():
            w.cursor_blink = False
        for w in pilot.app.query(Input).results():
            w.cursor_blink = False
        await pilot.pause()

    return before


@pytest.mark.parametrize("size", SIZES)
def test_browse(snap_compare, fake_kb, gpu, size):
    assert snap_compare(
        create_app(kb=fake_kb, environment=gpu), terminal_size=size, run_before=still()
    )


@pytest.mark.parametrize("size", SIZES)
def test_results_and_detail(snap_compare, fake_kb, gpu, size):
    app = create_app(kb=fake_kb, environment=gpu, text=MIXED_LOG)
    assert snap_compare(app, terminal_size=size, run_before=still())


@pytest.mark.parametrize("size", SIZES)
def test_no_match_with_guesses(snap_compare, fake_kb, gpu, size):
    app = create_app(kb=fake_kb, environment=gpu, text=NO_MATCH_TEXT)
    assert snap_compare(app, terminal_size=size, run_before=still())


@pytest.mark.parametrize("size", SIZES)
def test_guess_selected(snap_compare, fake_kb, gpu, size):
    app = create_app(kb=fake_kb, environment=gpu, text=NO_MATCH_TEXT)
    assert snap_compare(app, terminal_size=size, run_before=still("down"))


@pytest.mark.parametrize("size", SIZES)
def test_oom_arithmetic(snap_compare, fake_kb, gpu, size):
    app = create_app(kb=fake_kb, environment=gpu, text=OOM_LOG)
    assert snap_compare(app, terminal_size=size, run_before=still())


@pytest.mark.parametrize("size", SIZES)
def test_typing_footer(snap_compare, fake_kb, no_gpu_env, size):
    app = create_app(kb=fake_kb, environment=no_gpu_env, text=ILLEGAL)
    assert snap_compare(app, terminal_size=size, run_before=still("i"))


@pytest.mark.parametrize("size", SIZES)
def test_run_finished(snap_compare, fake_kb, gpu, no_gpu_env, size):
    app = create_app(kb=fake_kb, environment=no_gpu_env, text=ILLEGAL, verifier=StubVerify())
    done = run_shown
    assert snap_compare(app, terminal_size=size, run_before=still("r", until=done))


def test_no_gpu_skipped(snap_compare, fake_kb, no_gpu_env):
    app = create_app(kb=fake_kb, environment=no_gpu_env, text=OOM_LOG)
    done = run_shown
    assert snap_compare(app, terminal_size=(80, 24), run_before=still("r", until=done))


@pytest.mark.parametrize("size", SIZES)
def test_help(snap_compare, fake_kb, gpu, size):
    assert snap_compare(
        create_app(kb=fake_kb, environment=gpu), terminal_size=size, run_before=still("f1")
    )


def test_confirm_local(snap_compare, fake_kb, no_gpu_env):
    app = create_app(
        kb=fake_kb, environment=no_gpu_env, text="MyTeamOpError: custom op rope failed"
    )
    assert snap_compare(app, terminal_size=(80, 24), run_before=still("r"))


def test_light_theme(snap_compare, fake_kb, gpu):
    app = create_app(kb=fake_kb, environment=gpu, text=MIXED_LOG)
    app.theme = "textual-light"
    assert snap_compare(app, terminal_size=(80, 24), run_before=still())


@pytest.mark.parametrize("size", SIZES)
def test_job_root_first(snap_compare, job_kb, gpu, size):
    """A real two-rank CPU job: rank 1 was killed (SIGKILL), rank 0 lost its connection to it.
    The list leads with rank 1, marked as the root cause, and the detail is its diagnosis."""
    app = create_app(kb=job_kb, environment=gpu, log=JOBS / "cpu-sigkill" / "run")
    shown = lambda app: app.job is not None  # noqa: E731
    assert snap_compare(app, terminal_size=size, run_before=still(until=shown))
