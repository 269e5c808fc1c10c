"""TorchElastic error files: what a rank's @record-decorated entry point wrote when it died, with
the real traceback (TORCHELASTIC_ERROR_FILE; torchrun gives each rank
<log_dir>/<run_id>/attempt_<n>/<local_rank>/error.json).

Two shapes, from torch/distributed/elastic/multiprocessing/errors/error_handler.py
(ErrorHandler.record_exception) and errors/__init__.py (ProcessFailure._get_error_data):
    {"message": {"message": "RuntimeError: ...",
                 "extraInfo": {"py_callstack": "Traceback ...", "timestamp": "1795402831"},
                 "errorCode": -6}}                       (errorCode: added when the agent copies it)
    {"message": "RuntimeError: ...", "timestamp": 1795402831}
"""

from __future__ import annotations

import json
import os

from kb.model.record import record

TYPE_CHECKING = False  # typing stays unimported at run time (kb lookup's cold start)
if TYPE_CHECKING:
    from typing import Any


MAX_BYTES = 16 << 20


@record
class ErrorFile:
    path: str
    message: str
    traceback: str
    timestamp: int | None
    error_code: int | None = None

    @property
    def text(self) -> str:
        """What the lookup reads: the traceback, ending in the exception line, else the message."""
        if self.traceback and self.message and self.message.splitlines()[0] not in self.traceback:
            return self.traceback.rstrip() + "\n" + self.message
        return self.traceback or self.message

    def to_dict(self) -> dict[str, str | int]:
        d: dict[str, str | int] = {
            "path": self.path,
            "message": self.message.splitlines()[0][:500] if self.message else "",
        }
        if self.timestamp is not None:
            d["timestamp"] = self.timestamp
        if self.error_code is not None:
            d["error_code"] = self.error_code
        return d


def read(path: str | os.PathLike[str]) -> ErrorFile | None:
    """The error file at path, or None when it is not one (or unreadable)."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
    except OSError:
        return None
    if len(raw) > MAX_BYTES or raw.lstrip()[:1] != b"{":
        return None
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or "message" not in data:
        return None
    msg = data["message"]
    if isinstance(msg, dict):
        info = msg.get("extraInfo")
        extra = info if isinstance(info, dict) else {}
        return ErrorFile(
            str(path),
            str(msg.get("message") or ""),
            str(extra.get("py_callstack") or ""),
            _int(extra.get("timestamp")),
            _int(msg.get("errorCode")),
        )
    return ErrorFile(str(path), str(msg), "", _int(data.get("timestamp")))


def _int(v: Any) -> int | None:  # a JSON value of any type
    try:
        return int(v)
    except (TypeError, ValueError):
        return None
