"""The TUI in a real terminal (tmux at 80x24), driven as a person drives it: typing on the start
screen, a paste from a terminal without bracketed paste, quitting while a pipe streams and while
a repro runs. The app runs as `kb tui` does (tmux_app.py: command_line.main), on the fixture
entries; what it shows is read back with capture-pane.

tmux is needed; without it these tests are skipped, saying so (apt-get install tmux).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
APP = HERE / "tmux_app.py"
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "train.py", line 88, in <module>\n'
    "    out = run_kernel(x, y)  # quantized::linear_dynamic, overlap\n"
    "RuntimeError: CUDA error: an illegal memory access was encountered\n"
)
HANG = "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE)"

pytestmark = pytest.mark.skipif(
    shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)"
)


class Term:
    """One tmux server of our own (its own socket), one 80x24 window running the app."""

    def __init__(self, tmp: Path, command: str) -> None:
        self.socket = f"kb-tui-test-{os.getpid()}-{time.monotonic_ns()}"
        self.runs = tmp / "runs.txt"
        self.pidfile = tmp / "pid"
        env = {
            "KB_TUI_RUNS": str(self.runs),
            "KB_TUI_PID": str(self.pidfile),
            "KB_HOME": str(tmp / "kb-home"),
        }
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        self.tmux("new-session", "-d", "-x", "80", "-y", "24", f"env {exports} {command}")
        # The editor's title: "Error or log", or "piped log" as soon as a pipe's first lines
        # arrive (which may be before the first look at the screen).
        self.wait_for_any("Error or log", "piped log")

    def tmux(self, *args: str) -> str:
        out = subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=30
        )
        return out.stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p")

    def wait_for_any(self, *texts: str, timeout: float = 60) -> str:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            shown = self.screen()
            if any(t in shown for t in texts):
                return shown
            time.sleep(0.1)
        raise AssertionError(f"none of {texts!r} showed:\n{self.screen()}")

    def wait_for(self, text: str, timeout: float = 60) -> str:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            shown = self.screen()
            if text in shown:
                return shown
            time.sleep(0.1)
        raise AssertionError(f"{text!r} never showed:\n{self.screen()}")

    def type(self, text: str, gap: float = 0.12) -> None:
        """Key by key, as a person types (a gap between keys)."""
        for ch in text:
            self.tmux("send-keys", "-l", ch)
            time.sleep(gap)

    def paste(self, text: str) -> None:
        """A paste without bracketed paste: the text as keys, all in one write."""
        self.tmux("set-buffer", "--", text)
        self.tmux("paste-buffer", "-d")  # no -p: no bracketed-paste markers around it

    def keys(self, *names: str) -> None:
        self.tmux("send-keys", *names)

    @property
    def pid(self) -> int:
        end = time.monotonic() + 30
        while not self.pidfile.exists() and time.monotonic() < end:
            time.sleep(0.05)
        return int(self.pidfile.read_text())

    def alive(self) -> bool:
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        stat = Path(f"/proc/{self.pid}/stat")
        return not (stat.exists() and stat.read_text().split(") ")[1].startswith("Z"))

    def ran(self) -> list[str]:
        return self.runs.read_text().split() if self.runs.exists() else []

    def close(self) -> None:
        self.tmux("kill-server")


@pytest.fixture
def term(tmp_path):
    made: list[Term] = []

    def start(command: str = "") -> Term:
        t = Term(tmp_path, command or f"{shlex.quote(sys.executable)} {shlex.quote(str(APP))}")
        made.append(t)
        return t

    yield start
    for t in made:
        t.close()


def gone_within(t: Term, timeout: float) -> float:
    """Seconds until the app's process is gone (AssertionError after timeout)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if not t.alive():
            return time.monotonic() - t0
        time.sleep(0.02)
    raise AssertionError(f"still running after {timeout} s:\n{t.screen()}")


def test_typing_on_the_start_screen_lands_in_the_box(term):
    t = term()
    t.keys("Tab", "Tab")  # the focus off the box, onto the list
    time.sleep(0.3)
    t.type("quantized::linear_dynamic failed")
    shown = t.wait_for("No entry matched")
    assert "quantized::linear_dynamic" in shown  # in the box: every key was text
    assert "Run the repro" not in shown and "Open a job" not in shown  # no dialog
    assert t.alive() and t.ran() == []  # not quit, nothing run


def test_a_paste_without_bracketed_paste_on_the_start_screen_is_text(term):
    t = term()
    t.keys("Tab", "Tab")
    time.sleep(0.3)
    t.paste(TRACEBACK)
    shown = t.wait_for("Matches (1)")
    assert "fake-illegal-access" in shown  # the whole paste was looked up
    assert "Run the repro" not in shown and "Open a job" not in shown
    assert t.alive() and t.ran() == []


def test_quitting_while_a_pipe_streams_leaves_within_a_second(term):
    """An endless, slow pipe (a training run's output): ctrl+q leaves at once, the reader
    thread notwithstanding."""
    writer = "while true; do echo 'step 1 loss 0.5'; sleep 0.05; done"
    t = term(
        f"sh -c {shlex.quote(writer + ' | ' + shlex.quote(sys.executable) + ' ' + shlex.quote(str(APP)))}"
    )
    t.wait_for("still reading")
    t.keys("C-q")
    took = gone_within(t, 10)
    print(f"\nquit while a pipe streams: the process was gone {took:.2f} s after ctrl+q")
    assert took < 3  # measured well under a second on a quiet machine (see the printed figure)


def test_quitting_during_a_run_asks_then_stops_the_repro_and_leaves(term):
    t = term()
    t.paste(HANG)
    t.wait_for("Matches (1)")
    t.keys("F5")
    t.wait_for("$ kb verify fake-hang")
    time.sleep(0.5)  # a question is answered once it has been read
    t.keys("y")
    t.wait_for("waiting for the other ranks")
    assert t.ran() == ["fake-hang"]
    repro = [p for p in children(t.pid) if "repro.py" in cmdline(p)]
    assert repro, "the repro's process was not found"
    t.keys("C-q")
    t.wait_for("Stop it and quit?")
    assert t.alive()
    time.sleep(0.5)
    t.keys("y")
    took = gone_within(t, 10)
    print(f"\nquit during a run: the process was gone {took:.2f} s after the yes")
    assert took < 3
    time.sleep(0.2)
    assert not any(alive(p) for p in repro), "the repro outlived the app"


def children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat[stat.rfind(")") + 2 :].split()[1]) == pid:
                out.append(int(d.name))
    return out


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return not stat[stat.rfind(")") + 2 :].startswith("Z")
