"""`kb verify` where the interpreter lacks torch or numpy: a repro that stops at importing one
is skipped with that reason ("needs torch", "needs numpy"), never counted as not reproduced or
fix failed, and a run where every repro was skipped exits 3. The exit status does not depend
on whether anyone read the output (`kb verify | head -1`)."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _repo import REPO

GOOD = (REPO / "tests" / "fixtures" / "good_entry.yaml").read_text()


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> str:
    """An interpreter with the standard library only: a venv of this Python with no packages
    (and no pip), whatever the base installation holds."""
    where = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = str(where / "bin" / "python")
    for module in ("torch", "numpy"):
        assert subprocess.run([python, "-c", f"import {module}"], capture_output=True).returncode
    return python


def _entry(root: Path, name: str, repro: str, fix: str = 'print("all good")') -> None:
    """A local entry whose repro is `repro` (it should print the Widget error); each entry's
    error names a word of its own, so that no two entries claim one line."""
    word = "".join(part.capitalize() for part in name.split("-"))
    repro = repro.replace("Widget", word).replace("widget", word.lower())
    text = GOOD.replace("good-entry", name).replace("Widget", word).replace("widget", word.lower())
    head, _, _ = text.partition("repro:")
    rest = text[text.index("examples:") :]
    text = (
        head
        + "repro:\n  requires: {gpu: false}\n  expect: [modern]\n  code: |\n"
        + textwrap.indent(repro.strip("\n") + "\n", "    ")
        + "fix_check:\n  code: |\n"
        + textwrap.indent(fix.strip("\n") + "\n", "    ")
        + rest
    )
    d = root / "mine" / "local"
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{name}.yaml").write_text(text)


# The Widget error, printed only after importing a module: directly, in a program the repro
# writes and runs (no static look at the repro sees that import), or through `python -m`.
NEEDS_NUMPY = """
import numpy
print("Widget error: the widget exploded")
raise SystemExit(1)
"""
NEEDS_TORCH_INSIDE = """
import subprocess, sys
code = "import torch\\nprint('Widget error: the widget exploded')\\n"
raise SystemExit(subprocess.run([sys.executable, "-c", code]).returncode or 1)
"""
FIX_NEEDS_TORCH = """
import torch
print("all good")
"""
WORKS = """
print("Widget error: the widget exploded")
raise SystemExit(1)
"""


def kb_verify(root: Path, python: str, *ids: str, json_out: bool = True):
    p = subprocess.run(
        [sys.executable, "-m", "kb", "verify", "--kb-dir", str(root / "mine"), "--trust"]
        + ["--python", python, "-j", "2"]
        + (["--json"] if json_out else [])
        + list(ids),
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    return p.returncode, p.stdout, p.stderr


def test_repros_that_need_torch_or_numpy_are_skipped_with_the_reason(tmp_path, bare_python):
    _entry(tmp_path, "needs-numpy", NEEDS_NUMPY)
    _entry(tmp_path, "needs-torch-inside", NEEDS_TORCH_INSIDE)
    _entry(tmp_path, "fix-needs-torch", WORKS, FIX_NEEDS_TORCH)
    rc, out, err = kb_verify(
        tmp_path, bare_python, "needs-numpy", "needs-torch-inside", "fix-needs-torch"
    )
    got = {o["entry_id"]: o for o in json.loads(out)}
    assert {k: o["status"] for k, o in got.items()} == dict.fromkeys(got, "skipped"), err
    assert got["needs-numpy"]["detail"] == f"needs numpy, {bare_python} cannot import numpy"
    for k in ("needs-torch-inside", "fix-needs-torch"):
        assert got[k]["detail"].startswith(f"needs torch, {bare_python} cannot import torch")
    assert rc == 3, err  # nothing could be verified here
    assert "nothing could be verified" in err


def test_a_missing_module_that_is_the_repros_point_is_not_a_skip(tmp_path, bare_python):
    """A module the interpreter can import (here `json`, in the standard library) named in a
    ModuleNotFoundError is what the repro is about, never a missing requirement; and repros
    that work still count."""
    _entry(tmp_path, "works", WORKS)
    _entry(
        tmp_path,
        "own-point",
        "import json.nope_not_there\n",  # ModuleNotFoundError: No module named 'json.nope...'
    )
    rc, out, _ = kb_verify(tmp_path, bare_python, "works", "own-point")
    got = {o["entry_id"]: o["status"] for o in json.loads(out)}
    assert got == {"works": "reproduced", "own-point": "not-reproduced"}
    assert rc == 1


@pytest.mark.parametrize("shown", ["json", "table"])
def test_exit_status_is_the_same_when_the_reader_goes_away(tmp_path, bare_python, shown):
    """`kb verify | head -1`: the reader has gone before kb writes its table; kb still exits
    with the verdict (1: a repro did not reproduce), not 0."""
    _entry(tmp_path, "never", 'print("nothing to see")\n')
    args = [sys.executable, "-m", "kb", "verify", "--kb-dir", str(tmp_path / "mine"), "--trust"]
    args += ["--python", bare_python, "never"] + (["--json"] if shown == "json" else [])
    full = subprocess.run(args, capture_output=True, cwd=REPO, timeout=300)
    assert full.returncode == 1
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
    p.stdout.close()  # as `head -1` does once it has its line (here: before the first one)
    _, err = p.communicate(timeout=300)
    assert p.returncode == full.returncode, err.decode()[-2000:]
    assert b"Traceback" not in err


def test_the_bundled_repros_that_import_torch_or_numpy_are_skipped(bare_python, tmp_path):
    """The repros issue 29 found counted as failures on a machine without torch: each imports
    torch or numpy somewhere (a subprocess, torchrun, its fix_check, a find_spec)."""
    ids = [
        "bus-error",
        "library-version-mismatch",
        "segfault",
        "cpp-terminate-abort",
        "torch-import-failed",
        "illegal-instruction-cpu",
    ]
    p = subprocess.run(
        [sys.executable, "-m", "kb", "verify", "--python", bare_python, "--json", *ids],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
        env={**os.environ, "KB_PATH": ""},
    )
    got = {o["entry_id"]: o for o in json.loads(p.stdout)}
    assert {k: o["status"] for k, o in got.items()} == dict.fromkeys(ids, "skipped"), p.stderr
    assert all(o["detail"].startswith("needs ") for o in got.values())
    assert p.returncode == 3
