"""Run a command with its output streamed to this terminal unchanged and copied to a file.

The copy costs one read and two writes per chunk of up to 1 MiB: no per-line work in Python, so
the command runs as fast as it would alone. Where this process's stdout / stderr is a terminal,
the command gets a pseudo-terminal of the same size for that stream, so it colours, buffers and
draws progress bars exactly as it would without kb in between; elsewhere (CI, a pipe, a file) it
gets a pipe, as it would. Its stdin is this process's.

The command runs in its own process group; SIGINT (Ctrl-C), SIGTERM, SIGHUP, SIGQUIT, SIGUSR1
and SIGUSR2 sent to kb are forwarded to that whole group (torchrun and its workers, a shell
pipeline), and kb keeps copying until the command exits. A command in its own process group is
not the terminal's foreground job: one that reads from the terminal itself is stopped (SIGTTIN);
give such input through a file or a pipe.
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
FORWARDED = (
    signal.SIGINT,
    signal.SIGTERM,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
)


@record
class Outcome:
    returncode: int  # the command's exit status; a death by signal N is 128 + N, as shells say
    raw: int  # Popen's: negative for a signal
    wall_s: float
    forwarded: list[str] = field(default_factory=list)  # signals kb passed on
    bytes: int = 0


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
    """Write everything; False once the reader is gone (the command's output still goes to the
    file: it must never block on a closed terminal)."""
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except BlockingIOError:
            time.sleep(0.001)
            continue
        except OSError as e:
            if e.errno in (errno.EPIPE, errno.EBADF, errno.EIO):
                return False
            raise
        view = view[n:]
    return True


def run(argv: list[str], env: dict[str, str], log_path: str, *, use_pty: bool = True) -> Outcome:
    """Run argv; copy its stdout to ours, its stderr to ours, both to log_path (in the order the
    chunks arrived). Raises OSError when the command cannot be started."""
    ends: dict[int, tuple[int, int]] = {}  # our fd -> (read end, child end)
    for ours in (1, 2):
        pty = _pty_for(ours) if use_pty else None
        if pty is None:
            r, w = os.pipe()
            _grow(r)
            pty = (r, w)
        ends[ours] = pty
    kw = {"process_group": 0} if sys.version_info >= (3, 11) else {"preexec_fn": os.setpgrp}
    start = time.monotonic()
    try:
        child = subprocess.Popen(
            argv, env=env, stdout=ends[1][1], stderr=ends[2][1], close_fds=True, **kw
        )
    except BaseException:
        for r, w in ends.values():
            os.close(r)
            os.close(w)
        raise
    for _, w in ends.values():
        os.close(w)
    forwarded: list[str] = []

    def forward(signum, frame):
        forwarded.append(signal.Signals(signum).name)
        try:
            os.killpg(child.pid, signum)
        except ProcessLookupError:
            pass

    previous = {}
    for sig in FORWARDED:
        try:
            previous[sig] = signal.signal(sig, forward)
        except (OSError, ValueError):  # not the main thread, or a signal this OS lacks
            pass
    total = 0
    sel = selectors.DefaultSelector()
    alive = {1: True, 2: True}
    try:
        with open(log_path, "wb", buffering=CHUNK) as log:
            for ours, (r, _) in ends.items():
                sel.register(r, selectors.EVENT_READ, ours)
            exited_at = None
            while sel.get_map():
                if exited_at is None and child.poll() is not None:
                    exited_at = time.monotonic()
                if exited_at is not None and time.monotonic() - exited_at > DRAIN_AFTER_EXIT_S:
                    break
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
                    log.write(data)
                    if alive[key.data]:
                        alive[key.data] = _write_all(key.data, data)
        raw = child.wait()
    finally:
        sel.close()
        for r, _ in ends.values():
            try:
                os.close(r)
            except OSError:
                pass
        for sig, h in previous.items():
            signal.signal(sig, h)
    rc = raw if raw >= 0 else 128 - raw
    return Outcome(rc, raw, time.monotonic() - start, forwarded, total)
