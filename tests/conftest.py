import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

# All kb state (entry cache, full-text index) goes to a throwaway folder for the whole run.
os.environ.setdefault("KB_HOME", tempfile.mkdtemp(prefix="kb-test-home-"))
os.environ.pop("KB_PATH", None)
os.environ["NO_COLOR"] = "1"

REPO = Path(__file__).resolve().parents[1]


_WARM: list[Path] = []


def _warm_template(tmp_path_factory) -> Path:
    """A state folder with the bundled knowledge's caches already built (the entry cache and
    the catalog's index), made once per test process by kb itself: the same files a user's
    second `kb lookup` finds."""
    if not _WARM:
        home = tmp_path_factory.mktemp("kb-warm-home")
        env = dict(os.environ, KB_HOME=str(home), KB_NO_PROGRESS="1")
        env.pop("KB_PATH", None)
        for line in (
            "RuntimeError: CUDA error: an illegal memory access was encountered",
            "widgetlib.FrobError: the frobnicator refused the widget",  # reads the catalog
        ):
            subprocess.run(
                [sys.executable, "-m", "kb", "lookup", line],
                env=env,
                cwd=REPO,
                capture_output=True,
                timeout=600,
            )
        _WARM.append(home)
    return _WARM[0]


def _share(src: str, dst: str) -> None:
    """A cache file of the warm folder, hard-linked rather than copied (tens of MB per test
    otherwise): kb replaces its cache files whole (write, then rename), never writes into one,
    so no test can change the template through its link. Small files are copied."""
    if os.path.getsize(src) >= 1 << 16:
        try:
            os.link(src, dst)
            return
        except OSError:
            pass
    shutil.copy2(src, dst)


@pytest.fixture(autouse=True)
def _fresh_kb_home(request, tmp_path_factory, monkeypatch):
    """Every test gets its own state folder: none can touch a user's cache or see another
    test's index. Tests marked `warm_home` (they run kb as a user's second command would, and
    test no cache) start from a copy of a folder whose caches are built, instead of paying for
    the build in every kb process they start."""
    home = tmp_path_factory.mktemp("kb-home")
    if request.node.get_closest_marker("warm_home") is not None:
        shutil.copytree(
            _warm_template(tmp_path_factory), home, dirs_exist_ok=True, copy_function=_share
        )
    monkeypatch.setenv("KB_HOME", str(home))
    monkeypatch.delenv("KB_PATH", raising=False)


@pytest.fixture(scope="session")
def kb_bundled():
    from kb.knowledge.base import load

    return load()


@pytest.fixture
def entry_dir(tmp_path):
    """A folder to write entry files into; returns a writer function."""
    root = tmp_path / "entries" / "test"
    root.mkdir(parents=True)

    def write(name: str, text: str | bytes) -> Path:
        p = root / name
        if isinstance(text, bytes):
            p.write_bytes(text)
        else:
            p.write_text(text, encoding="utf-8")
        return p

    write.root = root.parent
    return write
