"""The TUI's one lookup call: typed text, or a log file read whole, through kb.Engine.lookup.

Blocking (a log can be gigabytes), so the app calls it from a worker thread. This is also where
a job lookup belongs once kb has one in its public API: a folder of rank logs, or a multi-rank
log, would go to it here and come back with the per-rank verdicts beside the LookupResult.
Nothing here imports Textual.
"""

from __future__ import annotations

from pathlib import Path

from kb import Engine, LookupResult

from .log_source import READ_ERRORS, human_size, open_tolerant, problem


class LookupFailed(Exception):
    """The input could not be read; the message says why in words."""


def normalize_paste(text: str) -> str:
    """A terminal paste may bring its line ends as CR only: make them lines again."""
    if "\r" in text and "\n" not in text:
        return text.replace("\r", "\n")
    return text


def look_up(engine: Engine, target: Path | str, label: str, top: int) -> LookupResult:
    """Look up typed text, or a log file whole (plain or gzip, any size). A file that breaks
    partway gives the results for what came before the break, and a warning that says so."""
    if isinstance(target, str):
        return engine.lookup(normalize_paste(target), top=top)
    try:
        stream, raw = open_tolerant(target)
        with stream:
            result = engine.lookup(stream, top=top)
    except READ_ERRORS as e:
        raise LookupFailed(problem(label or target, e)) from e
    if raw.error is not None:
        result.warnings.append(
            f"{problem(label or target, raw.error)}: results use the first "
            f"{human_size(raw.read_bytes)}"
        )
    return result
