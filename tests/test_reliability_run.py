"""`kb run` of a command that reads the terminal (issue 36): a command kb runs is in a process
group of its own, which the terminal stops when it reads (SIGTTIN); kb says so instead of waiting
in silence, and Ctrl-C still ends it."""

from __future__ import annotations

import fcntl
import os
import select
import subprocess
import sys
import termios
import time

import pytest
from _repo import REPO


def _on_a_terminal(argv: list[str], env: dict[str, str]):
    """argv run as a session leader whose stdin, stdout and stderr are a new terminal (kb is the
    terminal's foreground job, as in a shell): (process, the terminal's master end)."""
    master, slave = os.openpty()

    def own_terminal() -> None:
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    p = subprocess.Popen(
        argv,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
        preexec_fn=own_terminal,
        cwd=REPO,
        env=env,
    )
    os.close(slave)
    return p, master


def _read_until(master: int, needle: bytes, timeout: float) -> bytes:
    got = b""
    end = time.monotonic() + timeout
    while needle not in got and time.monotonic() < end:
        r, _, _ = select.select([master], [], [], 0.2)
        if r:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            got += chunk
    return got


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the stop is seen in /proc")
def test_a_command_that_reads_the_terminal_is_said_and_ctrl_c_ends_it(tmp_path):
    env = {**os.environ, "KB_HOME": str(tmp_path / "state")}
    p, master = _on_a_terminal(
        [
            sys.executable,
            "-m",
            "kb",
            "run",
            "--run-dir",
            str(tmp_path / "run"),
            "--",
            sys.executable,
            "-c",
            "input()",
        ],
        env,
    )
    try:
        said = _read_until(master, b"waiting on the terminal", 60)
        assert b"waiting on the terminal" in said, said.decode(errors="replace")
        assert b"SIGTTIN" in said and b"< input" in said
        os.write(master, b"\x03")  # Ctrl-C, as the terminal sends it to its foreground job
        _read_until(master, b"\x00never", 1)
        assert p.wait(timeout=60) != 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        os.close(master)
