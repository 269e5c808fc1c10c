"""Where kb finds its data and keeps its state.

One environment variable, KB_HOME, moves all state (entry cache, full-text index) so tests and
CI can point it at a temporary folder. KB_PATH adds the user's own entry folders (os.pathsep
separated), like --kb-dir on the command line.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

_PKG = Path(__file__).resolve().parent


def _data_dir(name: str) -> Path:
    # Installed wheel: the data sits inside the package. Source checkout / editable install: it
    # sits at the repository root beside kb/.
    inside = _PKG / "_data" / name
    return inside if inside.is_dir() else _PKG.parent / name


def bundled_entries_dir() -> Path:
    return _data_dir("entries")


def evidence_dir() -> Path:
    return _data_dir("evidence")


def repo_evidence_dir() -> Path | None:
    """The evidence folder of a source checkout, where `kb verify --record` writes; None when
    kb runs from an installed wheel (there is no repository to record into)."""
    d = _PKG.parent / "evidence"
    return d if (_PKG.parent / "pyproject.toml").is_file() else None


def user_entry_dirs(extra: list[str] | None = None) -> list[Path]:
    dirs = [Path(p) for p in (extra or [])]
    env = os.environ.get("KB_PATH", "")
    dirs += [Path(p) for p in env.split(os.pathsep) if p]
    return dirs


def state_dir() -> Path:
    home = os.environ.get("KB_HOME")
    if home:
        return Path(home)
    if sys.platform.startswith("linux"):
        # platformdirs' own rule for Linux, without its import (and tempfile's, random's):
        # every lookup asks for this folder.
        cache = os.environ.get("XDG_CACHE_HOME", "").strip()
        return Path(cache if cache else os.path.expanduser("~/.cache")) / "kb"
    import platformdirs

    return Path(platformdirs.user_cache_dir("kb", appauthor=False))


def _yaml_files_under(root: str) -> list[Path]:
    # os.walk rather than Path.rglob: it reads each folder once and tells files from folders
    # without a stat per name (rglob and is_file took a tenth of a cold lookup). A broken link
    # is listed too, and the loader names it as a file it cannot read.
    return sorted(
        Path(folder, name)
        for folder, _subdirs, names in os.walk(root)
        for name in names
        if name.endswith(".yaml")
    )


def entry_files(dirs) -> list[Path]:
    """Every entry file under the given folders (or the files themselves), in a stable order
    (Path order: folder by folder)."""
    files: list[Path] = []
    for d in dirs:
        d = Path(d)
        if d.is_file():
            files.append(d)
        elif d.is_dir():
            files.extend(_yaml_files_under(str(d)))
    return files


def evidence_files(root: Path) -> list[Path]:
    """<root>/<entry id>/<record>.yaml, in a stable order."""
    if not root.is_dir():
        return []
    found = []
    with os.scandir(root) as folders:
        for folder in folders:
            if folder.is_dir():
                with os.scandir(folder.path) as records:
                    found += [Path(r.path) for r in records if r.name.endswith(".yaml")]
    return sorted(found)
