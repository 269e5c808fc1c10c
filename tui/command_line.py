"""`kb tui [PATH]` (a log file or a job's folder), or `cmd 2>&1 | kb tui`: check the input, take
the terminal, run the app."""

from __future__ import annotations

import argparse
import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from textual.app import App

from .log_source import check, check_folder
from .shutdown import kill_child_groups


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


def _is_pipe(path: Path) -> bool:
    try:
        return stat.S_ISFIFO(os.stat(path).st_mode)
    except OSError:
        return False


def main(args: argparse.Namespace, make_app: Callable[..., App[int]]) -> int:
    """A path is checked before the screen changes (a bad one is said in one line, exit 2): a
    file must be readable, a folder listable (the app reads it as a job). A pipe (stdin, or a
    FIFO given as the path) is handed to the app unread, which copies it in a background thread
    while the screen is up."""
    path, file = getattr(args, "path", None), getattr(args, "file", None)
    if path and file:
        print("kb: give a PATH or --file, not both", file=sys.stderr)
        return 2
    given: str | None = path or file
    log = Path(given) if given else None
    stream: BinaryIO | None = None
    if log is not None and _is_pipe(log):
        # A FIFO, <(cmd), /dev/stdin: read once, as it comes, like a pipe on stdin (each open
        # of a FIFO is another reader: checking it, showing its tail and looking it up would
        # each wait for a writer of its own). Opening waits for the writer, as `cat` does.
        try:
            stream = open(log, "rb")  # the app reads it to its end and closes it
        except OSError as e:
            print(f"kb: cannot read {log}: {e.strerror or e}", file=sys.stderr)
            return 2
        log = None
    elif log is not None:
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
    if getattr(app, "quit_with_run", False):
        # quit while a repro ran: what its cancel has not killed yet (a program that ignores
        # SIGTERM gets seconds of grace) dies now, not after kb has gone
        kill_child_groups()
    finish = getattr(app, "finish_writing", None)
    if finish is not None:  # what is being written into KB_HOME is finished, not cut short
        try:
            finish(lambda text: print(text, file=sys.stderr, flush=True))
        except KeyboardInterrupt:  # the user's ctrl+c while it waited: said, not a traceback
            print("kb: interrupted before the search index was finished", file=sys.stderr)
            return 130
    return app.return_code or 0
