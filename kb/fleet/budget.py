"""The time one triage job may take: past it, the job ends in a row whose `error` says so, and
the run goes on (a job can never hang a fleet run).

The clock is the process's interval timer (SIGALRM): it interrupts a read that waits forever as
well as a loop that runs long, in a worker process (or in `kb triage` itself with one worker),
where the job runs on the main thread, and in a Ray actor (kb.fleet.ray_engine runs its jobs
there on the main thread too). Where it cannot be set (another thread, a platform without
setitimer), the job runs without it, and the other bounds still hold:
links never lead out of a job's folder, no FIFO, device or /proc file is opened, tarballs and
folders are bounded (kb.fleet.tarball, kb.job.inputs).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

SECONDS = 600.0  # a job of 16k ranks' logs takes a minute; ten is something wrong


class JobTooLong(Exception):
    """The job went past its time."""


@contextmanager
def time_budget(seconds: float | None) -> Iterator[None]:
    """Raise JobTooLong in the block once `seconds` have passed (None or 0: no limit)."""
    if (
        not seconds
        or not hasattr(signal, "setitimer")
        or threading.current_thread() is not threading.main_thread()
    ):
        yield
        return

    def past(signum, frame) -> None:
        raise JobTooLong(
            f"stopped after {seconds:g} s, the time one job may take (--job-seconds): a job "
            "this slow is a folder or an archive far larger than one job's logs"
        )

    old = signal.signal(signal.SIGALRM, past)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
