"""Quitting `kb tui` in its first seconds (issue 38): the full-text index it was building in
the background is finished, not left behind as a half-built temporary folder in KB_HOME
(index-<key>-XXXX, which nothing named and nothing removed); the finished index is kept."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def test_quitting_while_the_index_is_built_leaves_no_temporary_folder(tmp_path):
    home = tmp_path / "kb-home"
    building = tmp_path / "building"
    env = {**os.environ, "KB_HOME": str(home), "KB_TEST_BUILDING": str(building)}
    env.pop("KB_PATH", None)
    t0 = time.monotonic()
    out = subprocess.run(
        [sys.executable, str(HERE / "quit_early_app.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    took = time.monotonic() - t0
    assert out.returncode == 0, out.stderr
    assert building.exists(), "the index was never being built: the quit proved nothing"
    folder = Path(building.read_text())
    assert folder.parent == home
    folders = sorted(p.name for p in home.iterdir() if p.is_dir())
    named = {p.read_text().strip() for p in home.glob("index-*.current")}
    # every index folder is one a pointer names: the one being built when the user quit
    assert folders == [folder.name] and named == {folder.name}, (folders, named)
    assert any(folder.iterdir())  # whole: Whoosh's files are in it
    assert "finishing the entries' cache and search index" in out.stderr
    print(f"\nquit during the index build: the process was gone after {took:.1f} s")
