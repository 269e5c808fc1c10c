"""`kb triage`: every job under some folders -> a table (DuckDB or Parquet) and a summary.

    kb triage /logs/2026-11-26 --out day.duckdb --meta jobs.csv
    kb triage --sql "SELECT host, failures, classes FROM faulty_nodes" day.duckdb
    kb triage --out day.duckdb --sql "..."        (the same)

Progress goes to stderr (none with --quiet), the summary or the query's result to stdout.
Exit codes as everywhere in kb: 0 written (or queried), 2 usage error or unreadable input (a
path that does not exist, a bad jobs file, an output kb cannot write, a query DuckDB refuses,
--engine ray without Ray or with an --address where no Ray answers: said within seconds, or
after kb.fleet.ray_engine.CONNECT_SECONDS for a listener that is not Ray), 130 interrupted. A job that cannot be read is a row with `error`, not a failure of the run.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections.abc import Generator, Iterator, Sequence
from contextlib import closing, contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from kb import exit_codes
from kb.render.terminal import InertWriter, inert

from . import budget, local, store
from . import discover as discovery
from . import meta as job_meta
from .summary import render, render_result

WIDE = 160  # columns of the summary when stdout is not a terminal


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kb triage",
        description="Triage every job under the given paths: one row per job (kb's answer, its "
        "domain and action, host, GPU, first failure time) in a DuckDB or Parquet table, and a "
        "summary: failure classes by count and GPU hours, whose problem they are, the hosts and "
        "GPUs with repeated hardware-class failures, the jobs without an answer.",
    )
    p.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="job folders, log files (.gz too), job tarballs, or folders of them",
    )
    p.add_argument(
        "--out",
        metavar="FILE",
        help="the table: FILE.duckdb or FILE.parquet (with --sql and no jobs: the table to query)",
    )
    p.add_argument(
        "--meta",
        metavar="CSV",
        help="the jobs' records: job,gpus,start,end[,user] (sacct's JobID,AllocTRES,Start,End,User too)",
    )
    p.add_argument(
        "--files",
        action="store_true",
        help="every log file (or tarball) under the paths is a job of its own: a folder of per-job logs",
    )
    p.add_argument("--engine", choices=("local", "ray"), default="local")
    p.add_argument(
        "--address",
        metavar="ADDR",
        help="a Ray cluster (ray://head:10001 through Ray Client, head:6379 from a cluster "
        "node, auto); default: RAY_ADDRESS, else a local Ray for the run",
    )
    p.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="worker processes (default: this machine's cores; Ray: the cluster's CPUs)",
    )
    p.add_argument(
        "--sql",
        metavar="QUERY",
        help="a query over the table (jobs, faulty_nodes) instead of the summary; without PATH, over the --out written before",
    )
    p.add_argument(
        "--format",
        choices=("table", "csv", "jsonl"),
        default="table",
        help="how --sql prints its rows",
    )
    p.add_argument(
        "--kb-dir", action="append", default=[], metavar="DIR", help="more entry folders"
    )
    p.add_argument(
        "--job-seconds",
        type=float,
        default=budget.SECONDS,
        metavar="S",
        help=f"the time one job may take before it is a row with an error (default "
        f"{budget.SECONDS:g}; 0: no limit)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    return p


def main(argv: list[str]) -> int:
    try:
        args = parser().parse_args(argv)
    except SystemExit as e:  # --help (0) or a usage error (2), already printed by argparse
        return e.code if isinstance(e.code, int) else exit_codes.USAGE
    # What reaches stdout is made inert (kb.render.terminal): job and host names, table cells
    # and errors come from the jobs' files; only rich's own styles reach a terminal.
    out = Console(file=InertWriter(sys.stdout))  # type: ignore[arg-type]
    if not out.is_terminal and "COLUMNS" not in os.environ:
        # Piped or redirected: no terminal to fit, so tables keep their cells whole.
        out = Console(file=InertWriter(sys.stdout), width=WIDE)  # type: ignore[arg-type]
    err = Console(stderr=True)
    if args.workers is not None and args.workers < 1:
        return _usage(err, "--workers must be 1 or more")
    if not args.job_seconds >= 0:  # NaN too
        return _usage(err, "--job-seconds must be 0 (no limit) or more")
    if args.address and args.engine != "ray":
        return _usage(err, "--address is for --engine ray")
    # `kb triage --sql QUERY day.duckdb`: the one path is the table to query, not a job.
    one = args.paths[0] if len(args.paths) == 1 else ""
    if args.sql and not args.out and one.lower().endswith(store.FORMATS):
        args.out, args.paths = one, []
    if not args.out:
        return _usage(err, "--out FILE.duckdb (or FILE.parquet) is needed")
    try:
        if not args.paths:
            if not args.sql:
                return _usage(err, "give the jobs' paths (or --sql QUERY to query --out)")
            con = store.open_table(args.out)
            try:
                render_result(store.query(con, args.sql), out, args.format)
            finally:
                con.close()
            return exit_codes.OK
        with _terminate_as_interrupt():
            return _triage(args, out, err)
    except (
        discovery.DiscoveryError,
        job_meta.MetaError,
        store.StoreError,
        local.WorkersFailed,
        _EngineMissing,
    ) as e:
        return _usage(err, str(e))
    except KeyboardInterrupt:
        err.print("kb triage: interrupted")
        return exit_codes.INTERRUPTED
    except Terminated:
        err.print("kb triage: terminated")
        return TERMINATED


class _EngineMissing(Exception):
    pass


TERMINATED = 128 + 15  # as a shell reports a process ended by SIGTERM


class Terminated(BaseException):
    """SIGTERM (a scheduler's or `timeout`'s stop): raised where the run is, so that it ends
    as Ctrl-C does: the workers stopped, the spool removed, one line said."""


@contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    def stop(signum, frame) -> None:
        raise Terminated

    try:
        old = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread (kb triage called from a thread): as it was
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _triage(args: argparse.Namespace, out: Console, err: Console) -> int:
    store.check_out(args.out)  # before reading a single job
    meta = job_meta.read(args.meta) if args.meta else None
    quiet = args.quiet
    progress = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err,
        disable=quiet,
        transient=True,
    )
    spool = store.Spool()
    try:
        with progress:
            finding = progress.add_task("finding jobs", total=None, rate="")
            jobs = discovery.discover(args.paths, files=args.files)
            progress.remove_task(finding)
            _say_links(err, discovery.skipped_links(), found=len(jobs), quiet=quiet)
            task = progress.add_task("triage", total=len(jobs), rate="")
            start = time.perf_counter()
            # Closed as soon as the loop ends, however it ends: an engine stops its workers
            # (and Ray gives stdout and stderr back) before kb says anything more.
            with closing(_rows(args, jobs)) as rows:
                for i, row in enumerate(rows, 1):
                    spool.add(meta.annotate(row) if meta else job_meta.no_meta(row))
                    elapsed = time.perf_counter() - start
                    rate = f"{i / elapsed:.0f} jobs/s" if elapsed > 0 else ""
                    progress.update(task, advance=1, rate=rate)
        try:
            con = store.write(spool, args.out)
        except store.StoreError as e:
            # Every job was read: their rows are kept where they are, never lost to a late error.
            spool.keep = True
            raise store.StoreError(
                f"{e}; the {spool.count} row(s) of this run are kept in {spool.path} (one JSON "
                "object per job)"
            ) from None
    finally:
        spool.remove()
    if not quiet:
        took = time.perf_counter() - start
        err.print(
            f"{len(jobs)} job(s) in {took:.1f} s with the {args.engine} engine -> {args.out}",
            style="dim",
        )
        if meta is not None:
            unused = len({r.job for r in meta.records} - meta.matched)
            if unused:
                err.print(f"{unused} job(s) of {args.meta} were not among the paths", style="dim")
    try:
        if args.sql:
            render_result(store.query(con, args.sql), out, args.format)
        else:
            render(store.summarize(con), out, args.out)
    finally:
        con.close()
    return exit_codes.OK


def _say_links(err: Console, links: list[str], found: int, quiet: bool) -> None:
    """Links under the paths are never followed (one could lead to /proc or out of the job's
    tree); say so, or a folder of linked job folders reads as "0 jobs" with no reason given.
    Said even with --quiet when no job was found: then it is the answer."""
    if not links or (quiet and found):
        return
    shown = ", ".join(links[:3]) + (f" and {len(links) - 3} more" if len(links) > 3 else "")
    err.print(
        f"kb triage: {len(links)} symbolic link(s) under the paths not followed ({inert(shown)}): "
        "a link can lead out of a job's tree. To read what they point to, name them as paths: "
        f"kb triage {inert(os.path.join(os.path.dirname(links[0]), '*'))}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


def _rows(args: argparse.Namespace, jobs: Sequence[discovery.Job]) -> Generator[dict, None, None]:
    if args.engine == "ray":
        from . import ray_engine

        try:
            yield from ray_engine.run(
                jobs, args.workers, args.address, args.kb_dir, args.job_seconds, args.quiet
            )
        except (ray_engine.RayMissing, ray_engine.RayUnavailable) as e:
            raise _EngineMissing(str(e)) from None
        return
    yield from local.run(jobs, args.workers, args.kb_dir, args.job_seconds)


def _usage(err: Console, message: str) -> int:
    err.print(f"kb triage: {inert(message)}", markup=False, highlight=False, soft_wrap=True)
    return exit_codes.USAGE


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
