"""Where kb finds its data and keeps its state.

One environment variable, KB_HOME, moves all state (entry cache, full-text index) so tests and
CI can point it at a temporary folder. KB_PATH adds the user's own entry folders (os.pathsep
separated), like --kb-dir on the command line.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

# The functions come in two forms: plain strings (..._folder, ..._names), which the cold path of
# `kb lookup` uses so that it never imports pathlib (~5 ms with what pathlib imports), and Path
# objects for everything else.
_PKG = os.path.dirname(os.path.realpath(__file__))


def _path(name: str) -> Path:
    from pathlib import Path

    return Path(name)


def _data_folder(name: str) -> str:
    # Installed wheel: the data sits inside the package. Source checkout / editable install: it
    # sits at the repository root beside kb/.
    inside = os.path.join(_PKG, "_data", name)
    return inside if os.path.isdir(inside) else os.path.join(os.path.dirname(_PKG), name)


def bundled_entries_folder() -> str:
    return _data_folder("entries")


def bundled_entries_dir() -> Path:
    return _path(bundled_entries_folder())


def evidence_folder() -> str:
    return _data_folder("evidence")


def evidence_dir() -> Path:
    return _path(evidence_folder())


def repo_evidence_dir() -> Path | None:
    """The evidence folder of a source checkout, where `kb verify --record` writes; None when
    kb runs from an installed wheel (there is no repository to record into)."""
    root = os.path.dirname(_PKG)
    if not os.path.isfile(os.path.join(root, "pyproject.toml")):
        return None
    return _path(os.path.join(root, "evidence"))


def user_entry_folders(extra: list[str] | None = None) -> list[str]:
    env = os.environ.get("KB_PATH", "")
    return [os.fspath(p) for p in (extra or [])] + [p for p in env.split(os.pathsep) if p]


def user_entry_dirs(extra: list[str] | None = None) -> list[Path]:
    return [_path(p) for p in user_entry_folders(extra)]


def state_folder() -> str:
    home = os.environ.get("KB_HOME")
    if home:
        return home
    if sys.platform.startswith("linux"):
        # platformdirs' own rule for Linux, without its import (and tempfile's, random's):
        # every lookup asks for this folder.
        cache = os.environ.get("XDG_CACHE_HOME", "").strip()
        return os.path.join(cache if cache else os.path.expanduser("~/.cache"), "kb")
    import platformdirs

    return platformdirs.user_cache_dir("kb", appauthor=False)


def state_dir() -> Path:
    return _path(state_folder())


def _path_order(name: str) -> str:
    # Path's own order (folder by folder, case-blind where the system is), so both forms of a
    # listing agree and so does every order derived from them (signatures' tie-breaks). The
    # separator made the lowest character compares names folder by folder, as a list of their
    # parts would, without building one per file (a cold lookup sorts ~400 names).
    return os.path.normcase(name).replace(os.sep, "\0")


def _yaml_names_under(root: str) -> list[str]:
    # os.walk rather than Path.rglob: it reads each folder once and tells files from folders
    # without a stat per name (rglob and is_file took a tenth of a cold lookup). A broken link
    # is listed too, and the loader names it as a file it cannot read.
    return sorted(
        (
            os.path.join(folder, name)
            for folder, _subdirs, names in os.walk(root)
            for name in names
            if name.endswith(".yaml")
        ),
        key=_path_order,
    )


def entry_file_names(dirs) -> list[str]:
    """Every entry file under the given folders (or the files themselves), in a stable order
    (Path order: folder by folder)."""
    files: list[str] = []
    for d in dirs:
        d = os.path.normpath(os.fspath(d))
        if os.path.isfile(d):
            files.append(d)
        elif os.path.isdir(d):
            files.extend(_yaml_names_under(d))
    return files


def entry_files(dirs) -> list[Path]:
    return [_path(f) for f in entry_file_names(dirs)]


def evidence_file_names(root: str) -> list[str]:
    """<root>/<entry id>/<record>.yaml, in a stable order."""
    if not os.path.isdir(root):
        return []
    found = []
    with os.scandir(root) as folders:
        for folder in folders:
            if folder.is_dir():
                with os.scandir(folder.path) as records:
                    found += [r.path for r in records if r.name.endswith(".yaml")]
    return sorted(found, key=_path_order)


def evidence_files(root: Path) -> list[Path]:
    return [_path(f) for f in evidence_file_names(os.fspath(root))]
