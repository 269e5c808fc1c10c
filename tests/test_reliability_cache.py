"""A local entry whose time lies in the future (copied with its times from a machine whose clock
runs ahead, `touch -d 2030-01-01`) is cached like any other (issue 36): it never counts as
"being written", so no lookup waits for it to settle and none reads and hashes every file."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

import kb.knowledge.base as knowledge
from kb import paths
from kb.knowledge.base import load

REPO = Path(__file__).resolve().parents[1]
GOOD = (REPO / "tests" / "fixtures" / "good_entry.yaml").read_text()
SETTLE = 0.05
FUTURE = time.time() + 4 * 365 * 86400


@pytest.fixture
def mine(tmp_path, monkeypatch):
    d = tmp_path / "mine" / "local"
    d.mkdir(parents=True)
    monkeypatch.setattr(knowledge, "SETTLED_S", SETTLE)
    return d


def _future(f: Path) -> None:
    os.utime(f, (FUTURE, FUTURE))
    time.sleep(SETTLE * 3)  # its ctime (now) settles; its mtime stays years ahead


def _counted(monkeypatch, name: str) -> list[int]:
    calls: list[int] = []
    real = getattr(knowledge, name)
    monkeypatch.setattr(knowledge, name, lambda *a, **k: calls.append(1) or real(*a, **k))
    return calls


def test_an_entry_dated_in_the_future_is_found_by_stat(mine, monkeypatch):
    f = mine / "good-entry.yaml"
    f.write_text(GOOD)
    _future(f)
    first = load([str(mine.parent)])
    assert first.get("good-entry") is not None
    assert list(paths.state_dir().glob("entries-*.key"))  # a stat key, as for any settled file
    hashed = _counted(monkeypatch, "_snapshot")
    again = load([str(mine.parent)])
    assert again.get("good-entry") is not None and not hashed  # no file read, nothing hashed


def test_a_broken_entry_dated_in_the_future_is_no_file_being_written(mine, monkeypatch):
    """A broken local entry written years ahead: its problem is said at once and the knowledge
    base cached; it was read as a file being saved, waited on for SETTLED_S on every lookup and
    never cached."""
    monkeypatch.setattr(knowledge, "SETTLED_S", 2.0)
    (mine / "good-entry.yaml").write_text(GOOD)
    bad = mine / "broken-entry.yaml"
    bad.write_text("id: broken-entry\ntitle: [unclosed\n")
    os.utime(bad, (FUTURE, FUTURE))
    os.utime(mine / "good-entry.yaml", (FUTURE, FUTURE))
    time.sleep(2.1)  # the ctimes settle
    waits: list[float] = []
    monkeypatch.setattr(time, "sleep", waits.append)  # load waits on a file with time.sleep
    kb = load([str(mine.parent)])
    assert not waits  # no wait for the file to settle
    assert any("broken-entry" in str(p) for p in kb.problems)
    parsed = _counted(monkeypatch, "_parse")
    again = load([str(mine.parent)])
    assert not waits and not parsed  # from the cache
    assert any("broken-entry" in str(p) for p in again.problems)


def test_a_file_written_just_now_is_still_read_again(mine):
    """What the future-dated rule must not lose: a write now (its ctime now) is still seen."""
    f = mine / "good-entry.yaml"
    f.write_text(GOOD)
    _future(f)
    load([str(mine.parent)])
    f.write_text(GOOD.replace("the widget exploded", "the widget burst"))
    os.utime(f, (FUTURE, FUTURE))  # same mtime as before, years ahead
    assert "burst" in load([str(mine.parent)]).get("good-entry").title
