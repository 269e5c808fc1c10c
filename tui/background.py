"""Blocking work off the event loop, in daemon threads the app never waits for.

Textual's thread workers run in asyncio's default executor, and `App.run` waits for that
executor's threads when it ends: a worker stuck reading an endless pipe, or looking up a file that
never ends, kept the process alive (at 100% CPU, the screen already cleared) after the user quit.
Work that can block for long (reading input, a lookup, the machine probe, a repro) therefore runs
here, in daemon threads: quitting never waits for them, and `busy` tells the tests when all is
done. Nothing here imports Textual.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class Background:
    """Starts and counts daemon threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live = 0
        self._idle = threading.Condition(self._lock)

    @property
    def busy(self) -> bool:
        with self._lock:
            return self._live > 0

    def start(self, work: Callable[[], object], name: str) -> threading.Thread:
        """Run work() in a daemon thread. work catches what it expects and reports it to the UI
        itself: a thread has no one else to tell."""

        def run() -> None:
            try:
                work()
            finally:
                with self._lock:
                    self._live -= 1
                    self._idle.notify_all()

        with self._lock:
            self._live += 1
        thread = threading.Thread(target=run, name=f"kb-tui-{name}", daemon=True)
        thread.start()
        return thread

    def wait(self, timeout: float) -> bool:
        """Wait up to timeout seconds for every thread to end; whether they all did."""
        with self._lock:
            return self._idle.wait_for(lambda: self._live == 0, timeout)
