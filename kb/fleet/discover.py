"""The jobs under the paths a platform team gives `kb triage`: one Job per job, in a stable order.

What counts as one job:

  * a file given or found: a tarball (.tar, .tar.gz, .tgz, .tar.bz2, .tbz2, .tar.xz, .txz) is one
    job, its members being the job's files; any other log file (.gz too) is a job of one log;
  * a folder is looked at in this order:
      1. a `kb run` folder (kb-run.json) is one job;
      2. a folder with two or more sub-folders that each hold logs (or kb-run.json) directly, and
         are not named by a rank, is a folder of jobs (a day's jobs, one folder each);
      3. a folder that holds log files, TorchElastic error files or Flight Recorder dumps
         directly, or whose sub-folders are torchrun's layout (<run_id>/attempt_<n>/...) or are
         named by rank (0/ 1/ ..., rank0/, rank_1/, worker-2/, node3/), is one job, read whole as
         `kb lookup FOLDER` reads it; except that logs in it with no rank of their own are never
         merged into another's (kb.job.inputs.split_logs, the rules `kb lookup` reads a folder
         by): a folder of unrelated logs (job-001.log ... job-010.log) is a job per log, and a
         log with no rank of its own beside a job's per-rank logs is a job of its own;
      4. any other folder is a folder of jobs.
    In a folder of jobs each sub-folder is looked at by the same rules (down to MAX_DEPTH levels),
    and each log file or tarball directly in it is a job of its own.

A folder of per-job log files, one file per job, is read with files=True (`kb triage --files`):
every log file or tarball under the paths is then a job of its own. Without it, one case is
recognised: Slurm's default output name: a folder whose only logs are two or more
`slurm-<jobid>.out` files (sbatch without --output puts every job's output in one folder, one file
per job) is a folder of jobs, each file one job.

Not told apart: a multi-node job whose per-host folders are named by host (gpu-a/, gpu-b/, each
with its ranks' logs) looks like a folder of jobs (rule 2). Name them node<N>/, or pack the job as
a tarball: a tarball is always one job.

Links are not followed and hidden names are skipped, as in the job view; only regular files and
folders are jobs (never a FIFO, a device or a socket). The links passed over are kept
(skipped_links()) so that a caller can say why a folder of linked job folders holds no job. A path given twice (or a job found under
two of the paths) is one job. At most MAX_ENTRIES names are looked at under the paths, folders
counting as files do; past that the run stops before any job is read and says which folder to
give instead (a folder is listed only as far as the limit, never held whole in memory).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

MAX_DEPTH = 8  # folders of folders of jobs (year/month/day/user/job) and then some
MAX_ENTRIES = 2_000_000  # names looked at under the paths of one run (files and folders)
TARBALL = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")
# The names the job view reads as logs (kb's job inputs), and the files that are part of a job.
LOG_EXT = (".log", ".out", ".err", ".txt", ".gz", ".stdout", ".stderr")
_RANK_DIR = re.compile(r"^(?:(?:rank|local_rank|worker|task|proc|node|r)[_-]?)?\d{1,5}$", re.I)
_ATTEMPT = re.compile(r"^attempt_\d+$")
_SLURM_DEFAULT = re.compile(r"^slurm-\d+\.out$")
_DUMP = re.compile(r"(?:trace.*?|_rank_?)\d+$", re.I)  # nccl_trace_rank_3 (Flight Recorder)


@dataclass(frozen=True)
class Job:
    """One job: its path and how it is read (folder, file or tarball)."""

    path: str
    kind: str  # folder | file | tarball


class DiscoveryError(Exception):
    """A path that does not exist: a usage error, said in one line."""


def is_tarball(name: str) -> bool:
    return name.lower().endswith(TARBALL)


def job_of(path: str | os.PathLike[str]) -> Job:
    """The job a path is by itself (no looking inside a folder for a folder of jobs)."""
    p = str(path)
    if os.path.isdir(p):
        return Job(p, "folder")
    return Job(p, "tarball" if is_tarball(p) else "file")


def discover(paths: Iterable[str | os.PathLike[str]], files: bool = False) -> list[Job]:
    """Every job under the paths, in the order given, each folder's jobs sorted by name.
    files=True: every log file or tarball under the paths is a job of its own (a folder of
    per-job logs, one file each), whatever the folders look like."""
    out: list[Job] = []
    seen: set[str] = set()
    _LOOKED[0] = 0
    _LINKS.clear()
    for p in paths:
        path = Path(p)
        if not path.exists():
            raise DiscoveryError(f"no such file or folder: {p}")
        if not path.is_dir():
            from kb.scan.reader import not_a_log

            why = not_a_log(path.stat(), str(p))  # a FIFO, a device, /proc: never a job
            if why:
                raise DiscoveryError(why)
        for job in _each_file(path, 0) if files else _jobs(path, 0):
            key = os.path.realpath(job.path)
            if key not in seen:
                seen.add(key)
                out.append(job)
    return out


def _jobs(path: Path, depth: int) -> Iterator[Job]:
    if not path.is_dir():
        yield job_of(path)
        return
    files, dirs = _children(path)
    if _is_one_job(files, dirs):
        split = _unrelated_logs(files, dirs)
        if split is None:
            yield Job(str(path), "folder")
            return
        job, alone = split
        if job:
            yield Job(str(path), "folder")
        for f in alone:
            yield job_of(f)
        if not job and depth < MAX_DEPTH:
            for d in dirs:
                yield from _jobs(d, depth + 1)
        return
    for f in files:
        if is_tarball(f.name) or _is_log(f.name):
            yield job_of(f)
    if depth < MAX_DEPTH:
        for d in dirs:
            yield from _jobs(d, depth + 1)


def _each_file(path: Path, depth: int) -> Iterator[Job]:
    if not path.is_dir():
        yield job_of(path)
        return
    files, dirs = _children(path)
    for f in files:
        if is_tarball(f.name) or _is_log(f.name):
            yield job_of(f)
    if depth < MAX_DEPTH:
        for d in dirs:
            yield from _each_file(d, depth + 1)


_LOOKED = [0]  # names looked at in this discover() call
_LINKS: list[str] = []  # links passed over in this discover() call


def skipped_links() -> list[str]:
    """The symbolic links the last discover() call passed over (never followed: a link can lead
    out of the job's tree, to /proc or to a device)."""
    return list(_LINKS)


def _listing(path: Path) -> list[os.DirEntry]:
    """A folder's entries, counted against MAX_ENTRIES (DiscoveryError past it); [] when it
    cannot be read."""
    out: list[os.DirEntry] = []
    try:
        with os.scandir(path) as it:
            for entry in it:
                _LOOKED[0] += 1
                if _LOOKED[0] > MAX_ENTRIES:
                    raise DiscoveryError(
                        f"more than {MAX_ENTRIES:,} files and folders under the paths (in {path} "
                        "and the folders before it): give kb triage the folders that hold the "
                        "jobs, or a list of them"
                    )
                out.append(entry)
    except OSError:
        return []  # an unreadable folder holds no jobs we can name
    return out


def _children(path: Path) -> tuple[list[Path], list[Path]]:
    files: list[Path] = []
    dirs: list[Path] = []
    for entry in sorted(_listing(path), key=lambda e: e.name):
        if entry.name.startswith("."):
            continue
        if entry.is_symlink():
            _LINKS.append(entry.path)
            continue
        try:
            if entry.is_dir(follow_symlinks=False):
                dirs.append(Path(entry.path))
            elif entry.is_file(follow_symlinks=False):
                files.append(Path(entry.path))  # never a FIFO, a device or a socket
        except OSError:
            continue
    return files, dirs


def _is_log(name: str) -> bool:
    return name.lower().endswith(LOG_EXT) and not is_tarball(name)


def _holds_job_files(names: list[str]) -> bool:
    """Log files, error files or Flight Recorder dumps directly among these names."""
    logs = [n for n in names if _is_log(n)]
    if len(logs) >= 2 and all(_SLURM_DEFAULT.match(n) for n in logs):
        return False  # Slurm's default: one slurm-<jobid>.out per job, side by side
    return bool(logs) or "error.json" in names or any(_DUMP.search(n) for n in names)


def _rank_dirs(dirs: list[Path]) -> bool:
    """Sub-folders that are the ranks (or nodes) of one job: named by a number only, counting
    from 0 (a folder of Slurm job ids is not), or rank3/ worker_3/ node3/ ..."""
    if not dirs or not all(_RANK_DIR.match(d.name) for d in dirs):
        return False
    bare = [int(d.name) for d in dirs if d.name.isdigit()]
    return not bare or min(bare) == 0


def _is_one_job(files: list[Path], dirs: list[Path]) -> bool:
    names = [f.name for f in files]
    if "kb-run.json" in names:
        return True
    if not _rank_dirs(dirs):
        jobs_below = 0
        for d in dirs:
            below = [n for n in _names(d) if not n.startswith(".")]
            if "kb-run.json" in below or _holds_job_files(below):
                jobs_below += 1
                if jobs_below >= 2:
                    return False  # a folder of jobs, whatever else lies beside them
    if _holds_job_files(names) or _rank_dirs(dirs):
        return True
    # torchrun's attempt_<n>/ here, or its --log-dir (<run_id>/attempt_<n>/) below
    return any(_ATTEMPT.match(d.name) for d in dirs) or any(
        _ATTEMPT.match(g) for d in dirs for g in _names(d)
    )


def _unrelated_logs(files: list[Path], dirs: list[Path]) -> tuple[list[Path], list[Path]] | None:
    """None when a folder that is one job by rule 3 is one job; else (its logs that make one
    job, the logs that are jobs of their own), by the rules `kb lookup` reads a folder by. Only
    logs directly in a folder with no other mark of a job (no kb run record, error file, dump,
    tarball, torchrun layout or rank folders) are looked at."""
    names = [f.name for f in files]
    if (
        "kb-run.json" in names
        or any(n.endswith(".json") or _DUMP.search(n) or is_tarball(n) for n in names)
        or _rank_dirs(dirs)
        or any(_ATTEMPT.match(d.name) for d in dirs)
        or any(_ATTEMPT.match(g) for d in dirs for g in _names(d))
    ):
        return None
    logs = [f for f in files if _is_log(f.name)]
    if len(logs) < 2:
        return None
    from kb.job.inputs import named_rank, split_logs

    job, alone, how, _ = split_logs(logs, {p: named_rank(p) for p in logs})
    return (job, alone) if how and alone else None


def _names(d: Path) -> list[str]:
    return [e.name for e in _listing(d)]
