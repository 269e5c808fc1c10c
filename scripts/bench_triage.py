"""Fleet triage speed: jobs per second with the local engine and with Ray, and what one job costs.

    python scripts/bench_triage.py [--jobs 10000] [--sample 300] [--skip-ray] [--only-ray]
                                   [--rounds 4] [--keep DIR]

1. Builds --jobs synthetic jobs in a temporary folder from the repository's own captured jobs
   (tests/fixtures/jobs/*/run: `kb run` folders of real torchrun jobs) and logs (each job's
   stdout/stderr capture, docs/examples/*.log): job folders (hard links to the captured files),
   single logs, .gz logs, tarballs of job folders, and logs cut at half their length (a job killed
   mid-run: some no longer hold their error). Nothing in a log is invented; the variations are of form.
2. Triages them: the local engine with 1 worker (in this process) and 2 workers (the process
   pool), and the Ray engine with 1 and 2 actors on a local Ray started once (its start-up is
   timed apart). Prints jobs/s, the CPU time of this process and of every process under it (the
   pool's workers; Ray's actors and its own processes, GCS, raylet, agents, shown apart), the
   load average, and the 2-worker/1-worker ratio of each engine. Ray's fixed cost is stated
   apart: starting Ray (once per run), a fresh process importing kb and loading the knowledge
   base (what each actor pays once), and a call over two jobs (actors started and ready).
3. The cost of one job, on --sample jobs in this process: read (the job's bytes, tarballs
   unpacked), scan (kb's scan of those bytes, less the read), verdict (the rest of the per-job
   function: the job view, the ranking, the row), write (the row into the table).
4. From those, a worked estimate of the workers a fleet of 100,000 failed jobs a day needs.
"""

from __future__ import annotations

import argparse
import gzip
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import kb  # noqa: E402
from kb.fleet import local, store  # noqa: E402
from kb.fleet.discover import Job, discover  # noqa: E402
from kb.fleet.meta import no_meta  # noqa: E402
from kb.fleet.triage import engine, triage, unpack  # noqa: E402

FLEET_DAY = 100_000


# ---------------------------------------------------------------- building the jobs
def templates() -> tuple[list[Path], list[Path]]:
    """(job folders, single logs) the repository captured."""
    runs = sorted((REPO / "tests" / "fixtures" / "jobs").glob("*/run"))
    logs = [r / "output.log" for r in runs]
    logs += sorted((REPO / "tests" / "fixtures" / "jobs").glob("*/stderr.txt"))
    logs += sorted((REPO / "docs" / "examples").glob("*.log"))
    return runs, [p for p in logs if p.is_file() and p.stat().st_size > 0]


def build(day: Path, n: int) -> dict[str, int]:
    """n jobs under day/, cycling through the forms; returns how many of each form."""
    runs, logs = templates()
    packed = day.parent / "templates"
    packed.mkdir(exist_ok=True)
    tars, gzs, cuts = [], [], []
    for i, run in enumerate(runs):
        t = packed / f"run{i}.tar.gz"
        with tarfile.open(t, "w:gz") as tar:
            tar.add(run, arcname=f"job{i}")
        tars.append(t)
    for i, log in enumerate(logs):
        data = log.read_bytes()
        g = packed / f"log{i}.log.gz"
        g.write_bytes(gzip.compress(data))
        gzs.append(g)
        c = packed / f"cut{i}.log"
        # the first half of the log, at a line end: a job killed mid-run
        c.write_bytes(data[: data.rfind(b"\n", 0, len(data) // 2) + 1])
        cuts.append(c)
    forms = ["folder"] * 8 + ["log"] * 5 + ["gz"] * 3 + ["tarball"] * 2 + ["cut"] * 2
    counts: dict[str, int] = {}
    day.mkdir(parents=True)
    for i in range(n):
        form = forms[i % len(forms)]
        counts[form] = counts.get(form, 0) + 1
        name = f"job-{i:06d}"
        if form == "folder":
            src = runs[i % len(runs)]
            for f in src.rglob("*"):
                dst = day / name / f.relative_to(src)
                if f.is_dir():
                    dst.mkdir(parents=True, exist_ok=True)
                else:
                    dst.parent.mkdir(parents=True, exist_ok=True)
                    os.link(f, dst)
        elif form == "log":
            os.link(logs[i % len(logs)], day / f"{name}.log")
        elif form == "gz":
            os.link(gzs[i % len(gzs)], day / f"{name}.log.gz")
        elif form == "tarball":
            os.link(tars[i % len(tars)], day / f"{name}.tar.gz")
        else:
            os.link(cuts[i % len(cuts)], day / f"{name}.log")
    return counts


# ---------------------------------------------------------------- the per-job cost
def _scanner():
    """kb's scan of one stream (read and scan together), wherever this version keeps it."""
    try:
        from kb.scan.reader import read_scan

        return lambda fh, path: read_scan(fh, path)
    except ImportError:
        from kb.scan.extract import iter_chunks, scan  # kb 0.2's layout

        return lambda fh, path: scan(iter_chunks(fh))


def _files(job: Job, tmp: Path) -> list[Path]:
    if job.kind == "tarball":
        out = Path(tempfile.mkdtemp(dir=tmp))
        unpack(job.path, str(out))
        return sorted(p for p in out.rglob("*") if p.is_file())
    if job.kind == "folder":
        return sorted(p for p in Path(job.path).rglob("*") if p.is_file())
    return [Path(job.path)]


def breakdown(jobs: list[Job], tmp: Path) -> dict[str, float]:
    """CPU seconds per job, averaged (a shared machine's other loads stretch wall time, not
    CPU time): read, scan (less read), verdict (the rest of the per-job function), the total,
    and the wall time of the per-job function for comparison."""
    scan_one = _scanner()
    eng = engine()
    read_t = scan_t = total_t = wall_t = 0.0
    nbytes = 0
    clock = time.process_time
    for job in jobs:
        t0 = clock()
        files = _files(job, tmp)
        for f in files:
            with kb.open_log(f) as fh:
                while chunk := fh.read(1 << 20):
                    nbytes += len(chunk)
        t1 = clock()
        for f in files:
            if f.suffix == ".json" or "trace" in f.name:
                continue  # error files and dumps are parsed by the job view, not scanned
            with kb.open_log(f) as fh:
                scan_one(fh, str(f))
        t2 = clock()
        w0 = time.perf_counter()
        triage(job, eng)
        wall_t += time.perf_counter() - w0
        t3 = clock()
        read_t += t1 - t0
        scan_t += t2 - t1
        total_t += t3 - t2
    n = len(jobs)
    read, scan_incl = read_t / n, scan_t / n
    total = total_t / n
    return {
        "read": read,
        "scan": max(0.0, scan_incl - read),
        "verdict": max(0.0, total - scan_incl),
        "triage": total,
        "wall": wall_t / n,
        "bytes": nbytes / n,
    }


def big_log_rate(tmp: Path, mib: int) -> tuple[float, float, float]:
    """(MB per CPU-second, CPU seconds, wall seconds) of the per-job function over one job of
    `mib` MiB: the captured OOM job's output repeated up to that size (the lines a long run
    prints), its error at the end. The best of three runs."""
    out = REPO / "tests" / "fixtures" / "jobs" / "oom" / "run" / "output.log"
    lines = out.read_bytes().split(b"\n")
    head = b"\n".join(ln for ln in lines if b"Error" not in ln and b"rank1" not in ln) + b"\n"
    path = tmp / "big.log"
    with open(path, "wb") as fh:
        size = 0
        while size < mib << 20:
            fh.write(head)
            size += len(head)
        fh.write(out.read_bytes())
    eng = engine()
    cpu = wall = float("inf")
    for _ in range(3):
        c0, w0 = time.process_time(), time.perf_counter()
        row = triage(Job(str(path), "file"), eng)
        cpu = min(cpu, time.process_time() - c0)
        wall = min(wall, time.perf_counter() - w0)
        assert row["id"] == "cuda-oom", row
    return path.stat().st_size / cpu / 1e6, cpu, wall


def write_cost(rows: list[dict], tmp: Path) -> float:
    """CPU seconds per row to spool the rows and build the table from them."""
    spool = store.Spool(str(tmp))
    t0 = time.process_time()
    for r in rows:
        spool.add(no_meta(dict(r)))
    con = store.write(spool, str(tmp / "bench.duckdb"))
    con.close()
    spool.remove()
    return (time.process_time() - t0) / len(rows)


def _cpu() -> float:
    """CPU seconds of this process and of its children that have ended (a pool's workers, once
    it is shut down)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_RAY_OWN: set[int] = set()  # Ray's own processes (GCS, raylet, agents, monitors), by pid


def _procs() -> dict[int, tuple[int, int, int]]:
    """pid -> (ppid, own CPU ticks, ticks of its children that ended and that it reaped)."""
    out = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as fh:
                    f = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            out[int(d)] = (int(f[1]), int(f[11]) + int(f[12]), int(f[13]) + int(f[14]))
    return out


def _mark_ray_own() -> None:
    """Ray's own processes, as a local Ray has just started them under this process: all but
    its worker processes (named ray::IDLE until they become actors)."""
    if not os.path.isdir("/proc/self/task"):
        return
    procs = _procs()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    todo = list(children.get(os.getpid(), []))
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmd = fh.read()
        except OSError:
            continue
        argv = cmd.split(b"\0")
        # A worker's command line (the raylet's names the workers' in an option, not first)
        worker = argv[0].startswith(b"ray::IDLE") or any(
            a.endswith((b"default_worker.py", b"setup_worker.py")) for a in argv[:3]
        )
        if not worker:
            _RAY_OWN.add(pid)


class CpuMeter:
    """CPU seconds a run costs on this machine: this process, the processes it started and
    reaped (the pool's workers), Ray's own processes (GCS, raylet, agents: by pid, as they were
    when Ray started here) and Ray's worker processes (the actors). The raylet reaps its workers
    without their time being added to its own, so each is read while it lives (sample()): the
    caller samples once more after the last row, before the actors are stopped."""

    def __init__(self) -> None:
        self.linux = os.path.isdir("/proc/self/task")
        self.me0, self.ray0, self.workers0 = self._read()
        self.workers: dict[int, int] = dict(self.workers0)

    def _read(self) -> tuple[float, int, dict[int, int]]:
        if not self.linux:
            return _cpu(), 0, {}
        procs = _procs()
        me = procs.get(os.getpid())
        mine = (me[1] + me[2]) / _TICK if me else _cpu()
        ray_own = sum(procs[p][1] for p in _RAY_OWN if p in procs)
        workers = {
            pid: own
            for pid, (ppid, own, _) in procs.items()
            if ppid in _RAY_OWN and pid not in _RAY_OWN
        }
        return mine, ray_own, workers

    def sample(self) -> None:
        for pid, own in self._read()[2].items():
            self.workers[pid] = max(own, self.workers.get(pid, 0))

    def stop(self) -> tuple[float, float]:
        """(CPU seconds in all, of which Ray's own processes)."""
        self.sample()
        me1, ray1, _ = self._read()
        actors = sum(t - self.workers0.get(pid, 0) for pid, t in self.workers.items())
        ray_own = (ray1 - self.ray0) / _TICK
        return me1 - self.me0 + ray_own + actors / _TICK, ray_own


def kb_startup() -> float:
    """Seconds a fresh Python process takes to import kb and load the knowledge base (what each
    pool worker and each Ray actor pays once): the quicker of three."""
    code = "from kb.fleet.triage import engine; engine()"
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True)
        best = min(best, time.perf_counter() - t0)
    return best


class Tally:
    """One engine configuration over all rounds: rows, wall time, start-ups, CPU, load."""

    def __init__(self, label: str, fn, counts_cpu: bool):
        self.label, self.fn, self.counts_cpu = label, fn, counts_cpu
        self.rows: list[dict] = []
        self.wall = self.startup = self.cpu = self.ray_cpu = 0.0
        self.calls = 0
        self.loads: list[float] = []

    def probe(self, jobs: list[Job]) -> None:
        """The cost of one call apart from its jobs (starting the pool or the actors, each
        loading the knowledge base): the quicker of two calls over a couple of jobs."""
        times = []
        for _ in range(2):
            t0 = time.perf_counter()
            for _row in self.fn(jobs):
                pass
            times.append(time.perf_counter() - t0)
        self.startup = min(times)

    def run(self, jobs: list[Job]) -> None:
        self.loads.append(os.getloadavg()[0])
        meter, t0 = CpuMeter(), time.perf_counter()
        due = time.monotonic() + 0.5
        for i, row in enumerate(self.fn(jobs), 1):
            self.rows.append(row)
            if i == len(jobs) or time.monotonic() > due:  # the last: before the actors stop
                meter.sample()
                due = time.monotonic() + 0.5
        self.wall += time.perf_counter() - t0
        cpu, ray_own = meter.stop()
        if self.label.startswith("Ray"):
            self.ray_cpu += ray_own
            self.cpu += cpu
        else:  # a local Ray started for the Ray runs idles meanwhile: its time is not this run's
            self.cpu += cpu - ray_own
        self.calls += 1
        self.loads.append(os.getloadavg()[0])

    @property
    def rate(self) -> float:
        return len(self.rows) / self.wall

    @property
    def steady(self) -> float:
        """Jobs/s once the workers are up: each call's start-up (probe) left out."""
        return len(self.rows) / max(1e-9, self.wall - self.calls * self.startup)

    def report(self, rounds: int) -> None:
        cpu = (
            f"; {self.cpu:.0f} CPU-s, {len(self.rows) / self.cpu:.1f} jobs per CPU-second"
            if self.counts_cpu and self.cpu > 0
            else ""
        )
        if self.counts_cpu and self.ray_cpu > 0:
            cpu += f" (Ray's own processes: {self.ray_cpu:.1f} CPU-s of it)"
        if self.counts_cpu and self.wall > 0:
            # what the machine's other loads left this run: 2.00 would be both cores throughout
            cpu += f"; {self.cpu / self.wall:.2f} cores busy with it"
        print(
            f"  {self.label:<20} {len(self.rows):>6} jobs in {self.wall:6.1f} s = "
            f"{self.rate:6.1f} jobs/s; start-up {self.startup:4.1f} s a call, "
            f"then {self.steady:6.1f} jobs/s{cpu}; load {min(self.loads):.1f}-"
            f"{max(self.loads):.1f} (mean {statistics.mean(self.loads):.1f})",
            flush=True,
        )


def _same(rows: list[dict]) -> list[dict]:
    return sorted(
        ({k: v for k, v in r.items() if k != "seconds"} for r in rows), key=lambda r: r["job"]
    )


def _differ(rows: list[dict], base: list[dict]) -> tuple[int, dict[str, int]]:
    """(rows that differ from the baseline's, how many differ in each column)."""
    n = 0
    columns: dict[str, int] = {}
    for a, b in zip(_same(rows), base):
        keys = [k for k in a if a[k] != b.get(k)]
        n += bool(keys)
        for k in keys:
            columns[k] = columns.get(k, 0) + 1
    return n + abs(len(rows) - len(base)), columns


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--sample", type=int, default=300, help="jobs for the per-job breakdown")
    ap.add_argument("--skip-ray", action="store_true")
    ap.add_argument(
        "--only-ray",
        action="store_true",
        help="of the local engine, only the 1-worker run (the baseline); then Ray's two",
    )
    ap.add_argument("--big-mib", type=int, default=64, help="size of the one big job timed")
    ap.add_argument("--rounds", type=int, default=4, help="slices the configurations take in turn")
    ap.add_argument("--keep", metavar="DIR", help="build the jobs here and keep them")
    args = ap.parse_args()

    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="kb-bench-triage-"))
    try:
        run(args, base)
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)


def run(args: argparse.Namespace, base: Path) -> None:
    cores = local.cpu_count()
    print(
        f"kb {kb.__version__}, {len(kb.load().entries)} entries, Python "
        f"{sys.version.split()[0]}, {cores} core(s), load average {os.getloadavg()[0]:.2f}"
    )
    day = base / "day"
    t0 = time.perf_counter()
    counts = build(day, args.jobs)
    print(f"built {args.jobs} jobs in {time.perf_counter() - t0:.1f} s: {counts}")
    t0 = time.perf_counter()
    jobs = discover([day])
    print(f"discovered {len(jobs)} jobs in {time.perf_counter() - t0:.2f} s")
    assert len(jobs) == args.jobs, "discovery must find every job built"

    tallies = [Tally("local, 1 worker", lambda js: local.run(js, 1), True)]
    if not args.only_ray:
        tallies.append(Tally("local, 2 workers", lambda js: local.run(js, 2), True))
    ray = None
    if not args.skip_ray:
        try:
            import ray

            from kb.fleet import ray_engine
        except ImportError:
            print("Ray is not installed: pip install 'kb-cuda[fleet]' (its runs are skipped)")
            ray = None
        else:
            import logging

            t0 = time.perf_counter()
            ray.init(
                address="local",
                num_cpus=2,
                include_dashboard=False,
                log_to_driver=False,
                logging_level=logging.ERROR,
            )
            _mark_ray_own()
            print(
                f"Ray's fixed cost: starting a local Ray (2 CPUs), once per run: "
                f"{time.perf_counter() - t0:.1f} s",
                flush=True,
            )
            print(
                f"  a fresh process importing kb and loading the knowledge base, once per actor "
                f"(and per pool worker): {kb_startup():.2f} s; jobs per Ray task: up to "
                f"{ray_engine.BATCH} ({ray_engine.batch_size(args.jobs // max(1, args.rounds), 2)}"
                f" in these calls with 2 actors)",
                flush=True,
            )
            tallies += [
                Tally("Ray, 1 actor", lambda js: ray_engine.run(js, 1), True),
                Tally("Ray, 2 actors", lambda js: ray_engine.run(js, 2), True),
            ]
    # Every configuration triages every job once, in --rounds slices taken in turn (the order
    # of the configurations rotating), so that the other loads of a shared machine fall on all
    # of them alike.
    rounds = max(1, args.rounds)
    size = -(-len(jobs) // rounds)
    print(
        f"throughput: {len(jobs)} jobs per configuration, in {rounds} rounds of {size}, "
        "configurations in turn (the first figure counts each call's start-up of its pool or "
        "actors, the second leaves it out):"
    )
    try:
        for t in tallies:
            t.probe(jobs[:2])
        for k in range(rounds):
            part = jobs[k * size : (k + 1) * size]
            for t in tallies[k % len(tallies) :] + tallies[: k % len(tallies)]:
                t.run(part)
    finally:
        if ray is not None:
            ray.shutdown()
    for t in tallies:
        t.report(rounds)
    base_rows = _same(tallies[0].rows)
    same = True
    for t in tallies[1:]:
        n, columns = _differ(t.rows, base_rows)
        if n:
            same = False
            print(f"  {t.label}: {n} row(s) differ from the 1-worker run's, by column: {columns}")
    if same:
        print("  every configuration gave the same rows (the time each took aside)")
    by = {t.label: t for t in tallies}
    one = by["local, 1 worker"]
    if "local, 2 workers" in by:
        two = by["local, 2 workers"]
        print(
            f"  local scaling 2/1 workers: {two.rate / one.rate:.2f}x overall, "
            f"{two.steady / one.steady:.2f}x once started"
        )
    if "Ray, 1 actor" in by:
        r1, r2 = by["Ray, 1 actor"], by["Ray, 2 actors"]
        print(
            f"  Ray scaling 2/1 actors: {r2.rate / r1.rate:.2f}x overall, "
            f"{r2.steady / r1.steady:.2f}x once started; against the local engine's 1 worker "
            f"(in process, no start-up): {r1.rate / one.rate:.2f}x (1 actor), "
            f"{r2.rate / one.rate:.2f}x (2 actors)"
        )
        print(
            f"  Ray's fixed cost a call (2 actors started and ready, two jobs read): "
            f"{r2.startup:.1f} s = {100 * r2.startup * r2.calls / r2.wall:.0f}% of the 2-actor "
            f"runs' wall time; Ray's own processes used {r1.ray_cpu + r2.ray_cpu:.1f} CPU-s "
            f"during the Ray runs ({100 * (r1.ray_cpu + r2.ray_cpu) / (r1.cpu + r2.cpu):.0f}% "
            "of their CPU time)"
        )
    rows1 = one.rows
    answered = sum(1 for r in rows1 if r["id"])
    errors = sum(1 for r in rows1 if r["error"])
    print(
        f"  rows: {answered} answered, {len(rows1) - answered - errors} no answer, {errors} errors"
    )

    print(f"per-job cost, {min(args.sample, len(jobs))} jobs in this process (mean CPU time):")
    step = max(1, len(jobs) // args.sample)
    sample = jobs[::step][: args.sample]
    tmp = base / "tmp"
    tmp.mkdir(exist_ok=True)
    b = breakdown(sample, tmp)
    w = write_cost(rows1, tmp)
    total = b["triage"] + w
    for k in ("read", "scan", "verdict"):
        print(f"  {k:<8} {b[k] * 1e3:7.2f} ms  {100 * b[k] / total:4.0f}%")
    print(f"  {'write':<8} {w * 1e3:7.2f} ms  {100 * w / total:4.0f}%")
    print(
        f"  total    {total * 1e3:7.2f} ms per job ({b['bytes'] / 1024:.1f} KiB of logs a job); "
        f"wall time of the per-job function {b['wall'] * 1e3:.2f} ms"
    )
    seconds = [r["seconds"] for r in rows1]
    print(
        f"  per-job time in the 1-worker run: p50 {statistics.median(seconds) * 1e3:.2f} ms, "
        f"p99 {sorted(seconds)[int(0.99 * (len(seconds) - 1))] * 1e3:.2f} ms"
    )

    rate, big_cpu, big_wall = big_log_rate(tmp, args.big_mib)
    print(
        f"  one {args.big_mib} MiB job: {big_wall:.2f} s, {big_cpu:.2f} CPU-s "
        f"({rate:.0f} MB per CPU-second)"
    )

    print(f"estimate for {FLEET_DAY:,} failed jobs a day:")
    # One worker's rate: jobs per CPU-second of the 1-worker run, which the other loads on a
    # shared machine do not change (its wall-clock rate is printed above).
    per_worker = len(one.rows) / one.cpu if one.cpu > 0 else one.steady
    avg = FLEET_DAY / 86400
    burst = FLEET_DAY / 3600  # the whole day's jobs triaged within one hour
    print(
        f"  one worker here: {per_worker:.0f} jobs/s = {per_worker * 86400:,.0f} jobs/day "
        f"at these jobs' size ({b['bytes'] / 1024:.1f} KiB)"
    )
    print(f"  average arrival {avg:.2f} jobs/s -> {avg / per_worker:.3f} of one worker")
    print(
        f"  a day's backlog in one hour: {burst:.1f} jobs/s -> "
        f"{-(-burst // per_worker):.0f} worker(s) at this size"
    )
    for mb in (1, 10, 100):
        per_job = 1 / per_worker + mb * 1e6 / (rate * 1e6)
        need_avg = avg * per_job
        need_burst = burst * per_job
        print(
            f"  jobs of {mb:>3} MB of logs: {per_job * 1e3:7.1f} ms a job -> "
            f"{need_avg:5.1f} worker(s) for the average, {need_burst:6.1f} to clear a day in an hour"
        )


if __name__ == "__main__":
    main()
