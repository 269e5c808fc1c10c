"""The files of a job, from the paths a user gives: per-rank logs, torchrun's log folder, Slurm's
per-task files, TorchElastic error files and Flight Recorder dumps, each with the rank its path
names (when it names one).

Layouts recognised:
  torchrun --log-dir / --tee / --redirects (torch/distributed/elastic/multiprocessing/api.py,
    DefaultLogsSpecs.reify): <log_dir>/<run_id>/attempt_<n>/<local_rank>/{stdout.log,stderr.log,
    error.json}, plus filtered_stdout.log / filtered_stderr.log (copies, skipped)
  Slurm --output with %t (task id) or %j_%t: slurm-123_4.out, job.4.err, train-%t.log
  anything named rank3.log, rank_3.txt, r3.out, worker-3.log
  Flight Recorder dumps: <prefix><rank> such as nccl_trace_rank_3 (TORCH_NCCL_DEBUG_INFO_TEMP_FILE)
  error files: error.json, or any JSON file in TorchElastic's error-file shape
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import kb.job.parsers.error_file as error_file
import kb.job.parsers.flight_recorder as flight_recorder
from kb.job.source import Source
from kb.model.record import field, record

MAX_FILES = 4096  # per folder argument; a job's log folder, not a file system
MAX_DEPTH = 8  # torchrun's layout is 4 deep under --log-dir
_LOG_EXT = (".log", ".out", ".err", ".txt", ".gz", ".stdout", ".stderr")
_ATTEMPT = re.compile(r"attempt_\d+$")
_RANK_NAME = re.compile(r"(?:^|[^a-z])(?:rank|worker|task|proc|r)[_-]?(\d{1,5})(?=\D*$)", re.I)
_SLURM_TASK = re.compile(r"[_.-](\d{1,5})\.(?:out|err|log|txt)(?:\.gz)?$")
_DUMP_NAME = re.compile(r"trace.*?(\d+)$|_rank_?(\d+)$", re.I)
# kb's own files in a `kb run` folder: read by nobody but people.
_OWN = re.compile(r"^kb-")


@record
class JobInputs:
    logs: list[Source] = field(default_factory=list)
    error_files: list[Source] = field(default_factory=list)
    dumps: list[Source] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # paths that do not exist
    folders: int = 0  # folder arguments (a folder is one job)

    @property
    def several(self) -> bool:
        return self.folders > 0 or len(self.logs) + len(self.error_files) + len(self.dumps) > 1


def collect(paths: list[str]) -> JobInputs:
    out = JobInputs()
    for p in paths:
        path = Path(p)
        if path.is_dir():
            out.folders += 1
            for f in _walk(path):
                _add(out, f, from_folder=True)
        elif path.exists():
            _add(out, path, from_folder=False)
        else:
            out.missing.append(p)
    return out


def _walk(root: Path) -> list[Path]:
    """Regular files under root (no links followed, no hidden names), in a stable order."""
    found: list[Path] = []
    base = len(root.parts)
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames[:] = (
            sorted(d for d in dirnames if not d.startswith("."))
            if len(here.parts) - base < MAX_DEPTH
            else []
        )
        for name in sorted(filenames):
            f = here / name
            if name.startswith(".") or f.is_symlink() or not f.is_file():
                continue
            found.append(f)
            if len(found) >= MAX_FILES:
                return found
    return found


def _add(out: JobInputs, f: Path, from_folder: bool) -> None:
    name = f.name
    if _OWN.match(name) or name.startswith("filtered_std"):
        return
    rank, local = rank_of_path(f)
    if name.endswith(".json") or name == "error.json":
        if error_file.read(f) is not None:
            out.error_files.append(Source(str(f), rank, local))
            return
        if flight_recorder.looks_like_dump(f):
            out.dumps.append(Source(str(f), rank, local))
            return
        if from_folder:
            return  # some other JSON in the folder (configs, metrics)
    m = _DUMP_NAME.search(name)
    if m and not name.endswith(_LOG_EXT) and flight_recorder.looks_like_dump(f):
        out.dumps.append(Source(str(f), int(m.group(1) or m.group(2))))
        return
    # Not a log by its name: checkpoints, images, scripts are skipped; a name with no suffix
    # ("stderr", "output") is read when it is text (a core file is not).
    if from_folder and not name.endswith(_LOG_EXT) and ("." in name or not _looks_text(f)):
        return
    if not from_folder and flight_recorder.looks_like_dump(f) and _head(f)[:1] == b"\x80":
        out.dumps.append(Source(str(f), rank, local))
        return
    out.logs.append(Source(str(f), rank, local))


def _head(f: Path, n: int = 2) -> bytes:
    try:
        with open(f, "rb") as fh:
            return fh.read(n)
    except OSError:
        return b""


def _looks_text(f: Path) -> bool:
    from kb.scan.extract import _looks_binary

    head = _head(f, 8192)
    return bool(head) and not _looks_binary(head)


def rank_of_path(f: Path) -> tuple[int | None, bool]:
    """(rank, is_local_rank) from a file's path, else (None, False)."""
    parent = f.parent
    if parent.name.isdigit() and _ATTEMPT.match(parent.parent.name):
        return int(parent.name), True  # torchrun: attempt_<n>/<local_rank>/stderr.log
    m = _SLURM_TASK.search(f.name) if f.name.startswith(("slurm", "job")) else None
    m = m or _RANK_NAME.search(f.stem if not f.name.endswith(".gz") else Path(f.stem).stem)
    if m:
        return int(m.group(1)), False
    return None, False
