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

A folder is one job or many, by what it holds (split_logs; kb triage's discovery reads folders by
the same rules). It is one job when it holds a job's own files: torchrun's layout, Flight
Recorder dumps, error files, a `kb run` record, or logs that each name a rank of their own and no
two the same one: by their names (rank3.log, worker-3.log; a family of Slurm %t names counting
from 0: train-0.log train-1.log, slurm-123_0.out) or by their lines (every line of the file
carries one rank's prefix, [rank3]: or [default3]:). A log with no rank of its own is never
merged into another's: beside a job's per-rank files it is left out of that job (a job of its
own, said with why), and a folder of such logs (job-001.log ... job-010.log, or ten combined
logs of ten jobs) is as many jobs as it holds logs.

A folder is read whole, up to MAX_FILES files and folders (every entry listed counts, so a
folder of millions of empty folders costs no more than one of as many files) and MAX_JOB_BYTES
bytes of files: what is left out is said, with why (over a limit, deeper than MAX_DEPTH
folders, not a log by its name, a link to a folder already read, a link out of the job's
folder), and a folder or file that cannot be read is reported, never fatal to the rest. A folder
is listed only as far as the limit: the rest of a huge one is never read into memory. Links are
followed only inside the job's own folder (a link to /usr or /proc/kmsg is left out, said); a
folder is entered once, so a link back to a parent is no loop; only regular files are ever
opened (never a FIFO, a device, or a file of the kernel's in /proc or /sys).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import kb.job.parsers.error_file as error_file
import kb.job.parsers.flight_recorder as flight_recorder
from kb.errors import InputError
from kb.job.source import Source
from kb.model.record import field, record

MAX_FILES = 100_000  # files and folders per folder argument: a 16k-rank job's logs, dumps...
MAX_DEPTH = 8  # torchrun's layout is 4 deep under --log-dir
MAX_JOB_BYTES = 64 << 30  # bytes of the files of one folder argument: a job's logs, not a disk
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
    # how each folder argument was read (split_logs), in words
    reading: list[str] = field(default_factory=list)

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
            part = JobInputs()
            for f in _walk(path, part):
                _add(part, f, from_folder=True)
            _read_folder(path, part)
            out.logs += part.logs
            out.error_files += part.error_files
            out.dumps += part.dumps
            out.tarballs += part.tarballs
            out.problems += part.problems
            out.left_out += part.left_out
            out.reading += part.reading
        elif path.exists() or path.is_symlink():
            if not path.exists():
                out.problems.append(f"{p}: a broken link (to {os.readlink(p)})")
                continue
            _add(out, path, from_folder=False)
        else:
            out.missing.append(p)
    return out


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _walk(root: Path, out: JobInputs) -> list[Path]:
    """The files under root, in a stable order: links followed inside root only (each folder
    entered once, so a link to a parent is no loop, each file read once), hidden names skipped,
    at most MAX_FILES entries (files and folders) and MAX_JOB_BYTES bytes of files, MAX_DEPTH
    deep; what is left out and what cannot be read are written to `out`."""
    from kb.scan.reader import not_a_log

    found: list[Path] = []
    seen_dirs: set[tuple[int, int]] = set()
    seen_files: dict[tuple[int, int], Path] = {}
    over = 0  # entries past MAX_FILES
    over_named: list[str] = []
    unlisted: list[str] = []  # folders whose listing stopped at the limit
    budget = MAX_FILES  # entries still to be read
    size = 0
    over_bytes: list[str] = []
    try:
        st = root.stat()
        seen_dirs.add((st.st_dev, st.st_ino))
        top = os.path.realpath(root)
    except OSError as e:
        out.problems.append(f"cannot read folder {root}: {e.strerror or e}")
        return found
    stack: list[tuple[Path, int]] = [(root, 0)]
    while stack:
        here, depth = stack.pop()
        items: list[os.DirEntry[str]] = []
        try:
            with os.scandir(here) as it:
                # Listed only as far as the limit (one more, to know there are more): a folder
                # of millions of entries is never held in memory.
                for item in it:
                    if len(items) > budget:
                        unlisted.append(str(here))
                        break
                    items.append(item)
        except OSError as e:
            out.problems.append(f"cannot read folder {here}: {e.strerror or e}")
            continue
        items.sort(key=lambda e: e.name)
        subdirs: list[Path] = []
        for item in items:
            p = Path(item.path)
            if budget <= 0:
                over += 1
                if len(over_named) < 20:
                    over_named.append(str(p))
                continue
            budget -= 1
            if item.name.startswith("."):
                out.left_out.append((str(p), "a hidden name"))
                continue
            if item.is_symlink():
                target = os.path.realpath(p)
                if not _inside(target, top):
                    out.left_out.append((str(p), f"a link out of the job's folder (to {target})"))
                    continue
            try:
                is_dir = item.is_dir()  # follows links (inside the job's folder)
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
            if not_a_log(st, str(p), resolve=False):
                out.left_out.append((str(p), "not a regular file (a socket, a device, a pipe)"))
                continue
            if key in seen_files:
                out.left_out.append((str(p), "the same file as another path read (a link)"))
                continue
            seen_files[key] = p
            if size + st.st_size > MAX_JOB_BYTES:
                over_bytes.append(str(p))
                out.left_out.append(
                    (str(p), f"over the {MAX_JOB_BYTES >> 30} GiB kb reads of one job")
                )
                continue
            size += st.st_size
            found.append(p)
        # depth-first, in name order
        for d in reversed(subdirs):
            stack.append((d, depth + 1))
    if over or unlisted:
        for name in over_named:
            out.left_out.append((name, f"over the {MAX_FILES:,} files kb reads in one folder"))
        more = f"; {', '.join(unlisted[:3])} held more, not even listed" if unlisted else ""
        out.problems.append(
            f"{root}: {over:,} files left out over the {MAX_FILES:,} kb reads in one folder "
            f"(files and folders both count; by name order), among them "
            f"{', '.join(over_named[:3]) or 'the rest'}{more}"
        )
    if over_bytes:
        out.problems.append(
            f"{root}: {len(over_bytes):,} files left out over the {MAX_JOB_BYTES >> 30} GiB kb "
            f"reads of one job, among them {', '.join(over_bytes[:3])}"
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
    """The first n bytes of a regular file (never a FIFO, a device or a file of the kernel's:
    b"" for those, and for what cannot be read)."""
    from kb.errors import InputError
    from kb.scan.reader import open_checked

    try:
        with open_checked(str(f)) as fh:
            return fh.read(n)
    except (OSError, InputError):
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


# ---------------------------------------------------------------- one job or many
# Slurm's %t (and %j_%t) in an --output name, or any "<stem>-<n>.log" family: read as ranks only
# when the numbers of one stem count from 0 (task ids do; a sequence job-001.log ... does not).
_FAMILY = re.compile(r"^(?P<stem>.*?)[_.-](?P<n>0|[1-9]\d{0,4})\.(?:out|err|log|txt)(?:\.gz)?$")
_SLURM_JOB = re.compile(r"^slurm-\d+$")
_RANK_DIR = re.compile(r"^(?:rank|local_rank|worker|task|proc|r)[_-]?(\d{1,5})$", re.I)
_STREAM = re.compile(r"[_.-]?(?:stdout|stderr|out|err)$")
_LAUNCHER_WORDS = (b"ChildFailedError", b"local_rank", b"terminated with the following error")
SNIFF_LINES = 64 << 10  # bytes of a log's head (and tail) read for the ranks its lines carry


@record(frozen=True)
class Claim:
    """What one log says of whose it is."""

    path: Path
    rank: int | None  # the rank its name or its lines give it
    by: str  # name | family | lines | several (a combined log of several ranks) | launcher | none


def split_logs(
    logs: list[Path], named: dict[Path, int | None]
) -> tuple[list[Path], list[Path], str, dict[Path, int | None]]:
    """The logs of one folder that hold no other mark of a job (no torchrun layout, dump, error
    file or `kb run` record): (the logs that are one job, the logs that are jobs of their own,
    how it was read, the rank of each log of the job). `named`: the rank each log's own name
    (or its folder's) gives it (rank3.log, rank3/stdout.log), else None.

    One job: logs that each name one rank of their own, by name, by a family of task-numbered
    names counting from 0, or by the prefix all their lines carry, no two the same rank but for
    the stdout/stderr pair of one name; a launcher's log (torchrun's summary, mp.spawn's report)
    and one combined log of several ranks (its stdout and stderr) go with them. Every other log
    is a job of its own: a log with no rank of its own is never merged into another's."""
    if len(logs) < 2:
        return list(logs), [], "", {p: named.get(p) for p in logs}
    claims = _claims(logs, named)
    rank = {c.path: c.rank for c in claims}
    per_rank: dict[int, list[Claim]] = {}
    combined: dict[str, list[Claim]] = {}
    launchers: list[Claim] = []
    plain: list[Claim] = []
    for c in claims:
        if c.rank is not None:
            per_rank.setdefault(c.rank, []).append(c)
        elif c.by == "several":
            combined.setdefault(_stream_stem(c.path), []).append(c)
        elif c.by == "launcher":
            launchers.append(c)
        else:
            plain.append(c)
    clash = [r for r, cs in per_rank.items() if len({_stream_stem(c.path) for c in cs}) > 1]
    job: list[Path] = []
    if per_rank and not clash:
        job = [c.path for cs in per_rank.values() for c in cs]
        if len(combined) == 1:
            job += [c.path for c in next(iter(combined.values()))]
            combined = {}
        job += [c.path for c in launchers]
        launchers = []
    elif not per_rank and len(combined) == 1 and not plain:
        job = [c.path for c in next(iter(combined.values()))] + [c.path for c in launchers]
        combined, launchers = {}, []
    elif not per_rank and not combined and not plain and launchers:
        job, launchers = [c.path for c in launchers], []
    alone = [c.path for cs in combined.values() for c in cs] + [c.path for c in launchers]
    alone += [c.path for c in plain]
    if clash:
        alone += [c.path for cs in per_rank.values() for c in cs]
    keep = set(job)
    job = [p for p in logs if p in keep]
    alone = [p for p in logs if p in set(alone)]
    if len(job) < 2 and not alone:
        return job, [], "", rank
    if len(job) == 1:  # one log is not a job of several files: it is a job of its own as well
        alone, job = sorted([*alone, *job]), []
    return job, alone, _say(claims, job, alone, clash), rank


def _claims(logs: list[Path], named: dict[Path, int | None]) -> list[Claim]:
    family = _family_ranks(logs)
    out = []
    for p in logs:
        r = named.get(p)
        if r is not None:
            out.append(Claim(p, r, "name"))
            continue
        if p in family:
            out.append(Claim(p, family[p], "family"))
            continue
        ranks, launcher = _ranks_in_lines(p)
        if len(ranks) == 1:
            out.append(Claim(p, next(iter(ranks)), "lines"))
        elif ranks:
            out.append(Claim(p, None, "several"))
        else:
            out.append(Claim(p, None, "launcher" if launcher else "none"))
    return out


def _family_ranks(logs: list[Path]) -> dict[Path, int]:
    """Logs whose names differ only by a task number, counting from 0 in one folder:
    train-0.log train-1.log, slurm-123_0.out slurm-123_1.out -> their numbers."""
    groups: dict[tuple[Path, str], dict[Path, int]] = {}
    for p in logs:
        m = _FAMILY.match(p.name)
        if m:
            groups.setdefault((p.parent, m.group("stem")), {})[p] = int(m.group("n"))
    out: dict[Path, int] = {}
    for (_, stem), members in groups.items():
        # Slurm's %j_%t names carry the job id: its tasks even when task 0's file is not there
        if len(members) >= 2 and (0 in members.values() or _SLURM_JOB.match(stem)):
            out.update(members)
    return out


def _stream_stem(p: Path) -> str:
    """A log's name without its stream and suffix: train.out and train.err, rank3.stdout and
    rank3.stderr are one process's two streams."""
    name = p.name[:-3] if p.name.endswith(".gz") else p.name
    stem = name.rsplit(".", 1)[0] if "." in name else name
    return str(p.parent / _STREAM.sub("", stem))


def _ranks_in_lines(p: Path) -> tuple[set[int], bool]:
    """(the ranks the prefixes of a log's lines name, whether a launcher wrote in it), read from
    its head and tail."""
    from kb.scan.extract import peel
    from kb.scan.prefixes import rank_of

    raw = _sample(p)
    ranks: set[int] = set()
    for line in raw.decode("utf-8", "replace").splitlines():
        if not line or line[0] not in "[0123456789r":
            continue
        prefix, _ = peel(line)
        r = rank_of(prefix) if prefix else None
        if r is not None:
            ranks.add(r)
            if len(ranks) > 1:
                break
    return ranks, any(w in raw for w in _LAUNCHER_WORDS)


def _sample(p: Path) -> bytes:
    from kb.scan.reader import open_checked

    try:
        if p.name.endswith(".gz") or _head(p, 2) == b"\x1f\x8b":
            import gzip

            with open_checked(str(p)) as raw, gzip.GzipFile(fileobj=raw) as fh:
                return fh.read(2 * SNIFF_LINES)
        with open_checked(str(p)) as fh:
            head = fh.read(SNIFF_LINES)
            size = os.fstat(fh.fileno()).st_size
            if size > 2 * SNIFF_LINES:
                fh.seek(size - SNIFF_LINES)
            return head + b"\n" + fh.read(SNIFF_LINES)
    except (OSError, EOFError, ValueError, InputError):
        return b""


def _say(claims: list[Claim], job: list[Path], alone: list[Path], clash: list[int]) -> str:
    by = {c.path: c for c in claims}
    if job:
        kinds = sorted({by[p].by for p in job})
        words = {
            "name": "named by rank",
            "family": "task-numbered names counting from 0",
            "lines": "lines carrying one rank each",
            "several": "a combined log of several ranks",
            "launcher": "a launcher's log",
        }
        how = f"one job of {len(job)} logs ({', '.join(words[k] for k in kinds if k in words)})"
        if alone:
            how += f", and {len(alone)} log{'s' if len(alone) != 1 else ''} of no rank of its own"
        return how
    why = (
        f"two or more logs say they are rank {clash[0]}"
        if clash
        else "none of them names a rank of its own"
    )
    return f"{len(alone)} unrelated logs ({why}): {len(alone)} jobs"


def _read_folder(root: Path, part: JobInputs) -> None:
    """One folder argument's files, read as one job or many (split_logs): the logs that are
    jobs of their own are left out of this one, with why, and lose the rank their names seemed
    to give them."""
    marks = part.dumps or part.error_files or part.tarballs or any(s.local for s in part.logs)
    if marks or len(part.logs) < 2 or (root / "kb-run.json").exists():
        return
    # the logs directly in it (a sub-folder's go with the folder's job, as kb triage reads it)
    paths = [Path(s.path) for s in part.logs if Path(s.path).parent == root]
    named = {p: named_rank(p) for p in paths}
    job, _, how, rank = split_logs(paths, named)
    if not how:
        return
    part.reading.append(f"{root}: {how}")
    keep = set(job)
    out: list[Source] = []
    for s in part.logs:
        p = Path(s.path)
        if p in keep:
            out.append(Source(s.path, rank.get(p), s.local))
        elif p not in named:
            out.append(s)
        elif job:
            why = "no rank of its own beside a job's per-rank logs: a job of its own"
            part.left_out.append((s.path, why))
        else:
            out.append(Source(s.path, None, False))
    part.logs = out


def named_rank(f: Path) -> int | None:
    """The rank a log's own name (or its folder's) gives it: rank3.log, worker-3.out, r3.txt,
    rank3/stdout.log; never a number that may count anything else (job-001.log)."""
    m = _RANK_NAME.search(f.stem if not f.name.endswith(".gz") else Path(f.stem).stem)
    if m:
        return int(m.group(1))
    m = _RANK_DIR.match(f.parent.name)
    return int(m.group(1)) if m else None
