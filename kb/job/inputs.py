"""The files of a job, from the paths a user gives: per-rank logs, torchrun's log folder, Slurm's
per-task files, TorchElastic error files and Flight Recorder dumps (and tarballs of them), each
with the rank its path names (when it names one).

Layouts recognised:
  torchrun --log-dir / --tee / --redirects (torch/distributed/elastic/multiprocessing/api.py,
    DefaultLogsSpecs.reify): <log_dir>/<run_id>/attempt_<n>/<local_rank>/{stdout.log,stderr.log,
    error.json}, plus filtered_stdout.log / filtered_stderr.log (copies, skipped)
  Slurm --output with %t (task id) or %j_%t: slurm-123_4.out, job.4.err, train-%t.log
  anything named rank3.log, rank_3.txt, r3.out, worker-3.log
  Flight Recorder dumps, known by what they hold whatever their names (nccl_trace_rank_3, a
    TORCH_FR_DUMP_TEMP_FILE prefix of one's own, job_dump_3.json, rank3/trace), and tarballs
  error files: error.json, or any JSON file in TorchElastic's error-file shape

A folder is read whole, up to MAX_FILES files: what is left out is said, with why (over the
limit, deeper than MAX_DEPTH folders, not a log by its name, a link to a folder already read),
and a folder or file that cannot be read is reported, never fatal to the rest. Links to files and
folders are followed; a folder is entered once, so a link back to a parent is no loop.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import kb.job.parsers.error_file as error_file
import kb.job.parsers.flight_recorder as flight_recorder
from kb.job.source import Source
from kb.model.record import field, record

MAX_FILES = 100_000  # per folder argument: a 16k-rank job's logs, dumps and error files
MAX_DEPTH = 8  # torchrun's layout is 4 deep under --log-dir
MAX_COUNTED = 1_000_000  # entries walked past MAX_FILES only to count what was left out
_LOG_EXT = (".log", ".out", ".err", ".txt", ".gz", ".stdout", ".stderr")
_ATTEMPT = re.compile(r"attempt_\d+$")
_RANK_NAME = re.compile(r"(?:^|[^a-z])(?:rank|worker|task|proc|r)[_-]?(\d{1,5})(?=\D*$)", re.I)
_SLURM_TASK = re.compile(r"[_.-](\d{1,5})\.(?:out|err|log|txt)(?:\.gz)?$")
# kb's own files in a `kb run` folder: read by nobody but people.
_OWN = re.compile(r"^kb-")
SNIFF = 4096  # bytes read first to tell a dump or a tarball from a log


@record
class JobInputs:
    logs: list[Source] = field(default_factory=list)
    error_files: list[Source] = field(default_factory=list)
    dumps: list[Source] = field(default_factory=list)
    tarballs: list[Source] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # paths that do not exist
    folders: int = 0  # folder arguments (a folder is one job)
    problems: list[str] = field(default_factory=list)  # what could not be read, and why
    left_out: list[tuple[str, str]] = field(default_factory=list)  # (path, why) not read on purpose

    @property
    def several(self) -> bool:
        n = len(self.logs) + len(self.error_files) + len(self.dumps) + len(self.tarballs)
        return self.folders > 0 or n > 1

    def left_out_summary(self, quiet: tuple[str, ...] = ()) -> list[str]:
        """What was left out, counted by why, with a few of the paths (all of them are in
        `left_out`); reasons starting with one of `quiet` are not said."""
        by: dict[str, list[str]] = {}
        for path, why in self.left_out:
            if why.startswith(quiet) if quiet else False:
                continue
            by.setdefault(why, []).append(path)
        out = []
        for why, paths in by.items():
            shown = ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
            out.append(
                f"left out {len(paths)} file{'s' if len(paths) != 1 else ''} ({why}): {shown}"
            )
        return out


def collect(paths: list[str]) -> JobInputs:
    out = JobInputs()
    for p in paths:
        path = Path(p)
        if path.is_dir():
            out.folders += 1
            for f in _walk(path, out):
                _add(out, f, from_folder=True)
        elif path.exists() or path.is_symlink():
            if not path.exists():
                out.problems.append(f"{p}: a broken link (to {os.readlink(p)})")
                continue
            _add(out, path, from_folder=False)
        else:
            out.missing.append(p)
    return out


def _walk(root: Path, out: JobInputs) -> list[Path]:
    """The files under root, in a stable order: links followed (each folder entered once, so a
    link to a parent is no loop, each file read once), hidden names skipped, at most MAX_FILES
    and MAX_DEPTH deep; what is left out and what cannot be read are written to `out`."""
    found: list[Path] = []
    seen_dirs: set[tuple[int, int]] = set()
    seen_files: dict[tuple[int, int], Path] = {}
    over = 0  # files past MAX_FILES
    over_named: list[str] = []
    counted = 0
    try:
        st = root.stat()
        seen_dirs.add((st.st_dev, st.st_ino))
    except OSError as e:
        out.problems.append(f"cannot read folder {root}: {e.strerror or e}")
        return found
    stack: list[tuple[Path, int]] = [(root, 0)]
    while stack:
        here, depth = stack.pop()
        try:
            with os.scandir(here) as it:
                items = sorted(it, key=lambda e: e.name)
        except OSError as e:
            out.problems.append(f"cannot read folder {here}: {e.strerror or e}")
            continue
        subdirs: list[Path] = []
        for item in items:
            p = Path(item.path)
            if item.name.startswith("."):
                out.left_out.append((str(p), "a hidden name"))
                continue
            try:
                is_dir = item.is_dir()  # follows links
                st = item.stat()  # follows links
            except OSError:
                target = os.readlink(p) if item.is_symlink() else "?"
                out.problems.append(f"{p}: a broken link (to {target})")
                continue
            key = (st.st_dev, st.st_ino)
            if is_dir:
                if key in seen_dirs:
                    out.left_out.append((str(p), "a link to a folder already read"))
                    continue
                seen_dirs.add(key)
                if depth + 1 > MAX_DEPTH:
                    out.left_out.append((str(p), f"a folder deeper than {MAX_DEPTH} levels"))
                    continue
                subdirs.append(p)
                continue
            if not item.is_file():
                out.left_out.append((str(p), "not a regular file (a socket, a device, a pipe)"))
                continue
            if key in seen_files:
                out.left_out.append((str(p), "the same file as another path read (a link)"))
                continue
            seen_files[key] = p
            if len(found) >= MAX_FILES:
                over += 1
                if len(over_named) < 20:
                    over_named.append(str(p))
                continue
            found.append(p)
        counted += len(items)
        if over and counted > MAX_COUNTED:
            out.problems.append(
                f"{root}: more than {MAX_FILES:,} files; kb read the first {MAX_FILES:,} (by "
                f"name) and stopped counting the rest after {MAX_COUNTED:,}"
            )
            return found
        # depth-first, in name order
        for d in reversed(subdirs):
            stack.append((d, depth + 1))
    if over:
        for name in over_named:
            out.left_out.append((name, f"over the {MAX_FILES:,} files kb reads in one folder"))
        out.problems.append(
            f"{root}: {over:,} files left out over the {MAX_FILES:,} kb reads in one folder "
            f"(by name order), among them {', '.join(over_named[:3])}"
        )
    return found


def _add(out: JobInputs, f: Path, from_folder: bool) -> None:
    name = f.name
    if _OWN.match(name) or name.startswith("filtered_std"):
        out.left_out.append(
            (str(f), "kb's own record" if _OWN.match(name) else "a copy torchrun filters")
        )
        return
    rank, local = rank_of_path(f)
    if not from_folder and not f.is_file():
        # A pipe or FIFO (`<(cmd)`, /dev/stdin): it can be read once only, so it is not sniffed
        # for what it holds; it is a log.
        out.logs.append(Source(str(f), rank, local))
        return
    if flight_recorder.is_tarball(f):
        out.tarballs.append(Source(str(f)))
        return
    head = _head(f, SNIFF)
    sniff = head[:1] == b"\x80" or head[:2] == b"\x1f\x8b" or head.lstrip()[:1] == b"{"
    # a dump is known by what it holds: its keys come first
    if sniff and _dump_head(f, head):
        out.dumps.append(Source(str(f), flight_recorder.rank_from_name(str(f)), False))
        return
    if name.endswith(".json"):
        if error_file.read(f) is not None:
            out.error_files.append(Source(str(f), rank, local))
            return
        if from_folder:
            out.left_out.append((str(f), "JSON that is neither an error file nor a dump"))
            return
    # Not a log by its name: checkpoints, images, scripts are skipped; a name with no suffix
    # ("stderr", "output") is read when it is text (a core file is not).
    if from_folder and not name.endswith(_LOG_EXT):
        if "." in name:
            out.left_out.append((str(f), "not a log by its name"))
            return
        if not _looks_text(head):
            out.left_out.append((str(f), "binary, not a log"))
            return
    out.logs.append(Source(str(f), rank, local))


def _dump_head(f: Path, head: bytes) -> bool:
    if head[:2] == b"\x1f\x8b":
        import zlib

        try:
            raw = _head(f, flight_recorder.HEAD)
            head = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(raw, flight_recorder.HEAD)
        except zlib.error:
            return False
    elif len(head) == SNIFF and not flight_recorder.looks_like_dump(head):
        head = _head(f, flight_recorder.HEAD)  # a dump's keys may come after a long pg_config
    return flight_recorder.looks_like_dump(head)


def _head(f: Path, n: int = 2) -> bytes:
    try:
        with open(f, "rb") as fh:
            return fh.read(n)
    except OSError:
        return b""


def _looks_text(head: bytes) -> bool:
    from kb.scan.extract import _looks_binary

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
