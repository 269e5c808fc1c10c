"""The entries load from the moment the app is made (issue 39: the list's fill competed with the
UI thread): loaded before the screen is mounted, they are in the first frame; loaded after, they
are listed as soon as they come; a load that fails is said either way; the GIL's switch interval
is short only while they load."""

from __future__ import annotations

import asyncio
import sys
import threading

from conftest import detail_text, option_ids, settle

import tui.app as tui_app
from kb import Engine, Environment
from tui.app import create_app
from tui.results_list import ResultsList


def no_probe_env() -> Environment:
    return Environment(gpu=None, gpu_reason="NVML found no GPU", torch="", cuda="")


def first_frame_rows(monkeypatch) -> list[int]:
    """The list's row count when the first frame is on the screen (Textual's Ready)."""
    seen: list[int] = []
    real = tui_app.KbApp.on_ready

    def on_ready(self) -> None:
        seen.append(self.query_one(ResultsList).option_count)
        real(self)

    monkeypatch.setattr(tui_app.KbApp, "on_ready", on_ready)
    return seen


def test_entries_loaded_before_the_screen_is_up_are_in_its_first_frame(fake_kb, monkeypatch):
    monkeypatch.setattr(tui_app, "Engine", lambda kb_dirs=None: Engine(knowledge=fake_kb))
    seen = first_frame_rows(monkeypatch)

    async def go():
        app = create_app(environment=no_probe_env())
        assert app._writer is not None  # the loader started with the app, before it runs
        app._writer.join(30)
        assert not app._writer.is_alive()
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            n = len(fake_kb.entries)
            assert seen == [n]  # the first frame held every entry
            assert sorted(option_ids(app)) == sorted(e.id for e in fake_kb.entries)
            assert app.query_one(ResultsList).border_title == f"Entries ({n})"

    asyncio.run(go())


def test_entries_loaded_after_the_screen_is_up_are_listed_when_they_come(fake_kb, monkeypatch):
    release = threading.Event()
    mounted = threading.Event()

    class SlowEngine(Engine):
        @property
        def knowledge(self):
            release.wait(30)
            return fake_kb

    monkeypatch.setattr(tui_app, "Engine", lambda kb_dirs=None: SlowEngine(knowledge=fake_kb))
    seen = first_frame_rows(monkeypatch)
    real_mount = tui_app.KbApp.on_mount

    def on_mount(self) -> None:
        real_mount(self)
        mounted.set()

    monkeypatch.setattr(tui_app.KbApp, "on_mount", on_mount)

    async def go():
        app = create_app(environment=no_probe_env())
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot, until=lambda: app.ready_at is not None)
            assert mounted.is_set() and seen == [0]  # not loaded yet: an empty list
            assert app.query_one(ResultsList).border_title == "Entries (loading)"
            release.set()
            await settle(pilot)
            assert sorted(option_ids(app)) == sorted(e.id for e in fake_kb.entries)

    asyncio.run(go())


def test_a_load_that_fails_before_the_screen_is_up_is_said(monkeypatch):
    class Broken(Engine):
        @property
        def knowledge(self):
            raise OSError("the entries' folder is gone")

    monkeypatch.setattr(tui_app, "Engine", lambda kb_dirs=None: Broken())

    async def go():
        app = create_app(environment=no_probe_env())
        assert app._writer is not None
        app._writer.join(30)
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            shown = detail_text(app)
            assert "Cannot load the entries" in shown
            assert "the entries' folder is gone" in shown
            assert app.kb is None

    asyncio.run(go())


def test_the_switch_interval_is_short_only_while_the_entries_load(fake_kb, monkeypatch):
    during: list[float] = []
    before = sys.getswitchinterval()

    class Watched(Engine):
        @property
        def knowledge(self):
            during.append(sys.getswitchinterval())
            return fake_kb

    monkeypatch.setattr(tui_app, "Engine", lambda kb_dirs=None: Watched(knowledge=fake_kb))
    app = create_app(environment=no_probe_env())
    assert app._writer is not None
    app._writer.join(30)
    assert during == [tui_app.LOAD_SWITCH_S] and before > tui_app.LOAD_SWITCH_S
    assert sys.getswitchinterval() == before
