"""Lint, format and type checks, run the way a contributor runs them (configured in
pyproject.toml), so CI fails on a lint error or a type error like on a failing test."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from _repo import REPO

TREES = ["kb", "tui", "tests", "scripts"]


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *argv], cwd=REPO, capture_output=True, text=True, timeout=600
    )


def _need(module: str) -> None:
    # The test extras install both tools; without them this is a setup error, said plainly.
    if shutil.which(module) is None and _run(module, "--version").returncode != 0:
        pytest.fail(f"{module} is not installed: pip install '.[test]'")


def test_ruff_check_is_clean():
    _need("ruff")
    out = _run("ruff", "check", *TREES)
    assert out.returncode == 0, out.stdout + out.stderr


def test_ruff_format_is_applied():
    _need("ruff")
    out = _run("ruff", "format", "--check", *TREES)
    assert out.returncode == 0, out.stdout + out.stderr


def test_mypy_finds_no_type_errors():
    _need("mypy")
    out = _run("mypy", "kb", "tui")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Success: no issues found" in out.stdout
