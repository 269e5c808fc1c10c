"""Snapshots of the screens at 80x24 and 120x40 (pytest-textual-snapshot), one for each thing
issue 27 says must hold where it can be seen, and the main screens besides.

Deterministic on purpose: the fake fixture entries (not the bundled ones), a fixed GPU state, and
for runs a stub verifier with a fixed outcome (a real run's duration varies). Regenerate with
`pytest --snapshot-update tests/tui/test_snapshots.py` and read the SVGs in __snapshots__/.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import ILLEGAL, JOBS, OOM_LOG, StubVerify, run_repro, settle
from textual.widgets import Input, TextArea

from tui import clipboard
from tui.app import create_app
from tui.confirm_screen import ConfirmScreen
from tui.copy_screen import CopiedScreen, CopyMenu
from tui.results_list import ResultsList
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
ROOT_LOG = (
    "loading data\n"
    "Traceback (most recent call last):\n"
    '  File "/home/you/train.py", line 12, in <module>\n'
    '    open("data/train.csv")\n'
    "FileNotFoundError: [Errno 2] No such file or directory: 'data/train.csv'\n"
)
LONG_LOG = "".join(f"step {i} loss 0.{i % 97:02d}\n" for i in range(1, 120)) + ILLEGAL + "\n"


class Blocking(Verifier):
    """A repro that runs until it is cancelled."""

    def verify_entry(self, entry, kb, env, *, python, on_line, cancel, trust):
        from kb import Outcome

        on_line("waiting for the other ranks")
        cancel.wait(30)
        return Outcome(entry.id, "cancelled", duration_s=0.1)


@pytest.fixture(autouse=True)
def _no_blinking(monkeypatch):
    """Cursors that never blink, from the moment each field is made: a blink phase caught in a
    line the field has cached would make the picture differ from run to run."""
    monkeypatch.setattr(TextArea.cursor_blink, "_default", False)
    monkeypatch.setattr(Input.cursor_blink, "_default", False)


def run_shown(app) -> bool:
    """The run is over and its log has scrolled to the repro's first error, or to its end when
    no line matched (the log scrolls after the next refresh, so "outcome set" alone can catch it
    still at its end on a busy machine)."""
    panel = app.query_one(RunPanel)
    if panel.outcome is None:
        return False
    log = panel.run_log
    line = panel.matched_line()
    if line is None:
        return log.scroll_y >= log.max_scroll_y
    return log.scroll_y == log.y_for_line(line)


def still(*steps, until=None, idle=True):
    """Settle (idle: until nothing is in flight), then run each step (a key name or an async
    function of the pilot)."""

    async def before(pilot):
        if idle:
            await settle(pilot)
        for step in steps:
            if callable(step):
                await step(pilot)
            else:
                await pilot.press(step)
        if until is not None:
            await settle(pilot, until=lambda: until(pilot.app))
        await pilot.pause()

    return before


async def run_it(pilot):
    await run_repro(pilot)


# ---------------------------------------------------------------- the main screens
@pytest.mark.parametrize("size", SIZES)
def test_browse(snap_compare, fake_kb, gpu, size):
    """The start screen: the box has the focus; the pane says what to do, no entry's fix."""
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
    """A guess is marked as one, and its fixes are not "Try first"."""
    app = create_app(kb=fake_kb, environment=gpu, text=NO_MATCH_TEXT)
    assert snap_compare(app, terminal_size=size, run_before=still("escape", "down"))


@pytest.mark.parametrize("size", SIZES)
def test_oom_arithmetic(snap_compare, fake_kb, gpu, size):
    app = create_app(kb=fake_kb, environment=gpu, text=OOM_LOG)
    assert snap_compare(app, terminal_size=size, run_before=still())


@pytest.mark.parametrize("size", SIZES)
def test_typing_footer(snap_compare, fake_kb, no_gpu_env, size):
    """Typing in the box: the footer names the same keys as anywhere else."""
    app = create_app(kb=fake_kb, environment=no_gpu_env, text=ILLEGAL)
    assert snap_compare(app, terminal_size=size, run_before=still("f2"))


@pytest.mark.parametrize("size", SIZES)
def test_run_finished(snap_compare, fake_kb, no_gpu_env, size):
    app = create_app(kb=fake_kb, environment=no_gpu_env, text=ILLEGAL, verifier=StubVerify())
    assert snap_compare(app, terminal_size=size, run_before=still(run_it, until=run_shown))


def test_no_gpu_cannot_run(snap_compare, fake_kb, no_gpu_env):
    """f5 on a GPU entry without a GPU: why it cannot run and what would let it, no question."""
    app = create_app(kb=fake_kb, environment=no_gpu_env, text=OOM_LOG)

    def said(app) -> bool:
        return any("cannot run here" in str(n.message) for n in app._notifications)

    assert snap_compare(app, terminal_size=(80, 24), run_before=still("f5", until=said))


@pytest.mark.parametrize("size", SIZES)
def test_help(snap_compare, fake_kb, gpu, size):
    assert snap_compare(
        create_app(kb=fake_kb, environment=gpu), terminal_size=size, run_before=still("f1")
    )


def test_light_theme(snap_compare, fake_kb, gpu):
    app = create_app(kb=fake_kb, environment=gpu, text=MIXED_LOG)
    app.theme = "textual-light"
    assert snap_compare(app, terminal_size=(80, 24), run_before=still())


@pytest.mark.parametrize("size", SIZES)
def test_job_root_first(snap_compare, job_kb, gpu, size):
    """A real two-rank CPU job: rank 1 was killed (SIGKILL), rank 0 lost its connection to it.
    The list leads with rank 1, marked as the root cause, and the detail is its diagnosis; each
    row's end ("exit -15 (SIGTERM)") has its own line, whole at 80 columns."""
    app = create_app(kb=job_kb, environment=gpu, log=JOBS / "cpu-sigkill" / "run")
    shown = lambda app: app.job is not None  # noqa: E731
    assert snap_compare(app, terminal_size=size, run_before=still(until=shown))


@pytest.mark.parametrize("size", SIZES)
def test_job_ranks_that_fared_the_same_are_one_row(
    snap_compare, job_kb, gpu, size, tmp_path, monkeypatch
):
    """Seven ranks that timed out waiting for rank 3 are one row, "ranks 0-2, 4-7 (7)"."""
    lines = [f"[rank{r}]: step 10 loss 2.31" for r in range(8)]
    lines += [
        "[rank3]: Traceback (most recent call last):",
        '[rank3]:   File "train.py", line 88, in <module>',
        "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB. GPU 3 "
        "has a total capacity of 79.15 GiB of which 3.20 GiB is free.",
    ]
    lines += [
        f"[rank{r}]:[E1126 05:10:00.000000000 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog "
        "caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, "
        "NumelOut=1, Timeout(ms)=600000) ran for 600010 milliseconds before timing out."
        for r in (0, 1, 2, 4, 5, 6, 7)
    ]
    (tmp_path / "train.log").write_text("\n".join(lines) + "\n")
    monkeypatch.chdir(tmp_path)  # a relative path: the screen holds no tmp folder's name
    app = create_app(kb=job_kb, environment=gpu, log=Path("train.log"))
    shown = lambda app: app.job is not None  # noqa: E731
    assert snap_compare(app, terminal_size=size, run_before=still("down", until=shown))


# ---------------------------------------------------------------- safe to type into
@pytest.mark.parametrize("size", SIZES)
def test_start_screen_typing_lands_in_the_box(snap_compare, fake_kb, gpu, size):
    """Typed with the focus on the list, on the start screen: every key is text (the q, the r,
    the o of the words start nothing), and the lookup of it runs."""

    async def type_on_the_list(pilot):
        pilot.app.query_one(ResultsList).focus()
        await pilot.pause()
        await pilot.press(*"quantized::linear_dynamic failed: run out")
        await settle(pilot)

    app = create_app(kb=fake_kb, environment=gpu)
    assert snap_compare(app, terminal_size=size, run_before=still(type_on_the_list))


@pytest.mark.parametrize("size", SIZES)
def test_run_asks_first_with_the_command(snap_compare, fake_kb, gpu, size):
    app = create_app(kb=fake_kb, environment=gpu, text=ILLEGAL)
    shown = lambda app: isinstance(app.screen, ConfirmScreen)  # noqa: E731
    assert snap_compare(app, terminal_size=size, run_before=still("f5", until=shown))


def test_confirm_local(snap_compare, fake_kb, no_gpu_env):
    app = create_app(
        kb=fake_kb, environment=no_gpu_env, text="MyTeamOpError: custom op rope failed"
    )
    shown = lambda app: isinstance(app.screen, ConfirmScreen)  # noqa: E731
    assert snap_compare(app, terminal_size=(80, 24), run_before=still("f5", until=shown))


@pytest.mark.parametrize("size", SIZES)
def test_quit_during_a_run_asks(snap_compare, fake_kb, gpu, size):
    app = create_app(
        kb=fake_kb,
        environment=gpu,
        text="Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE)",
        verifier=Blocking(),
    )
    running = lambda app: "waiting" in " ".join(app.query_one("#run-log").plain_lines)  # noqa: E731

    async def start(pilot):
        await run_repro(pilot)
        await settle(pilot, until=lambda: running(pilot.app))
        await pilot.press("ctrl+q")
        await settle(pilot, until=lambda: isinstance(pilot.app.screen, ConfirmScreen))

    assert snap_compare(app, terminal_size=size, run_before=still(start))


# ---------------------------------------------------------------- nothing stale, nothing posing
@pytest.mark.parametrize("size", SIZES)
def test_a_new_paste_after_a_run_brings_its_details(snap_compare, fake_kb, gpu, size):
    app = create_app(kb=fake_kb, environment=gpu, text=ILLEGAL, verifier=StubVerify())

    async def paste_again(pilot):
        await run_repro(pilot)
        await settle(pilot, until=lambda: run_shown(pilot.app))
        pilot.app.query_one("#paste", TextArea).load_text(OOM_LOG)
        await settle(pilot)

    assert snap_compare(app, terminal_size=size, run_before=still(paste_again))


@pytest.mark.parametrize("size", SIZES)
def test_the_run_log_belongs_to_its_entry(snap_compare, fake_kb, gpu, size):
    """After fake-illegal-access ran, the run log of another entry says it has not run."""
    app = create_app(kb=fake_kb, environment=gpu, verifier=StubVerify())

    async def other(pilot):
        await pilot.press("escape", "down", "down", "down")  # fake-illegal-access
        await run_repro(pilot)
        await settle(pilot, until=lambda: run_shown(pilot.app))
        await pilot.press("up")  # fake-hang
        await pilot.press("f4")  # its run log
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=still(other))


@pytest.mark.parametrize("size", SIZES)
def test_browsed_entry_is_not_a_diagnosis(snap_compare, fake_kb, gpu, size):
    app = create_app(kb=fake_kb, environment=gpu)
    assert snap_compare(app, terminal_size=size, run_before=still("escape", "down"))


@pytest.mark.parametrize("size", SIZES)
def test_root_failure_not_in_the_knowledge_base(snap_compare, fake_kb, gpu, size):
    app = create_app(kb=fake_kb, environment=gpu, text=ROOT_LOG)
    assert snap_compare(app, terminal_size=size, run_before=still())


# ---------------------------------------------------------------- every part reachable
@pytest.mark.parametrize("size", SIZES)
def test_find_in_the_details(snap_compare, fake_kb, gpu, size):
    app = create_app(kb=fake_kb, environment=gpu, text=ILLEGAL)
    steps = ("escape", "enter", "ctrl+f", *"kernel", "enter")  # into the details, then find
    assert snap_compare(app, terminal_size=size, run_before=still(*steps))


@pytest.mark.parametrize("size", SIZES)
def test_find_in_the_run_log(snap_compare, fake_kb, gpu, size):
    app = create_app(kb=fake_kb, environment=gpu, text=ILLEGAL, verifier=StubVerify())

    async def find(pilot):
        await run_repro(pilot)
        await settle(pilot, until=lambda: run_shown(pilot.app))
        await pilot.press("escape", "ctrl+f", *"launching")  # out of the box: the log in front

    assert snap_compare(app, terminal_size=size, run_before=still(find))


@pytest.mark.parametrize("size", SIZES)
def test_go_to_the_matched_line(snap_compare, fake_kb, gpu, size):
    """f7: the matched line, selected in the paste box, scrolled into view."""
    app = create_app(kb=fake_kb, environment=gpu, text=LONG_LOG)
    assert snap_compare(app, terminal_size=size, run_before=still("escape", "f7"))


@pytest.mark.parametrize("size", SIZES)
def test_maximised_details(snap_compare, fake_kb, gpu, size):
    app = create_app(kb=fake_kb, environment=gpu, text=ILLEGAL)
    assert snap_compare(app, terminal_size=size, run_before=still("escape", "enter", "f10"))


@pytest.mark.parametrize("size", SIZES)
def test_enter_drills_into_the_details_which_show_the_focus(snap_compare, fake_kb, gpu, size):
    app = create_app(kb=fake_kb, environment=gpu, text=ILLEGAL)
    assert snap_compare(app, terminal_size=size, run_before=still("escape", "enter"))


@pytest.mark.parametrize("size", SIZES)
def test_command_palette_holds_the_apps_actions(snap_compare, fake_kb, gpu, size):
    app = create_app(kb=fake_kb, environment=gpu, text=ILLEGAL)

    async def palette(pilot):
        await pilot.press("ctrl+p")
        await pilot.pause(0.5)
        await settle(pilot)

    assert snap_compare(app, terminal_size=size, run_before=still(palette))


@pytest.mark.parametrize("size", SIZES)
def test_copy_menu(snap_compare, fake_kb, gpu, size):
    app = create_app(kb=fake_kb, environment=gpu, text=ILLEGAL)
    shown = lambda app: isinstance(app.screen, CopyMenu)  # noqa: E731
    assert snap_compare(app, terminal_size=size, run_before=still("ctrl+o", until=shown))


@pytest.mark.parametrize("size", SIZES)
def test_copy_not_confirmed_shows_the_text(snap_compare, fake_kb, gpu, size, monkeypatch):
    """No system clipboard and no word from the terminal: the text is shown to select."""
    monkeypatch.setattr(clipboard, "copy_system", lambda text: "")
    monkeypatch.delenv("TMUX", raising=False)
    app = create_app(kb=fake_kb, environment=gpu, text=ILLEGAL)
    shown = lambda app: isinstance(app.screen, CopiedScreen)  # noqa: E731
    assert snap_compare(app, terminal_size=size, run_before=still("ctrl+o", "1", until=shown))


@pytest.mark.parametrize("size", SIZES)
def test_open_lists_the_names_that_fit(snap_compare, fake_kb, gpu, tmp_path, monkeypatch, size):
    (tmp_path / "rank0.log").write_text("x")
    (tmp_path / "rank1.log").write_text("x")
    monkeypatch.chdir(tmp_path)  # the typed path is relative: the SVG holds no tmp path
    app = create_app(kb=fake_kb, environment=gpu)

    async def tab(pilot):
        await pilot.press("f3", "r", "tab")
        hint = lambda: "2 fit" in str(pilot.app.screen.query_one("#open-hint").content)  # noqa: E731
        await settle(pilot, until=hint)
        await pilot.pause(0.3)  # the field's grey suggestion, worked out in a thread, has come

    assert snap_compare(app, terminal_size=size, run_before=still(tab))


@pytest.mark.parametrize("size", SIZES)
def test_open_keeps_a_mistyped_path(snap_compare, fake_kb, gpu, tmp_path, monkeypatch, size):
    monkeypatch.chdir(tmp_path)
    app = create_app(kb=fake_kb, environment=gpu)
    assert snap_compare(app, terminal_size=size, run_before=still("f3", *"runs/exp1", "enter"))


# ---------------------------------------------------------------- a pipe, live
@pytest.mark.parametrize("size", SIZES)
def test_a_pipe_shows_its_tail_while_still_reading(snap_compare, fake_kb, gpu, size):
    read, write = os.pipe()
    body = "".join(f"step {i} loss 0.{i % 97:02d}\n" for i in range(1, 40)).encode()
    os.write(write, body)
    app = create_app(kb=fake_kb, environment=gpu, stream=os.fdopen(read, "rb"))

    def shown(app) -> bool:
        return "step 39" in app.query_one("#paste", TextArea).text and app.result is not None

    try:
        # not idle: the pipe's reader waits for more until the pipe closes
        assert snap_compare(app, terminal_size=size, run_before=still(until=shown, idle=False))
    finally:
        os.close(write)
