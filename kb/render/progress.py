"""Word of long work on a terminal, silence in a pipe.

    with step("reading the knowledge base") as tick:
        for i, x in enumerate(xs, 1):
            tick(i, len(xs))

When standard error is a terminal and the work takes longer than DELAY_S (KB_PROGRESS_DELAY
overrides it; KB_NO_PROGRESS=1 turns the line off), one line on it says
what kb is doing (with a count when the work gives one, and the seconds so far), redrawn in
place and erased when the work ends; work that ends sooner shows nothing. When standard error is
not a terminal (a pipe, a file, CI) nothing is written and no thread is started: `tick` is a
no-op, and the cost is one isatty call. Plain writes, no rich: `kb lookup` uses it on its cold
path.
"""

from __future__ import annotations

import os
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    import threading
    from collections.abc import Callable
    from typing import TextIO

DELAY_S = 0.5  # work shorter than this says nothing
REDRAW_S = 0.25


def _noop(done: int | None = None, total: int | None = None, what: str = "") -> None:
    return None


def _is_terminal(stream: TextIO | None) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (AttributeError, OSError, ValueError):
        return False


class step:  # a context manager, named like contextlib's
    """Say `label` on the terminal while the block runs longer than `delay` seconds. `label`
    may be a function, called once the delay has passed (what to say can depend on what the
    work left behind by then)."""

    def __init__(
        self,
        label: str | Callable[[], str],
        stream: TextIO | None = None,
        delay: float | None = None,
        shown: bool = True,
    ):
        """shown=False: say nothing (the terminal is the input: the user is typing on it)."""
        self.shown = shown
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.delay = delay
        self.done: int | None = None
        self.total: int | None = None
        self.what = ""  # what the work said it does now (tick), else the label
        self._thread: threading.Thread | None = None
        self._shown = False

    def tick(self, done: int | None = None, total: int | None = None, what: str = "") -> None:
        """How far the work is (done of total), and what it does now when that changed."""
        self.done, self.total = done, total
        if what:
            self.what = what

    def __enter__(self) -> Callable[..., None]:
        if not self.shown or os.environ.get("KB_NO_PROGRESS") or not _is_terminal(self.stream):
            return _noop
        import threading

        if self.delay is None:
            try:  # KB_PROGRESS_DELAY: seconds of work before it is said (tests say 0)
                self.delay = float(os.environ.get("KB_PROGRESS_DELAY", DELAY_S))
            except ValueError:
                self.delay = DELAY_S
        self._stop = threading.Event()
        self._start = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="kb-progress", daemon=True)
        self._thread.start()
        return self.tick

    def _line(self, text: str) -> str:
        elapsed = time.monotonic() - self._start
        count = ""
        if self.done is not None:
            count = f" {self.done}/{self.total}" if self.total else f" {self.done}"
        return f"kb: {elapsed:.0f} s{count} {text}"

    def _run(self) -> None:
        if self._stop.wait(self.delay):
            return
        try:
            text = self.label() if callable(self.label) else self.label
        except Exception:  # what to say must never break the work
            text = "working"
        try:
            width = os.get_terminal_size(self.stream.fileno()).columns or 80  # 0: size unset
        except (AttributeError, OSError, ValueError):
            width = 80
        last = ""
        while True:
            # \r and "erase to the end of the line": the line is redrawn in place, and never
            # longer than the terminal (a wrapped line would not be).
            line = self._line(self.what or text)
            if len(line) >= width:
                line = line[: max(width - 2, 1)] + "…"
            if line != last:
                try:
                    self.stream.write("\r" + line + "\x1b[K")
                    self.stream.flush()
                except (OSError, ValueError):
                    return
                self._shown, last = True, line
            if self._stop.wait(REDRAW_S):
                return

    def __exit__(self, *exc) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        if self._shown:
            try:
                self.stream.write("\r\x1b[K")
                self.stream.flush()
            except (OSError, ValueError):
                pass


def reading_label() -> str:
    """What loading the knowledge base is doing when it takes long: a first run after an install
    or an edit of the entries builds the entry cache."""
    from kb import paths

    return f"reading the knowledge base (a first run builds its cache in {paths.state_folder()})"


def lookup_label() -> str:
    """What a lookup of a message is doing when it takes long: the first one that needs the
    message catalog or the full-text index builds it."""
    from kb import paths

    return f"looking up (a first lookup builds kb's indexes in {paths.state_folder()}, once)"


__all__ = ["DELAY_S", "lookup_label", "reading_label", "step"]
