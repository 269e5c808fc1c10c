"""The TUI under hostile input (issue 36): text from a log, a path or a local entry is never Rich
markup and never reaches the terminal as something it obeys (kb.inert): a local entry's problem
holding `[/]`, a job folder whose path holds `[/]`, a log with a window title, a reset, line
drawing, a C1 CSI and a right-to-left override."""

from __future__ import annotations

import asyncio
import unicodedata

from conftest import ILLEGAL, detail_text, settle
from textual.geometry import Region

from tui.app import create_app

HOSTILE = "\x1bc\x1b(0\x1b#8\x1b7\u009b2J\x7f\u202e\x1b]2;pwned\x07"


def run(coro):
    return asyncio.run(coro)


def obeyed_on_screen(app) -> list[str]:
    """Characters a terminal acts on, in the lines every shown widget renders."""
    bad = []
    for w in app.screen.walk_children():
        if not w.display or not w.size.height:
            continue
        for strip in w.render_lines(Region(0, 0, w.size.width, w.size.height)):
            text = strip.text
            for c in text:
                if c not in "\t" and unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp"):
                    bad.append(f"{type(w).__name__}: {c!r} in {text.strip()[:60]!r}")
    return bad


def test_a_local_entry_problem_holding_markup_does_not_stop_the_app(fake_kb, gpu):
    from kb import KnowledgeBase
    from kb.model.entry import Problem

    kb = KnowledgeBase(
        fake_kb.entries,
        [Problem("/home/you/kb/x[/].yaml", 3, 1, "KB004", "title: '[/]' is not [bold]ok")],
        content_hash=fake_kb.content_hash,
        warnings=["cannot write [/] here \x1b]2;pwned\x07"],
    )
    kb.evidence = fake_kb.evidence

    async def go():
        app = create_app(kb=kb, environment=gpu)
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            shown = [str(n.message) for n in app._notifications]
            assert any("x[/].yaml" in m and "[bold]ok" in m for m in shown)
            assert all("\x1b" not in m for m in shown)
            assert detail_text(app).startswith("Nothing to diagnose yet")

    run(go())


def test_a_rank_log_whose_path_holds_markup_is_shown(job_kb, gpu, tmp_path):
    """Rank logs in a folder named `job[`, files named `]rank0.log`: the rank view shows
    `job[/]rank0.log` (the path's last two parts) as text, with no title sequence obeyed."""
    job = tmp_path / "job\x1b]2;t\x07["
    job.mkdir()
    (job / "]rank0.log").write_text(f"[rank0]: {ILLEGAL}\n")
    (job / "]rank1.log").write_text(
        "[rank1]:[E ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
        "ran for 600012 milliseconds before timing out.\n"
    )

    async def go():
        app = create_app(kb=job_kb, environment=gpu, log=job)
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot, until=lambda: app.job is not None)
            await settle(pilot)
            assert "[/]rank0.log" in detail_text(app)
            assert not obeyed_on_screen(app)
            await pilot.press("down")
            await settle(pilot)
            assert not obeyed_on_screen(app)

    run(go())


def test_a_pasted_log_that_drives_terminals_is_shown_inert(fake_kb, gpu):
    async def go():
        text = f"{HOSTILE}{ILLEGAL}{HOSTILE}\n[rank0]: [/] {HOSTILE} done\n"
        app = create_app(kb=fake_kb, environment=gpu, text=text)
        async with app.run_test(size=(120, 30)) as pilot:
            await settle(pilot)
            assert "fake-illegal-access" in detail_text(app)
            assert not obeyed_on_screen(app)

    run(go())
