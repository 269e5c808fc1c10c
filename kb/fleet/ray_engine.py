"""The per-job function on Ray, for fleets one machine cannot keep up with.

A pool of `workers` Ray actors. Each pays kb's fixed cost once, in its constructor: a Ray worker
process, importing kb, loading the knowledge base (docs/performance.md has the figures). Then it
triages *batches* of jobs: one Ray task reads many jobs, so that Ray's cost per task (scheduling,
sending the rows back) is spread over the batch, and what a worker spends is the jobs' bytes,
not kb's start-up or Ray's bookkeeping. Each actor has two batches queued, so it never waits for
the driver; rows come back in the jobs' order.

Plain actors, not Ray Data: Ray Data adds a streaming executor that sizes and restarts its own
actor pool (seconds of fixed cost for nothing kb needs), and it cannot run over Ray Client, the
`ray://` address through which a machine outside the cluster submits work.

With no address a local Ray is started for the run (with `workers` CPUs) and stopped after it;
with an address (ray://head:10001 through Ray Client, head:6379 from a cluster node, "auto"), or
RAY_ADDRESS, the run goes to that cluster, whose workers must have kb installed and see the job
paths (a shared file system). A Ray already started by the caller (a notebook, a test) is used as
it is. Reaching a cluster is bounded: nothing listening is said at once, a listener that is not
Ray after CONNECT_SECONDS.

Ray's own output never reaches stdout, which carries kb's table or query result: while Ray runs
here, this process's stdout is its stderr (and so it is for the Ray processes started here);
`quiet` sends both to /dev/null, Ray's log lines and warnings included.

Ray is an optional extra (pip install 'kb-cuda[fleet]') and is imported only here.
"""

from __future__ import annotations

import importlib
import logging
import os
import signal
import socket
import sys
import threading
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

from .discover import Job
from .triage import empty_row, engine, triage

BATCH = 256  # most jobs per Ray task: ~0.1-1 s of work against Ray's ~1 ms per task
SPREAD = 4  # at least this many batches per actor, so that the last ones even out
QUEUED = 2  # batches queued per actor: the next is there when one ends
CONNECT_SECONDS = 60.0  # reaching a cluster (or starting a local Ray) may take this long
PROBE_SECONDS = 5.0  # a TCP connection to the address's host:port, before Ray tries


class RayMissing(Exception):
    """Ray is not installed: a usage error, said with the command that installs it."""


class RayUnavailable(Exception):
    """Ray could not start here, or the cluster at --address could not be reached."""


class _Triage:
    """One per Ray actor: the knowledge base is loaded once, in the constructor."""

    def __init__(self, kb_dirs: list[str], seconds: float | None):
        self.kb_dirs = kb_dirs
        self.seconds = seconds
        engine(kb_dirs)

    def ready(self) -> int:
        return os.getpid()

    def batch(self, jobs: list[tuple[str, str]]) -> list[dict]:
        # Ray runs an actor's tasks on its main thread: the per-job time budget (SIGALRM) holds.
        eng = engine(self.kb_dirs)
        return [triage(Job(path, kind), eng, self.seconds) for path, kind in jobs]


def batch_size(jobs: int, actors: int) -> int:
    """Jobs per task: as many as BATCH allows while every actor still gets SPREAD batches (a
    short list is spread over every actor rather than left to one)."""
    return max(1, min(BATCH, -(-jobs // (actors * SPREAD))))


def run(
    jobs: Sequence[Job],
    workers: int | None = None,
    address: str | None = None,
    kb_dirs: Sequence[str] = (),
    seconds: float | None = None,
    quiet: bool = False,
) -> Iterator[dict]:
    """One row per job, in the jobs' order. seconds: the time one job may take
    (kb.fleet.budget; None: its default, 0: no limit)."""
    try:
        # Through importlib: Ray is optional, and its absence must not fail a type check.
        ray = importlib.import_module("ray")
    except ImportError:
        raise RayMissing("--engine ray needs Ray: pip install 'kb-cuda[fleet]'") from None
    if not jobs:
        return
    # The knowledge base must load here before actors try: an entry folder that does not load
    # is said once, as the local engine says it, not as a Ray error from every actor.
    engine(kb_dirs)
    with _ray_output(quiet):
        started = False
        if not ray.is_initialized():
            _connect(ray, address or os.environ.get("RAY_ADDRESS") or "local", workers)
            started = True
        try:
            n = workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
            yield from _Pool(ray, n, list(kb_dirs), seconds).run(jobs)
        finally:
            if started:
                ray.shutdown()


class _Pool:
    """`n` actors and the batches queued on them. An actor gets batches once it has started
    (a cluster with fewer free CPUs than actors runs on those that start); a batch whose actor
    died is read again one job per task on its replacement, so that the job that kills its
    worker becomes a row with `error` (as the local engine does: kb.fleet.local)."""

    def __init__(self, ray: Any, n: int, kb_dirs: list[str], seconds: float | None):
        self.ray = ray
        self.n = n
        self.cls = ray.remote(num_cpus=1, max_restarts=0, max_task_retries=0)(_Triage)
        self.args = (kb_dirs, seconds)
        self.actors: list[Any] = []
        self.done = 0  # rows an actor returned: once one has, a dead actor is the job's fault
        self.lost = 0  # batches read again because their actor died

    def _actor(self) -> Any:
        return self.cls.remote(*self.args)

    def run(self, jobs: Sequence[Job]) -> Iterator[dict]:
        ray = self.ray
        size = batch_size(len(jobs), self.n)
        batches = [
            [(j.path, j.kind) for j in jobs[i : i + size]] for i in range(0, len(jobs), size)
        ]
        self.actors = [self._actor() for _ in range(min(self.n, len(batches)))]
        starting = {actor.ready.remote(): a for a, actor in enumerate(self.actors)}
        started: list[int] = []
        running: dict[Any, tuple[int, int, Any]] = {}  # task -> (batch, actor's slot, actor)
        queued = [0] * len(self.actors)
        ready: dict[int, list[dict]] = {}
        nxt = head = 0
        # Batches ahead of the first one not yet yielded: bounds the rows held here.
        window = len(self.actors) * (QUEUED + SPREAD)
        try:
            while head < len(batches):
                for a in started:
                    while queued[a] < QUEUED and nxt < len(batches) and nxt < head + window:
                        actor = self.actors[a]
                        running[actor.batch.remote(batches[nxt])] = (nxt, a, actor)
                        queued[a] += 1
                        nxt += 1
                waiting = [*running, *starting]
                done, _ = ray.wait(waiting, num_returns=1, timeout=CONNECT_SECONDS)
                if not done:
                    if not running:  # a batch may take long; no actor starting may not
                        raise RayUnavailable(
                            f"none of kb's {len(self.actors)} Ray actor(s) started within "
                            f"{CONNECT_SECONDS:g} s: the cluster has no free CPU for them"
                        )
                    continue
                ref = done[0]
                if ref in starting:
                    a = starting.pop(ref)
                    try:
                        ray.get(ref)
                    except ray.exceptions.RayError as e:
                        raise RayUnavailable(
                            "kb's Ray actors could not start (is kb installed on the cluster's "
                            f"nodes?): {_first_line(e)}"
                        ) from None
                    started.append(a)
                    continue
                b, a, actor = running.pop(ref)
                queued[a] -= 1
                try:
                    ready[b] = ray.get(ref)
                    self.done += len(ready[b])
                except ray.exceptions.RayActorError:
                    # The actor died (out of memory, a crash in a native library): every batch
                    # queued on it comes back here too. Its replacement takes its slot (and its
                    # CPU, which the dead one gave back) once; each batch is read job by job.
                    if self.actors[a] is actor:
                        with suppress(Exception):
                            ray.kill(actor)
                        self.actors[a] = self._actor()
                    ready[b] = self._again(a, batches[b])
                except ray.exceptions.RayError as e:
                    ready[b] = [self._failed(job, e) for job in batches[b]]
                while head in ready:
                    yield from ready.pop(head)
                    head += 1
        finally:
            for actor in self.actors:
                with suppress(Exception):
                    ray.kill(actor)

    def _again(self, a: int, batch: list[tuple[str, str]]) -> list[dict]:
        """The jobs of a batch whose actor died, one task each on the actor of slot `a`: the
        job that kills it again is a row with `error`, and a new actor reads on."""
        ray = self.ray
        self.lost += 1
        rows = []
        for job in batch:
            actor = self.actors[a]
            try:
                (row,) = ray.get(actor.batch.remote([job]))
                self.done += 1
            except ray.exceptions.RayActorError as e:
                if not self.done:
                    raise RayUnavailable(
                        "the Ray workers died before reading any job (is kb installed on the "
                        f"cluster's nodes?): {_first_line(e)}"
                    ) from None
                row = empty_row(job[0])
                row["error"] = (
                    "the Ray worker reading this job died (killed by a signal: out of memory, "
                    "or a crash)"
                )
                if self.actors[a] is actor:
                    with suppress(Exception):
                        ray.kill(actor)
                    self.actors[a] = self._actor()
            except ray.exceptions.RayError as e:
                row = self._failed(job, e)
            rows.append(row)
        return rows

    @staticmethod
    def _failed(job: tuple[str, str], e: Exception) -> dict:
        row = empty_row(job[0])
        row["error"] = f"Ray could not run this job: {_first_line(e)}"
        return row


def _connect(ray: Any, address: str, workers: int | None) -> None:
    """ray.init, bounded: nothing listening at the address is said within PROBE_SECONDS, a
    cluster that does not answer within CONNECT_SECONDS is said then."""
    if address == "local":
        _start_local(ray, workers)
        return
    _probe(address)
    failed: list[BaseException] = []

    def init() -> None:
        try:
            ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
        except BaseException as e:  # said by the thread that waits for this one
            failed.append(e)

    # On a thread of its own, because ray.init waits without end for a cluster that does not
    # answer (it retries its connection for many minutes). A driver that connects starts no
    # process of its own, so none dies with this thread (see _start_local). Off the main
    # thread, Ray also leaves kb's SIGTERM handling (stop the run as Ctrl-C does) as it is.
    said = logging.getLogger("ray._private.worker")
    level = said.level
    said.setLevel(logging.ERROR)  # not "SIGTERM handler is not set": kb keeps its own
    try:
        t = threading.Thread(target=init, name="kb-ray-init", daemon=True)
        t.start()
        t.join(CONNECT_SECONDS)
    finally:
        said.setLevel(level)
    if t.is_alive():
        raise RayUnavailable(
            f"the Ray cluster at {address} did not answer within {CONNECT_SECONDS:g} s (a Ray "
            "Client address is ray://head:10001; the GCS port, 6379, only from a cluster node)"
        )
    if failed:
        msg = _first_line(failed[0])
        if address.startswith("ray://") and "timeout" in msg.lower():
            msg += (
                " (no Ray Client server answered there; a cluster that requires a token needs "
                "RAY_AUTH_MODE=token here, and the token in RAY_AUTH_TOKEN or ~/.ray/auth_token)"
            )
        raise RayUnavailable(f"cannot reach the Ray cluster at {address}: {msg}")


def _start_local(ray: Any, workers: int | None) -> None:
    """A local Ray for this run, started on this thread: the processes Ray starts die with the
    thread that started them (PR_SET_PDEATHSIG), so a helper thread would take them along."""
    from .local import cpu_count

    main = threading.current_thread() is threading.main_thread()
    term = signal.getsignal(signal.SIGTERM) if main else None
    try:
        ray.init(
            address="local",
            num_cpus=workers or cpu_count(),
            include_dashboard=False,
            logging_level=logging.ERROR,
            log_to_driver=False,
        )
    except Exception as e:  # Ray raises RuntimeError, ConnectionError, its own types...
        raise RayUnavailable(f"cannot start a local Ray: {_first_line(e)}") from None
    finally:
        # ray.init puts its own SIGTERM handler (exit at once) in place of kb's, which ends
        # the run as Ctrl-C does: the actors and Ray stopped, the spool removed.
        if main and term is not None:
            signal.signal(signal.SIGTERM, term)


def _probe(address: str) -> None:
    """RayUnavailable at once when nothing accepts a TCP connection at the address's host and
    port (a wrong port, a head that is down): Ray itself would retry for many minutes."""
    hostport = address.split("://", 1)[1] if "://" in address else address
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        return  # "auto", or a form Ray reads itself
    host = host.strip("[]")
    try:
        socket.create_connection((host, int(port)), timeout=PROBE_SECONDS).close()
    except OSError as e:
        why = e.strerror or str(e) or type(e).__name__
        raise RayUnavailable(f"cannot reach the Ray cluster at {address}: {why}") from None


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


@contextmanager
def _ray_output(quiet: bool) -> Iterator[None]:
    """While Ray runs here, file descriptor 1 is fd 2 (or, quiet, both are /dev/null): Ray's
    native code and the processes it starts write to the descriptors, not to sys.stdout, so the
    redirection is made there. Python warnings (Ray's UserWarnings) are dropped when quiet."""
    for stream in (sys.stdout, sys.stderr):
        with suppress(Exception):
            stream.flush()
    saved: list[tuple[int, int]] = []
    try:
        with warnings.catch_warnings():
            if quiet:
                warnings.simplefilter("ignore")
            try:
                saved.append((1, os.dup(1)))
                if quiet:
                    saved.append((2, os.dup(2)))
                    devnull = os.open(os.devnull, os.O_WRONLY)
                    os.dup2(devnull, 2)
                    os.close(devnull)
                os.dup2(2, 1)
            except OSError:
                pass  # no descriptor to move (a closed stdout): nothing of Ray's can reach it
            yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            with suppress(Exception):
                stream.flush()
        for fd, copy in reversed(saved):
            with suppress(OSError):
                os.dup2(copy, fd)
            with suppress(OSError):
                os.close(copy)
