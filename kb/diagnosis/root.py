"""The root failure of a log: the first failure in it that is not a consequence of another, read
whether or not any entry knows it (kb.model.root.RootFailure).

What counts as a failure, in the order the log prints them:
- a Python exception: the line after a traceback's frames ("FileNotFoundError: [Errno 2] ..."),
  or a line that is one on its own ("torch.OutOfMemoryError: CUDA out of memory. ..."), with
  its message (the lines it goes on over, up to a blank line or a new record), its frames and
  the package each frame is in; a C++ exception's "terminate called after throwing an instance
  of 'c10::Error'" with its `what():` line;
- a signal the shell or Python reported ("Killed", "Segmentation fault (core dumped)",
  "Fatal Python error: Bus error");
- a launcher's or scheduler's report (torchrun's "failed (exitcode: -9) local_rank: ...", its
  ChildFailedError summary, srun's "task 0: Killed", Slurm's "CANCELLED ... DUE TO TIME LIMIT",
  mp.spawn's "process 0 terminated with signal SIGKILL", a CalledProcessError);
- the kernel's own line (an NVRM Xid, the OOM killer, a segfault line);
- a bare non-zero exit status ("Process finished with exit code 1").

Which exception is the root, for each way Python and the wrappers chain them (the original
cause, never the wrapper):
- "The above exception was the direct cause of the following exception" (`raise B from A`): A,
  the first printed. B is in `chain` as `cause`.
- "During handling of the above exception, another exception occurred" (B raised in A's
  `except`): A, the first printed: the handler failed because A happened (a translation to
  another type, a failing cleanup). B is in `chain` as `context`.
- Wrappers that print the original after themselves: mp.spawn's ProcessRaisedException ("-- Process
  N terminated with the following error:"), torch's ExceptionWrapper ("Caught KeyError in DataLoader
  worker process 0." then "Original Traceback"; also DataParallel replicas and the pin-memory
  thread), Ray's `RayTaskError(X)` (X's frames follow), the `RemoteTraceback` of
  concurrent.futures and multiprocessing.pool: the original, printed after. Lightning's
  multi-process launchers and accelerate's notebook_launcher go through mp.spawn, and
  accelerate's RuntimeError("An issue was found when launching the training") is raised from
  it: the original still comes first. The wrapper is in `chain` as `wrapper`.
- Launchers that report a child's failure after it (torchrun's ChildFailedError and its agent's
  "failed (exitcode: ...)", subprocess's CalledProcessError from `accelerate launch` or a
  DeepSpeed runner, srun's task report): the child's own exception when the log shows it
  (earlier in the log, or in the ChildFailedError summary's traceback from the error file);
  the report itself (kind `launcher`) when nothing else is shown. Lightning, HF Trainer and
  accelerate's Accelerator re-raise the original exception unchanged: nothing to unwrap.
- An exception Python reports as ignored ("Exception ignored in: ...") is no failure.

Several failures: the first in the log that is neither a wrapper nor a consequence of another
failure (a timeout waiting for a peer, the launcher's SIGTERM, an aborted communicator: the
classes kb.job.consequences names, given as `consequence`); when every failure is a consequence,
the first of them, marked with its class. `others` counts the failures left, each once (the same
exception and message printed by several ranks is one). Lines from several ranks are read as one
stream per rank (the scan has peeled their launcher prefixes and kept the rank), so tracebacks
printed at the same time do not mix.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable

from kb.model.root import ChainLink, Frame, Origin, Relation, RootFailure, RootKind
from kb.scan.extract import Line, Scan

TYPE_CHECKING = False  # typing stays unimported at run time (kb lookup's cold start)
if TYPE_CHECKING:
    from typing import Any

    from kb.knowledge.data import FailureEvents, LineRule

    Consequence = Callable[[str], str | None]

MAX_MESSAGE_LINES = 12
MAX_MESSAGE = 2000
MAX_CHAIN = 8


class _Lazy:
    """A regex compiled on first use (a one-line lookup needs few of them)."""

    __slots__ = ("args", "rx")

    def __init__(self, pattern: str, flags: int = 0):
        self.args = (pattern, flags)
        self.rx: re.Pattern | None = None

    def get(self) -> re.Pattern:
        if self.rx is None:
            self.rx = re.compile(*self.args)
        return self.rx


_HEADER = "Traceback (most recent call last)"
_CAUSE = "The above exception was the direct cause of the following exception"
_CONTEXT = "During handling of the above exception, another exception occurred"
# Python's frames, faulthandler's ("line 12 in f": no comma) and IPython 8's.
_FRAME = _Lazy(
    r'^File "(?P<file>[^"]*)", line (?P<line>\d+)(?:,? in (?P<func>.+))?$'
    r"|^File (?P<ifile>[^\s\"].*?):(?P<iline>\d+), in (?P<ifunc>.+)$"
    r"|^(?P<cell>Cell In ?\[\d*\]), line (?P<cline>\d+)$"
    # IPython 7's "<ipython-input-7-4f66> in <module>", "~/x/model.py in fit(self, X)": the line
    # number comes on the arrow line under it ("--> 148 ...").
    r"|^(?P<pfile><ipython-input-[\w-]+>|[^\s<]\S*\.py) in (?P<pfunc><[^>]*>|[\w.]+)(?:\(.*)?$"
)
_ARROW = _Lazy(r"^-+>\s*(?P<n>\d+)\s(?P<code>.*)$")
# An exception line after a traceback's frames: any name Python prints there.
_EXC_AFTER = _Lazy(
    r"^(?P<type>(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:\((?:[\w.]+\.)?[A-Z]\w*\))?)(?::(?P<msg>.*))?$"
)
# An exception line with no traceback above it: the name must say it is one.
_EXC_ALONE = _Lazy(
    r"^(?P<type>(?:[A-Za-z_]\w*\.)*(?:_*[A-Z]\w*(?:Error|Exception|Interrupt|Exit|Failure|Failed)"
    r"|Exception|KeyboardInterrupt|StopIteration|SystemExit|BrokenProcessPool|_RemoteTraceback"
    r"|RemoteTraceback)(?:\((?:[\w.]+\.)?[A-Z]\w*\))?)(?::(?P<msg>.*))?$"
)
# An exception named inside a line: after a space, quote, backtick, colon or markup.
_MENTION = _Lazy(
    r"(?:^|[\s`'\"(>:：*_#|])(?P<type>(?:[A-Za-z_]\w*\.)*_*[A-Z]\w*(?:Error|Exception|Interrupt))"
    r"(?:\s*[:：]\s*(?P<msg>.*)|[`'\"]?\s*$)"
)
_MP_MARK = _Lazy(r"^-- Process (?P<n>\d+) terminated with the following error:$")
_CAUGHT = _Lazy(r"^Caught (?P<inner>\w+) (?P<where>in .+?)\.?$")
_IGNORED = "Exception ignored in"


# The wordings of the failures that are lines of their own (signals, launchers, the kernel,
# builds, exit statuses) and their roles are data: kb/data/failure-events.yaml, given by the
# engine (kb.knowledge.data.FailureEvents). What stays here is the grammar of Python's own
# tracebacks above.
class _Rules:
    """failure-events.yaml, each regex compiled on first use."""

    __slots__ = ("by_id", "events", "lines", "rx", "signals", "stopped", "words")

    def __init__(self, events: FailureEvents):
        self.events = events
        self.words = events.signal_words
        self.signals = events.signals
        self.stopped = events.stopped_by_others
        self.lines = tuple(r for r in events.lines if r.id != "cxx-what")
        self.by_id = {r.id: r for r in events.lines}
        self.rx: dict[str, re.Pattern] = {}

    def compiled(self, name: str, pattern: str, flags: str = "") -> re.Pattern:
        rx = self.rx.get(name)
        if rx is None:
            rx = self.rx[name] = re.compile(pattern, re.I if "i" in flags else 0)
        return rx

    def read(self, r: LineRule, t: str, low: str) -> re.Match | None:
        """The rule's match on a line, when the line holds one of its keys."""
        hay = low if r.lower else t
        if not any(k in hay for k in r.keys):
            return None
        return self.compiled(r.id, r.pattern, r.flags).search(t)

    def form(self, name: str, text: str) -> re.Match | None:
        return self.compiled(name, getattr(self.events, name)).search(text)

    def launcher(self, name: str, text: str) -> re.Match | None:
        """A launcher's wording (failure-events.yaml `launchers`) in a text holding its key."""
        key, pattern = self.events.launchers[name]
        return self.compiled("launchers." + name, pattern).search(text) if key in text else None


_RULES: list[_Rules] = []  # the last rules compiled: an engine passes the same every time


def _rules(events: FailureEvents | None) -> _Rules:
    if events is None:
        from kb.knowledge.data import bundled, load_data

        # A cache written before this file existed has none: read the file itself.
        events = getattr(bundled(), "events", None) or load_data().events
        if events is None:
            raise RuntimeError("kb/data/failure-events.yaml could not be read (`kb lint` says why)")
    if not _RULES or _RULES[0].events is not events:
        _RULES[:] = [_Rules(events)]
    return _RULES[0]


# Wrappers: (what prints them, how to tell them). Their original follows them ("after") or was
# printed before them ("report").
_AFTER_WRAPPERS = ("mp.spawn", "dataloader-worker", "exception-wrapper", "ray", "remote-traceback")


def _wrapper_of(exc: str, message: str) -> str:
    name = exc.rsplit(".", 1)[-1]
    first = message.split("\n", 1)[0].strip()
    if name == "ProcessRaisedException" or (
        name == "Exception" and _MP_MARK.get().match(_second_line(message))
    ):
        return "mp.spawn"
    m = _CAUGHT.get().match(first)
    if m:
        return (
            "dataloader-worker" if "DataLoader worker" in m.group("where") else "exception-wrapper"
        )
    if name.startswith("RayTaskError") or (
        name == "ActorDiedError" and "raised in its creation task" in first
    ):
        return "ray"
    if name.endswith("RemoteTraceback"):
        return "remote-traceback"
    if name == "ChildFailedError":
        return "torchrun"
    if name == "CalledProcessError":
        return "subprocess"
    if name == "ProcessExitedException":
        return "mp.spawn"
    return ""


def _second_line(message: str) -> str:
    rest = [ln.strip() for ln in message.split("\n")[1:] if ln.strip()]
    return rest[0] if rest else ""


# ---------------------------------------------------------------- frames and packages
_SITE = _Lazy(r"/(?:site|dist)-packages/(?P<rest>[^\n]+)", re.I)
_STDLIB_UNIX = _Lazy(r"/lib/(?:python|pypy)\d(?:\.\d+)?/(?P<mod>[^/]+)", re.I)
_STDLIB_WIN = _Lazy(
    r"/(?:python\d*|anaconda\d*|miniconda\d*|miniforge\d*|mambaforge|conda|envs/[^/]+|versions/[\d.]+)"
    r"/lib/(?P<mod>[^/]+)",
    re.I,
)
_SCRIPTS = _Lazy(r"/(?:bin|Scripts)/(?P<name>[\w.-]+?)(?:\.exe)?$")


def package_of(path: str) -> tuple[Origin, str]:
    """Whose code a frame's file is: (origin, package). The package is the top-level import
    name for an installed package (from site-packages / dist-packages in pip, conda, venv,
    Debian and Windows layouts), the module for the standard library ("json", "importlib" for
    `<frozen importlib._bootstrap>`), "" for the user's own code."""
    p = path.replace("\\", "/")
    if p.startswith("<frozen "):
        return Origin.STDLIB, p[8:].rstrip(">").split(".")[0]
    if p.startswith("<eval_with_key>"):
        return Origin.PACKAGE, "torch"  # torch.fx's generated forward
    if p.startswith("<"):
        return Origin.USER, ""  # <string>, <stdin>, <ipython-input-3-...>
    m = _SITE.get().search(p)
    if m:
        parts = [s for s in m.group("rest").split("/") if s]
        first = parts[0] if parts else ""
        if first.endswith((".egg", ".egg-link")) and len(parts) > 1:
            first = parts[1]
        return Origin.PACKAGE, _module_name(first)
    if "/torchinductor_" in p:
        return Origin.PACKAGE, "torch"  # code Inductor generated and compiled
    if "/transformers_modules/" in p:
        return Origin.PACKAGE, "transformers_modules"  # a model's code fetched from the Hub
    for rx in (_STDLIB_UNIX, _STDLIB_WIN):
        m = rx.get().search(p)
        if m:
            mod = _module_name(m.group("mod"))
            if mod == "lib-dynload" or mod in sys.stdlib_module_names:
                return Origin.STDLIB, mod
    m = _SCRIPTS.get().search(p)
    if m and not m.group("name").endswith(".py"):
        return Origin.PACKAGE, m.group("name")  # a console script pip wrote (torchrun, accelerate)
    return Origin.USER, ""


def _module_name(part: str) -> str:
    # "six.py" -> six; "_cffi_backend.cpython-310-x86_64-linux-gnu.so" -> _cffi_backend
    return part.split(".", 1)[0] if part.endswith((".py", ".so", ".pyd", ".pyc")) else part


def _frame(m: re.Match) -> Frame:
    if m.group("cell"):
        return Frame(m.group("cell"), int(m.group("cline")), "", "", Origin.USER)
    file = next(f for f in (m.group("file"), m.group("ifile"), m.group("pfile")) if f is not None)
    line = m.group("line") or m.group("iline") or "0"
    func = (m.group("func") or m.group("ifunc") or m.group("pfunc") or "").strip()
    origin, pkg = package_of(file)
    return Frame(file, int(line), func, pkg, origin)


# ---------------------------------------------------------------- reading a stream
# An item: (line number, indentation, text, the scan's Line or None for a context line).
Item = tuple[int, int, str, "Line | None"]


class _Event:
    """A failure found in a stream, before the root is chosen."""

    __slots__ = (
        "consequence",
        "ending",
        "exception",
        "exit_code",
        "frames",
        "held",
        "ignored",
        "kind",
        "line",
        "link",
        "logged",
        "mention",
        "message",
        "number",
        "prefix",
        "rank",
        "report",
        "role",
        "signal",
        "source",
        "span",
        "stopped",
        "torn",
        "truncated",
        "wrapper",
    )

    def __init__(self, kind: RootKind, number: int, line: str, **kw: Any):
        self.kind = kind
        self.number = number
        self.line = line
        self.exception = ""
        self.message = ""
        self.frames: list[Frame] = []
        self.wrapper = ""  # set for an exception that wraps or reports another failure
        self.report = False  # a report of a failure shown elsewhere (a launcher's, a cut traceback)
        self.link = ""  # how it is tied to the event before it: cause | context | inner
        self.ignored = False
        self.mention = False  # an exception named inside a sentence, not a line of its own
        self.truncated = False
        self.signal = ""
        self.exit_code: int | None = None
        self.consequence = ""
        self.rank: int | None = None
        self.prefix = ""  # what the scan peeled off its line (launcher prefix, time)
        self.source = 0
        self.held: Line | None = None  # the scan's line, when it holds a summary block
        self.span = 0  # lines after its own that its message went on over
        self.ending = False  # a shell's or runtime's word for how the process ended
        self.torn = False  # a report of a signal the log shows as a teardown
        self.stopped = False  # its signal is one others stop a process with (SIGTERM...)
        self.logged = False  # only its log level says it is a failure
        self.role = "initiating"  # set by _roles once the whole input is read
        for k, v in kw.items():
            setattr(self, k, v)

    @property
    def key(self) -> tuple[str, str, str]:
        """What makes two events one failure: the same exception and message (from two ranks),
        the same signal (Python's fatal error and the shell's report of it)."""
        if self.signal and not self.exception:
            return ("signal", "", self.signal)
        return (self.kind.value, self.exception, self.message or self.line)


def _depth(prefix: str) -> int:
    return len(prefix) - len(prefix.rstrip()) if prefix else 0


def _streams(lines: Iterable[Line]) -> dict[tuple[int, int | None], list[Item]]:
    """Each rank's lines of each input, in order, with the traceback lines the scan kept
    around them (Line.context); a line kept in its own right wins over a context copy."""
    by_key: dict[tuple[int, int | None], dict[int, Item]] = {}
    lines = list(lines)
    for ln in lines:
        d = by_key.setdefault((ln.source, ln.rank), {})
        for off, t in ln.context:
            n = ln.number + off
            if n not in d and t.strip():
                s = t.lstrip(" ")
                d[n] = (n, len(t) - len(s), s.strip(), None)
    own: set[tuple[int, int | None, int]] = set()
    for ln in lines:
        key = (ln.source, ln.rank, ln.number)
        if key in own:
            continue  # the scan's join of a wrapped line with the next: the line itself is read
        own.add(key)
        by_key[(ln.source, ln.rank)][ln.number] = (ln.number, _depth(ln.prefix), ln.text, ln)
    return {k: [d[n] for n in sorted(d)] for k, d in by_key.items()}


def _is_header(text: str) -> bool:
    return text.endswith((_HEADER + ":", _HEADER))


def _header_type(text: str) -> str:
    """The exception IPython names on its traceback's header line, or ""."""
    body = text[: -len(_HEADER) - (1 if text.endswith(":") else 0)]
    head = body.strip()
    if not head or " " in head or not body.endswith("  "):
        return ""  # IPython pads the name into a column; "Original Traceback" is torch's wrapper
    return head if _exception_line(head) else ""


def _is_frame(text: str) -> re.Match | None:
    if not text.startswith(("File ", "Cell In", "<ipython-input")) and ".py in " not in text:
        return None
    return _FRAME.get().match(text)


_LOWER_EXCEPTIONS = ("error", "timeout", "gaierror", "herror")  # socket.timeout, select.error...


def _exception_name_ok(name: str) -> bool:
    """After frames any class name is printed as it is, but class names are CamelCase (a few of
    the standard library's are not): a source line whose indentation a paste lost
    ("self.queue.wait(remaining)", "main") is not an exception line."""
    last = name.split("(", 1)[0].rsplit(".", 1)[-1].lstrip("_")
    if not last:
        return False
    return last[0].isupper() or ("." in name and last in _LOWER_EXCEPTIONS)


_FRAME_EXTRAS = ("[Previous line repeated",)  # Python's note on a recursion's repeated frames


def _exception_line(text: str) -> bool:
    m = _EXC_AFTER.get().match(text)
    return m is not None and _exception_name_ok(m.group("type"))


class _Reader:
    def __init__(self, items: list[Item], source: int, rank: int | None, rules: _Rules):
        self.rules = rules
        self.items = items
        self.source = source
        self.rank = rank
        self.events: list[_Event] = []
        self.skip_until = -1  # line numbers up to this were read as part of a summary block
        self._lines: dict[int, Line] | None = None  # number -> scan line, built when first asked

    def read(self) -> list[_Event]:
        items = self.items
        link = ""
        ignored = False
        i = 0
        while i < len(items):
            n, _, text, _ = items[i]
            if n <= self.skip_until:
                i += 1
                continue
            if text.startswith(_CAUSE):
                link, i = "cause", i + 1
                continue
            if text.startswith(_CONTEXT):
                link, i = "context", i + 1
                continue
            if _MP_MARK.get().match(text):
                link, i = "inner", i + 1
                continue
            if text.startswith(_IGNORED):
                ignored, i = True, i + 1
                continue
            if _is_header(text) or _is_frame(text):
                ev, i = self._traceback(i)
                if ev is not None:
                    ev.ignored = ignored
                    self._add(ev, link or ("inner" if text.startswith("Original ") else ""))
                link, ignored = "", False
                continue
            ev = self._line_event(i) or self._logged(i)
            if ev is not None:
                ev.ignored = ignored
                self._add(ev, link)
                link, ignored = "", False
                i += ev.span
            i += 1
        return self.events

    def _line_of(self, number: int) -> Line | None:
        """The scan's line with this number (None for a traceback's context lines)."""
        if self._lines is None:
            self._lines = {n: ln for n, _, _, ln in self.items if ln is not None}
        return self._lines.get(number)

    def _logged(self, i: int) -> _Event | None:
        """A line its program logged at error level (the level is in the prefix the scan
        peeled: pip's "ERROR: ...", a logger's "[ERROR]"): a failure, the weakest kind."""
        n, _, t, ln = self.items[i]
        if ln is None or not ln.prefix or self.rules.form("logged_error", ln.prefix) is None:
            return None
        return _Event(RootKind.LOGGED, n, t, message=t, logged=True)

    def _add(self, ev: _Event, link: str) -> None:
        ev.source, ev.rank = self.source, self.rank
        ln = self._line_of(ev.number)
        if ln is not None:
            ev.prefix = ln.prefix
        prev = self.events[-1] if self.events else None
        after = prev is not None and prev.wrapper in _AFTER_WRAPPERS and not prev.report
        if not link and after and not ev.wrapper:
            link = "inner"  # Ray's frames, a remote traceback: the original follows its wrapper
        ev.link = link
        self.events.append(ev)
        if ev.wrapper == "torchrun" and ev.held is not None and ev.held.block:
            for inner in self._summary(ev, ev.held):
                self._add(inner, inner.link or "inner")

    # ------------------------------------------------------------ tracebacks
    def _traceback(self, i: int) -> tuple[_Event | None, int]:
        items = self.items
        n0, d0, t0, _ = items[i]
        header = _is_header(t0)
        base = d0 if header else max(0, d0 - 2)
        j = i + 1 if header else i
        frames: list[Frame] = []
        code_for: int | None = None  # index of the frame whose source line comes next
        frame_n = -1  # the line number of the last frame
        while j < len(items):
            n, d, t, _ = items[j]
            m = _is_frame(t)
            if m:
                frames.append(_frame(m))
                code_for, frame_n = len(frames) - 1, n
                j += 1
                continue
            if not frames:
                break
            # A frame's source line is indented under it; a paste that lost the indentation
            # still puts it right under its frame, and it is no exception line.
            bare_source = n == frame_n + 1 and not _exception_line(t)
            arrow = _ARROW.get().match(t) if t.startswith("-") else None
            if d > base + 1 or bare_source or arrow or t.startswith(_FRAME_EXTRAS):
                f = frames[-1]
                if arrow:  # IPython: the arrow marks the frame's line (7 prints no other)
                    line, code = f.line or int(arrow.group("n")), arrow.group("code").strip()
                    frames[-1] = Frame(f.file, line, f.function, f.package, f.origin, code)
                    code_for = None
                elif t[:1].isdigit():
                    pass  # IPython's numbered context lines around the arrow
                elif code_for is not None and f.line and set(t) - set("~^ "):
                    frames[-1] = Frame(f.file, f.line, f.function, f.package, f.origin, t)
                    code_for = None
                j += 1
                continue
            break
        named = _header_type(t0) if header else ""
        if j >= len(items) or _is_header(items[j][2]) or (not frames and not header):
            return self._cut(n0, t0, frames, named), j
        t = items[j][2]
        m = _EXC_AFTER.get().match(t)
        if m is None or not _exception_name_ok(m.group("type")):
            return self._cut(n0, t0, frames, named), j
        ev, more = self._exception(j, m)
        ev.frames = frames
        ev.truncated = not header and ev.wrapper == "" and not self._after_wrapper()
        return ev, j + 1 + more

    def _after_wrapper(self) -> bool:
        prev = self.events[-1] if self.events else None
        return prev is not None and prev.wrapper in _AFTER_WRAPPERS and not prev.report

    def _cut(self, n: int, text: str, frames: list[Frame], named: str = "") -> _Event | None:
        """A traceback with no exception line: the log was cut, or another process's output
        broke in. A failure only when nothing better is shown, unless its header named the
        exception (IPython's "KeyError    Traceback (most recent call last)")."""
        if named:
            return _Event(
                RootKind.EXCEPTION, n, text, exception=named, frames=frames, truncated=True
            )
        if not frames:
            return None
        return _Event(RootKind.EXCEPTION, n, text, frames=frames, truncated=True, report=True)

    def _exception(self, j: int, m: re.Match) -> tuple[_Event, int]:
        """The exception on items[j], and how many lines its message goes on over."""
        n, _, t, ln = self.items[j]
        ev = _Event(RootKind.EXCEPTION, n, t, exception=m.group("type"), held=ln)
        first = (m.group("msg") or "").strip()
        # "NotImplementedError" alone was raised with no message: Python prints one on the
        # lines after only after "Name: ", so the next line is the log's, not the message's.
        more = self._continuation(j) if m.group("msg") is not None else []
        if ln is not None and ln.block:
            # torchrun's summary follows: its title ("train.py FAILED") says it; the rest is read
            # as the summary it is (_summary).
            title = [b.strip() for b in ln.block.splitlines() if b.strip().endswith(" FAILED")]
            first, more = (title[0] if title else first), []
        ev.message = "\n".join([first, *more]).strip("\n") if more else first
        if len(ev.message) > MAX_MESSAGE:
            ev.message = ev.message[:MAX_MESSAGE]
        ev.wrapper = _wrapper_of(ev.exception, ev.message)
        if not ev.wrapper and ev.exception == "Exception":
            # torch < 1.8's mp.spawn raised a bare Exception("process 3 terminated with signal
            # SIGKILL"): the report ProcessExitedException makes now.
            said = self.rules.launcher("spawn", first)
            if said is not None and said.group("n2"):
                ev.wrapper, ev.report, ev.kind = "mp.spawn", True, RootKind.LAUNCHER
        _signal_in(ev, ev.message, self.rules)
        if ev.wrapper in ("torchrun", "subprocess") or ev.exception.endswith(
            ("ProcessExitedException", "SignalException")
        ):
            ev.report = ev.wrapper != ""
            ev.kind = (
                RootKind.SIGNAL if ev.exception.endswith("SignalException") else RootKind.LAUNCHER
            )
        ev.span = len(more)
        return ev, len(more)

    def _continuation(self, j: int) -> list[str]:
        """The lines an exception's message goes on over: the next lines in a row, up to a blank
        line, a traceback's own lines, another exception or a new log record."""
        items = self.items
        n, d0, _, ln0 = items[j]
        prefix0 = ln0.prefix.strip() if ln0 is not None else ""
        out: list[str] = []
        size = 0
        k = j + 1
        while k < len(items) and len(out) < MAX_MESSAGE_LINES:
            n2, d, t, ln = items[k]
            if n2 != n + 1 + len(out):
                break  # a blank line, or a line of the log that was not kept
            if (
                _is_header(t)
                or _is_frame(t)
                or t.startswith((_CAUSE, _CONTEXT, _IGNORED, "Exception raised from", "frame #"))
                or _MP_MARK.get().match(t)
                or (d <= d0 and _EXC_ALONE.get().match(t))
                or (d <= d0 and _shell_signal(t, self.rules))
                or (ln is not None and ln.prefix.strip() not in ("", prefix0))
            ):
                break
            out.append(t)
            size += len(t)
            if size > MAX_MESSAGE:
                break
            k += 1
        return out

    def _summary(self, ev: _Event, ln: Line) -> list[_Event]:
        """torchrun's ChildFailedError summary (torch/distributed/elastic/multiprocessing/
        errors/__init__.py, _MSG_FORMAT_TEMPLATE and _FAILURE_FORMAT_TEMPLATE): the Root Cause
        rank's traceback (from its error file) is the original, read as a traceback of its own;
        without one, its exit code says how the rank ended."""
        lines = ln.block.splitlines()
        self.skip_until = max(self.skip_until, ln.number + len(lines))
        at = next(
            (k for k, s in enumerate(lines) if "Root Cause (first observed failure)" in s), -1
        )
        if at < 0:
            return []
        exit_line: tuple[int, str] | None = None
        signal_line: tuple[int, str] | None = None
        found: list[_Event] = []
        for k in range(at + 1, len(lines)):
            s = lines[k].strip()
            if s.startswith("===="):
                break
            number = ln.number + 1 + k
            if s.startswith("traceback") and "Signal " in s and "received by PID" in s:
                # "traceback : Signal 9 (SIGKILL) received by PID 4367": says how it ended
                signal_line = (number, s)
            elif s.startswith("exitcode"):
                exit_line = (number, s)
                m = re.search(r":\s*(-?\d+)", s)
                if m:
                    ev.exit_code = int(m.group(1))
                    if ev.exit_code < 0:
                        ev.signal = self.rules.signals.get(-ev.exit_code, "")
            elif s.startswith("traceback") and _HEADER in s:
                items: list[Item] = [(number, 0, _HEADER + ":", None)]
                for k2 in range(k + 1, len(lines)):
                    raw = lines[k2]
                    if raw.strip().startswith("===="):
                        break
                    raw = raw[2:] if raw.startswith("  ") else raw  # the summary's own indent
                    body = raw.lstrip(" ")
                    if body.strip():
                        items.append((ln.number + 1 + k2, len(raw) - len(body), body.strip(), None))
                found = _Reader(items, self.source, self.rank, self.rules).read()
                break
        shown = signal_line or exit_line
        if shown is not None and not found:
            # No traceback: the rank died of a signal or exited; the summary's signal line (else
            # its exit line) says which.
            ev.number, ev.line = shown
        return found

    # ------------------------------------------------------------ lines that are failures
    def _line_event(self, i: int) -> _Event | None:
        n, _, t, _ = self.items[i]
        m = _EXC_ALONE.get().match(t)
        if m:
            return self._exception(i, m)[0]
        # The rules of failure-events.yaml in their order, each only where its cheap key test
        # says it can match: a long log hands thousands of lines here, and most are none of these.
        low = t.lower()
        R = self.rules
        for r in R.lines:
            m = R.read(r, t, low)
            if m is None:
                continue
            ev = getattr(self, "_on_" + r.id.replace("-", "_"))(r, m, i, n, t)
            if ev is _DECLINED:
                return None
            if ev is not None:
                return ev
        named = "Error" in t or "Exception" in t or "Interrupt" in t
        m = _MENTION.get().search(t) if named else None
        if m and not m.group("type").endswith("Warning"):
            # Named in passing: a sentence about it, or a traceback a paste flattened onto one
            # line. The whole line is what the log shows.
            msg = (m.group("msg") or "").strip().rstrip("`*_").rstrip()
            if msg.count('"') % 2:
                msg = msg.rstrip('"').rstrip()  # the quote the sentence put around it
            return _Event(
                RootKind.EXCEPTION, n, t, exception=m.group("type"), message=msg, mention=True
            )
        return None

    # ------------------------------------------------------------ one handler per line rule
    def _on_cxx_terminate(self, r: LineRule, m: re.Match, i: int, n: int, t: str) -> _Event:
        ev = _Event(RootKind.EXCEPTION, n, t, exception=m.group("type"))
        what = self.rules.by_id["cxx-what"]
        for k in range(i + 1, min(i + 4, len(self.items))):
            text = self.items[k][2]
            w = self.rules.read(what, text, text.lower())
            if w:
                ev.message = w.group("msg").strip()
                ev.line, ev.number = text, self.items[k][0]
                break
        return ev

    def _on_fatal_python(self, r: LineRule, m: re.Match, i: int, n: int, t: str) -> _Event:
        what = m.group("what").strip()
        sig = self.rules.words.get(what.lower(), "SIGABRT")  # Python's fatal errors abort()
        ev = _Event(_kind(r), n, t, message=what, signal=sig, ending=r.role == "ending")
        ev.frames, ev.span = self._faulthandler(i)
        return ev

    def _on_shell_signal(self, r: LineRule, m: re.Match, i: int, n: int, t: str):
        word = m.group("sig").lower()
        if word in ("terminated", "aborted") and m.group("cmd") is None and len(t) > 40:
            return _DECLINED  # a sentence that ends in the word, not a shell's report
        sig = self.rules.words[word]
        return _Event(_kind(r), n, t, signal=sig, message=t, ending=r.role == "ending")

    def _on_kernel(self, r: LineRule, m: re.Match, i: int, n: int, t: str) -> _Event:
        return _Event(_kind(r), n, t, message=t)

    def _on_slurm_cancel(self, r: LineRule, m: re.Match, i: int, n: int, t: str) -> _Event:
        why = (m.group("why") or "").strip()
        said = f"cancelled{' due to ' + why.lower() if why else ''}"
        return _Event(_kind(r), n, t, message=said)

    def _on_compiler_error(self, r: LineRule, m: re.Match, i: int, n: int, t: str):
        if ": " not in t:
            return None
        return _Event(_kind(r), n, t, message=m.group("msg").strip())

    def _on_build_stop(self, r: LineRule, m: re.Match, i: int, n: int, t: str) -> _Event:
        ev = _Event(_kind(r), n, t, message=t)
        code = m.group("code") or m.group("status")
        if code is not None:
            _exit(ev, int(code), self.rules)
        return ev

    def _on_cant_open(self, r: LineRule, m: re.Match, i: int, n: int, t: str) -> _Event:
        ev = _Event(_kind(r), n, t, message=t)
        _exit(ev, 2, self.rules)
        return ev

    def _report(self, r: LineRule, n: int, t: str) -> _Event:
        return _Event(_kind(r), n, t, wrapper=r.launcher, report=r.role == "report", message=t)

    def _on_torchrun_failed(self, r: LineRule, m: re.Match, i: int, n: int, t: str) -> _Event:
        ev = self._report(r, n, t)
        _exit(ev, int(m.group("code")), self.rules)
        return ev

    def _on_srun(self, r: LineRule, m: re.Match, i: int, n: int, t: str) -> _Event:
        ev = self._report(r, n, t)
        what = m.group("what")
        word = what.split(" (")[0].lower()
        if word in self.rules.words:
            ev.signal = self.rules.words[word]
        else:
            c = self.rules.form("srun_exit", what)
            if c:
                _exit(ev, int(c.group("code")), self.rules)
        return ev

    def _on_deepspeed_exit(self, r: LineRule, m: re.Match, i: int, n: int, t: str):
        if int(m.group("code")) == 0:
            return None
        ev = self._report(r, n, t)
        _exit(ev, int(m.group("code")), self.rules)
        return ev

    def _on_exit_status(self, r: LineRule, m: re.Match, i: int, n: int, t: str):
        if int(m.group("code")) == 0:
            return None
        ev = _Event(_kind(r), n, t, message=t, report=r.role == "report", ending=True)
        if m.group("sig"):
            ev.kind = RootKind.SIGNAL
            ev.signal = self.rules.signals.get(int(m.group("sig")), "")
            ev.report = False
        _exit(ev, int(m.group("code")), self.rules, shell=True)
        return ev

    def _faulthandler(self, i: int) -> tuple[list[Frame], int]:
        """faulthandler's dump after a fatal error: the current thread's frames (most recent
        first, returned outermost first as a traceback lists them), and how many lines the dump
        takes (every thread's frames: none of them is a failure of its own)."""
        frames: list[Frame] = []
        current = False
        span = 0
        for k, (_, _, t, _) in enumerate(self.items[i + 1 : i + 200], 1):
            if t.startswith(("Current thread", "Thread 0x")) and "most recent call first" in t:
                current = t.startswith("Current thread")
                span = k
                continue
            m = _is_frame(t)
            if m is None:
                if span:
                    break
                continue
            span = k
            if current:
                frames.append(_frame(m))
        frames.reverse()
        return frames, span


_DECLINED = object()  # a handler's word that the line is no failure, and no later rule may read it


def _kind(r: LineRule) -> RootKind:
    return RootKind(r.kind)


def _shell_signal(t: str, rules: _Rules) -> bool:
    """A shell's report of how a process ended ("Killed", "bash: line 1: 1684 Killed  python3
    x.py"): a line of its own, never a line of an exception's message."""
    return rules.read(rules.by_id["shell-signal"], t, t.lower()) is not None


def _exit(ev: _Event, code: int, rules: _Rules, shell: bool = False) -> None:
    ev.exit_code = code
    if code < 0:
        ev.signal = ev.signal or rules.signals.get(-code, "")
    elif shell and code > 128 and not ev.signal:
        ev.signal = rules.signals.get(code - 128, "")


def _signal_in(ev: _Event, message: str, rules: _Rules) -> None:
    low = message.lower()
    if "signal" not in low and "exit" not in low:
        return
    m = rules.form("message_signal", message)
    if m:
        if m.group("n") or m.group("n2"):
            ev.signal = rules.signals.get(int(m.group("n") or m.group("n2")), "")
        elif m.group("name") or m.group("sname"):
            ev.signal = m.group("name") or m.group("sname")
        elif m.group("text"):
            ev.signal = rules.words.get(m.group("text").strip().lower(), "")
    m = rules.form("message_exit", message)
    if m:
        _exit(ev, int(m.group("code")), rules)


def rule_of(text: str, events: FailureEvents) -> str | None:
    """The id of the line rule that reads a line as a failure (kb lint checks each rule's
    examples with it), or None."""
    R = _rules(events)
    low = text.lower()
    for r in events.lines:
        m = R.read(r, text, low)
        if m is not None:
            return r.id
    return None


# ---------------------------------------------------------------- choosing the root
def find_root(
    s: Scan, consequence: Consequence | None = None, rules: FailureEvents | None = None
) -> RootFailure | None:
    """The root failure of a scanned log, or None when it shows no failure. `consequence`
    gives the class of a line that is a consequence of another failure ("timeout", "sigterm":
    the classes kb.job.consequences names; the engine reads them from the signatures that
    matched the line), or None. `rules`: the engine's failure-events.yaml (the bundled one when
    None)."""
    if not s.lines or s.binary:
        return None
    R = _rules(rules)
    events: list[_Event] = []
    for (source, rank), items in _streams(s.lines).items():
        events += _Reader(items, source, rank, R).read()
    events = [e for e in events if not e.ignored]
    if not events:
        return None
    events.sort(key=lambda e: (e.source, e.number))
    if consequence is not None:
        for e in events:
            e.consequence = consequence(e.line) or ""
    # Lines the engine calls consequences (a watchdog's timeout) are failures a later ending
    # follows from, whether or not the reader made an event of them.
    first_consequence: dict[int, int] = {}
    if consequence is not None:
        for ln in s.lines:
            if ln.source not in first_consequence and consequence(ln.text):
                first_consequence[ln.source] = ln.number
    _roles(events, first_consequence, R)
    root = min(events, key=lambda e: (_rank(e), e.source, e.number))
    _to_kernel_assertion(root, s.lines)
    chain = _chain(root, events)
    in_chain = {id(e) for e in chain} | {id(root)}
    seen = {root.key}
    others = 0
    for e in events:
        if id(e) in in_chain or e.key in seen or e.wrapper or e.mention:
            continue
        seen.add(e.key)
        others += 1
    followers: tuple[tuple[int, int], ...] = ()
    if root.role == "initiating" and _rank(root) == 1:
        followers = tuple(
            sorted(
                {
                    (e.source, e.number)
                    for e in events
                    if e is not root
                    and e.role in ("report", "consequence", "teardown")
                    and e.number != root.number
                }
            )
        )
    return _record(root, chain, others, followers)


def _roles(events: list[_Event], first_consequence: dict[int, int], R: _Rules) -> None:
    """Each event's role, in input order: the envelope a wrapper prints its original in
    (mp.spawn, a DataLoader worker, Ray); a launcher's or wrapper's report of another failure;
    a consequence (the engine said its line is one: a timeout waiting for a peer...); a
    teardown: how the process ended (the shell's `Killed`, an exit status, Python's fatal error
    after the watchdog's abort) printed after another
    failure of the same input, which it followed from (the OOM killer is confirmed only by the
    kernel's own line, an initiating event); else initiating, a failure of its own."""
    failed: set[int] = set()
    for e in events:
        e.stopped = e.signal in R.stopped
        if e.wrapper in _AFTER_WRAPPERS and not e.report:
            e.role = "wrapper"  # the envelope its original is printed in: no failure of its own
        elif e.wrapper or e.report:
            e.role = "report"
        elif e.consequence:
            e.role = "consequence"
        elif e.ending and (
            e.source in failed or first_consequence.get(e.source, e.number) < e.number
        ):
            e.role = "teardown"
        else:
            e.role = "initiating"
        if not e.mention and not e.logged:
            failed.add(e.source)
    # A launcher's report of a signal the process's own teardown shows (the watchdog's abort
    # after a timeout) reports that teardown, not a death of its own.
    torn = {(e.source, e.signal) for e in events if e.role == "teardown" and e.signal}
    for e in events:
        if e.role == "report" and (e.source, e.signal) in torn:
            e.torn = True


_KERNEL_ASSERT = _Lazy(r"Assertion [`'].+[`'] failed")


def _to_kernel_assertion(root: _Event, lines: Iterable[Line]) -> None:
    """A kernel's assert() ("Loss.cu:245: ... Assertion `t >= 0 && t < n_classes` failed.") is
    the failure every later CUDA error of its process follows from: the "device-side assert
    triggered" it surfaces as (the device's printf is flushed at the next synchronisation, often
    after the traceback), or a cascade through another library (cuDNN's or cuBLAS's error at its
    next call). Its line names the file and the condition, so it is the root's line: wherever it
    was printed for a device-side assert, printed before the root's line for any other CUDA
    error of the same stream."""
    if root.kind is not RootKind.EXCEPTION:
        return
    said = root.message or root.line
    assert_said = "device-side assert" in said
    if not assert_said and not _CUDA_WORDS.get().search(said):
        return
    for ln in lines:
        if (ln.source, ln.rank) != (root.source, root.rank) or "Assertion" not in ln.text:
            continue
        if ln.number == root.number:
            continue  # the exception's own line, joined with the message lines after it
        if not assert_said and ln.number > root.number:
            break
        if _KERNEL_ASSERT.get().search(ln.text):
            root.line, root.number = ln.text, ln.number
            return


_CUDA_WORDS = _Lazy(
    r"\bCUDA\b|\bcu(?:DNN|BLAS|FFT|SOLVER|SPARSE)\b|CUDNN_STATUS|CUBLAS_STATUS", re.I
)


def _rank(e: _Event) -> int:
    """Which failures can be the root, best first: a failure of its own; a launcher's report of
    a death by a signal nobody else sent (SIGKILL, SIGSEGV: the process's own end, whatever its
    peers then printed); a consequence of another failure (when nothing else failed); a wrapper
    or a report whose original is not shown; an exception named in passing ("...and then I get
    KeyError: 'x'"); a traceback cut before its exception line."""
    if e.mention or e.logged:
        return 5
    if e.truncated and e.report:
        return 6
    if e.wrapper or e.report:
        return 2 if e.signal and not e.stopped and not e.torn else 4
    return 3 if e.role in ("consequence", "teardown") else 1


def _chain(root: _Event, events: list[_Event]) -> list[_Event]:
    """The events tied to the root: the rest of its group (events each linked to the one before
    it, in its stream), and the launchers' reports after it."""
    stream = [e for e in events if (e.source, e.rank) == (root.source, root.rank)]
    i = stream.index(root)
    lo = i
    while lo > 0 and stream[lo].link:
        lo -= 1
    hi = i
    while hi + 1 < len(stream) and stream[hi + 1].link:
        hi += 1
    out = [e for e in stream[lo : hi + 1] if e is not root and e.key != root.key]
    for e in events:
        # Launchers' reports of the same source: printed after the failure, or (torchrun's agent
        # line before its ChildFailedError summary) before the copy of it that they carry.
        report = e.source == root.source and (e.wrapper or e.report) and not e.truncated
        if report and e not in out and e is not root:
            out.append(e)
    out.sort(key=lambda e: e.number)
    return out[:MAX_CHAIN]


def _record(
    root: _Event, chain: list[_Event], others: int, followers: tuple[tuple[int, int], ...]
) -> RootFailure:
    frames = tuple(root.frames)
    raising = frames[-1] if frames else None
    user = next((f for f in reversed(frames) if f.origin is Origin.USER), None)
    links = []
    for e in chain:
        if e.wrapper or e.report:
            rel = Relation.WRAPPER
        elif e.link == "context":
            rel = Relation.CONTEXT
        else:
            rel = Relation.CAUSE
        links.append(
            ChainLink(
                rel,
                e.exception,
                e.line,
                e.number,
                e.message.split("\n", 1)[0] if e.message else "",
                e.wrapper,
            )
        )
    return RootFailure(
        kind=root.kind,
        line=root.line,
        line_number=root.number,
        exception=root.exception,
        message=root.message,
        frame=raising,
        raised_in=raising.origin if raising else None,
        package=raising.package if raising else "",
        user_frame=user,
        frames=frames,
        chain=tuple(links),
        signal=root.signal,
        exit_code=root.exit_code,
        rank=root.rank,
        prefix=root.prefix,
        source=root.source,
        truncated=root.truncated,
        consequence=root.consequence,
        others=others,
        role=root.role if _rank(root) != 4 else "report",
        followers=followers,
    )


__all__ = ["find_root", "package_of"]
