"""Running many repros at once: up to `jobs` side by side, and the exclusive ones (they fill the
GPU, so a neighbour would fail for want of memory, not for its own bug) each alone, after
everything else has finished. Generic over what a task returns so it can be tested without
repros."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TypeVar

R = TypeVar("R")


def run_scheduled(
    shared: Iterable[int],
    exclusive: Iterable[int],
    task: Callable[[int], R],
    finish: Callable[[int, R], None],
    jobs: int,
    cancel: threading.Event,
) -> None:
    """Run task(i) for every index, `shared` ones up to `jobs` at a time, then each `exclusive`
    one with nothing beside it. finish(i, result) is called in the calling thread as each ends.
    Any exception here (a KeyboardInterrupt, most often) sets `cancel`, waits for every running
    task to return (tasks watch `cancel` and kill what they run), then propagates."""
    pending: dict[Future[R], int] = {}

    def collect() -> None:
        done, _ = wait(list(pending), timeout=0.2, return_when=FIRST_COMPLETED)
        for f in done:
            finish(pending.pop(f), f.result())

    with ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="kb-verify") as pool:
        try:
            for i in shared:
                pending[pool.submit(task, i)] = i
            while pending:
                collect()
            for i in exclusive:  # one at a time, after everything else has finished
                pending[pool.submit(task, i)] = i
                while pending:
                    collect()
        except BaseException:
            cancel.set()
            while pending:
                done, _ = wait(list(pending))
                for f in done:
                    finish(pending.pop(f), f.result())
            raise
