"""One input of a job and the error for one that cannot be read: shared by the job lookup and
the readers of a job's files, so neither imports the other to name them."""

from __future__ import annotations

from kb.errors import InputError  # noqa: F401  (kb.job.lookup's callers catch it from here)


class Source:
    """One input: a file (or "<stdin>", "<text>") and the rank its path names, if any."""

    __slots__ = ("local", "path", "rank")

    def __init__(self, path: str, rank: int | None = None, local: bool = False):
        self.path = path
        self.rank = rank
        self.local = local  # the rank is torchrun's local rank (a folder per local rank)
