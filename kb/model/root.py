"""The root failure of a log: what failed first, whether or not any entry knows it.

Typed, frozen records, no I/O; kb.diagnosis.root reads them out of a scan. A lookup carries one
(LookupResult.root) for every input that shows a failure, so a log no entry explains still gets
its failing line, its exception and where it was raised.
"""

from __future__ import annotations

from enum import Enum  # already loaded by `re`: free on the cold path

from kb.model.origin import MessageOrigin
from kb.model.record import asdict, record

TYPE_CHECKING = False  # typing stays unimported at run time (kb lookup's cold start)
if TYPE_CHECKING:
    from typing import Any


class RootKind(str, Enum):
    """What the root failure is. str-valued: the JSON holds the value."""

    EXCEPTION = "exception"  # a Python exception (or a C++ one's `what():`)
    SIGNAL = "signal"  # the process died of a signal its shell or runtime reported
    EXIT_STATUS = "exit-status"  # only a non-zero exit status says it failed
    LAUNCHER = "launcher"  # a launcher or scheduler reported a child's failure (torchrun, srun...)
    KERNEL = "kernel"  # the kernel's own message: an Xid, the OOM killer, a segfault line
    BUILD = "build"  # a compiler's error or a build tool's stop (an extension, a JIT build)
    # a line the program logged at error level ("ERROR: ..." from pip, a logger's ERROR record)
    # with nothing stronger in the log: it says something failed, not what
    LOGGED = "logged error"


class Origin(str, Enum):
    """Whose code a traceback frame is in."""

    USER = "user"  # not in any installed package nor the standard library
    PACKAGE = "package"  # site-packages / dist-packages (pip, conda, venv, Debian, Windows)
    STDLIB = "stdlib"  # the standard library, <frozen ...> modules included


class Relation(str, Enum):
    """How an exception in the root's chain is tied to the root."""

    CAUSE = "cause"  # "The above exception was the direct cause of the following exception"
    CONTEXT = "context"  # "During handling of the above exception, another exception occurred"
    WRAPPER = "wrapper"  # re-raised or reported by a wrapper (mp.spawn, a DataLoader worker...)


@record(frozen=True)
class Frame:
    """One frame of a traceback, as printed."""

    file: str
    line: int = 0  # 0 when the frame gave none
    function: str = ""
    package: str = (
        ""  # its top-level package ("torch"), the stdlib module ("json"), "" for user code
    )
    origin: Origin = Origin.USER
    code: str = ""  # the source line printed under it, when shown

    def where(self) -> str:
        """file:line in function, as a person reads it."""
        at = f"{self.file}:{self.line}" if self.line else self.file
        return f"{at} in {self.function}" if self.function else at


@record(frozen=True)
class ChainLink:
    """An exception the root came through: a wrapper that re-raised it, or an exception raised
    from it or while handling it."""

    relation: Relation
    exception: str  # the type as printed
    line: str
    line_number: int
    message: str = ""
    wrapper: str = ""  # which wrapper: mp.spawn, dataloader-worker, ray, torchrun, subprocess...


@record(frozen=True)
class RootFailure:
    """The first failure in a log that is not a consequence of another one."""

    kind: RootKind
    line: str  # the line that says it, cleaned of log prefixes
    line_number: int  # 1-based, in its input
    exception: str = ""  # the type as printed: torch.OutOfMemoryError, FileNotFoundError...
    message: str = ""  # the exception's message, with the lines it continues on
    frame: Frame | None = None  # the frame that raised it (the traceback's innermost)
    raised_in: Origin | None = None  # whose code that frame is in; None without a traceback
    package: str = ""  # the package of that frame ("" for user code or without a traceback)
    user_frame: Frame | None = None  # the user's own frame nearest the failure
    frames: tuple[Frame, ...] = ()  # the whole traceback, outermost first
    chain: tuple[ChainLink, ...] = ()  # the wrappers and chained exceptions it came through
    signal: str = ""  # SIGKILL, SIGSEGV... when a signal ended the process
    exit_code: int | None = None  # the exit status a launcher or shell reported
    rank: int | None = None  # the rank whose line it is, when a launcher prefix said
    # What the scan peeled off its line (launcher prefixes, the logger's time and level): when it
    # happened, without reading the input again.
    prefix: str = ""
    source: int = 0  # which input it is in, when several were read as one job
    truncated: bool = False  # its traceback was cut: frames or the exception line are missing
    consequence: str = ""  # set when every failure in the log is a consequence (e.g. "timeout")
    others: int = 0  # further failures in the log, outside its chain
    # The root's role (kb.diagnosis.root): "initiating" (a failure of its own), or, when the log
    # shows nothing else, "consequence" (a peer's timeout...), "teardown" (a signal or exit after
    # another failure) or "report" (a launcher's report whose original is not shown).
    role: str = "initiating"
    # (input, line number) of the failures the log shows after an initiating root because of it:
    # consequences, teardowns, launchers' reports. Empty unless the root is initiating.
    followers: tuple[tuple[int, int], ...] = ()
    # Where its message is printed, when it fits a message catalog template that maps to no
    # entry (kb.diagnosis.catalog_match): known, though no entry claims it.
    printed_by: MessageOrigin | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        out: dict[str, Any] = {}
        for k, v in d.items():
            out[k] = v.value if isinstance(v, Enum) else v
        for key in ("frame", "user_frame"):
            if out[key] is not None:
                out[key] = _frame_dict(out[key])
        out["frames"] = [_frame_dict(f) for f in out["frames"]]
        out["chain"] = [{k: _plain(v) for k, v in c.items()} for c in out["chain"]]
        out["printed_by"] = self.printed_by.to_dict() if self.printed_by is not None else None
        return out


def _plain(v: Any) -> Any:
    return v.value if isinstance(v, Enum) else v


def _frame_dict(f: dict[str, Any]) -> dict[str, Any]:
    return {k: _plain(v) for k, v in f.items()}


__all__ = ["ChainLink", "Frame", "Origin", "Relation", "RootFailure", "RootKind"]
