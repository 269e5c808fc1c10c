"""Every part reachable, nothing stale (issue 27): find in the details, the run log and the paste
box; the matched line, also beyond the tail a file shows; maximise; enter and esc; the command
palette; the copy menu and what it says of the clipboard; the details in front for a new paste
or selection, the run log kept with its entry; a pipe's tail while it streams; the open dialog's
completion and its mistakes; code that wraps."""

from __future__ import annotations

import asyncio
import os

import pytest
from conftest import ILLEGAL, OOM_LOG, StubVerify, detail_text, letter, run_repro, settle
from textual.widgets import Input, TabbedContent, TextArea

import tui.app as tui_app
from tui import clipboard
from tui.app import create_app
from tui.copy_screen import CopiedScreen, CopyMenu
from tui.detail_pane import DetailPane
from tui.find_bar import FindBar
from tui.open_screen import OpenScreen
from tui.results_list import ResultsList
from tui.run_panel import RunPanel

pytestmark = pytest.mark.warm_home  # runs kb as a user would after its first run; tests no cache


def run(coro):
    return asyncio.run(coro)


def test_find_in_the_details_marks_every_hit_and_steps_through_them(fake_kb, gpu):
    async def go():
        app = create_app(kb=fake_kb, environment=gpu, text=ILLEGAL)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            await pilot.press("escape", "enter")  # into the details
            pane = app.query_one(DetailPane)
            assert app.focused is pane
            await pilot.press("ctrl+f", *"kernel")
            bar = app.query_one(FindBar)
            assert bar.display and "details" in str(bar.query_one("#find-where").content)
            want = sum(line.lower().count("kernel") for line in pane.plain_lines)
            assert want >= 3 and pane.hit_count == want
            first = pane.current_hit
            await pilot.press("enter")  # next
            assert pane.current_hit == (first + 1) % want
            await pilot.press("up")  # previous
            assert pane.current_hit == first
            assert f"{first + 1}/{want}" in str(bar.query_one("#find-count").content)
            await pilot.press("escape")  # the bar closes; the marks stay, n and N go on
            assert not bar.display and app.focused is pane
            await letter(pilot, "n")
            assert pane.current_hit == (first + 1) % want
            await letter(pilot, "N")
            assert pane.current_hit == first
            # the view scrolled the current hit into sight
            line = pane._hits[pane.current_hit].line
            assert pane.scroll_y <= line < pane.scroll_y + pane.scrollable_content_region.height

    run(go())


def test_find_in_the_run_log_and_in_the_paste_box(fake_kb, gpu):
    async def go():
        app = create_app(kb=fake_kb, environment=gpu, text=ILLEGAL, verifier=StubVerify())
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            await run_repro(pilot)
            panel = app.query_one(RunPanel)
            await settle(pilot, until=lambda: panel.outcome is not None)
            await pilot.press("escape", "ctrl+f", *"launching")  # the run log is in front
            assert panel.run_log.hit_count == 2  # "launching kernel", "... with a mask"
            await pilot.press("escape", "f2", "ctrl+f")  # now from the paste box: in it
            field = app.query_one("#find-input", Input)
            field.value = ""
            await pilot.press(*"illegal")
            area = app.query_one("#paste", TextArea)
            assert area.selected_text.lower() == "illegal"

    run(go())


def test_go_to_the_matched_line_in_the_box(fake_kb, gpu):
    log = "".join(f"step {i} loss 0.1\n" for i in range(1, 200)) + ILLEGAL + "\n"

    async def go():
        app = create_app(kb=fake_kb, environment=gpu, text=log)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            await pilot.press("escape", "f7")
            await pilot.pause()
            area = app.query_one("#paste", TextArea)
            assert app.focused is area
            assert area.selected_text == ILLEGAL
            assert area.selection.start[0] == 199  # line 200

    run(go())


def test_go_to_a_matched_line_beyond_the_tail_a_file_shows(fake_kb, gpu, monkeypatch, tmp_path):
    monkeypatch.setattr(tui_app, "MAX_AREA_CHARS", 2000)
    log = tmp_path / "train.log"
    log.write_text("".join(f"step {i}\n" for i in range(1, 300)) + ILLEGAL + "\n" + "x\n" * 2000)

    async def go():
        app = create_app(kb=fake_kb, environment=gpu, log=log)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot, until=lambda: app.result is not None)
            await settle(pilot)
            area = app.query_one("#paste", TextArea)
            assert ILLEGAL not in area.text  # the tail holds only the x's
            await pilot.press("escape", "f7")
            await settle(pilot, until=lambda: ILLEGAL in area.text)
            await pilot.pause()
            assert area.selected_text == ILLEGAL
            assert area.show_line_numbers and area.line_number_start == 300 - 200
            assert "lines 100-" in str(area.border_subtitle)
            # the box still stands for the whole file: nothing was looked up again
            assert app._lookup_target() == log

    run(go())


def test_maximise_the_focused_pane_and_back(fake_kb, gpu):
    async def go():
        app = create_app(kb=fake_kb, environment=gpu, text=ILLEGAL)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            await pilot.press("escape", "enter", "f10")
            assert app.screen.maximized is app.query_one(TabbedContent)
            await pilot.press("escape")
            assert app.screen.maximized is None
            await letter(pilot, "m")
            assert app.screen.maximized is app.query_one(TabbedContent)
            await letter(pilot, "m")
            assert app.screen.maximized is None

    run(go())


def test_enter_drills_in_and_esc_goes_back(fake_kb, gpu):
    async def go():
        app = create_app(kb=fake_kb, environment=gpu, text=ILLEGAL)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            area = app.query_one("#paste", TextArea)
            results = app.query_one(ResultsList)
            pane = app.query_one(DetailPane)
            assert app.focused is area
            await pilot.press("escape")
            assert app.focused is results
            await pilot.press("enter")
            assert app.focused is pane and pane.has_pseudo_class("focus")
            await pilot.press("escape")
            assert app.focused is results
            await pilot.press("escape")
            assert app.focused is area

    run(go())


def test_the_command_palette_holds_the_apps_actions(fake_kb, gpu):
    async def go():
        app = create_app(kb=fake_kb, environment=gpu, text=ILLEGAL)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            commands = {c.help.split(" · ")[0]: c for c in app.get_system_commands(app.screen)}
            for label in ("Quit", "Help", "Run", "Copy", "Find", "Open", "Log", "Max", "Line"):
                assert label in commands, sorted(commands)
            assert "Cancel" not in commands  # nothing runs
            assert commands["Run"].help == "Run · f5 or r"
            titles = [c.title for c in app.get_system_commands(app.screen)]
            assert titles.count("Quit") == 0  # Textual's own quit would not ask during a run
            commands["Help"].callback()
            await pilot.pause()
            assert type(app.screen).__name__ == "HelpScreen"

    run(go())


def test_the_copy_menu_offers_each_part_and_says_where_the_copy_went(fake_kb, gpu, monkeypatch):
    async def go(system: str):
        monkeypatch.setattr(clipboard, "copy_system", lambda text: system)
        app = create_app(kb=fake_kb, environment=gpu, text=ILLEGAL)
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            await pilot.press("ctrl+o")
            menu = app.screen
            assert isinstance(menu, CopyMenu)
            labels = [it.label for it in menu.items]
            assert labels[0].startswith("Fix 1 (code)") and labels[1].startswith("Fix 2 (text)")
            assert any(lbl.startswith("Command: CUDA_LAUNCH_BLOCKING=1") for lbl in labels)
            assert any(lbl.startswith("Matched line 1: RuntimeError") for lbl in labels)
            url = fake_kb.get("fake-illegal-access").references[0].url
            assert any(it.text == url for it in menu.items)  # whole, never cut
            assert labels[-1].startswith("All of it, as Markdown")
            await pilot.press(str(len(labels)))  # the Markdown
            await settle(pilot)
            md = app.clipboard
            assert md.startswith("### kb: `fake-illegal-access` (high confidence)")
            assert "Matched line 1 (signature `torch-modern`)" in md and "**Try first:**" in md
            return app, [n.message for n in app._notifications]

    _, said = run(go("xclip"))
    assert any("to the clipboard (xclip)" in s for s in said), said

    async def not_confirmed():
        monkeypatch.setattr(clipboard, "copy_system", lambda text: "")
        monkeypatch.delenv("TMUX", raising=False)
        app = create_app(kb=fake_kb, environment=gpu, text=ILLEGAL)
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            await pilot.press("ctrl+o", "3")  # the diagnostic command
            await settle(pilot, until=lambda: isinstance(app.screen, CopiedScreen))
            shown = app.screen.query_one("#copied-text", TextArea)
            assert shown.text == "CUDA_LAUNCH_BLOCKING=1 python train.py"
            why = str(app.screen.query_one("#copied-why").content)
            assert "does not say whether it took it" in why and "Select the text" in why

    run(not_confirmed())


def test_the_copy_menu_for_a_guess_says_it_is_one(fake_kb, gpu):
    text = "watchdog operation timeout in the collective allreduce of the ranks"

    async def go():
        app = create_app(kb=fake_kb, environment=gpu, text=text)
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            await pilot.press("escape", "down", "ctrl+o")
            items = app.screen.items
            assert not any(it.label.startswith("Matched") for it in items)
            assert items[-1].text.startswith("### kb guess (full text, no signature matched)")

    run(go())


def test_details_come_to_the_front_and_the_run_log_stays_with_its_entry(fake_kb, gpu, tmp_path):
    async def go():
        app = create_app(kb=fake_kb, environment=gpu, verifier=StubVerify())
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            tabs = app.query_one(TabbedContent)
            panel = app.query_one(RunPanel)
            await pilot.press("escape", "down", "down", "down")  # fake-illegal-access
            await run_repro(pilot)
            await settle(pilot, until=lambda: panel.outcome is not None)
            assert tabs.active == "run"
            await pilot.press("up")  # another entry: its details, in front
            assert tabs.active == "details"
            await pilot.press("f4")  # its run log: it has none, and says so
            assert "fake-hang has not run here yet" in " ".join(panel.run_log.plain_lines)
            await pilot.press("down")  # back: the details first, the old run kept
            assert tabs.active == "details"
            await pilot.press("f4")
            assert "REPRODUCED" in " ".join(panel.run_log.plain_lines)
            # a new paste: its details in front at once
            app.query_one("#paste", TextArea).load_text(OOM_LOG)
            await settle(pilot)
            assert tabs.active == "details" and "fake-gpu-oom" in detail_text(app)
            # an Open that fails is said in front, not behind the log
            await pilot.press("f4")
            app.open_path(tmp_path / "no-such.log")
            await settle(pilot, until=lambda: detail_text(app).startswith("Cannot read"))
            assert tabs.active == "details"

    run(go())


def test_a_pipe_shows_its_tail_live_and_says_still_reading_until_it_ends(fake_kb, gpu):
    read, write = os.pipe()

    async def go():
        app = create_app(kb=fake_kb, environment=gpu, stream=os.fdopen(read, "rb"))
        async with app.run_test(size=(80, 24)) as pilot:
            area = app.query_one("#paste", TextArea)
            os.write(write, b"".join(b"step %d\n" % i for i in range(1, 30)))
            await settle(pilot, until=lambda: "step 29" in area.text)
            assert "still reading" in str(area.border_subtitle)
            await settle(pilot, until=lambda: app.result is not None)
            assert "so far" in str(app.query_one(ResultsList).border_title)
            assert detail_text(app).startswith("Still reading: no entry matched so far.")
            os.write(write, OOM_LOG.encode())  # more comes: the tail and the lookup follow
            await settle(pilot, until=lambda: "Tried to allocate" in area.text)
            await settle(pilot, until=lambda: app.result is not None and app.result.matches)
            os.close(write)
            await settle(pilot, until=lambda: not app._streaming)
            await settle(pilot)
            assert "still reading" not in str(area.border_subtitle)
            assert app.query_one(ResultsList).border_title == "Matches (1)"

    run(go())


def test_open_lists_what_fits_and_keeps_a_mistyped_path(fake_kb, gpu, tmp_path):
    (tmp_path / "rank0.log").write_text("x")
    (tmp_path / "rank1.log").write_text("x")

    async def go():
        app = create_app(kb=fake_kb, environment=gpu)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            await pilot.press("f3")
            field = app.screen.query_one("#open-path", Input)
            field.value = str(tmp_path / "ra")
            await pilot.press("tab")
            await settle(pilot, until=lambda: field.value == str(tmp_path / "rank"))
            hint = str(app.screen.query_one("#open-hint").content)
            assert "2 fit: rank0.log  rank1.log" in hint
            field.value = str(tmp_path / "nope.log")
            await pilot.press("enter")
            await pilot.pause()
            assert isinstance(app.screen, OpenScreen)  # still open, with the path to fix
            assert "No such file or folder" in str(app.screen.query_one("#open-hint").content)
            assert app.result is None and app.query_one(ResultsList).option_count == 4

    run(go())


def test_fix_code_that_wraps_shows_numbered_lines(fake_kb, gpu):
    """A comment wider than the pane wraps; numbered lines show where a wrap goes on, so the
    wrapped part never reads as a line of code of its own."""
    from kb import replace

    entry = fake_kb.get("fake-hang")
    code = "dist.init_process_group('nccl')  # " + "a long comment " * 8 + "\nx = 1"
    wide = replace(entry, fixes=(replace(entry.fixes[0], code=code),))

    async def go():
        app = create_app(kb=fake_kb, environment=gpu, text=ILLEGAL)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            pane = app.query_one(DetailPane)
            pane.show_entry(wide, [], None, None)
            await pilot.pause()
            lines = pane.plain_lines
            first = next(i for i, ln in enumerate(lines) if "init_process_group" in ln)
            assert lines[first].strip().startswith("1 ")
            assert not lines[first + 1].strip()[:1].isdigit()  # the wrap: no number
            assert any(ln.strip().startswith("2 x = 1") for ln in lines)

    run(go())


def test_the_job_list_leads_with_the_root_ranks_own_answer(tmp_path):
    # Rank 1 raised a KeyError; rank 0's watchdog then timed out: the TUI's rows read the same
    # root failure as `kb lookup` and the job view (tests/test_failure_roles.py).
    import kb
    from kb.diagnosis.engine import default_engine
    from tui.job_ranks import job_of

    log = tmp_path / "train.log"
    log.write_text(
        "[rank1]: Traceback (most recent call last):\n"
        '[rank1]:   File "/home/user/train.py", line 33, in main\n'
        '[rank1]:     lr = cfg["k"]\n'
        "[rank1]: KeyError: 'k'\n"
        "[rank0]:[E1129 10:02:11.201 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=1024, "
        "NumelOut=1024, Timeout(ms)=600000) ran for 600045 milliseconds before timing out.\n"
    )
    engine = default_engine()
    info = job_of(engine, kb.lookup_job([str(log)], engine=engine), 3)
    assert info is not None
    first, second = info.rows[0], info.rows[1]
    assert (first.rank, first.is_root, first.match.id if first.match else None) == (
        1,
        True,
        "python-key-error",
    )
    assert second.rank == 0 and not second.is_root
