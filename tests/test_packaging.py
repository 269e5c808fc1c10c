"""The wheel ships the entries, their evidence, the schema and the code table."""

import subprocess
import sys
import zipfile

from conftest import REPO


def test_wheel_contents(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(REPO),
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    wheel = next(tmp_path.glob("*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    entries = sorted(p for p in REPO.glob("entries/*/*.yaml"))
    assert entries
    for p in entries:
        assert f"kb/_data/entries/{p.parent.name}/{p.name}" in names
    assert any(n.startswith("kb/_data/evidence/") for n in names)
    assert {
        "kb/schema.json",
        "kb/data/cuda_codes.json",
        "kb/cli.py",
        "tui/app.py",
        "tui/app.tcss",
    } <= names
    assert not any("scratch" in n or "/tests/" in n for n in names)


def test_local_entries_are_marked(tmp_path):
    d = tmp_path / "mine" / "local"
    d.mkdir(parents=True)
    src = (REPO / "tests" / "fixtures" / "good_entry.yaml").read_text()
    (d / "good-entry.yaml").write_text(src)

    def run(*a):
        return subprocess.run(
            [sys.executable, "-m", "kb", *a, "--kb-dir", str(tmp_path / "mine")],
            capture_output=True,
            text=True,
            cwd=REPO,
        )

    out = run("lookup", "--json", "RuntimeError: Widget error: the widget exploded")
    import json

    m = json.loads(out.stdout)["matches"][0]
    assert m["id"] == "good-entry" and m["local"] is True
    assert "(local)" in run("list").stdout
    assert json.loads(run("show", "good-entry", "--json").stdout)["local"] is True
    assert "local" in run("lookup", "Widget error: the widget exploded").stdout.splitlines()[0]
