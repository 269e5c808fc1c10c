"""The failures a rank shows because another rank failed first: timeouts while waiting for a peer,
the watchdog's teardown, aborted communicators, a peer's closed connection, the launcher's
SIGTERM. The job view never picks one of these as the root cause while any rank shows something
else.

The wordings, their roles and the signals a launcher stops ranks with are data
(kb/data/job-wordings.yaml, each wording quoted from the PyTorch source that prints it), read
with the entries and checked by `kb lint`; an entry or one of its signatures says the same with
`consequence: <role>` (an entry whose every wording is a wait for another rank says
`consequence: timeout`). This module only reads them.
"""

from __future__ import annotations

import re

from kb.knowledge.data import JobWordings, bundled

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from kb.model.entry import Match

_COMPILED: dict[int, tuple[JobWordings, list[tuple[str, re.Pattern]], list[re.Pattern]]] = {}


def _wordings() -> tuple[JobWordings, list[tuple[str, re.Pattern]], list[re.Pattern]] | None:
    jobs = bundled().jobs
    if jobs is None:  # kb/data/job-wordings.yaml is broken: kb lint says how
        return None
    got = _COMPILED.get(id(jobs))
    if got is None or got[0] is not jobs:
        got = _COMPILED[id(jobs)] = (
            jobs,
            [(w.role, re.compile(w.pattern)) for w in jobs.consequences],
            [re.compile(w.pattern) for w in jobs.neutral],
        )
    return got


def classify(text: str) -> str | None:
    """The consequence role of a line (a key of CLASSES), or None when it is not one."""
    got = _wordings()
    for role, rx in got[1] if got else ():
        if rx.search(text):
            return role
    return None


def neutral(text: str) -> bool:
    """A line that only wraps another error printed next (never an answer by itself)."""
    got = _wordings()
    return any(rx.search(text) for rx in (got[2] if got else ()))


def of_match(m: Match) -> str | None:
    """The consequence role a match's entry states for its wording (its signature's
    `consequence`, else its entry's), or None."""
    sig = m.entry.signature(m.signature or "") if m.source == "signature" else None
    return (sig.consequence if sig is not None else "") or m.entry.consequence or None


def __getattr__(name: str) -> Any:
    # CLASSES: role -> what a rank showing it was doing; STOPPED_BY_OTHERS: the signals a
    # process dies of when someone else stops it (number -> name). Read from the data file.
    if name in ("CLASSES", "STOPPED_BY_OTHERS"):
        got = _wordings()
        if got is None:
            return {}
        return dict(got[0].roles) if name == "CLASSES" else dict(got[0].stopped_by_others)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
