"""Pilot-driven tests of the TUI: paste -> results -> detail, runs, cancel, no GPU, local entries."""

from __future__ import annotations

import asyncio
import gzip
import io
import re
import subprocess
import sys
from types import SimpleNamespace

import pytest
from conftest import ILLEGAL, OOM_LOG, settle
from textual.widgets import Input, TextArea

import tui.app as tui_app
from tui.app import create_app, read_input, run_app
from tui.confirm_screen import ConfirmScreen
from tui.gpu_status import GpuStatus
from tui.help_screen import HelpScreen
from tui.results_list import ResultsList
from tui.run_panel import RunPanel


def run(coro):
    return asyncio.run(coro)


def option_ids(app) -> list[str]:
    results = app.query_one(ResultsList)
    return [o.id for o in results.options if not o.disabled]


def detail_text(app) -> str:
    from rich.console import Console

    body = app.query_one("#detail-body")
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(body.content if hasattr(body, "content") else body.renderable)
    return console.export_text()


def log_text(app) -> str:
    # joined and re-spaced: the log wraps long lines at the panel's width
    return " ".join(" ".join(line.text for line in app.query_one("#run-log").lines).split())


def banner(app) -> str:
    return str(app.query_one("#run-verdict").content)


def test_browse_lists_every_entry_and_filters(fake_kb, gpu):
    async def go():
        app = create_app(kb=fake_kb, gpu=gpu)
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            assert option_ids(app) == ["fake-gpu-oom", "fake-hang", "fake-illegal-access", "fake-local-entry"]
            assert app.query_one(ResultsList).border_title == "Entries (4)"
            await pilot.press("escape", "slash", *"hang")
            assert isinstance(app.focused, Input)
            assert option_ids(app) == ["fake-hang"]
            await pilot.press("enter")
            assert isinstance(app.focused, ResultsList)
            assert "Fake: the watchdog saw a collective hang" in detail_text(app)

    run(go())


def test_paste_gives_results_and_detail(fake_kb, gpu):
    async def go():
        app = create_app(kb=fake_kb, gpu=gpu)
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            area = app.query_one("#paste", TextArea)
            assert app.focused is area
            area.insert("noise before\n" + ILLEGAL + "\n")
            await settle(pilot)
            assert option_ids(app) == ["fake-illegal-access"]
            assert app.query_one(ResultsList).border_title == "Matches (1)"
            text = detail_text(app)
            assert "Why it matched" in text
            assert "line 2: " + ILLEGAL in text
            assert "signature torch-modern" in text
            assert "Causes (most likely first)" in text and "Mask every load and store" in text
            assert "reproduced, fix verified on NVIDIA H100 80GB HBM3" in text  # the evidence
            # the OOM arithmetic of the log, next to its entry
            area.load_text(OOM_LOG)
            await settle(pilot)
            assert option_ids(app) == ["fake-gpu-oom"]
            text = detail_text(app)
            assert "Diagnosis of this log" in text
            assert re.search(r"requested\s+20\.00 GiB", text)
            assert "captured  requested=20.00 GiB" in text
            # nothing matches: the list says so; full-text near misses are offered as "maybe"
            area.load_text("all good today")
            await settle(pilot)
            assert app.result.matches == []
            first = app.query_one(ResultsList).get_option_at_index(0)
            assert first.disabled and "No entry matched this text." in str(first.prompt)
            assert option_ids(app) == [m.id for m in app.result.suggestions]
            # emptied: back to browsing
            await pilot.press("ctrl+x")
            await settle(pilot)
            assert len(option_ids(app)) == 4

    run(go())


def test_typing_is_debounced_into_one_lookup(fake_kb, gpu, monkeypatch):
    calls = []
    real = tui_app.Engine.lookup

    def counting(self, text, **kw):
        calls.append(text)
        return real(self, text, **kw)

    monkeypatch.setattr(tui_app.Engine, "lookup", counting)

    async def go():
        app = create_app(kb=fake_kb, gpu=gpu)
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            await pilot.press(*"CUDA error: an illegal memory access")
            await settle(pilot)
            assert len(calls) <= 2, calls  # not one per key
            assert calls[-1] == "CUDA error: an illegal memory access"
            assert option_ids(app) == ["fake-illegal-access"]
            assert app.last_result_ms is not None and app.last_result_ms < 1000

    run(go())


def test_run_repro_streams_then_verdict_and_fix(fake_kb, gpu, no_gpu_env):
    async def go():
        app = create_app(kb=fake_kb, gpu=gpu, environment=no_gpu_env, text=ILLEGAL)
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            await pilot.press("r")
            panel = app.query_one(RunPanel)
            await settle(pilot, until=lambda: panel.outcome is not None)
            assert panel.outcome.status == "reproduced"
            assert panel.outcome.fix_status == "fix-verified"
            assert banner(app).startswith("REPRODUCED: matched torch-modern · FIX VERIFIED")
            assert app.query_one("#run-verdict").has_class("-good")
            log = log_text(app)
            assert "── repro (exit code 1) ──" in log and ILLEGAL in log
            assert "── fix check (exit code 0) ──" in log and "with a mask" in log
            assert app.query_one("TabbedContent").active == "run"

    run(go())


def test_cancel_kills_a_running_repro(fake_kb, gpu, no_gpu_env):
    async def go():
        app = create_app(kb=fake_kb, gpu=gpu, environment=no_gpu_env, text="Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE)")
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            assert option_ids(app) == ["fake-hang"]
            await pilot.press("f5")
            panel = app.query_one(RunPanel)
            await settle(pilot, until=lambda: "waiting for the other ranks" in log_text(app))
            assert panel.running
            await pilot.press("c")
            await settle(pilot, until=lambda: not panel.running, timeout=10)
            assert panel.outcome.status == "cancelled"
            assert banner(app).startswith("CANCELLED")
            assert panel.outcome.duration_s < 10  # not the repro's 60 s sleep

    run(go())


def test_no_gpu_state_and_gpu_repro_is_skipped(fake_kb, no_gpu_env):
    async def go():
        app = create_app(kb=fake_kb, environment=no_gpu_env, text=OOM_LOG)
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            status = app.query_one(GpuStatus)
            assert status.has_class("-no-gpu")
            assert "No NVIDIA GPU" in str(status.content) and "no NVIDIA driver" in str(status.content)
            await pilot.press("r")
            panel = app.query_one(RunPanel)
            await settle(pilot, until=lambda: not panel.running)
            assert panel.outcome.status == "skipped"
            assert banner(app) == "SKIPPED: no GPU: NVML unavailable: no NVIDIA driver?"

    run(go())


def test_gpu_status_line_shows_name_memory_driver(fake_kb):
    from kb.gpu import GpuInfo
    from kb.verify import Environment

    env = Environment(gpu=GpuInfo("NVIDIA H200", 143771, 140000, "575.51.03", 2, "9.0"))

    async def go():
        app = create_app(kb=fake_kb, environment=env)
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            text = str(app.query_one(GpuStatus).content)
            assert "NVIDIA H200 (+1 more) 3.7/140.4 GiB used · driver 575.51.03" in text

    run(go())


def test_local_entry_asks_before_running(fake_kb, gpu, no_gpu_env):
    async def go():
        app = create_app(kb=fake_kb, gpu=gpu, environment=no_gpu_env,
                         text="MyTeamOpError: custom op fused_gelu failed")
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            assert option_ids(app) == ["fake-local-entry"]
            panel = app.query_one(RunPanel)
            await pilot.press("r")
            assert isinstance(app.screen, ConfirmScreen)
            await pilot.press("n")
            assert not isinstance(app.screen, ConfirmScreen)
            assert not panel.running and panel.outcome is None
            await pilot.press("r")
            assert isinstance(app.screen, ConfirmScreen)
            await pilot.press("y")
            await settle(pilot, until=lambda: panel.outcome is not None)
            # trust=True reached kb.verify: without it the repro is skipped as untrusted
            assert panel.outcome.status == "reproduced", panel.outcome.detail
            assert banner(app).startswith("REPRODUCED: matched custom-op · no fix check")

    run(go())


def test_copy_fix_and_help(fake_kb, gpu):
    async def go():
        app = create_app(kb=fake_kb, gpu=gpu, text=ILLEGAL)
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            await pilot.press("y")
            assert app.clipboard == "mask = offs < n\nx = tl.load(x_ptr + offs, mask=mask)\n"
            await pilot.press("question_mark")
            assert isinstance(app.screen, HelpScreen)
            await pilot.press("escape")
            assert not isinstance(app.screen, HelpScreen)
            await pilot.press("i")
            assert isinstance(app.focused, TextArea)
            await pilot.press("f1")  # works from inside the editor too
            assert isinstance(app.screen, HelpScreen)

    run(go())


def test_big_input_is_looked_up_whole_but_shown_as_tail(fake_kb, gpu, monkeypatch):
    monkeypatch.setattr(tui_app, "MAX_AREA_CHARS", 2000)
    log = ILLEGAL + "\n" + "".join(f"step {i} loss 0.1\n" for i in range(500))

    async def go():
        app = create_app(kb=fake_kb, gpu=gpu, text=log)
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            area = app.query_one("#paste", TextArea)
            assert len(area.text) <= 2000 and ILLEGAL not in area.text
            assert "results use all" in str(area.border_subtitle)
            assert option_ids(app) == ["fake-illegal-access"]

    run(go())


def test_read_input_from_pipe_and_gzip_file(tmp_path):
    piped = SimpleNamespace(isatty=lambda: False, buffer=io.BytesIO(ILLEGAL.encode()))
    assert read_input(SimpleNamespace(file=None), stdin=piped) == (ILLEGAL, None)
    log = tmp_path / "train.log.gz"
    log.write_bytes(gzip.compress(OOM_LOG.encode()))
    assert read_input(SimpleNamespace(file=str(log)), stdin=piped) == (OOM_LOG, None)
    text, err = read_input(SimpleNamespace(file=str(tmp_path / "missing.log")))
    assert text == "" and err.startswith("kb: cannot read")


def test_run_app_without_a_terminal_says_so(monkeypatch, capsys):
    piped = SimpleNamespace(isatty=lambda: False, buffer=io.BytesIO(b"log"))
    monkeypatch.setattr(sys, "stdin", piped)
    monkeypatch.setattr(tui_app.os, "isatty", lambda fd: False)

    def no_tty(path, flags):
        raise OSError(6, "No such device or address")

    monkeypatch.setattr(tui_app.os, "open", no_tty)
    assert run_app(SimpleNamespace(file=None, kb_dir=None)) == 2
    assert "needs a terminal" in capsys.readouterr().err


def test_kb_never_imports_tui():
    code = ("import sys, kb.cli, kb.engine, kb.verify, kb.render, kb.report; "
            "print([m for m in sys.modules if m.split('.')[0] in ('tui', 'textual')])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("status,fix,cls", [
    ("reproduced", "fix-failed", "-bad"), ("not-reproduced", "", "-bad"), ("timeout", "", "-bad"),
    ("error", "", "-bad"), ("skipped", "", "-neutral"), ("cancelled", "", "-neutral")])
def test_verdict_banner_classes(status, fix, cls):
    from tui.run_panel import verdict_of

    o = SimpleNamespace(status=status, fix_status=fix, detail="why; because", duration_s=1.0,
                        matched=("sig",), matched_instead=("other-entry",))
    text, got = verdict_of(o)
    assert got == cls
    assert text.split(":")[0].split(" ")[0] in ("REPRODUCED", "NOT", "TIMED", "ERROR", "SKIPPED", "CANCELLED")
