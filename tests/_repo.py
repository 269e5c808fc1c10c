"""The repository root, for tests that run kb or read its files (a plain module, so it does not
clash with tests/tui/conftest.py when both folders are collected)."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
