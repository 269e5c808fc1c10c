import os
import tempfile
from pathlib import Path

import pytest

# All kb state (entry cache, full-text index) goes to a throwaway folder for the whole run.
os.environ.setdefault("KB_HOME", tempfile.mkdtemp(prefix="kb-test-home-"))
os.environ.pop("KB_PATH", None)
os.environ["NO_COLOR"] = "1"

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _fresh_kb_home(tmp_path_factory, monkeypatch):
    """Every test gets its own state folder: none can touch a user's cache or see another
    test's index."""
    monkeypatch.setenv("KB_HOME", str(tmp_path_factory.mktemp("kb-home")))
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
