"""Running one program in isolation, because a repro is meant to crash, hang or fill the GPU.

Each program runs in a fresh interpreter (torch lives only there), in its own process group and
temporary folder, with an explicit environment, a timeout and capped output. A timeout or a
cancel kills the whole group (SIGTERM, then SIGKILL after a grace period), and the group is
killed again when the program ends, so nothing it started outlives it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping

from kb.model.record import record

TYPE_CHECKING = False  # typing stays unimported at run time (kb lookup's cold start)
if TYPE_CHECKING:
    from typing import IO


DEFAULT_TIMEOUT = 120.0
KILL_GRACE = 3.0  # seconds between SIGTERM and SIGKILL to a process group
MAX_OUTPUT = 256 << 10  # characters of a program's output kept...
HEAD_KEEP = 32 << 10  # ...of which the first ones (the root error is early), the rest from the end
MAX_LINE = 16 << 10  # a longer line is read in pieces

# Passed through from kb's own environment when set; everything else a repro sees is explicit.
PASS_EXACT = (
    "PATH",
    "HOME",
    "LANG",
    "TMPDIR",
    "CUDA_VISIBLE_DEVICES",
    "LD_LIBRARY_PATH",
    "PYTHONPATH",
)
PASS_PREFIX = ("NCCL_", "TORCH_", "NVSHMEM_")


@record
class ProgramResult:
    rc: int | None  # None: never started (see error)
    output: str  # stdout and stderr interleaved, as a terminal shows them; capped
    timed_out: bool = False
    cancelled: bool = False
    duration: float = 0.0
    error: str = ""
    cut: int = 0  # characters dropped from the middle of the output


def child_env(extra: Mapping[str, object] | None = None) -> dict[str, str]:
    """The whole environment a repro gets: a minimal base, chosen pass-throughs, its own env."""
    env = {k: v for k, v in os.environ.items() if k in PASS_EXACT or k.startswith(PASS_PREFIX)}
    env.setdefault("PATH", os.defpath)
    env.setdefault("LANG", "C.UTF-8")
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONIOENCODING"] = "utf-8:backslashreplace"
    for k, v in (extra or {}).items():
        env[str(k)] = str(v)
    return env


class _Output:
    """The first HEAD_KEEP characters and the last ones up to MAX_OUTPUT; the middle is counted."""

    def __init__(self, limit: int = MAX_OUTPUT, head: int = HEAD_KEEP):
        self.limit, self.head_limit = limit, head
        self.head: list[str] = []
        self.head_size = 0
        self.tail: deque[str] = deque()
        self.tail_size = 0
        self.cut = 0
        self.lock = threading.Lock()

    def add(self, line: str) -> None:
        n = len(line) + 1
        with self.lock:
            if not self.tail and self.head_size + n <= self.head_limit:
                self.head.append(line)
                self.head_size += n
                return
            self.tail.append(line)
            self.tail_size += n
            while self.tail_size > self.limit - self.head_size and len(self.tail) > 1:
                dropped = self.tail.popleft()
                self.tail_size -= len(dropped) + 1
                self.cut += len(dropped) + 1

    def text(self) -> str:
        with self.lock:
            mid = [f"[... kb verify cut {self.cut} characters here ...]"] if self.cut else []
            return "\n".join(self.head + mid + list(self.tail))


def _pump(stream: IO[bytes], out: _Output, on_line: Callable[[str], None] | None) -> None:
    try:
        for raw in iter(lambda: stream.readline(MAX_LINE), b""):
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            out.add(line)
            if on_line is not None:
                try:
                    on_line(line)
                except Exception:
                    pass
    except (OSError, ValueError):
        pass
    finally:
        try:
            stream.close()
        except OSError:
            pass


def _exited(proc: subprocess.Popen[bytes]) -> bool:
    """Has the child exited? Without reaping it: while it is an unreaped zombie its process
    group id cannot be reused, so killing the group afterwards can hit nobody else."""
    if proc.returncode is not None:
        return True
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True
    except AttributeError:  # pragma: no cover - no waitid on this platform
        return proc.poll() is not None


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _stop(proc: subprocess.Popen[bytes], grace: float) -> None:
    """SIGTERM to the group; SIGKILL follows in run_program's cleanup after the grace period."""
    _signal_group(proc.pid, signal.SIGTERM)
    end = time.monotonic() + grace
    while not _exited(proc) and time.monotonic() < end:
        time.sleep(0.02)


def run_program(
    code: str,
    env: Mapping[str, object] | None,
    timeout: float,
    python: str = sys.executable,
    on_line: Callable[[str], None] | None = None,
    cancel: threading.Event | None = None,
) -> ProgramResult:
    """Run `code` as a script in a fresh interpreter, isolated (see the module doc).

    env is the program's own variables, added to the explicit base (child_env). on_line gets each
    output line as it arrives, from a reader thread. Setting `cancel` stops the program like a
    timeout does. Never raises for the program's sake; an interrupt of the caller (Ctrl-C) kills
    the group before it propagates.
    """
    tmp = tempfile.mkdtemp(prefix="kb-verify-")
    try:
        script = os.path.join(tmp, "repro.py")
        with open(script, "w", encoding="utf-8") as fh:
            fh.write(code)
        t0 = time.monotonic()
        try:
            proc = subprocess.Popen(
                [python, script],
                cwd=tmp,
                env=child_env(env),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as e:
            return ProgramResult(None, "", error=f"cannot start {python}: {e.strerror or e}")
        assert proc.stdout is not None  # stdout=PIPE
        out = _Output()
        reader = threading.Thread(target=_pump, args=(proc.stdout, out, on_line), daemon=True)
        reader.start()
        timed_out = cancelled = finished = False
        deadline = t0 + timeout
        try:
            while not _exited(proc):
                if cancel is not None and cancel.is_set():
                    cancelled = True
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    timed_out = True
                    break
                step = min(0.05, left)
                if cancel is not None:
                    cancel.wait(step)
                else:
                    time.sleep(step)
            finished = True
        finally:
            try:
                if timed_out or cancelled or not finished:
                    _stop(proc, KILL_GRACE)
            finally:  # a second Ctrl-C during the grace period still ends the group
                # Always, also after a clean exit: whatever the program left running in its
                # group (a daemonised helper, a stuck worker) dies with it.
                _signal_group(proc.pid, signal.SIGKILL)
                rc = proc.wait()
            duration = time.monotonic() - t0
            reader.join(timeout=5.0)
        detail = ""
        if reader.is_alive():  # something escaped the group (setsid) and holds the pipe open
            detail = "output pipe still held open by a process outside the repro's group"
        return ProgramResult(rc, out.text(), timed_out, cancelled, duration, detail, out.cut)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
