"""Pilot-driven tests of the TUI: paste -> results -> detail, runs, cancel, no GPU, local entries,
jobs (a folder or a multi-rank log: the ranks, the root cause first)."""

from __future__ import annotations

import asyncio
import gzip
import io
import re
import subprocess
import sys
from types import SimpleNamespace

import pytest
from conftest import (
    ILLEGAL,
    JOBS,
    OOM_LOG,
    answer,
    banner,
    detail_text,
    footer_keys,
    letter,
    log_text,
    option_ids,
    run_repro,
    screen_text,
    settle,
)
from textual.widgets import Input, TextArea

import tui.app as tui_app
from tui.app import create_app, run_app
from tui.confirm_screen import ConfirmScreen
from tui.help_screen import HelpScreen
from tui.machine_status import MachineStatus, status_line
from tui.rank_list import RankList
from tui.results_list import NO_MATCH, ResultsList
from tui.run_panel import RunPanel

pytestmark = pytest.mark.warm_home  # runs kb as a user would after its first run; tests no cache


def run(coro):
    return asyncio.run(coro)


def test_browse_lists_every_entry_and_filters_by_any_word(fake_kb, gpu):
    async def go():
        app = create_app(kb=fake_kb, environment=gpu)
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            assert option_ids(app) == [
                "fake-gpu-oom",
                "fake-hang",
                "fake-illegal-access",
                "fake-local-entry",
            ]
            assert app.query_one(ResultsList).border_title == "Entries (4)"
            # the start screen opens on no entry: what to do, not an entry's fix
            assert app.query_one(ResultsList).highlighted is None
            assert detail_text(app).startswith("Nothing to diagnose yet")
            await pilot.press("f6", *"hang")
            assert isinstance(app.focused, Input)
            assert option_ids(app) == ["fake-hang"]
            await pilot.press("enter")
            assert isinstance(app.focused, ResultsList)
            shown = detail_text(app)
            assert shown.startswith(" AN ENTRY, NOT A DIAGNOSIS ")
            assert "Fake: the watchdog saw a collective hang" in shown
            assert "Try first" not in shown and "Fixes" in shown
            # a word only an entry's diagnostic command holds finds it too
            await pilot.press("f6", "ctrl+u", *"memory_summary")
            assert option_ids(app) == ["fake-gpu-oom"]

    run(go())


def test_paste_gives_results_and_detail(fake_kb, gpu):
    async def go():
        app = create_app(kb=fake_kb, environment=gpu)
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            area = app.query_one("#paste", TextArea)
            assert app.focused is area  # typing and pasting land in the box from the start
            area.insert("noise before\n" + ILLEGAL + "\n")
            await settle(pilot)
            assert option_ids(app) == ["fake-illegal-access"]
            assert app.query_one(ResultsList).border_title == "Matches (1)"
            text = detail_text(app)
            assert "line 2  " + ILLEGAL in text
            assert "signature torch-modern" in text
            assert "Causes (most likely first)" in text and "Mask every load and store" in text
            assert "NVIDIA H100 80GB HBM3: reproduced, fix verified" in text  # evidence per GPU
            # the order a person needs: what happened, the line it stands on, the fix, causes,
            # ..., how it matched, evidence
            order = [
                "fake-illegal-access · fake · high confidence",
                "a kernel touched memory",
                "line 2  " + ILLEGAL,
                "Try first",
                "Causes",
                "Diagnostics",
                "Other fixes",
                "Matched",
                "Verified on",
            ]
            at = [text.index(s) for s in order]
            assert at == sorted(at), list(zip(order, at, strict=True))
            assert text.count(ILLEGAL) == 1  # the line once, at the top
            # the OOM arithmetic of the log comes straight after what happened
            area.load_text(OOM_LOG)
            await settle(pilot)
            assert option_ids(app) == ["fake-gpu-oom"]
            text = detail_text(app)
            assert (
                text.index("Diagnosis of this log")
                < text.index("Try first")
                < text.index("\nMatched\n")
            )
            assert re.search(r"requested\s+20\.00 GiB", text)
            assert "in the log  requested=20.00 GiB" in text
            # nothing matches: the list and the detail say so; no suggestion is opened as the answer
            area.load_text("all good today")
            await settle(pilot)
            assert app.result.matches == []
            results = app.query_one(ResultsList)
            assert results.border_title == "No match" and results.selected_id == NO_MATCH
            assert "No entry matched" in str(results.get_option_at_index(0).prompt)
            assert detail_text(app).startswith("No entry matched this log.")
            assert option_ids(app) == [m.id for m in app.result.suggestions]
            # emptied: back to browsing
            await pilot.press("ctrl+l")
            await settle(pilot)
            assert len(option_ids(app)) == 4

    run(go())


def test_no_match_lists_guesses_as_guesses(fake_kb, gpu):
    text = "watchdog operation timeout in the collective allreduce of the ranks"

    async def go():
        app = create_app(kb=fake_kb, environment=gpu, text=text)
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            assert app.result.matches == [] and app.result.suggestions
            results = app.query_one(ResultsList)
            assert results.selected_id == NO_MATCH
            shown = detail_text(app)
            assert shown.startswith("No entry matched this log.")
            assert "Guesses (full text, unconfirmed)" in shown and "fake-hang" in shown
            await pilot.press("escape", "down")
            assert results.selected_id == app.result.suggestions[0].id
            shown = detail_text(app)
            assert shown.startswith(" GUESS, NOT A MATCH ")
            assert "No signature of this entry fired" in shown
            assert "Matched" not in shown and "Why it is listed" in shown
            assert "Try first" not in shown  # a guess's fixes are not offered as the answer
            assert "guess" in str(results.get_option_at_index(results.highlighted).prompt)

    run(go())


def test_no_match_shows_the_root_failure_first_as_not_in_the_knowledge_base(fake_kb, gpu):
    log = (
        "loading data\n"
        "Traceback (most recent call last):\n"
        '  File "/home/you/train.py", line 12, in <module>\n'
        '    open("data/train.csv")\n'
        "FileNotFoundError: [Errno 2] No such file or directory: 'data/train.csv'\n"
    )

    async def go():
        app = create_app(kb=fake_kb, environment=gpu, text=log)
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            assert app.result.matches == [] and app.result.root is not None
            shown = detail_text(app)
            assert shown.startswith(" NOT IN THE KNOWLEDGE BASE \nThe root failure, as the log")
            assert "kb has no diagnosis or fix for it" in shown
            assert "line 5  FileNotFoundError: [Errno 2] No such file" in shown
            assert "your code" in shown or "raised in" in shown
            assert "/home/you/train.py:12" in shown
            # then, plainly, that no entry matched; no "Try first" anywhere
            assert shown.index("NOT IN THE KNOWLEDGE BASE") < shown.index("No entry matched")
            assert "Try first" not in shown

    run(go())


def test_the_root_failure_says_where_a_known_message_is_printed(fake_kb, gpu):
    """No entry knows it, but kb's message catalog knows where PyTorch prints it: the detail
    pane says so beside the root failure (never as a diagnosis)."""
    log = (
        "Traceback (most recent call last):\n"
        '  File "/home/you/embed.py", line 9, in <module>\n'
        "    out = wrap_sparse(table)\n"
        "RuntimeError: layout_impl is only implemented for TensorImpl subclasses.\n"
    )

    async def go():
        app = create_app(kb=fake_kb, environment=gpu, text=log)
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            assert app.result.matches == [] and app.result.root is not None
            assert app.result.root.printed_by is not None
            shown = detail_text(app)
            assert "NOT IN THE KNOWLEDGE BASE" in shown
            assert "printed by" in shown
            assert "PyTorch's argument check in layout_impl" in " ".join(shown.split())

    run(go())


def test_the_footer_names_the_same_keys_wherever_the_focus_is(fake_kb, gpu):
    async def go():
        app = create_app(kb=fake_kb, environment=gpu, text=ILLEGAL)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            want = {
                "quit": "^q",
                "help": "f1",
                "run": "f5",
                "copy": "^o",
                "find": "^f",
                "open": "f3",
                "toggle_log": "f4",
                "maximize": "f10",
            }
            seen = []
            for focus in ("#paste", "#results", "#detail", "#filter"):
                app.query_one(focus).focus()
                await pilot.pause()
                shown = footer_keys(app)
                seen.append({a: shown.get(a) for a in want})
            assert all(s == want for s in seen), seen

    run(go())


def test_letters_act_only_outside_the_box_and_off_the_start_screen(fake_kb, gpu):
    async def go():
        app = create_app(kb=fake_kb, environment=gpu, text=ILLEGAL)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            area = app.query_one("#paste", TextArea)
            await letter(pilot, "q")  # in the box: text
            assert app.is_running and area.text.endswith("q")
            await pilot.press("escape")  # out of the box: now q is a command
            assert isinstance(app.focused, ResultsList)
            await letter(pilot, "q")
            assert not app.is_running

    run(go())


def test_ctrl_q_quits_from_anywhere(fake_kb, gpu):
    async def go():
        app = create_app(kb=fake_kb, environment=gpu)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            await pilot.press("ctrl+q")
            await pilot.pause()
            assert not app.is_running

    run(go())


def test_typing_is_debounced_into_one_lookup(fake_kb, gpu, monkeypatch):
    import threading

    calls = []
    threads = set()
    main = threading.get_ident()
    real = tui_app.Engine.lookup

    def counting(self, text, **kw):
        calls.append(text)
        threads.add("main" if threading.get_ident() == main else "worker")
        return real(self, text, **kw)

    monkeypatch.setattr(tui_app.Engine, "lookup", counting)
    # a loaded test machine can be slow between keys
    monkeypatch.setattr(tui_app, "DEBOUNCE_S", 0.6)

    async def go():
        app = create_app(kb=fake_kb, environment=gpu)
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            await pilot.press(*"CUDA error: an illegal memory access")
            await settle(pilot)
            assert len(calls) <= 2, calls  # not one per key
            assert calls[-1] == "CUDA error: an illegal memory access"
            assert option_ids(app) == ["fake-illegal-access"]
            assert app.last_result_ms is not None and app.last_result_ms < 1000
        assert threads == {"worker"}  # never a lookup on the event loop

    run(go())


def test_run_repro_streams_then_verdict_and_fix(fake_kb, gpu, no_gpu_env):
    async def go():
        app = create_app(kb=fake_kb, environment=no_gpu_env, text=ILLEGAL)
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            await run_repro(pilot)
            panel = app.query_one(RunPanel)
            await settle(pilot, until=lambda: panel.outcome is not None)
            assert panel.outcome.status == "reproduced"
            assert panel.outcome.fix_status == "fix-verified"
            assert banner(app).startswith(
                "REPRODUCED: matched torch-modern, as your line did · FIX VERIFIED"
            )
            assert app.query_one("#run-verdict").has_class("-good")
            log = log_text(app)
            assert "── repro (exit code 1) ──" in log and ILLEGAL in log
            assert "── fix check (exit code 0) ──" in log and "with a mask" in log
            assert app.query_one("TabbedContent").active == "run"

    run(go())


def test_cancel_kills_a_running_repro(fake_kb, gpu, no_gpu_env):
    async def go():
        app = create_app(
            kb=fake_kb,
            environment=no_gpu_env,
            text="Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE)",
        )
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            assert option_ids(app) == ["fake-hang"]
            await run_repro(pilot)
            panel = app.query_one(RunPanel)
            await settle(pilot, until=lambda: "waiting for the other ranks" in log_text(app))
            assert panel.running
            shown = footer_keys(app)  # while it runs, the footer offers to stop it
            assert shown.get("cancel") == "f5" and "run" not in shown
            await pilot.press("f5")
            await settle(pilot, until=lambda: not panel.running, timeout=10)
            assert panel.outcome.status == "cancelled"
            assert banner(app).startswith("CANCELLED")
            assert panel.outcome.duration_s < 10  # not the repro's 60 s sleep

    run(go())


def test_no_gpu_state_and_a_gpu_repro_is_not_offered(fake_kb, no_gpu_env):
    """The header says what the machine lacks; f5 on a GPU entry says why its repro cannot run
    (test_cannot_run_here.py has the rest)."""

    async def go():
        app = create_app(kb=fake_kb, environment=no_gpu_env, text=OOM_LOG)
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            status = app.query_one(MachineStatus)
            assert status.has_class("-no-gpu")
            line = str(status_line(status.environment, status.torch_known, 78))
            assert line == (
                "No NVIDIA GPU: no driver found · no torch: repros that need it cannot run"
            )
            await pilot.press("f5")
            await pilot.pause(0.4)
            assert not isinstance(app.screen, ConfirmScreen)
            panel = app.query_one(RunPanel)
            assert not panel.running and panel.outcome is None
            assert any(
                "fake-gpu-oom's repro cannot run here: no GPU" in str(n.message)
                for n in app._notifications
            )

    run(go())


def test_status_line_fits_and_says_what_was_checked(fake_kb):
    from kb import Environment, GpuInfo

    two = GpuInfo("NVIDIA H200", 143771, 140000, "575.51.03", 2, "9.0")
    env = Environment(gpu=two, torch="2.8.0+cu128", cuda="12.8")
    assert str(status_line(env, True, 118)) == (
        "GPU NVIDIA H200 (+1 more) · 3.7/140.4 GiB used · driver 575.51.03"
        "  ·  torch 2.8.0+cu128 (CUDA 12.8) runs the repros"
    )
    assert (
        str(status_line(env, True, 76))
        == "GPU H200 ×2 · 3.7/140.4 GiB · torch 2.8.0+cu128 (CUDA 12.8) runs the repros"
    )
    assert (
        str(status_line(env, True, 60))
        == "GPU H200 ×2 · 3.7/140.4 GiB · torch 2.8.0+cu128 (CUDA 12.8)"
    )
    assert str(status_line(env, False, 76)).endswith("torch: checking…")
    cpu_torch = Environment(gpu=None, gpu_reason="NVML found no GPU", torch="2.8.0", cuda="")
    assert (
        str(status_line(cpu_torch, True, 76))
        == "No NVIDIA GPU found · torch 2.8.0 (CPU build): only CPU repros run"
    )
    no_nvml = Environment(
        gpu=None, gpu_reason="NVML unavailable (the nvidia-ml-py package is not installed)"
    )
    assert str(status_line(no_nvml, True, 76)).startswith(
        "GPU unknown: nvidia-ml-py is not installed"
    )
    for width in (20, 40, 60, 76):
        for e in (env, cpu_torch, no_nvml):
            assert len(str(status_line(e, True, width))) <= width

    async def go():
        app = create_app(kb=fake_kb, environment=env)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            assert "H200" in str(app.query_one(MachineStatus).render())

    run(go())


def test_machine_is_probed_in_a_worker_not_on_the_event_loop(fake_kb):
    import threading

    from kb import GpuInfo
    from tui.verifier import Verifier

    main = threading.get_ident()
    seen: list[str] = []
    release = threading.Event()

    class SlowTorch(Verifier):
        def read_gpu(self):
            seen.append("gpu on main" if threading.get_ident() == main else "gpu in worker")
            return GpuInfo("NVIDIA H100 80GB HBM3", 81559, 80000, "570.86.15", 1, "9.0"), ""

        def probe_torch(self, python):
            seen.append("torch on main" if threading.get_ident() == main else "torch in worker")
            release.wait(10)
            return "", "", "ModuleNotFoundError: No module named 'torch'"

    async def go():
        app = create_app(kb=fake_kb, verifier=SlowTorch(), watch_gpu=False)
        async with app.run_test(size=(80, 24)) as pilot:
            status = app.query_one(MachineStatus)
            await settle(pilot, until=lambda: status.environment is not None)
            assert not status.torch_known  # the UI is live while torch is being probed
            assert "torch: checking" in str(status.render())
            release.set()
            await settle(pilot, until=lambda: status.torch_known)
            assert "torch not installed" in str(status.render()) or "no torch" in str(
                status.render()
            )
        assert seen == ["gpu in worker", "torch in worker"]

    run(go())


def test_local_entry_asks_before_running(fake_kb, gpu, no_gpu_env):
    async def go():
        app = create_app(
            kb=fake_kb, environment=no_gpu_env, text="MyTeamOpError: custom op fused_gelu failed"
        )
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            assert option_ids(app) == ["fake-local-entry"]
            panel = app.query_one(RunPanel)
            await pilot.press("f5")
            assert isinstance(app.screen, ConfirmScreen)
            shown = screen_text(app)
            assert "A local entry" in shown and "/home/you/kb-entries/" in shown
            await answer(pilot, "n")
            assert not isinstance(app.screen, ConfirmScreen)
            assert not panel.running and panel.outcome is None
            await run_repro(pilot)
            await settle(pilot, until=lambda: panel.outcome is not None)
            # trust=True reached kb.verify: without it the repro is skipped as untrusted
            assert panel.outcome.status == "reproduced", panel.outcome.detail
            assert banner(app).startswith(
                "REPRODUCED: matched custom-op, as your line did · no fix check"
            )

    run(go())


def test_help_opens_from_anywhere(fake_kb, gpu):
    async def go():
        app = create_app(kb=fake_kb, environment=gpu, text=ILLEGAL)
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            await pilot.press("escape")
            await letter(pilot, "question_mark")
            assert isinstance(app.screen, HelpScreen)
            await pilot.press("escape")
            assert not isinstance(app.screen, HelpScreen)
            await pilot.press("f2")
            assert isinstance(app.focused, TextArea)
            await pilot.press("f1")  # works from inside the editor too
            assert isinstance(app.screen, HelpScreen)
            await pilot.press("f5")  # the keys of the screen below do nothing under the help
            assert not app.query_one(RunPanel).running
            assert not isinstance(app.screen, ConfirmScreen)
            await pilot.press("f1")
            assert not isinstance(app.screen, HelpScreen)

    run(go())


def test_big_file_is_looked_up_whole_but_shown_as_tail(fake_kb, gpu, monkeypatch, tmp_path):
    monkeypatch.setattr(tui_app, "MAX_AREA_CHARS", 2000)
    log = tmp_path / "train.log.gz"
    log.write_bytes(
        gzip.compress(
            (ILLEGAL + "\n" + "".join(f"step {i} loss 0.1\n" for i in range(500))).encode()
        )
    )

    async def go():
        app = create_app(kb=fake_kb, environment=gpu, log=log)
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot, until=lambda: app.result is not None)
            area = app.query_one("#paste", TextArea)
            assert (
                len(area.text) <= 2000
                and ILLEGAL not in area.text
                and area.text.startswith("step ")
            )
            assert (
                str(area.border_subtitle).startswith("tail of ")
                and area.border_title == "train.log.gz"
            )
            assert option_ids(app) == ["fake-illegal-access"]
            assert app.result.lines_scanned == 501
            # typing over the tail makes the typed text the input
            area.load_text("RuntimeError: CUDA out of memory. Tried to allocate 2.00 MiB")
            await settle(pilot)
            assert option_ids(app) == ["fake-gpu-oom"]

    run(go())


def test_piped_log_is_read_in_a_worker_and_looked_up_whole(fake_kb, gpu):
    body = "".join(f"step {i}\n" for i in range(20000)) + OOM_LOG

    async def go():
        app = create_app(
            kb=fake_kb, environment=gpu, stream=io.BytesIO(gzip.compress(body.encode()))
        )
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot, until=lambda: app.result is not None and not app._streaming)
            await settle(pilot)
            assert option_ids(app) == ["fake-gpu-oom"]
            assert app.result.lines_scanned == body.count("\n")
            spooled = app._spool
            assert spooled is not None and spooled.exists()
        assert not spooled.exists()  # the copy of the pipe goes when the app does

    run(go())


def test_a_cut_short_gzip_gives_words_and_what_could_be_read(fake_kb, gpu, tmp_path):
    log = tmp_path / "killed.log.gz"
    whole = gzip.compress(
        (OOM_LOG + "".join(f"step {i} loss {i * 7 % 101}\n" for i in range(50000))).encode()
    )
    log.write_bytes(whole[: len(whole) // 2])

    async def go():
        app = create_app(kb=fake_kb, environment=gpu, log=log)
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot, until=lambda: app.result is not None)
            await settle(pilot)
            assert option_ids(app) == ["fake-gpu-oom"]
            # kb's reader gives what came before the cut, and says so
            said = [w for w in app.result.warnings if "truncated" in w or "cut short" in w]
            assert said, app.result.warnings
            assert said[0] in detail_text(app)

    run(go())


def test_run_app_refuses_a_bad_file_in_words(tmp_path, capsys):
    assert run_app(SimpleNamespace(file=str(tmp_path / "missing.log"), kb_dir=None)) == 2
    assert capsys.readouterr().err.strip() == f"kb: no such file: {tmp_path / 'missing.log'}"
    assert run_app(SimpleNamespace(file=str(tmp_path), kb_dir=None)) == 2
    assert "is a folder" in capsys.readouterr().err
    assert run_app(SimpleNamespace(file="/dev/zero", kb_dir=None)) == 2  # endless: refused
    assert "device" in capsys.readouterr().err


def test_run_app_without_a_terminal_says_so(monkeypatch, capsys):
    import tui.command_line as command_line

    monkeypatch.setattr(command_line.os, "isatty", lambda fd: False)

    def no_tty(path, flags):
        raise OSError(6, "No such device or address")

    monkeypatch.setattr(command_line.os, "open", no_tty)
    assert run_app(SimpleNamespace(file=None, kb_dir=None)) == 2
    assert "needs a terminal" in capsys.readouterr().err


def test_entries_load_in_a_worker(monkeypatch):
    import threading

    main = threading.get_ident()
    where = []
    real = tui_app.Engine.knowledge.fget

    def knowledge(self):
        where.append("main" if threading.get_ident() == main else "worker")
        return real(self)

    monkeypatch.setattr(tui_app.Engine, "knowledge", property(knowledge))

    async def go():
        app = create_app(environment=no_probe_env())  # the bundled entries, loaded by the app
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot, until=lambda: app.kb is not None)
            assert len(option_ids(app)) == len(app.kb.entries) > 10
        assert where and set(where) == {"worker"}

    run(go())


def no_probe_env():
    from kb import Environment

    return Environment(gpu=None, gpu_reason="NVML found no GPU", torch="", cuda="")


def test_kb_never_imports_tui():
    code = (
        "import sys, kb.cli.main, kb.diagnosis.engine, kb.verify.verifier, kb.render.style, kb.render.report; "
        "print([m for m in sys.modules if m.split('.')[0] in ('tui', 'textual')])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    "status,fix,cls",
    [
        ("reproduced", "fix-failed", "-bad"),
        ("not-reproduced", "", "-bad"),
        ("timeout", "", "-bad"),
        ("error", "", "-bad"),
        ("skipped", "", "-neutral"),
        ("cancelled", "", "-neutral"),
    ],
)
def test_verdict_banner_classes(status, fix, cls):
    from kb import Outcome
    from tui.run_panel import verdict_of

    o = Outcome(
        "e",
        status,
        fix,
        duration_s=1.0,
        detail="why; because",
        matched=("sig",),
        matched_instead=("other-entry",),
    )
    text, got = verdict_of(o)
    assert got == cls
    assert text.split(":")[0].split(" ")[0] in (
        "REPRODUCED",
        "NOT",
        "TIMED",
        "ERROR",
        "SKIPPED",
        "CANCELLED",
    )


def test_help_at_80x24_scrolls_to_its_last_line(fake_kb, gpu):
    from tui.help_screen import AFTER

    last_words = " ".join(AFTER.split()[-4:])

    async def go():
        app = create_app(kb=fake_kb, environment=gpu)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            await pilot.press("f1")
            await pilot.pause()
            body = app.screen.query_one("#help-body")
            assert body.max_scroll_y > 0  # taller than the terminal: the test means something
            assert "more" in str(body.border_subtitle)
            assert last_words not in screen_text(app)
            await pilot.press("end")
            await pilot.pause()
            assert body.scroll_y == body.max_scroll_y
            assert last_words in screen_text(app)
            assert str(body.border_subtitle) == "esc closes"
            await pilot.press("escape")
            assert not isinstance(app.screen, HelpScreen)

    run(go())


# ---------------------------------------------------------------- the job view
SIGKILL_JOB = JOBS / "cpu-sigkill" / "run"  # rank 1 killed by SIGKILL; rank 0 lost its peer


def rank_rows(app) -> list[str]:
    """The rank list's rows as shown, one string a row."""
    ranks = app.query_one(RankList)
    return [" ".join(str(o.prompt).split()) for o in ranks.options]


async def open_job(pilot) -> None:
    await settle(pilot, until=lambda: pilot.app.job is not None)
    await settle(pilot)


def test_a_job_folder_lists_its_ranks_root_cause_first(job_kb, gpu):
    async def go():
        app = create_app(kb=job_kb, environment=gpu, log=SIGKILL_JOB)
        async with app.run_test(size=(80, 24)) as pilot:
            await open_job(pilot)
            ranks = app.query_one(RankList)
            assert ranks.display and not app.query_one("#paste").display
            assert app.focused is ranks
            rows = rank_rows(app)
            assert len(rows) == 2
            assert rows[0].startswith("▶ rank 1 root cause") and "exit -9 (SIGKILL)" in rows[0]
            assert rows[1].startswith("rank 0 consequence") and "fake-peer-reset" in rows[1]
            assert ranks.highlighted == 0
            shown = detail_text(app)
            assert shown.startswith(" ROOT CAUSE  rank 1")
            assert "fake-killed-by-signal" in shown and "exit -9 (SIGKILL)" in shown
            assert "rank 1 failed first" in shown  # the job's verdict, under the rank's own
            assert "Try first" in shown
            keys = footer_keys(app)
            assert keys["open"] == "f3" and keys["quit"] == "^q" and keys["run"] == "f5"

    run(go())


def test_selecting_another_rank_shows_its_diagnosis(job_kb, gpu):
    async def go():
        app = create_app(kb=job_kb, environment=gpu, log=SIGKILL_JOB)
        async with app.run_test(size=(80, 24)) as pilot:
            await open_job(pilot)
            root_detail = detail_text(app)
            await pilot.press("down")
            await pilot.pause()
            shown = detail_text(app)
            assert shown != root_detail
            assert shown.startswith("rank 0 · a consequence of rank 1's failure")
            assert "lost the connection to a rank that had died" in shown
            assert "fake-peer-reset" in shown and "ROOT CAUSE" not in shown
            assert "exit -15 (SIGTERM)" in shown
            # the keys act on the selected rank's entry
            await letter(pilot, "y")
            menu = app.screen.query_one("#copy-list")
            assert "Fix 1 (text)" in str(menu.get_option_at_index(0).prompt)  # no code there
            await pilot.press("escape")
            await pilot.press("up")
            await letter(pilot, "y")
            await pilot.press("1")
            await pilot.pause()
            assert app.clipboard.startswith("loader = DataLoader(")

    run(go())


def test_open_key_opens_a_job_folder(job_kb, gpu):
    async def go():
        app = create_app(kb=job_kb, environment=gpu)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            assert app.job is None
            await pilot.press("f3")
            await pilot.pause()
            field = app.screen.query_one("#open-path", Input)
            assert app.focused is field
            field.value = str(SIGKILL_JOB)
            await pilot.press("enter")
            await open_job(pilot)
            assert rank_rows(app)[0].startswith("▶ rank 1 root cause")
            assert str(app.query_one(RankList).border_subtitle) == "cpu-sigkill/run"
            # f3 works from inside the paste box too; esc leaves the prompt without opening
            await letter(pilot, "i")  # closes the job: the box is where pasting happens
            await settle(pilot)
            assert app.job is None and isinstance(app.focused, TextArea)
            await pilot.press("f3")
            await pilot.pause()
            await pilot.press("escape")
            await settle(pilot)
            assert app.job is None and isinstance(app.focused, TextArea)

    run(go())


def test_opening_a_path_that_is_not_there_says_so(job_kb, gpu, tmp_path):
    async def go():
        app = create_app(kb=job_kb, environment=gpu, log=SIGKILL_JOB)
        async with app.run_test(size=(80, 24)) as pilot:
            await open_job(pilot)
            app.open_path(tmp_path / "no-such-run")
            await settle(pilot, until=lambda: app.job is None)
            await settle(pilot)
            assert detail_text(app).startswith("Cannot read the input")
            assert "no such file" in detail_text(app)
            empty = tmp_path / "empty"
            empty.mkdir()
            app.open_path(empty)
            await settle(pilot, until=lambda: "no log files" in detail_text(app))
            assert app.job is None

    run(go())


def test_quit_works_from_the_job_view(job_kb, gpu):
    async def go():
        app = create_app(kb=job_kb, environment=gpu, log=SIGKILL_JOB)
        async with app.run_test(size=(80, 24)) as pilot:
            await open_job(pilot)
            await pilot.press("down")
            await letter(pilot, "q")
            assert not app.is_running

    run(go())


def test_a_piped_multi_rank_log_opens_the_job_view(job_kb, gpu):
    log = (SIGKILL_JOB / "output.log").read_bytes()  # torchrun's own output: both ranks in it

    async def go():
        app = create_app(kb=job_kb, environment=gpu, stream=io.BytesIO(log))
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot, until=lambda: app.job is not None and not app._streaming)
            await settle(pilot)
            rows = rank_rows(app)
            assert rows[0].startswith("▶ rank 1 root cause") and rows[1].startswith("rank 0")

    run(go())


def test_one_process_log_is_no_job(job_kb, gpu, tmp_path):
    log = tmp_path / "train.log"
    log.write_text(OOM_LOG)

    async def go():
        app = create_app(kb=job_kb, environment=gpu, log=log)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot, until=lambda: app.result is not None)
            await settle(pilot)
            assert app.job is None and not app.query_one(RankList).display
            assert option_ids(app) == ["fake-gpu-oom"]

    run(go())


def test_job_lookups_run_in_workers(job_kb, gpu, monkeypatch):
    import threading

    main = threading.get_ident()
    where = []
    import tui.lookup as tui_lookup

    real = tui_lookup.lookup_job

    def recording(paths, **kw):
        where.append("main" if threading.get_ident() == main else "worker")
        return real(paths, **kw)

    monkeypatch.setattr(tui_lookup, "lookup_job", recording)

    async def go():
        app = create_app(kb=job_kb, environment=gpu, log=SIGKILL_JOB)
        async with app.run_test(size=(80, 24)) as pilot:
            await open_job(pilot)
        assert where and set(where) == {"worker"}

    run(go())


def test_job_rows_name_a_desyncs_stalled_rank_first(job_kb):
    """cpu-stall: rank 1 stalled before the all_reduce, rank 0 timed out waiting for it."""
    from kb import Engine, FaultKind, JobKind, Role
    from tui.lookup import look_up

    _, job = look_up(Engine(knowledge=job_kb), JOBS / "cpu-stall" / "run", "", 8)
    assert job is not None and job.kind == JobKind.DESYNC
    root, other = job.rows
    assert root.straggler and root.fault in (FaultKind.STALLED, FaultKind.STRAGGLER)
    assert (root.who, root.label, root.verdict) == ("rank 1", "root cause", str(root.fault))
    assert root.line_of == "rank 0" and "Timed out waiting" in root.line
    assert (other.who, other.role) == ("rank 0", Role.CONSEQUENCE)
    assert any("torchrun" in n for n in job.notes)  # torchrun blames the rank that waited


def test_run_app_takes_a_folder_and_refuses_it_as_file(tmp_path, monkeypatch, capsys):
    import tui.command_line as command_line

    made = {}

    class Fake:
        return_code = 0

        def run(self):
            pass

    def make_app(**kw):
        made.update(kw)
        return Fake()

    monkeypatch.setattr(command_line, "attach_terminal", lambda: None)
    args = SimpleNamespace(path=str(SIGKILL_JOB), file=None, kb_dir=None)
    assert command_line.main(args, make_app) == 0
    assert made["log"] == SIGKILL_JOB
    args = SimpleNamespace(path=None, file=str(SIGKILL_JOB), kb_dir=None)
    assert command_line.main(args, make_app) == 2
    assert "give a job's folder without --file" in capsys.readouterr().err
    args = SimpleNamespace(path=str(tmp_path / "gone"), file=None, kb_dir=None)
    assert command_line.main(args, make_app) == 2
    assert "no such file" in capsys.readouterr().err


def test_path_completion_goes_as_far_as_the_names_agree(tmp_path):
    from tui.open_screen import complete

    (tmp_path / "runs").mkdir()
    (tmp_path / "rank0.log").write_text("x")
    (tmp_path / "rank1.log").write_text("x")
    (tmp_path / ".hidden").mkdir()
    assert complete(str(tmp_path / "ru")) == (str(tmp_path / "runs") + "/", ["runs/"])
    # two fit: completed to what they share, both named, neither taken
    assert complete(str(tmp_path / "ra")) == (str(tmp_path / "rank"), ["rank0.log", "rank1.log"])
    assert complete(str(tmp_path / "rank")) == (None, ["rank0.log", "rank1.log"])
    assert complete(str(tmp_path / "x")) == (None, [])
    assert complete(str(tmp_path) + "/")[1] == ["rank0.log", "rank1.log", "runs/"]  # no .hidden


def test_a_desync_names_the_rank_the_others_waited_for(job_kb, gpu):
    async def go():
        app = create_app(kb=job_kb, environment=gpu, log=JOBS / "cpu-stall" / "run")
        async with app.run_test(size=(100, 30)) as pilot:
            await open_job(pilot)
            assert rank_rows(app)[0].startswith("▶ rank 1 root cause stalled")
            shown = " ".join(detail_text(app).split())
            assert shown.startswith("ROOT CAUSE rank 1 ") and "collective #2" in shown
            assert "The line is rank 0's, which timed out waiting for rank 1" in shown
            await pilot.press("down")
            await pilot.pause()
            shown = " ".join(detail_text(app).split())
            assert shown.startswith("rank 0 · a consequence: it waited for rank 1")
            assert "No entry's signature matches its line." in shown

    run(go())


def test_a_fifo_given_as_the_path_is_read_once_as_a_pipe(tmp_path, monkeypatch):
    """kb tui FIFO (or <(cmd), /dev/stdin): one reader, like a pipe on stdin; checking it
    first would have been a second reader waiting for a writer of its own."""
    import os
    import threading

    import tui.command_line as command_line

    fifo = tmp_path / "train.fifo"
    os.mkfifo(fifo)

    def writer():
        with open(fifo, "wb") as fh:
            fh.write((ILLEGAL + "\n").encode())

    threading.Thread(target=writer, daemon=True).start()
    made = {}

    class Fake:
        return_code = 0
        quit_with_run = False

        def run(self):
            made["data"] = made["stream"].read()

    def make_app(**kw):
        made.update(kw)
        return Fake()

    monkeypatch.setattr(command_line, "attach_terminal", lambda: None)
    args = SimpleNamespace(path=str(fifo), file=None, kb_dir=None)
    assert command_line.main(args, make_app) == 0
    assert made["log"] is None and made["data"] == (ILLEGAL + "\n").encode()


def test_the_cause_the_log_shows_leads_the_detail():
    # the linker's summary is the class's line; the line above it says which cause it is
    log = (
        "/usr/bin/ld: cannot find -lcuda: No such file or directory\n"
        "collect2: error: ld returned 1 exit status\n"
    )

    async def go():
        app = create_app(environment=no_probe_env())
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot, until=lambda: app.kb is not None)
            app.query_one("#paste", TextArea).insert(log)
            await settle(pilot)
            assert option_ids(app)[0] == "jit-extension-build-failed"
            text = detail_text(app)
            causes = text.split("Causes (most likely first)", 1)[1]
            first = causes.strip().splitlines()[0]
            assert "libcuda" in first and "(this log shows it)" in first
            assert causes.count("(this log shows it)") == 1

    run(go())
