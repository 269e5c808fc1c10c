"""The wheel's build hook: the caches kb would otherwise build on each user's machine at first use
are built here, once, and shipped in the wheel under kb/_data/cache (kb.knowledge.shipped reads
them): the bundled entries' cache with its trigger set and Hyperscan databases, its parse memo,
and the message catalog's index and coverage figures.

An editable install ships none: its entries are the checkout's, which change, and kb builds and
checks its per-user caches against them as before.

Run as a script (`python hatch_build.py OUT`), it builds the files into OUT with the checkout's
kb, in a process of its own: the build backend's process never imports kb.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

WHEEL_FOLDER = "kb/_data/cache"  # kb.knowledge.shipped.FOLDER, installed


class ShippedCaches(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or version == "editable":
            return
        out = tempfile.mkdtemp(prefix="kb-shipped-")
        self._out = out
        env = child_env(self.root, out, os.environ)
        done = subprocess.run(
            [sys.executable, os.path.join(self.root, "hatch_build.py"), out],
            cwd=self.root,
            env=env,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise RuntimeError(
                "building the caches the wheel ships failed (hatch_build.py):\n"
                + done.stderr[-4000:]
            )
        names = done.stdout.split()
        # The patterns a lookup's start-up compiles, learnt by a lookup in an interpreter of its
        # own that reads the caches just built (kb.knowledge.regex_cache): for this Python only.
        learnt = subprocess.run(
            [sys.executable, os.path.join(self.root, "hatch_build.py"), "--regex", out],
            cwd=self.root,
            env=env,
            capture_output=True,
            text=True,
        )
        if learnt.returncode == 0:
            names += learnt.stdout.split()  # else no table: patterns compile as usual
        for name in names:
            build_data["force_include"][os.path.join(out, name)] = f"{WHEEL_FOLDER}/{name}"

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        out = getattr(self, "_out", None)
        if out:
            shutil.rmtree(out, ignore_errors=True)


def child_env(root: str, out: str, parent: Mapping[str, str]) -> dict[str, str]:
    """The environment the cache builder runs in: the build's own, with the checkout first on
    the path. pip's isolated build environment reaches its packages (hatchling, pyyaml, whoosh)
    through PYTHONPATH, where a sitecustomize adds them: replacing it instead of extending it
    made every `pip install .` fail with "No module named 'hatchling'"."""
    env = {k: v for k, v in parent.items() if k != "KB_PATH"}
    inherited = parent.get("PYTHONPATH", "")
    env.update(
        PYTHONPATH=os.pathsep.join(p for p in (root, inherited) if p),
        KB_HOME=os.path.join(out, "state"),  # nothing is kept there; never the user's
        PYTHONDONTWRITEBYTECODE="1",  # no __pycache__ left in the checkout by a build
    )
    return env


def build(out: str) -> list[str]:
    """Build the shipped caches into `out` from this checkout's entries, evidence and data; the
    names written."""
    from kb import paths
    from kb.catalog import cache as catalog_cache
    from kb.knowledge import shipped
    from kb.knowledge.base import _shipped_tag, build_bundled

    entries, evidence = paths.bundled_entries_folder(), paths.evidence_folder()
    kb, memo = build_bundled(entries, evidence)  # a broken entry is shipped as kb reads it
    roots = {"entries": entries, "evidence": evidence, "package": os.path.dirname(kb_file())}
    shipped.write(os.path.join(out, shipped.ENTRIES), _shipped_tag(), kb, roots)
    shipped.write(os.path.join(out, shipped.MEMO), _shipped_tag(), memo, roots)
    names = [shipped.ENTRIES, shipped.MEMO]
    names += catalog_cache.write_shipped(out, catalog_cache.codes_of(kb.entries))
    names += fulltext(kb, out)
    return names


def fulltext(kb: Any, out: str) -> list[str]:
    """The full-text index (Whoosh) of the bundled entries, in a folder named by its key
    (kb.knowledge.index.shipped_index); its files' names, relative to `out`."""
    from pathlib import Path

    from kb.knowledge.index import SHIPPED_PREFIX, build, index_key

    folder = Path(out) / f"{SHIPPED_PREFIX}{index_key(kb)}"
    folder.mkdir()
    build(kb, folder)
    # Whoosh's lock is for writers: an installed index is only ever read.
    return [f"{folder.name}/{f.name}" for f in sorted(folder.iterdir()) if "LOCK" not in f.name]


# One-line lookups of the commonest classes, whose start-up compiles what most lookups do.
SAMPLE = (
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    "RuntimeError: CUDA error: device-side assert triggered",
)


def learn_regexes(out: str) -> list[str]:
    """Look the SAMPLE up as the kb command does, reading the caches built into `out`, and
    keep the table of what that compiled (kb.cli.lookup.start_up_regexes); the name written."""
    import contextlib
    import io
    import re

    from kb.knowledge import regex_cache, shipped

    shipped.FOLDER = out  # the caches just built stand for the installed ones
    re.sub(r"(-script\.pyw|\.exe)?$", "", sys.argv[0])  # what pip's `kb` script compiles
    from kb.cli.lookup import start_up_regexes
    from kb.cli.main import main
    from kb.diagnosis.engine import default_engine

    for message in SAMPLE:
        for argv in (["lookup", message], ["lookup", "--json", message]):
            with contextlib.redirect_stdout(io.StringIO()):
                main(argv)
    name = regex_cache.file_name()
    table = start_up_regexes(default_engine().knowledge)
    shipped.write(os.path.join(out, name), "regex", table, {})
    return [name]


def kb_file() -> str:
    import kb

    return os.path.abspath(kb.__file__)


if __name__ == "__main__":
    if sys.argv[1] == "--regex":
        print("\n".join(learn_regexes(sys.argv[2])))
    else:
        print("\n".join(build(sys.argv[1])))
