"""Run a command with its output streamed to this terminal unchanged and copied to a file.

The copy costs one read and two writes per chunk of up to 1 MiB: no per-line work in Python, so
the command runs as fast as it would alone. Where this process's stdout / stderr is a terminal,
the command gets a pseudo-terminal of the same size for that stream, so it colours, buffers and
draws progress bars exactly as it would without kb in between; elsewhere (CI, a pipe, a file) it
gets a pipe, as it would. When stdout and stderr are one file (`2>&1`, or both on one terminal)
the command gets one pipe (or one pseudo-terminal) for both, so what it prints reaches that file
in the order it printed it. Its stdin is this process's.

What kb does never changes what the command does or returns:
  - its output goes to this process's stdout / stderr first, and only then to the file; when the
    file cannot be written (a full disk), kb says so once and keeps passing the output through;
  - the exit status is the command's; a death by signal N is 128 + N (as shells say), and only
    a real signal is named as one (Outcome.signal);
  - the command runs in its own process group; SIGINT (Ctrl-C), SIGTERM, SIGHUP, SIGQUIT,
    SIGUSR1 and SIGUSR2 sent to kb are forwarded to that whole group (torchrun and its workers,
    a shell pipeline), and kb keeps copying until the command exits. After the first SIGINT,
    SIGTERM, SIGHUP or SIGQUIT the group has `kill_after` seconds to exit before kb sends it
    SIGKILL, and a third such signal sends SIGKILL at once: a command that ignores SIGTERM
    cannot keep kb waiting forever;
  - the command dies with kb: on Linux it gets SIGTERM when kb dies, whatever kills kb
    (prctl PR_SET_PDEATHSIG, set in the child before exec), and a small watcher process left
    behind by kb (it holds one end of a pipe, and sees kb die as that pipe closing) sends the
    whole group SIGTERM, then SIGKILL after `kill_after` seconds: a launcher's workers do not
    outlive a `kill -9` of kb.

A command in its own process group is not the terminal's foreground job: one that reads from the
terminal itself is stopped (SIGTTIN); give such input through a file or a pipe. kb says so as
soon as a process of the command is stopped that way (it would otherwise wait in silence), and
an ending signal (Ctrl-C) is followed by SIGCONT, so that a stopped command ends when asked.
"""

from __future__ import annotations

import errno
import os
import selectors
import signal
import subprocess
import sys
import time

from kb.model.record import field, record

CHUNK = 1 << 20
DRAIN_AFTER_EXIT_S = 3.0  # a worker the command left behind may hold its output open
KILL_AFTER_S = 30.0  # Slurm's default KillWait between SIGTERM and SIGKILL
FORWARDED = (
    signal.SIGINT,
    signal.SIGTERM,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
)
# Signals that ask the command to end (SIGUSR1/2 ask a job to checkpoint, and are only passed on).
ENDING = frozenset((signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT))
ENDING_BEFORE_KILL = 3  # the third ending signal sends SIGKILL at once
PR_SET_PDEATHSIG = 1  # linux/prctl.h


@record
class Outcome:
    returncode: int  # the command's exit status; a death by signal N is 128 + N, as shells say
    raw: int  # Popen's: negative for a signal
    wall_s: float
    forwarded: list[str] = field(default_factory=list)  # signals kb passed on
    bytes: int = 0  # bytes the command printed
    kept: int = 0  # bytes of them written to the log file
    signal: str = ""  # the signal that ended the command ("SIGKILL"); "" when it exited
    killed: bool = False  # kb sent the group SIGKILL (the grace period ran out, or a 3rd signal)
    log_error: str = ""  # why the log file stopped keeping the output ("" when it kept it all)
    # bytes of output the command had printed when the first SIGINT (Ctrl-C) reached kb: what
    # it printed before the interrupt; -1 when no SIGINT came
    interrupted_at: int = -1

    @property
    def exit_code(self) -> int | None:
        """The status the command exited with; None when a signal ended it."""
        return None if self.raw < 0 else self.raw


def same_file(a: int, b: int) -> bool:
    """Whether two of this process's descriptors lead to one file, pipe or terminal (`2>&1`)."""
    try:
        sa, sb = os.fstat(a), os.fstat(b)
    except OSError:
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def _pty_for(fd: int) -> tuple[int, int] | None:
    """(master, slave) of a pseudo-terminal that looks like the terminal on fd, or None."""
    try:
        if not os.isatty(fd):
            return None
        import fcntl
        import termios

        master, slave = os.openpty()
        attrs = termios.tcgetattr(slave)
        attrs[1] &= ~termios.OPOST  # bytes pass as written: "\n" stays "\n" (our terminal adds \r)
        termios.tcsetattr(slave, termios.TCSANOW, attrs)
        try:
            fcntl.ioctl(slave, termios.TIOCSWINSZ, fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\0" * 8))
        except OSError:
            pass
        return master, slave
    except (OSError, ImportError):
        return None


def _grow(fd: int) -> None:
    """A 1 MiB pipe (Linux; the default is 64 KiB): fewer, larger reads for a chatty command."""
    try:
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), CHUNK)
    except (OSError, ImportError):
        pass


def _write_all(fd: int, data: bytes) -> bool:
    """Write everything; False once the reader is gone or the file cannot take more (the
    command's output still goes to the log: it must never block on a closed terminal, nor stop
    on a full disk where our stdout was redirected)."""
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except BlockingIOError:
            time.sleep(0.001)
            continue
        except OSError:  # EPIPE, EBADF, EIO (a closed pty), ENOSPC...
            return False
        view = view[n:]
    return True


class _Keep:
    """The log file, kept as far as the disk allows: the first write that fails (a full disk, a
    quota) closes it, and the reason is kept and said once. Unbuffered (one write per chunk
    read), so nothing fails late in a flush."""

    def __init__(self, path: str | None, warn):
        self.path = path
        self.warn = warn
        self.kept = 0
        self.error = ""
        self.fd: int | None = None
        if path is None:
            return
        try:
            self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        except OSError as e:
            self._stop(e)

    def write(self, data: bytes) -> None:
        if self.fd is None:
            return
        view = memoryview(data)
        while view:
            try:
                n = os.write(self.fd, view)
            except OSError as e:
                self._stop(e)
                return
            self.kept += n
            view = view[n:]

    def _stop(self, e: OSError) -> None:
        self.error = e.strerror or str(e)
        self.close()
        self.warn(
            f"kb: cannot keep the command's output in {self.path} ({self.error}); the command "
            f"runs on and its output still reaches this terminal (kept: {self.kept:,} bytes)"
        )

    def close(self) -> None:
        if self.fd is not None:
            try:
                os.close(self.fd)
            except OSError as e:  # a delayed write error (NFS): the file is as far as it got
                if not self.error:
                    self.error = e.strerror or str(e)
            self.fd = None


def _stopped_in_group(pgid: int) -> list[int]:
    """The processes of a process group that are stopped (state T), on Linux (/proc); [] where
    that cannot be told."""
    out: list[int] = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        # after the name: state, ppid, pgrp
        if len(fields) > 2 and fields[0] == b"T" and int(fields[2]) == pgid:
            out.append(int(name))
    return out


def _reads_terminal(argv: list[str], pid: int) -> str:
    return (
        f"kb: {os.path.basename(argv[0])} (pid {pid}) is stopped, waiting on the terminal: it "
        "reads from it, and a command kb runs is in a process group of its own, which the "
        "terminal stops when it reads (SIGTTIN). Give it its input from a file or a pipe "
        "(kb run -- ... < input), or run it without kb; Ctrl-C ends it."
    )


def _pending(fd: int) -> int:
    """Bytes waiting to be read from a pipe or a pseudo-terminal's master (0 where unknown)."""
    import struct

    try:
        import fcntl
        import termios

        return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0" * 4))[0]
    except (OSError, ImportError, AttributeError, struct.error):
        return 0


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def _say(msg: str) -> None:
    try:
        sys.stderr.write(msg + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _child_setup():
    """What the child runs between fork and exec (Linux): its own process group (Python < 3.11;
    3.11 does it itself) and SIGTERM when kb dies. None where prctl is not to be had."""
    setpgrp = sys.version_info < (3, 11)
    prctl = None
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            prctl = ctypes.CDLL(None, use_errno=True).prctl
        except (OSError, AttributeError):
            prctl = None
    if prctl is None and not setpgrp:
        return None
    parent = os.getpid()

    def setup() -> None:
        if setpgrp:
            os.setpgrp()
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
            if os.getppid() != parent:  # kb died before the line above: nobody will signal
                os._exit(128 + int(signal.SIGTERM))

    return setup


def _watch(pgid: int, kill_after: float) -> tuple[int, int] | None:
    """Fork the watcher: (its pid, the pipe end kb holds), or None where fork is not available.
    The watcher waits for that pipe to close; closed without a word, kb is gone: it ends the
    command's group (SIGTERM, then SIGKILL after kill_after seconds) and exits."""
    if not hasattr(os, "fork"):
        return None
    r, w = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        return None
    if pid:
        os.close(r)
        return pid, w
    # The watcher: nothing but system calls, then _exit (no Python clean-up of kb's state).
    try:
        for s in FORWARDED:  # Ctrl-C on kb's terminal reaches kb's group, this process too
            signal.signal(s, signal.SIG_IGN)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):  # hold no one's terminal or pipe open
            os.dup2(null, fd)
        os.closerange(3, r)
        os.closerange(r + 1, 1 << 16)
        said = os.read(r, 1)
        if said:
            os._exit(0)
        os.killpg(pgid, signal.SIGTERM)
        deadline = time.monotonic() + kill_after
        while time.monotonic() < deadline:
            time.sleep(0.1)
            os.killpg(pgid, 0)
        os.killpg(pgid, signal.SIGKILL)
    except BaseException:  # the group is gone (ProcessLookupError), or anything else
        pass
    os._exit(0)


def run(
    argv: list[str],
    env: dict[str, str],
    log_path: str | None,
    *,
    use_pty: bool = True,
    kill_after: float = KILL_AFTER_S,
    warn=_say,
) -> Outcome:
    """Run argv; copy its stdout to ours, its stderr to ours, both to log_path (in the order the
    chunks arrived; None: no log). Raises OSError when the command cannot be started."""
    merged = same_file(1, 2)
    ends: dict[int, tuple[int, int]] = {}  # our fd -> (read end, child end)
    for ours in (1,) if merged else (1, 2):
        pty = _pty_for(ours) if use_pty else None
        if pty is None:
            r, w = os.pipe()
            _grow(r)
            pty = (r, w)
        ends[ours] = pty
    out_w = ends[1][1]
    err_w = ends[1][1] if merged else ends[2][1]
    setup = _child_setup()
    kw: dict = {"preexec_fn": setup} if setup is not None else {}
    if sys.version_info >= (3, 11):
        kw["process_group"] = 0
    start = time.monotonic()
    try:
        child = subprocess.Popen(argv, env=env, stdout=out_w, stderr=err_w, close_fds=True, **kw)
    except BaseException:
        for r, w in ends.values():
            os.close(r)
            os.close(w)
        raise
    for _, w in ends.values():
        os.close(w)
    watcher = _watch(child.pid, kill_after)
    forwarded: list[str] = []
    ending: list[float] = []  # when each ending signal came
    killed = False

    def kill_group() -> None:
        nonlocal killed
        killed = True
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    interrupted_at = -1

    def forward(signum, frame):
        nonlocal interrupted_at
        forwarded.append(signal.Signals(signum).name)
        if signum == signal.SIGINT and interrupted_at < 0:
            # what was printed before the interrupt: copied so far, and what waits in the pipes
            interrupted_at = total + sum(_pending(r) for r, _ in ends.values())
        if signum in ENDING:
            ending.append(time.monotonic())
            if len(ending) >= ENDING_BEFORE_KILL:
                kill_group()
                return
        try:
            os.killpg(child.pid, signum)
            if signum in ENDING:
                os.killpg(child.pid, signal.SIGCONT)  # a stopped command ends too
        except (ProcessLookupError, PermissionError):
            pass

    def overdue() -> bool:
        return bool(ending) and not killed and time.monotonic() - ending[0] > kill_after

    total = 0
    previous = {}
    for sig in FORWARDED:
        try:
            previous[sig] = signal.signal(sig, forward)
        except (OSError, ValueError):  # not the main thread, or a signal this OS lacks
            pass
    sel = selectors.DefaultSelector()
    alive = dict.fromkeys(ends, True)
    keep = _Keep(log_path, warn)
    try:
        for ours, (r, _) in ends.items():
            sel.register(r, selectors.EVENT_READ, ours)
        exited_at = None
        # A command reading the terminal is stopped by it (SIGTTIN): said once, not waited on
        # in silence. Looked for only where stdin is a terminal, once a second.
        watch_tty = _isatty(0)
        looked_at = time.monotonic()
        said: set[int] = set()
        while sel.get_map():
            if exited_at is None and child.poll() is not None:
                exited_at = time.monotonic()
            if watch_tty and exited_at is None and time.monotonic() - looked_at >= 1.0:
                looked_at = time.monotonic()
                for pid in _stopped_in_group(child.pid):
                    if pid not in said:
                        said.add(pid)
                        warn(_reads_terminal(argv, pid))
            if exited_at is not None and time.monotonic() - exited_at > DRAIN_AFTER_EXIT_S:
                break
            if overdue():
                kill_group()
            for key, _ in sel.select(timeout=0.2):
                try:
                    data = os.read(key.fd, CHUNK)
                except OSError as e:
                    if e.errno != errno.EIO:  # EIO: the pty's last writer closed it
                        raise
                    data = b""
                if not data:
                    sel.unregister(key.fd)
                    continue
                total += len(data)
                # The terminal first: the person (or CI) watching the job comes before the copy.
                if alive[key.data]:
                    alive[key.data] = _write_all(key.data, data)
                keep.write(data)
        while True:  # its output is closed; the command may still be running
            try:
                raw = child.wait(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                if overdue():
                    kill_group()
    finally:
        keep.close()
        sel.close()
        for r, _ in ends.values():
            try:
                os.close(r)
            except OSError:
                pass
        for sig, h in previous.items():
            signal.signal(sig, h)
        if watcher is not None:
            wpid, wfd = watcher
            try:
                os.write(wfd, b".")  # all is well: the watcher exits without a signal
            except OSError:
                pass
            os.close(wfd)
            try:
                os.waitpid(wpid, 0)
            except ChildProcessError:
                pass
    rc = raw if raw >= 0 else 128 - raw
    name = ""
    if raw < 0:
        try:
            name = signal.Signals(-raw).name
        except ValueError:
            name = f"signal {-raw}"
    return Outcome(
        rc,
        raw,
        time.monotonic() - start,
        forwarded,
        total,
        kept=keep.kept,
        signal=name,
        killed=killed,
        log_error=keep.error,
        interrupted_at=interrupted_at,
    )
