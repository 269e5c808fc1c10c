"""A renamed entry keeps its earlier id working; an alias can never shadow another entry."""

import os
import subprocess
import sys

from _repo import REPO

from kb.knowledge.load import load_dirs

GOOD = (REPO / "tests" / "fixtures" / "good_entry.yaml").read_text()


def kb_cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "kb", *args],
        capture_output=True,
        text=True,
        env=dict(os.environ, NO_COLOR="1"),
        cwd=REPO,
        timeout=120,
    )


def test_show_answers_to_an_earlier_id():
    p = kb_cli("show", "module-not-found", "--json")
    assert p.returncode == 0, p.stderr
    assert '"id": "python-module-not-found"' in p.stdout
    assert '"module-not-found"' in p.stdout  # listed under aliases


def test_an_alias_that_is_another_entrys_id_is_a_lint_problem(tmp_path):
    d = tmp_path / "local"
    d.mkdir()
    (d / "good-entry.yaml").write_text(GOOD)
    clash = GOOD.replace("id: good-entry", "id: other-entry\naliases: [good-entry]", 1)
    (d / "other-entry.yaml").write_text(clash)
    got = load_dirs([], [d])
    assert [e.id for e in got.entries] == ["good-entry"]
    assert any(p.code == "KB006" and "good-entry" in p.message for p in got.problems)
