"""The scheduler's records of the jobs (--meta jobs.csv): how many GPUs each held, from when to
when, and whose it was, so that the summary can count GPU hours lost per failure class.

The file: a header and one line per job, comma-separated (or '|', as `sacct -P` prints):

    job,gpus,start,end,user
    /logs/2026-11-26/1234567,8,2026-11-26T01:00:00,2026-11-26T05:30:00,alice

  job    the job as kb triage names it: its path, or the path's last part (a folder's name, or a
         file's name with .tar.gz/.tgz/.tar/.gz/.log/.out/.err/.txt taken off), or for Slurm's
         slurm-<id>.out the id alone (sacct's JobID)
  gpus   a number, or Slurm's TRES text ("billing=64,cpu=64,gres/gpu=8,mem=1T")
  start, end   ISO 8601 (sacct's 2026-11-26T01:00:00) or seconds since 1970; empty or Unknown
         when not known. A time with an offset (or in seconds) is stored in UTC, one without as
         written.
  user   optional

Header names are matched without regard to case, with sacct's names too (JobID, AllocTRES,
Start, End, User). GPU hours lost are gpus x (end - start): the whole allocation, since what a
failed job had saved before it died is not in its logs (an upper bound when it checkpointed).
"""

from __future__ import annotations

import csv
import os
import re
from dataclasses import dataclass
from datetime import datetime, timezone

# (column, DuckDB type) added to every row, null when no record names the job.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("user", "VARCHAR"),
    ("gpus", "INTEGER"),
    ("start_time", "TIMESTAMP"),
    ("end_time", "TIMESTAMP"),
    ("gpu_hours", "DOUBLE"),
)
_HEADERS = {
    "job": ("job", "jobid", "job_id", "jobidraw"),
    "gpus": ("gpus", "ngpus", "gpu", "gpu_count", "alloctres", "alloc_tres"),
    "start": ("start", "start_time", "started"),
    "end": ("end", "end_time", "ended"),
    "user": ("user", "username", "owner"),
}
_SUFFIXES = (".tar.gz", ".tar.bz2", ".tar.xz", ".tgz", ".tbz2", ".txz", ".tar", ".gz")
_LOG_SUFFIXES = (".log", ".out", ".err", ".txt", ".stdout", ".stderr")
_SLURM = re.compile(r"^slurm-(\d+(?:_\d+)?)$")
_TRES_GPU = re.compile(r"gres/gpu(?::[\w-]+)?=(\d+)")
_UNKNOWN = {"", "unknown", "none", "n/a", "na", "null", "-"}
MAX_CELL = 4096  # characters of one cell: a job's path, a number, a time (PATH_MAX is 4096)
MAX_GPUS = 1 << 20  # GPUs one job may hold: more is a typo (the table's column is 32-bit)


class MetaError(Exception):
    """A jobs file kb cannot read: a usage error, said with the file and the line."""


@dataclass(frozen=True)
class JobMeta:
    job: str
    gpus: int | None
    start: datetime | None
    end: datetime | None
    user: str | None

    @property
    def gpu_hours(self) -> float | None:
        if self.gpus is None or self.start is None or self.end is None or self.end < self.start:
            return None
        return self.gpus * (self.end - self.start).total_seconds() / 3600.0


def keys(job_path: str) -> list[str]:
    """The names a jobs file may use for a job kb found at job_path, most exact first."""
    path = os.path.normpath(job_path)
    name = os.path.basename(path)
    out = [job_path, path, os.path.abspath(path), name]
    stem = name
    for suf in _SUFFIXES:
        if stem.lower().endswith(suf):
            stem = stem[: -len(suf)]
            break
    for suf in _LOG_SUFFIXES:
        if stem.lower().endswith(suf):
            stem = stem[: -len(suf)]
            break
    out.append(stem)
    m = _SLURM.match(stem)
    if m:
        out.append(m.group(1))
    return list(dict.fromkeys(out))


class Meta:
    """The records of a jobs file, found by any of a job's names (see keys)."""

    def __init__(self, records: list[JobMeta]):
        self.records = records
        self._by: dict[str, JobMeta] = {}
        for r in records:
            self._by.setdefault(r.job, r)
            self._by.setdefault(os.path.normpath(r.job), r)
        self.matched: set[str] = set()

    def find(self, job_path: str) -> JobMeta | None:
        for k in keys(job_path):
            r = self._by.get(k)
            if r is not None:
                self.matched.add(r.job)
                return r
        return None

    def annotate(self, row: dict) -> dict:
        """The row with the job's record added (nulls when the file does not name the job)."""
        r = self.find(row["job"])
        row["user"] = r.user if r else None
        row["gpus"] = r.gpus if r else None
        row["start_time"] = _text(r.start) if r else None
        row["end_time"] = _text(r.end) if r else None
        row["gpu_hours"] = r.gpu_hours if r else None
        return row


def no_meta(row: dict) -> dict:
    for name, _ in COLUMNS:
        row.setdefault(name, None)
    return row


def read(path: str) -> Meta:
    try:
        with open(path, encoding="utf-8-sig", newline="") as fh:
            text = fh.read()
    except FileNotFoundError:
        raise MetaError(f"no such file: {path}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise MetaError(f"cannot read {path}: {e}") from None
    lines = text.splitlines()
    if not lines:
        raise MetaError(f"{path} is empty: it needs a header (job,gpus,start,end,user)")
    delim = "|" if "|" in lines[0] and "," not in lines[0] else ","
    reader = csv.reader(lines, delimiter=delim)
    try:
        return _records(path, reader)
    except csv.Error as e:  # a cell past csv's own limit (128 KiB), a stray quote
        raise MetaError(f"{path} line {reader.line_num}: {e}") from None


def _records(path: str, reader) -> Meta:
    """The records of a jobs file, every cell checked here, before any job is read: a value the
    table cannot hold must never end a run after its jobs were read."""
    header = [h.strip().lower() for h in next(reader)]
    where: dict[str, int] = {}
    for field, names in _HEADERS.items():
        for i, h in enumerate(header):
            if h in names and field not in where:
                where[field] = i
    missing = [f for f in ("job", "gpus", "start", "end") if f not in where]
    if missing:
        raise MetaError(
            f"{path}: no column for {', '.join(missing)} in its header "
            f"({', '.join(header) or 'empty'}); it needs job,gpus,start,end (user optional)"
        )
    records = []
    for number, cells in enumerate(reader, 2):
        if not any(c.strip() for c in cells):
            continue
        long = next((c for c in cells if len(c) > MAX_CELL), None)
        if long is not None:
            raise MetaError(
                f"{path} line {number}: a cell of {len(long):,} characters (more than "
                f"{MAX_CELL:,}: no job name, number or time is that long)"
            )

        def cell(field: str, cells: list[str] = cells) -> str:
            i = where.get(field)
            return cells[i].strip() if i is not None and i < len(cells) else ""

        job = cell("job")
        if not job:
            raise MetaError(f"{path} line {number}: the job column is empty")
        records.append(
            JobMeta(
                job,
                _gpus(cell("gpus"), path, number),
                _time(cell("start"), path, number, "start"),
                _time(cell("end"), path, number, "end"),
                cell("user") or None,
            )
        )
    return Meta(records)


def _gpus(text: str, path: str, number: int) -> int | None:
    if text.lower() in _UNKNOWN:
        return None
    if text.isdigit():
        if int(text) > MAX_GPUS:
            raise MetaError(f"{path} line {number}: gpus {text} is more than any job holds")
        return int(text)
    m = _TRES_GPU.search(text)
    if m:
        if int(m.group(1)) > MAX_GPUS:
            raise MetaError(f"{path} line {number}: gpus {text!r} is more than any job holds")
        return int(m.group(1))
    if "=" in text:
        return 0  # a TRES list without GPUs: a CPU job
    raise MetaError(f"{path} line {number}: gpus {text!r} is not a number")


def _time(text: str, path: str, number: int, field: str) -> datetime | None:
    if text.lower() in _UNKNOWN:
        return None
    try:
        if re.fullmatch(r"\d+(?:\.\d+)?", text):
            return datetime.fromtimestamp(float(text), timezone.utc).replace(tzinfo=None)
        t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (ValueError, OverflowError, OSError):
        raise MetaError(
            f"{path} line {number}: {field} {text!r} is not a time "
            "(ISO 8601 such as 2026-11-26T05:04:07, or seconds since 1970)"
        ) from None
    if t.tzinfo is not None:
        try:
            t = t.astimezone(timezone.utc).replace(tzinfo=None)
        except (OverflowError, ValueError):  # 0001-01-01T00:00:00+05:00 is before year 1 in UTC
            raise MetaError(
                f"{path} line {number}: {field} {text!r} is not a time kb can hold in UTC"
            ) from None
    return t


def _text(t: datetime | None) -> str | None:
    return t.isoformat(sep=" ") if t is not None else None
