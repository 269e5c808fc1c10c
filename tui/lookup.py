"""The TUI's one lookup call: typed text through kb.Engine.lookup; a log file or a job's folder
through kb.lookup_job, which gives a job view beside the result when the input holds
several ranks (a folder of per-rank logs, torchrun's --log-dir, one log with rank prefixes).

Blocking (a log can be gigabytes), so the app calls it from a worker thread. Nothing here
imports Textual.
"""

from __future__ import annotations

from pathlib import Path

from kb import Engine, LookupResult, lookup_job

from .job_ranks import JobInfo, job_of
from .log_source import human_size, open_tolerant, problem


class LookupFailed(Exception):
    """The input could not be read; the message says why in words."""


def normalize_paste(text: str) -> str:
    """A terminal paste may bring its line ends as CR only: make them lines again."""
    if "\r" in text and "\n" not in text:
        return text.replace("\r", "\n")
    return text


def look_up(
    engine: Engine, target: Path | str, label: str, top: int
) -> tuple[LookupResult, JobInfo | None]:
    """(the result, the job view or None). Typed text is one process's output; a file (plain or
    gzip, any size) or a folder is read whole as a job."""
    if isinstance(target, str):
        return engine.lookup(normalize_paste(target), top=top), None
    try:
        looked = lookup_job([str(target)], top=top, engine=engine)
    except Exception as e:  # kb says what it could not read, in words
        if target.is_dir() or not target.exists():  # nothing else reads these: say why
            raise LookupFailed(str(e) or type(e).__name__) from e
        # A file the job lookup could not read whole (a gzip cut short, a disk error): the
        # tolerant reader gives the results for what came before the break, and says so.
        return look_up_file(engine, target, label, top), None
    return looked.result, job_of(engine, looked, top)


def look_up_file(engine: Engine, target: Path, label: str, top: int) -> LookupResult:
    """A log file whole, as one process's output. A file that breaks partway gives the results
    for what came before the break, and a warning that says so."""
    try:
        stream, raw = open_tolerant(target)
        with stream:
            result = engine.lookup(stream, top=top)
    except Exception as e:  # the OS's errors and kb's reader's, said in words
        raise LookupFailed(problem(label or target, e)) from e
    if raw.error is not None:
        result.warnings.append(
            f"{problem(label or target, raw.error)}: results use the first "
            f"{human_size(raw.read_bytes)}"
        )
    return result
