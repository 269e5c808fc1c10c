"""The default engine: the per-job function over a pool of processes on this machine.

Each worker process loads the knowledge base once (its initializer builds the engine) and then
reads one job at a time, so memory is one job per worker plus the knowledge base. At most a few
jobs per worker are in flight, and rows come back in the order the jobs were given, whatever
order the workers finish them in.

A worker that dies inside a job (the kernel's OOM killer on a huge log, a crash in a native
library) breaks the pool: a new pool takes over, the jobs that were in flight are read again one
at a time, and the one that kills its worker again becomes a row with `error`. The run goes on.

Workers are started with "spawn": the parent may already run threads (the progress bar), and
forking a process with threads can deadlock the child.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import suppress

from .discover import Job
from .triage import empty_row, engine, triage

IN_FLIGHT = 4  # jobs queued per worker: keeps each busy without holding many rows in memory
_KB_DIRS: list[str] = []
_SECONDS: list[float | None] = []  # the time one job may take, in a worker


def cpu_count() -> int:
    """The cores this process may run on (a container's or a Slurm step's limit, not the
    machine's)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # macOS, Windows
        return max(1, os.cpu_count() or 1)


def run(
    jobs: Sequence[Job],
    workers: int | None = None,
    kb_dirs: Sequence[str] = (),
    seconds: float | None = None,
) -> Iterator[dict]:
    """One row per job, in the jobs' order. One worker runs in this process (no pool).
    seconds: the time one job may take (kb.fleet.budget; None: its default, 0: no limit)."""
    n = max(1, min(workers or cpu_count(), len(jobs) or 1))
    if n == 1:
        eng = engine(kb_dirs)
        for job in jobs:
            yield triage(job, eng, seconds)
        return
    yield from _Pool(n, list(kb_dirs), seconds).run(jobs)


class WorkersFailed(Exception):
    """No worker process could read a single job: the pool itself cannot run here."""


class _Pool:
    def __init__(self, n: int, kb_dirs: list[str], seconds: float | None = None):
        self.n = n
        self.kb_dirs = kb_dirs
        self.seconds = seconds
        self.done = 0  # rows a worker returned: once one has, a dead worker is the job's fault

    def _executor(self, n: int) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(
            n,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_init,
            initargs=(self.kb_dirs, self.seconds),
        )

    def run(self, jobs: Sequence[Job]) -> Iterator[dict]:
        pending: deque[tuple[Job, Future]] = deque()
        todo = iter(jobs)
        ex = self._executor(self.n)
        finished = False
        try:
            while True:
                while len(pending) < self.n * IN_FLIGHT:
                    job = next(todo, None)
                    if job is None:
                        break
                    pending.append((job, ex.submit(_work, job)))
                if not pending:
                    break
                job, fut = pending.popleft()
                try:
                    row = fut.result()
                except BrokenProcessPool:
                    pass
                else:
                    self.done += 1
                    yield row
                    continue
                # A worker died: every job in flight is suspect. Read them again alone.
                ex.shutdown(wait=False, cancel_futures=True)
                suspects = [job] + [j for j, _ in pending]
                pending.clear()
                for j in suspects:
                    yield self._alone(j)
                ex = self._executor(self.n)
            finished = True
        finally:
            # Done: let the workers exit (their CPU time is then counted, no zombies). Stopped
            # early (an error, Ctrl-C, SIGTERM, the caller gave up): drop what is queued and
            # stop the workers in their jobs: none is left behind holding the caller's pipe.
            if not finished:
                _stop_workers(ex)
            ex.shutdown(wait=finished, cancel_futures=not finished)
            if not finished:
                _await_manager(ex)

    def _alone(self, job: Job) -> dict:
        """A job read in a pool of its own: its row, or an error row if it kills the worker."""
        with self._executor(1) as ex:
            try:
                row = ex.submit(_work, job).result()
                self.done += 1
                return row
            except BrokenProcessPool:
                if not self.done:
                    raise WorkersFailed(
                        "the worker processes died before reading any job: run with "
                        "--workers 1 to see why"
                    ) from None
                row = empty_row(job.path)
                row["error"] = (
                    "the worker reading this job died (killed by a signal: out of memory, "
                    "or a crash)"
                )
                return row


def _stop_workers(ex: ProcessPoolExecutor) -> None:
    """End the pool's worker processes now (SIGTERM, then SIGKILL for any still there)."""
    procs = list((getattr(ex, "_processes", None) or {}).values())
    for p in procs:
        with suppress(Exception):
            p.terminate()
    for p in procs:
        with suppress(Exception):
            p.join(2)
            if p.is_alive():
                p.kill()
                p.join(2)


def _await_manager(ex: ProcessPoolExecutor, seconds: float = 5.0) -> None:
    """Let the pool's manager thread finish closing its wake-up pipe before the caller exits:
    at interpreter exit concurrent.futures wakes every manager thread, and one still closing
    that pipe makes the write fail ("Exception ignored in: <module 'threading'> ... OSError:
    [Errno 9] Bad file descriptor", CPython < 3.12) after kb has said it was stopped."""
    # Every pool's manager thread, not only this one's: a pool made again after a worker died
    # (or the one-job pools of _alone) may be closing its pipe too. concurrent.futures keeps
    # them in _threads_wakeups (CPython 3.9+); the pool's own attribute where it does not.
    import concurrent.futures.process as cfp
    import time

    threads = list(getattr(cfp, "_threads_wakeups", {}).keys())
    own = getattr(ex, "_executor_manager_thread", None)
    if own is not None and own not in threads:
        threads.append(own)
    end = time.monotonic() + seconds
    for thread in threads:
        with suppress(Exception):
            thread.join(max(0.0, end - time.monotonic()))


def _die_with_parent() -> None:
    """Linux: this worker gets SIGKILL when the process that started it dies, however it dies
    (even by SIGKILL, where no clean-up of the parent's runs)."""
    if not sys.platform.startswith("linux"):
        return
    with suppress(Exception):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() == 1:  # the parent died before the line above: go now
            os._exit(1)


def _init(kb_dirs: list[str], seconds: float | None = None) -> None:
    # Ctrl-C reaches the whole process group: the parent stops the pool, and a worker should
    # not print a traceback of its own for it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()
    # A worker writes nothing to stdout (its rows go back through the pool): it must not hold
    # the caller's pipe open (`kb triage ... | tail` waits for every holder to close it).
    with suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
    _KB_DIRS[:] = kb_dirs
    _SECONDS[:] = [seconds]
    engine(kb_dirs)  # the knowledge base, once per worker, before its first job


def _work(job: Job) -> dict:
    return triage(job, engine(_KB_DIRS), _SECONDS[0] if _SECONDS else None)
