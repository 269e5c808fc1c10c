"""One job -> one row: the per-job function every engine runs (the local process pool, Ray).

The verdict is kb's own (`kb.lookup_job`, as `kb lookup JOB` gives it); this module only
reads it into flat columns, adds where the failure happened (host, GPU) and when, and never
raises: a job that cannot be read is a row whose `error` says why.
"""

from __future__ import annotations

import os
import re
import shutil
import tarfile
import tempfile
import time
from collections.abc import Iterable, Iterator
from datetime import datetime

import kb
from kb.errors import KbError

from . import budget
from .discover import Job, job_of
from .tarball import TarballError, unpack

TOP = 10  # matches kept per job: enough to see an Xid line that is not the root's
ROOT_LINE_MAX = 2000  # characters of the root line kept in the table (a line can be megabytes)

# (column, DuckDB type): the table's schema, in order. The store and the tests read it from here.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("job", "VARCHAR"),  # the job's path, as found
    ("id", "VARCHAR"),  # the entry (generic ones included); null when none answered
    ("title", "VARCHAR"),
    ("confidence", "VARCHAR"),  # high | medium | low
    ("generic", "BOOLEAN"),  # a language/platform class rather than a PyTorch/CUDA one
    ("domain", "VARCHAR"),  # user-code | environment | infrastructure | unknown (per entry)
    ("action", "VARCHAR"),  # fix-code | fix-environment | restart | drain-node | unknown
    ("kind", "VARCHAR"),  # error | exception | signal | exit | desync | terminated | none
    ("root_line", "VARCHAR"),  # the root failure's line, whether or not an entry matched
    ("root_rank", "INTEGER"),
    ("exception", "VARCHAR"),
    ("host", "VARCHAR"),
    ("gpu", "VARCHAR"),  # PCI bus id (dddd:bb:dd) or UUID, from an Xid or NVML line
    ("first_failure", "TIMESTAMP"),  # as the log printed it (its host's clock)
    ("signature", "VARCHAR"),
    ("ranks", "INTEGER"),
    ("lines", "BIGINT"),
    ("bytes", "BIGINT"),
    ("seconds", "DOUBLE"),  # time kb took over this job
    ("kb_version", "VARCHAR"),
    ("knowledge", "VARCHAR"),  # hash of the entries that answered (same hash, same answers)
    ("error", "VARCHAR"),  # why the job could not be read; null when it was
)
COLUMN_NAMES = tuple(name for name, _ in COLUMNS)

# Where the failure happened, from the driver's own lines. The PCI id in an Xid line is
# "PCI:0000:3b:00" (domain:bus:device); NVML and nvidia-smi print "00000000:3B:00.0".
_PCI = re.compile(
    r"(?<![0-9A-Fa-f:])(?:PCI:)?([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.[0-7])?\b"
)
_UUID = re.compile(
    r"\b(GPU-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})\b"
)
_HARDWARE_LINE = re.compile(r"NVRM: |NVML|nvidia-smi|Unable to determine the device handle|GPU-")
# syslog / journalctl: "May 20 03:14:07 node17 kernel: NVRM: Xid ..."
_SYSLOG_HOST = re.compile(
    r"^(?:[A-Z][a-z]{2} +\d{1,2} \d\d:\d\d:\d\d|\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d\S*)"
    r" ([A-Za-z0-9][\w.-]*) kernel:"
)

_MONTHS = {
    m: i
    for i, m in enumerate(
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"], 1
    )
}
_ISO = re.compile(r"(\d{4})-(\d\d)-(\d\d)[T _](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?")
_DMESG_T = re.compile(  # dmesg -T: "[Tue Jun  4 10:21:33 2024]"
    r"\[[A-Z][a-z]{2} ([A-Z][a-z]{2}) +(\d{1,2}) (\d\d):(\d\d):(\d\d) (\d{4})\]"
)
_GLOG = re.compile(r"(?:^|\[)[IWEF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?")
_SYSLOG_TIME = re.compile(r"^([A-Z][a-z]{2}) +(\d{1,2}) (\d\d):(\d\d):(\d\d)\b")

_ENGINES: dict[tuple[str, ...], kb.Engine] = {}


def engine(kb_dirs: Iterable[str] | None = None) -> kb.Engine:
    """One engine per process (per set of folders): the knowledge base is loaded once per
    worker, on its first job, and kept."""
    key = tuple(kb_dirs or ())
    eng = _ENGINES.get(key)
    if eng is None:
        eng = _ENGINES[key] = kb.Engine(list(key))
        # Load and compile now, not inside the first job: the entries, their signatures, and the
        # full-text index that a job no signature knows is searched with.
        eng.signatures  # noqa: B018
        eng.fulltext()
    return eng


def empty_row(job: str) -> dict:
    row: dict = dict.fromkeys(COLUMN_NAMES)
    row["job"] = job
    return row


def triage(job: Job | str, eng: kb.Engine | None = None, seconds: float | None = None) -> dict:
    """The row for one job. Never raises (but for KeyboardInterrupt and the like): a job that
    cannot be read, or that takes longer than `seconds` (budget.SECONDS by default), is a row
    with `error`."""
    if not isinstance(job, Job):
        job = job_of(job)
    eng = eng or engine()
    start = time.perf_counter()
    row = empty_row(job.path)
    tmp: str | None = None
    try:
        with budget.time_budget(budget.SECONDS if seconds is None else seconds):
            paths = [job.path]
            if job.kind == "tarball":
                tmp = tempfile.mkdtemp(prefix="kb-triage-")
                unpack(job.path, tmp)  # only what the job view reads, streamed, bounded
                paths = [tmp]
            found = kb.lookup_job(paths, top=TOP, engine=eng)
            _fill(row, found, paths)
        knowledge = eng.knowledge
        row["kb_version"] = kb.__version__
        row["knowledge"] = (knowledge.identity or knowledge.content_hash or "")[:12] or None
    except Exception as e:  # any failure of one job is that job's row, never the run's end
        row["error"] = _why(e, tmp, job.path)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    row["seconds"] = round(time.perf_counter() - start, 6)
    return row


def _why(e: Exception, tmp: str | None, path: str) -> str:
    """One line saying why a job could not be read."""
    msg = str(e) or type(e).__name__
    if tmp:
        msg = msg.replace(tmp, path)  # name the tarball, not the folder it was unpacked into
    if isinstance(e, tarfile.ReadError):
        # tarfile lists every compression it tried, one per line: say what it means instead
        detail = f" ({msg})" if "\n" not in msg else ""
        return f"cannot read {path}: not a tar archive, or a damaged one{detail}"
    if isinstance(e, (tarfile.TarError, KbError, TarballError, budget.JobTooLong)):
        return msg.splitlines()[0]  # already says what and where
    return f"{type(e).__name__}: {msg.splitlines()[0] if msg else ''}"


# ---------------------------------------------------------------- the row
def _fill(row: dict, found, paths: list[str]) -> None:
    result = found.result
    view = found.job
    best = result.best
    facts = result.facts
    root = view.root if view is not None else None
    evidence = view.root_evidence() if view is not None else None
    if best is not None:
        e = best.entry
        row.update(
            id=e.id,
            title=e.title,
            confidence=_plain(best.confidence),
            generic=bool(e.generic),
            domain=e.domain,
            action=e.action,
            signature=best.signature,
        )
    # The root failure the lookup read (kb.diagnosis.root): the same reading as `kb lookup`'s,
    # never a second pass over the file.
    lroot = result.root
    row["exception"] = (
        lroot.exception.rsplit(".", 1)[-1] if lroot is not None and lroot.exception else None
    ) or facts.exception
    row["lines"] = result.lines_scanned
    row["bytes"] = result.bytes_scanned
    row["ranks"] = len(view.ranks) if view is not None else 1
    if view is not None:
        row["kind"] = _plain(view.kind)
        row["root_rank"] = root.rank if root is not None else None
        line = (evidence.line if evidence is not None else "") or (best.line if best else "")
    else:
        if best is not None:
            row["kind"] = "error"
        elif lroot is not None:
            row["kind"] = "exception" if lroot.exception else _plain(lroot.kind)
        else:
            row["kind"] = "exception" if facts.exception else "none"
        row["root_rank"] = (
            lroot.rank if lroot is not None and lroot.rank is not None else facts.rank
        )
        # The root failure's own line, the same reading as the exception and rank beside it;
        # the best match's line only where the log shows no root failure.
        line = lroot.line if lroot is not None else (best.line if best is not None else "")
    raw: str | None = None  # the root line as the file has it, prefixes and all (its time)
    if view is None and lroot is not None:
        raw = lroot.prefix + lroot.line  # the scan kept what it peeled: no second read
    elif view is None and best is not None and best.line_number and _one_file(found.paths):
        raw = _line_at(found.paths[0], best.line_number, best.line)  # no root failure: rare
    row["root_line"] = line[:ROOT_LINE_MAX] if line else None
    host, gpu = _where(result.matches)
    if host is None and view is not None:
        host = _root_host(view)
    row["host"], row["gpu"] = host, gpu
    row["first_failure"] = _first_failure(view, best, raw, paths)


def _plain(value):
    """kb's enums (JobKind, confidence) as their text: the rows go to JSON, Arrow and DuckDB."""
    return getattr(value, "value", value)


def _where(matches) -> tuple[str | None, str | None]:
    """(host, gpu) from the driver's lines among the matches' evidence: Xid, NVML, nvidia-smi."""
    host = gpu = None
    for m in matches:
        pci = m.captures.get("pci")
        if pci and gpu is None:
            gpu = _pci(pci)
        for h in m.hits:
            text = h.line
            if not _HARDWARE_LINE.search(text):
                continue
            if gpu is None:
                gpu = _gpu_in(text)
            if host is None:
                hm = _SYSLOG_HOST.match(text)
                if hm:
                    host = hm.group(1)
            if host is not None and gpu is not None:
                return host, gpu
    return host, gpu


def _gpu_in(text: str) -> str | None:
    m = _PCI.search(text)
    if m:
        return _pci(m.group(1))
    m = _UUID.search(text)
    return m.group(1) if m else None


def _pci(text: str) -> str:
    """One spelling per GPU: "PCI:0000:3b:00", "00000000:3B:00.0" -> "0000:3b:00"."""
    t = text.removeprefix("PCI:").split(".")[0].lower()
    parts = t.split(":")
    if len(parts) == 3:
        parts[0] = parts[0][-4:].rjust(4, "0")
    return ":".join(parts)


def _root_host(view) -> str | None:
    root = view.root
    if root is not None and root.host:
        return root.host
    tr = view.torchrun
    if tr is not None:
        failures = tr.failures
        mine = [f for f in failures if root is not None and f.rank == root.rank]
        for f in mine + list(failures):
            if f.host:
                return f.host
    return None


# ---------------------------------------------------------------- when
def _first_failure(view, best, raw: str | None, paths: list[str]) -> str | None:
    """When the job first failed, as ISO text: the earliest time on the root's line and on the
    line that shows it (for a desync, the rank that timed out), else torchrun's record of the
    first failure, else the time on the answer's line. glog and syslog times have no year: it is
    taken from a full date in the same job, else from the log file's modification time."""
    first: list[str] = []
    later: list[str] = []
    if view is not None:
        first += [v.time for v in (view.root, view.evidence) if v is not None and v.time]
        if view.torchrun is not None:
            later += sorted(f.time for f in view.torchrun.failures if f.time)[:1]
    if raw:
        later.append(raw[:96])
    if best is not None and best.line:
        later.append(best.line[:96])
    year = next((int(m.group(1)) for c in first + later for m in [_ISO.search(c)] if m), None)
    times = [t for t in (_time_in(c, year, paths) for c in first) if t is not None]
    if times:
        return min(times)
    for c in later:
        t = _time_in(c, year, paths)
        if t is not None:
            return t
    return None


def _time_in(text: str, year: int | None, paths: list[str]) -> str | None:
    m = _ISO.search(text)
    if m:
        y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
        return _iso(y, mo, d, h, mi, s, m.group(7))
    m = _DMESG_T.search(text)
    if m and m.group(1) in _MONTHS:
        d, h, mi, s, y = (int(g) for g in m.groups()[1:])
        return _iso(y, _MONTHS[m.group(1)], d, h, mi, s, None)
    m = _GLOG.search(text)
    if m:
        mo, d, h, mi, s = (int(g) for g in m.groups()[:5])
        return _iso(year or _year_of(paths, mo), mo, d, h, mi, s, m.group(6))
    m = _SYSLOG_TIME.match(text)
    if m and m.group(1) in _MONTHS:
        mo = _MONTHS[m.group(1)]
        d, h, mi, s = (int(g) for g in m.groups()[1:])
        return _iso(year or _year_of(paths, mo), mo, d, h, mi, s, None)
    return None


def _year_of(paths: list[str], month: int) -> int:
    """The year a month of a year-less time most likely fell in: the log was last written in the
    year of its modification time, or in the year before when the month is later than that."""
    newest = 0.0
    for p in paths:
        try:
            if os.path.isdir(p):
                for dirpath, _, names in os.walk(p):
                    for n in names:
                        newest = max(newest, os.stat(os.path.join(dirpath, n)).st_mtime)
            else:
                newest = max(newest, os.stat(p).st_mtime)
        except OSError:
            continue
    when = datetime.fromtimestamp(newest) if newest else datetime.now()
    return when.year - 1 if month > when.month else when.year


def _iso(y: int, mo: int, d: int, h: int, mi: int, s: int, frac: str | None) -> str | None:
    try:
        t = datetime(y, mo, d, h, mi, s, int((frac or "0")[:6].ljust(6, "0")))
    except ValueError:
        return None
    return t.isoformat(sep=" ")


# ---------------------------------------------------------------- re-reading one log
def _lines(path: str) -> Iterator[bytes]:
    """A log's lines as bytes (gunzipped when gzip), read a chunk at a time."""
    with kb.open_log(path) as fh:
        rest = b""
        while True:
            chunk = fh.read(1 << 20)
            if not chunk:
                break
            parts = (rest + chunk).split(b"\n")
            rest = parts.pop()
            yield from parts
        if rest:
            yield rest


def _one_file(paths: list[str]) -> bool:
    return len(paths) == 1 and not paths[0].startswith("<")


def _line_at(path: str, number: int, text: str) -> str | None:
    """Line `number` of a log as written (with the prefixes kb's scan peels off), when it is
    the line the lookup reported."""
    try:
        for i, raw in enumerate(_lines(path), 1):
            if i == number:
                line = raw.decode("utf-8", "replace").rstrip("\r")
                return line if text[:40] in line else None
    except (OSError, EOFError, ValueError, KbError):
        return None
    return None
