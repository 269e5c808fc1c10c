"""`kb tui` as command_line.main runs it (the entries loaded in the app's own thread, the
full-text index opened in the background: prewarm), quit while that index is being built, for
test_quit_early.py. Headless, on the fixture entries and a fixed machine.

The index build is held for HOLD_S, and the app quits as soon as it has started, so the quit
always lands in the middle of it. The build's folder is written to $KB_TEST_BUILDING.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # the checkout: kb/ and tui/

import kb.knowledge.index as index  # noqa: E402
from kb import Engine, Environment, KnowledgeBase  # noqa: E402
from kb.knowledge.base import load  # noqa: E402
from tui import app as tui_app  # noqa: E402
from tui import command_line  # noqa: E402

HOLD_S = 1.5
building = threading.Event()
real_build = index.build


def held_build(kb, where):
    Path(os.environ["KB_TEST_BUILDING"]).write_text(str(where))
    building.set()
    time.sleep(HOLD_S)
    real_build(kb, where)


def main() -> int:
    fixtures = HERE / "fixtures"
    loaded = load(bundled=[fixtures / "entries"], use_cache=False)
    kb = KnowledgeBase(
        loaded.entries, loaded.problems, content_hash=loaded.content_hash, warnings=loaded.warnings
    )
    index.build = held_build
    # The app loads its entries itself (kb=None), as `kb tui` does: the fixture ones here.
    tui_app.Engine = lambda kb_dirs=None, knowledge=None: Engine(knowledge=knowledge or kb)
    env = Environment(python=sys.executable, gpu=None, gpu_reason="NVML found no GPU")
    made = []

    def make_app(**kw):
        app = tui_app.create_app(environment=env, **kw)
        app.run = functools.partial(app.run, headless=True)
        made.append(app)
        return app

    def quit_when_building() -> None:
        if building.wait(60):
            made[0].call_from_thread(made[0].run_action, "quit")

    threading.Thread(target=quit_when_building, daemon=True).start()
    command_line.attach_terminal = lambda: None
    args = argparse.Namespace(path=None, file=None, kb_dir=None)
    return command_line.main(args, make_app)


if __name__ == "__main__":
    sys.exit(main())
