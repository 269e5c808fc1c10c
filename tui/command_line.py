"""`kb tui [--file PATH]`, or `cmd 2>&1 | kb tui`: check the input, take the terminal, run the app."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from textual.app import App

from .log_source import check


def attach_terminal() -> str | None:
    """Make fd 0 (keys) and fd 2 (Textual's output) the terminal, even after reading a pipe."""
    need_in = not os.isatty(0)
    need_out = not os.isatty(2)
    if not (need_in or need_out):
        return None
    try:
        fd = os.open("/dev/tty", os.O_RDWR)
    except OSError:
        return (
            "the TUI needs a terminal, and there is none here (no /dev/tty). "
            "For a log without a terminal use: kb lookup FILE (or pipe into kb lookup)."
        )
    if need_in:
        os.dup2(fd, 0)
    if need_out:
        os.dup2(fd, 2)
    os.close(fd)
    return None


def main(args: argparse.Namespace, make_app: Callable[..., App[int]]) -> int:
    """A file is checked before the screen changes (a bad one is said in one line, exit 2); a
    pipe is handed to the app unread, which copies it in a worker while the screen is up. A
    folder (a job's rank logs) is refused for now: it belongs to kb's job lookup once that is in
    kb's public API (see tui/lookup.py)."""
    path = getattr(args, "file", None)
    log = Path(path) if path else None
    stream: BinaryIO | None = None
    if log is not None:
        why = check(log)
        if why:
            print(f"kb: {why}", file=sys.stderr)
            return 2
    elif not os.isatty(0):
        stream = os.fdopen(os.dup(0), "rb")  # fd 0 is about to become the terminal
    problem = attach_terminal()
    if problem:
        if stream is not None:
            stream.close()
        print(f"kb: {problem}", file=sys.stderr)
        return 2
    app = make_app(log=log, stream=stream, kb_dirs=getattr(args, "kb_dir", None), prewarm=True)
    app.run()
    return app.return_code or 0
