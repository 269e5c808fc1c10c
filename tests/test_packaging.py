"""The wheel ships the entries, their evidence, the schema, the code table and the TUI (as
kb.tui: an installed kb adds no top-level package but kb)."""

import os
import subprocess
import sys
import zipfile

import pytest
from _repo import REPO


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("wheel")
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
            str(out_dir),
            str(REPO),
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return next(out_dir.glob("*.whl"))


def test_wheel_contents(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    entries = sorted(p for p in REPO.glob("entries/*/*.yaml"))
    assert entries
    for p in entries:
        assert f"kb/_data/entries/{p.parent.name}/{p.name}" in names
    assert any(n.startswith("kb/_data/evidence/") for n in names)
    assert {
        "kb/knowledge/schema.json",
        "kb/data/cuda_codes.json",
        "kb/cli/main.py",
        "kb/tui/__init__.py",
        "kb/tui/app.py",
        "kb/tui/app.tcss",
    } <= names
    assert not any("scratch" in n or "/tests/" in n or "__pycache__" in n for n in names)


def test_wheel_installs_no_top_level_package_but_kb(wheel):
    tops = {n.split("/")[0] for n in zipfile.ZipFile(wheel).namelist()}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"kb"}, tops


def test_installed_tui_imports_as_kb_tui(wheel, tmp_path):
    """A pure wheel unpacked is its installed layout. Run from elsewhere, with only that on the
    path before site-packages, so neither the checkout's kb/ nor its tui/ can stand in."""
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    env = {**os.environ, "PYTHONPATH": str(site)}
    probe = "import kb, kb.tui.app; print(kb.__file__); print(kb.tui.app.__file__)"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path, env=env
    )
    assert out.returncode == 0, out.stderr
    kb_file, app_file = out.stdout.split("\n")[:2]
    assert kb_file.startswith(str(site)) and app_file.startswith(str(site / "kb" / "tui"))
    # `kb tui` takes it from there (the checkout's tui/ may be on the path too, through the
    # editable install's .pth): a missing file is refused by the TUI's own check, exit 2.
    run_tui = (
        "import sys; from kb.cli.main import main; rc = main(['tui', '--file', sys.argv[1]]); "
        "print(sorted(m for m in ('tui', 'kb.tui.app') if m in sys.modules)); sys.exit(rc)"
    )
    out = subprocess.run(
        [sys.executable, "-c", run_tui, str(tmp_path / "missing.log")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        start_new_session=True,  # no controlling terminal, whatever runs the tests
    )
    assert out.returncode == 2 and "missing.log" in out.stderr, out.stderr
    assert out.stdout.strip() == "['kb.tui.app']"


def test_kb_tui_from_the_checkout_uses_the_top_level_tui():
    out = subprocess.run(
        [sys.executable, "-m", "kb", "tui", "--file", "no-such-file.log"],
        capture_output=True,
        text=True,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    assert out.returncode == 2 and "no-such-file.log" in out.stderr, out.stderr
    assert "not available" not in out.stderr


def test_a_missing_tui_dependency_is_named_not_hidden_by_the_fallback():
    code = (
        "import sys; sys.modules['textual'] = None; from kb.cli.main import main; "
        "sys.exit(main(['tui', '--file', 'x.log']))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 2
    assert "TUI is not available" in out.stderr and "textual" in out.stderr, out.stderr


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


def test_an_editable_install_can_be_built(tmp_path):
    """`pip install -e .` (the setup every contributor runs) builds hatch's editable wheel; a
    path rewrite hatch cannot do in dev mode fails it."""
    code = "import sys, hatchling.build as b; print(b.build_editable(sys.argv[1]))"
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], cwd=REPO, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-2000:]
    wheel = tmp_path / out.stdout.strip().splitlines()[-1]
    pth = [n for n in zipfile.ZipFile(wheel).namelist() if n.endswith(".pth")]
    assert pth, "the editable wheel puts the checkout on sys.path"
    text = zipfile.ZipFile(wheel).read(pth[0]).decode()
    assert str(REPO) in text
