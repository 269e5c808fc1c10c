"""kb's errors: one hierarchy, each class with the exit code a command ends with when it escapes.

Every command's failure that is the user's input or machine (a missing file, an unwritable cache,
a malformed entry) is one of these, said in one line by kb.cli.main; anything else is a bug and
keeps its traceback. Exit codes themselves are defined in kb.exit_codes.
"""

from __future__ import annotations

from kb import exit_codes


class KbError(Exception):
    """Base of kb's own errors; `exit_code` is what the command returns."""

    exit_code = exit_codes.USAGE


class UsageError(KbError):
    """Arguments that cannot be acted on (an unknown format, a value out of range)."""


class InputError(KbError):
    """An input that cannot be read: a missing or unreadable file or folder, a FIFO that never
    opens, a device file."""


class StateError(KbError):
    """kb's own state (the entry cache, the full-text index) cannot be written or read back."""


class EntryError(KbError):
    """A knowledge-base file is malformed or hostile: the message names the file, the line and
    what is wrong."""

    exit_code = exit_codes.NOT_FOUND

    def __init__(self, path: str, line: int, message: str):
        super().__init__(f"{path}:{line}: {message}")
        self.path = path
        self.line = line


class NotFound(KbError):
    """An id no entry has (and no alias)."""

    exit_code = exit_codes.NOT_FOUND
