"""The per-job function on Ray Data, for fleets one machine cannot keep up with.

`map_batches` over a callable class: Ray starts `workers` actors, each builds its engine (the
knowledge base) once in its constructor and then triages batches of job paths. The rows are the
local engine's rows, in the jobs' order (order preserved; the store sorts them by job anyway).

With no address a local Ray is started for the run (with `workers` CPUs) and stopped after it;
with an address (ray://head:10001, or "auto" inside a cluster) the run goes to that cluster, whose
workers must have kb installed and see the job paths (a shared file system). A Ray already
started by the caller (a notebook, a test) is used as it is.

Ray is an optional extra (pip install 'kb-cuda[fleet]') and is imported only here.
"""

from __future__ import annotations

import importlib
import json
import logging
from collections.abc import Iterator, Sequence

from .discover import Job

BATCH = 16  # jobs per batch: big enough to amortise Ray's per-task cost, small enough to balance


class RayMissing(Exception):
    """Ray is not installed: a usage error, said with the command that installs it."""


class RayUnavailable(Exception):
    """Ray could not start here, or the cluster at --address could not be reached."""


class _Triage:
    """One per Ray actor: the knowledge base is loaded once, in the constructor."""

    def __init__(self, kb_dirs: list[str] | None = None):
        from .triage import engine

        self.engine = engine(kb_dirs)

    def __call__(self, batch: dict) -> dict:
        from .triage import triage

        np = importlib.import_module("numpy")  # Ray Data's batch format; it comes with ray[data]

        rows = [
            json.dumps(triage(Job(str(p), str(k)), self.engine), default=str)
            for p, k in zip(batch["path"], batch["kind"])
        ]
        # One JSON text per row: Ray's Arrow blocks then never have to agree on the type of a
        # column that is null in one batch and text in another.
        return {"row": np.array(rows, dtype=object)}


def run(
    jobs: Sequence[Job],
    workers: int | None = None,
    address: str | None = None,
    kb_dirs: Sequence[str] = (),
) -> Iterator[dict]:
    try:
        # Through importlib: Ray is optional, and its absence must not fail a type check.
        ray = importlib.import_module("ray")
        importlib.import_module("ray.data")
    except ImportError:
        raise RayMissing(
            "--engine ray needs Ray Data: pip install 'kb-cuda[fleet]' (or 'ray[data]')"
        ) from None
    if not jobs:
        return
    # The knowledge base must load here before actors try: Ray Data retries an actor whose
    # constructor fails without end, so a broken entry folder would hang the run, not stop it.
    from .triage import engine

    engine(kb_dirs)
    started = False
    if not ray.is_initialized():
        try:
            if address:
                ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
            else:
                from .local import cpu_count

                ray.init(
                    num_cpus=workers or cpu_count(),
                    include_dashboard=False,
                    logging_level=logging.ERROR,
                    log_to_driver=False,
                )
        except Exception as e:  # Ray raises ConnectionError, RuntimeError, its own types...
            where = f"the Ray cluster at {address}" if address else "a local Ray"
            msg = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise RayUnavailable(f"cannot start {where}: {msg}") from None
        started = True
    try:
        logging.getLogger("ray.data").setLevel(logging.WARNING)  # not a line per dataset run
        ctx = ray.data.DataContext.get_current()
        ctx.execution_options.preserve_order = True
        ctx.enable_progress_bars = False  # kb's own progress bar counts the rows
        n = workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        items = [{"path": j.path, "kind": j.kind} for j in jobs]
        # At least one block per actor, so that a short list still keeps every actor busy.
        batch = max(1, min(BATCH, -(-len(items) // n)))
        blocks = max(1, min(len(items), max(n, -(-len(items) // batch))))
        ds = ray.data.from_items(items, override_num_blocks=blocks).map_batches(
            _Triage,
            # no constructor arguments unless needed: Ray keeps them in its object store
            fn_constructor_args=(list(kb_dirs),) if kb_dirs else None,
            batch_size=batch,
            batch_format="numpy",
            compute=ray.data.ActorPoolStrategy(size=n),
            num_cpus=1,
        )
        for r in ds.iter_rows():
            yield json.loads(r["row"])
    finally:
        if started:
            ray.shutdown()
