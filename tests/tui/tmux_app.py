"""The TUI as `kb tui` runs it (tui.command_line.main: the pipe, the terminal, the way out), on the
fixture entries and a fixed machine, for the tmux-driven tests (test_tmux.py).

Every repro it starts is recorded in $KB_TUI_RUNS (one entry id a line) before it runs for
real; its own pid goes to $KB_TUI_PID.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # the checkout: kb/ and tui/

from kb import Environment, KnowledgeBase  # noqa: E402
from kb.knowledge.base import load  # noqa: E402
from tui import command_line  # noqa: E402
from tui.app import create_app  # noqa: E402
from tui.verifier import Verifier  # noqa: E402


class Recording(Verifier):
    def verify_entry(self, entry, kb, env, **kw):
        with open(os.environ["KB_TUI_RUNS"], "a", encoding="utf-8") as fh:
            fh.write(entry.id + "\n")
        return super().verify_entry(entry, kb, env, **kw)


def main() -> int:
    fixtures = HERE / "fixtures"
    loaded = load([str(fixtures / "local")], bundled=[fixtures / "entries"], use_cache=False)
    kb = KnowledgeBase(
        loaded.entries, loaded.problems, content_hash=loaded.content_hash, warnings=loaded.warnings
    )
    env = Environment(python=sys.executable, gpu=None, gpu_reason="NVML found no GPU")

    def make_app(**kw):
        return create_app(
            kb=kb, environment=env, verifier=Recording(), log=kw.get("log"), stream=kw.get("stream")
        )

    Path(os.environ["KB_TUI_PID"]).write_text(str(os.getpid()))
    args = argparse.Namespace(path=None, file=None, kb_dir=None)
    return command_line.main(args, make_app)


if __name__ == "__main__":
    sys.exit(main())
