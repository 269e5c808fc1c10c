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


def configured_state_folder() -> str:
    """The state folder as configured (KB_HOME, else the user's cache folder), checked or not."""
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


# kb's state holds pickles, which run code when read: only a folder of the user's own that
# nobody else can write may hold them. A folder owned by another user, or writable by group or
# others, is refused (said once, in state_warnings()) and the caches go to a private folder of
# this user's in the temporary folder instead. Tests replace _euid to stand for another user.
_euid = getattr(os, "geteuid", lambda: -1)
_CHECKED: dict[str, tuple[str, str]] = {}  # configured folder -> (folder used, warning)


def unsafe_reason(path: str) -> str:
    """Why kb must not keep (or read) its caches at path, or '' when it may: a folder or file
    owned by another user, or writable by group or others. A missing path is ''."""
    try:
        st = os.stat(path)
    except OSError:
        return ""
    uid = _euid()
    if uid >= 0 and st.st_uid != uid:
        return f"owned by uid {st.st_uid}, not by this user (uid {uid})"
    writable = st.st_mode & 0o022
    if writable:
        who = {0o022: "group and others", 0o020: "group", 0o002: "others"}[writable]
        return f"writable by {who} (mode {st.st_mode & 0o7777:04o})"
    return ""


def _private_fallback(refused: str, why: str) -> tuple[str, str]:
    import tempfile

    uid = _euid()
    folder = os.path.join(tempfile.gettempdir(), f"kb-cache-{uid if uid >= 0 else 'user'}")
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    except OSError:
        folder = ""
    if not folder or os.path.islink(folder) or not os.path.isdir(folder) or unsafe_reason(folder):
        # Taken by someone else (or a link): a fresh folder for this process alone.
        import atexit
        import shutil

        folder = tempfile.mkdtemp(prefix="kb-cache-")
        atexit.register(shutil.rmtree, folder, True)
    return folder, (
        f"kb's cache folder {refused} is {why}: not used (a stranger could plant code in it); "
        f"caches go to {folder} instead (make it yours and private: chmod 700, or set KB_HOME)"
    )


def state_folder() -> str:
    """Where kb keeps its caches: the configured folder when it is missing (made private when
    first written) or is this user's and private, else a private folder of the user's in the
    temporary folder (state_warnings() says why)."""
    want = configured_state_folder()
    got = _CHECKED.get(want)
    if got is not None:
        return got[0]
    why = unsafe_reason(want)
    if not why:
        if os.path.isdir(want):
            _CHECKED[want] = (want, "")
        return want
    _CHECKED[want] = _private_fallback(want, why)
    return _CHECKED[want][0]


def state_warnings() -> list[str]:
    """What state_folder() refused and why (empty when the configured folder is used)."""
    got = _CHECKED.get(configured_state_folder())
    return [got[1]] if got and got[1] else []


def make_private_folder(folder: str) -> None:
    """Make folder and any missing parents with mode 0700 whatever the umask (raises OSError)."""
    folder = os.path.abspath(folder)
    if os.path.isdir(folder):
        return
    parent = os.path.dirname(folder)
    if parent != folder:
        make_private_folder(parent)
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        if not os.path.isdir(folder):
            raise


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
