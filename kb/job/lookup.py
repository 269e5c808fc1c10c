"""A lookup over a whole job: read every input (logs, error files, Flight Recorder dumps), run the
usual lookup over all their lines, and the job view over the ranks; the result leads with the
root rank's entry, so `matches[0]` and `job.root` agree."""

from __future__ import annotations

import os
import zlib
from collections import Counter

from kb.diagnosis.engine import Engine, LookupResult
from kb.job.source import InputError, Source
from kb.model.record import replace
from kb.scan.extract import Line, Scan, scan_text
from kb.scan.prefixes import host_of, rank_in_text
from kb.scan.reader import open_log, read_scan

TYPE_CHECKING = False  # typing stays unimported at run time (kb lookup's cold start)
if TYPE_CHECKING:
    from typing import BinaryIO

# The job modules (kb.job and what it reads with) are imported only for input that is a job:
# a one-line `kb lookup "..."` must not pay for them (tests/test_import_contract.py).


class JobLookup:
    """A lookup result, the job view (None for one process's log), and the inputs read.

    Plain classes rather than dataclasses: this module is on the cold path of every `kb lookup`,
    where creating a dataclass costs milliseconds."""

    __slots__ = ("job", "left_out", "path_of", "paths", "result")

    def __init__(
        self,
        result: LookupResult,
        job=None,
        paths: list[str] | None = None,
        path_of: dict[tuple[int, str], str] | None = None,
        left_out: list[tuple[str, str]] | None = None,
    ):
        self.result = result
        self.job = job  # kb.job.view.JobView, imported only when there is one
        self.paths = paths or []  # the inputs read, in source order
        self.path_of = path_of or {}  # (line number, line) -> path
        self.left_out = left_out or []  # (path, why) of files a folder held that were not read

    def path_for(self, line_number: int, line: str) -> str | None:
        return self.path_of.get((line_number, line))


def lookup_paths(engine: Engine, paths: list[str], *, top: int = 3) -> JobLookup:
    from kb.job.inputs import collect

    inputs = collect(paths)
    if inputs.missing:
        raise InputError(f"no such file or folder: {', '.join(inputs.missing)}")
    if not (inputs.logs or inputs.error_files or inputs.dumps or inputs.tarballs):
        if inputs.problems:
            raise InputError("; ".join(inputs.problems))
        # What was passed over (links out of the folder, hidden names) is the reason: say it.
        why = "; ".join(inputs.left_out_summary())
        raise InputError(f"no log files in {', '.join(paths)}" + (f" ({why})" if why else ""))
    scans: list[tuple[Source, Scan]] = []
    for src in inputs.logs:
        try:
            scans.append((src, _scan_file(src.path, engine)))
        except InputError as e:
            # one file that cannot be read is said, and the rest of the job is still read
            if len(inputs.logs) == 1 and not inputs.several:
                raise
            inputs.problems.append(str(e))
    if not scans and not (inputs.error_files or inputs.dumps or inputs.tarballs):
        raise InputError("; ".join(inputs.problems) or f"no log files in {', '.join(paths)}")
    return _lookup(engine, scans, inputs, top)


def lookup_stream(
    engine: Engine, stream: BinaryIO, *, top: int = 3, name: str = "<stdin>"
) -> JobLookup:
    s = read_scan(stream, name, triggers=engine.triggers)
    return _lookup(engine, [(Source(name), s)], None, top)


def lookup_text(engine: Engine, text: str | bytes, *, top: int = 3) -> JobLookup:
    s = scan_text(text, triggers=engine.triggers)
    return _lookup(engine, [(Source("<text>"), s)], None, top)


def _maybe_job(lines: list[Line]) -> bool:
    """Whether one stream can hold a job: lines from two ranks (or hosts), or a torchrun summary.
    Cheap: most logs are one process and never reach kb.job."""
    ranks: set[int] = set()
    hosts: set[str] = set()
    for ln in lines:
        if ln.block:
            return True
        if "failed (exitcode" in ln.text and "local_rank" in ln.text:
            return True  # torchrun's agent names the rank that failed
        if "terminated with" in ln.text and "rocess " in ln.text:
            return True  # mp.spawn names the process (rank) that failed
        if "sigkill_handler" in ln.text and "--local_rank=" in ln.text:
            return True  # DeepSpeed's launcher names the worker that failed
        r = ln.rank if ln.rank is not None else rank_in_text(ln.text)
        if r is not None:
            ranks.add(r)
        if ln.rank is None and len(hosts) < 2:
            h = host_of(ln.text)
            if h:
                hosts.add(h[0])
        if len(ranks) > 1 or len(hosts) > 1:
            return True
    return False


def _scan_file(path: str, engine: Engine) -> Scan:
    try:
        with open_log(path) as fh:
            return read_scan(fh, path, triggers=engine.triggers)
    except IsADirectoryError:
        raise InputError(f"{path} is a folder, not a log file") from None
    except PermissionError:
        raise InputError(f"permission denied: {path}") from None
    except (OSError, EOFError, zlib.error) as e:  # a truncated or corrupt .gz, an I/O error
        raise InputError(f"cannot read {path}: {e}") from None


def _lookup(engine: Engine, scans: list[tuple[Source, Scan]], inputs, top: int) -> JobLookup:
    if inputs is None and not _maybe_job(scans[0][1].lines):
        src, s = scans[0]
        return JobLookup(engine.lookup_scan(s, top=top), None, [src.path])
    import kb.job.parsers.error_file as error_file
    from kb.job.analyze import analyze
    from kb.job.inputs import JobInputs

    inputs = inputs or JobInputs()
    efs = []
    for src in inputs.error_files:
        ef = error_file.read(src.path)
        if ef is not None:
            efs.append((ef, src.rank, src.local))
    dumps, problems = _read_dumps(inputs)
    # One pass of the usual lookup over everything, error files' tracebacks included.
    for ef, _, _ in efs:
        scans.append((Source(ef.path), scan_text(ef.text, triggers=engine.triggers)))
    paths = [src.path for src, _ in scans]
    combined: list[Line] = []
    path_of: dict[tuple[int, str], str] = {}
    tagged: list[tuple[Line, str, int | None]] = []
    n_logs = len(scans) - len(efs)
    for i, (src, s) in enumerate(scans):
        for ln in s.lines:
            ln.source = i
            combined.append(ln)
            path_of.setdefault((ln.number, ln.text), src.path)
            if i < n_logs:
                tagged.append((ln, src.path, src.rank))
    total = Scan(
        combined,
        sum(s.total_lines for _, s in scans),
        sum(s.total_bytes for _, s in scans),
        sum(s.dropped for _, s in scans),
        any(s.binary for _, s in scans) and len(scans) == 1,
        sum(s.skimmed for _, s in scans),
        [w for _, s in scans for w in s.warnings],
        dict(sum((Counter(s.dropped_kinds) for _, s in scans), Counter())),
    )
    several = inputs.several
    job = analyze(engine, tagged, error_files=efs, dumps=dumps, several=several, problems=problems)
    result = engine.lookup_scan(total, top=max(top, 50) if job else top)
    if job is not None:
        _lead_with_root(result, job)
        result.matches = result.matches[:top]
        _root_of_root_rank(result, job, tagged)
    return JobLookup(result, job, paths, path_of, inputs.left_out)


def _read_dumps(inputs) -> tuple[list, list[str]]:
    """The Flight Recorder dumps among the inputs (tarballs of them too), and every problem met
    reading the job's files: a file that cannot be read, a dump refused and why, what was left
    out of a folder."""
    import kb.job.parsers.flight_recorder as flight_recorder
    from kb.knowledge.pickle_file import gc_paused

    problems = list(inputs.problems)
    dumps = []
    with gc_paused():  # a thousand dumps make a million small containers, none in a cycle
        found, trouble = flight_recorder.read_files([(s.path, s.rank) for s in inputs.dumps])
    dumps += found
    problems += trouble
    for src in inputs.tarballs:
        with gc_paused():
            found, trouble, others = flight_recorder.read_tarball(src.path)
        dumps += found
        problems += trouble
        if others:
            problems.append(
                f"{src.path}: {len(others)} member{'s' if len(others) != 1 else ''} that "
                f"{'are' if len(others) != 1 else 'is'} not a Flight Recorder dump, not read "
                f"({', '.join(o.split(':', 1)[-1] for o in others[:3])}"
                + (" ..." if len(others) > 3 else "")
                + ")"
            )
    problems += inputs.left_out_summary(quiet=_QUIET)
    return dumps, problems


# Files left out that need no word in the verdict (JSON lists them all, under input.left_out):
# what is plainly not a log, and what the limit's own problem line already counts.
_QUIET = (
    "not a log by its name",
    "a hidden name",
    "kb's own record",
    "a copy torchrun filters",
    "JSON that is neither an error file nor a dump",
    "over the ",
)


def _root_of_root_rank(result: LookupResult, job, tagged) -> None:
    """The root failure as the root rank shows it: the inputs of a job have no common clock, so
    the first failure of the first input says nothing; the job view's root rank does."""
    rank = job.root.rank if job.root is not None else None
    if rank is None:
        return
    from kb.diagnosis.root import find_root

    lines = [ln for ln, _, r in tagged if (ln.rank if ln.rank is not None else r) == rank]
    found = find_root(Scan(lines, 0, 0, 0, False)) if lines else None
    if found is not None:
        result.root = found


def _lead_with_root(result: LookupResult, job) -> None:
    """Put the root rank's entry first, shown with the root rank's own line."""
    root = job.root
    if root is None or root.id is None:
        return
    ms = result.matches
    i = next((k for k, m in enumerate(ms) if m.id == root.id), None)
    m = ms.pop(i) if i is not None else root.match
    if m is None:
        return
    ev = job.root_evidence()
    if ev is not None and ev.line:
        m = replace(m, line=ev.line, line_number=ev.line_number)
    ms.insert(0, m)


def display_path(path: str | None) -> str | None:
    """Paths as the user would type them: relative to the working folder when inside it."""
    if not path or path.startswith("<"):
        return path
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return rel if not rel.startswith("..") else path
