"""Real-log fixtures (tests/logs/<entry>/*.log, written by scripts/capture_log_fixtures.py from
logs kb captured itself): a lookup of each names the folder's entry first, on the marked line."""

from __future__ import annotations

import pytest
from _repo import REPO

import kb

pytestmark = pytest.mark.warm_home  # runs kb as a user would after its first run; tests no cache

MARK = "  #=MATCH=#"
FIXTURES = sorted((REPO / "tests" / "logs").glob("*/*.log"))


@pytest.fixture(scope="module")
def engine():
    return kb.Engine()


def test_there_are_fixtures_for_most_entries_with_a_repro():
    entries = {p.parent.name for p in FIXTURES}
    with_repro = {e.id for e in kb.load().entries if e.repro is not None and not e.local}
    assert len(entries & with_repro) >= 0.8 * len(with_repro)


@pytest.mark.parametrize("path", FIXTURES, ids=[f"{p.parent.name}/{p.name}" for p in FIXTURES])
def test_fixture_names_its_entry_on_the_marked_line(engine, path):
    lines = path.read_text(encoding="utf-8").splitlines()
    marks = [i + 1 for i, ln in enumerate(lines) if ln.endswith(MARK)]
    assert len(marks) == 1, f"{path}: mark exactly one line with {MARK!r}"
    text = "\n".join(ln.removesuffix(MARK) for ln in lines) + "\n"
    best = engine.lookup(text, top=3).best
    assert best is not None and best.id == path.parent.name, best and best.id
    assert best.line_number == marks[0], (best.line_number, best.line)
