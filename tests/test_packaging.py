"""The wheel ships the entries, their evidence, the schema, the code table and the TUI (as
kb.tui: an installed kb adds no top-level package but kb)."""

import json
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
    # No shipped cache: the checkout's entries change, and kb checks its own caches against them.
    assert not [n for n in zipfile.ZipFile(wheel).namelist() if "_data/cache" in n]


# ---------------------------------------------------------------- caches built with the wheel
SHIPPED = (
    "kb/_data/cache/entries.pickle",
    "kb/_data/cache/entries.memo",
    "kb/_data/cache/catalog.index.pickle",
    "kb/_data/cache/catalog.coverage.pickle",
)
CLAIMED = "CUDA error: an illegal memory access was encountered"
# No entry's signature knows it: the message catalog answers (dtype-mismatch).
CATALOG = (
    "RuntimeError: index_add_(): self (Float) and source (BFloat16) must have the same scalar type"
)


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory):
    """The wheel unpacked (a pure wheel's installed layout), its files as pip leaves them."""
    site = tmp_path_factory.mktemp("installed")
    zipfile.ZipFile(wheel).extractall(site)
    return site


def _kb(site, home, *argv, env=None):
    e = {k: v for k, v in os.environ.items() if k not in ("KB_PATH", "PYTHONPATH")}
    e.update(PYTHONPATH=str(site), KB_HOME=str(home), **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "kb", *argv], capture_output=True, text=True, cwd=site, env=e
    )


# No entry knows it: the full-text index is consulted (for suggestions).
UNKNOWN = "ValueError: the frobnicator refused to initialise the widget cache (gizmo detached)"


def test_the_wheel_ships_the_caches_of_the_bundled_knowledge(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    assert set(SHIPPED) <= names
    fulltext = [n for n in names if n.startswith("kb/_data/cache/fulltext-")]
    assert any(n.endswith(".toc") for n in fulltext), "the full-text index"
    assert not any("LOCK" in n for n in fulltext)
    assert any(n.startswith("kb/_data/cache/regex-") for n in names), "the start-up's regexes"


def test_a_first_lookup_after_install_builds_nothing_and_answers_as_the_checkout(
    installed, tmp_path
):
    home = tmp_path / "home"
    for msg, rc in ((CLAIMED, 0), (CATALOG, 0), (UNKNOWN, 4)):
        got = _kb(installed, home, "lookup", "--json", msg)
        want = subprocess.run(
            [sys.executable, "-m", "kb", "lookup", "--json", msg],
            capture_output=True,
            text=True,
            cwd=REPO,
            env={**os.environ, "KB_HOME": str(tmp_path / "checkout-home")},
        )
        assert got.returncode == want.returncode == rc, got.stderr
        assert got.stdout == want.stdout  # the same answer, knowledge identity included
        assert got.stderr == ""
    # Neither the entry cache, the catalog's index, the full-text index nor a regex table
    # was built: nothing was written at all.
    assert not home.exists()
    shown = json.loads(_kb(installed, home, "show", "cuda-oom", "--json").stdout)
    area = next(REPO.glob("entries/*/cuda-oom.yaml")).parent.name
    assert shown["path"] == str(installed / "kb" / "_data" / "entries" / area / "cuda-oom.yaml")


def test_local_entries_build_only_their_own_part(installed, tmp_path):
    """With a folder of the user's own: the bundled entries come parsed from the shipped memo
    (only the user's file is read as YAML), and the whole is cached per user as before."""
    mine = tmp_path / "mine" / "local"
    mine.mkdir(parents=True)
    (mine / "good-entry.yaml").write_text((REPO / "tests/fixtures/good_entry.yaml").read_text())
    probe = (
        "import sys, kb.knowledge.load as L\n"
        "seen = []\n"
        "real = L.load_file\n"
        "L.load_file = lambda f, *a, **k: (seen.append(str(f)), real(f, *a, **k))[1]\n"
        "from kb.cli.main import main\n"
        "rc = main(['lookup', '--json', 'RuntimeError: Widget error: the widget exploded'])\n"
        "print('PARSED', seen, file=sys.stderr)\n"
        "sys.exit(rc)\n"
    )
    e = {k: v for k, v in os.environ.items() if k not in ("KB_PATH", "PYTHONPATH")}
    e.update(PYTHONPATH=str(installed), KB_HOME=str(tmp_path / "home"), KB_PATH=str(mine.parent))
    runs = [
        subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path, env=e
        )
        for _ in range(2)
    ]
    for out in runs:
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["matches"][0]["id"] == "good-entry"
    parsed = [ln for ln in runs[0].stderr.splitlines() if ln.startswith("PARSED")]
    assert parsed == [f"PARSED {[str(mine / 'good-entry.yaml')]}"]
    assert "PARSED []" in runs[1].stderr  # the second one reads the per-user cache
    assert list((tmp_path / "home").glob("entries-*.pickle"))
    # ...and the bundled ones still answer, from the installed package's files
    bundled = _kb(
        installed, tmp_path / "home", "lookup", "--json", CLAIMED, env={"KB_PATH": str(mine.parent)}
    )
    assert json.loads(bundled.stdout)["matches"][0]["id"] == "cuda-illegal-memory-access"


def test_a_shipped_cache_others_can_write_is_refused_and_said(installed, tmp_path):
    """Trusted like the package's code only when nobody else can write it: else the per-user
    cache is built (and answers the same)."""
    target = installed / "kb" / "_data" / "cache" / "entries.pickle"
    mode = target.stat().st_mode
    target.chmod(mode | 0o022)
    try:
        out = _kb(installed, tmp_path / "home", "lookup", CLAIMED)
    finally:
        target.chmod(mode)
    assert out.returncode == 0
    assert out.stdout.startswith("cuda-illegal-memory-access")
    assert "refused the cache shipped with kb" in out.stderr
    assert "writable by group and others" in out.stderr
    assert list((tmp_path / "home").glob("entries-*.pickle"))


def test_the_cache_builder_keeps_the_build_environments_path():
    """pip's isolated build reaches hatchling and kb's build dependencies through PYTHONPATH:
    the builder's child keeps it behind the checkout (`pip install .` failed with "No module
    named 'hatchling'" when it was replaced)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("hatch_build", REPO / "hatch_build.py")
    assert spec is not None and spec.loader is not None
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    parent = {"PYTHONPATH": "/tmp/pip-build-env-x/site", "KB_PATH": "/mine", "HOME": "/root"}
    env = hook.child_env("/src/kb", "/tmp/out", parent)
    assert env["PYTHONPATH"] == os.pathsep.join(["/src/kb", "/tmp/pip-build-env-x/site"])
    assert "KB_PATH" not in env and env["HOME"] == "/root"
    assert env["KB_HOME"] == os.path.join("/tmp/out", "state")
    assert hook.child_env("/src/kb", "/tmp/out", {})["PYTHONPATH"] == "/src/kb"
