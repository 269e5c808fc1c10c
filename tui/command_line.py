"""`kb tui [PATH]` (a log file or a job's folder), or `cmd 2>&1 | kb tui`: check the input, take
the terminal, run the app."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from textual.app import App

from .log_source import check, check_folder


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
    """A path is checked before the screen changes (a bad one is said in one line, exit 2): a
    file must be readable, a folder listable (the app reads it as a job). A pipe is handed to the
    app unread, which copies it in a worker while the screen is up."""
    path, file = getattr(args, "path", None), getattr(args, "file", None)
    if path and file:
        print("kb: give a PATH or --file, not both", file=sys.stderr)
        return 2
    given: str | None = path or file
    log = Path(given) if given else None
    stream: BinaryIO | None = None
    if log is not None:
        if file and log.is_dir():
            why: str | None = (
                f"{log} is a folder, not a log file (give a job's folder without --file)"
            )
        else:
            why = check_folder(log) if log.is_dir() else check(log)
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
