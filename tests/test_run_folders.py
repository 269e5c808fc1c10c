"""`kb run`'s default run folder (./kb-runs/<time>-<pid>) is kept only when there is something
to diagnose; a command that cannot start and the user's Ctrl-C are said as such."""

import os
import signal
import subprocess
import sys

import pytest

pytestmark = pytest.mark.warm_home

KB = [sys.executable, "-m", "kb", "run"]
IMA = "RuntimeError: CUDA error: an illegal memory access was encountered"


def _runs(cwd):
    d = cwd / "kb-runs"
    return sorted(d.iterdir()) if d.exists() else []


def _kb(cwd, *argv, timeout=60):
    return subprocess.run(
        [*KB, "--", *argv], capture_output=True, text=True, cwd=cwd, timeout=timeout
    )


def test_a_success_keeps_no_run_folder(tmp_path):
    p = _kb(tmp_path, sys.executable, "-c", "print('done')")
    assert p.returncode == 0 and p.stdout == "done\n" and p.stderr == ""
    assert not (tmp_path / "kb-runs").exists()


def test_a_failure_keeps_its_run_folder(tmp_path):
    p = _kb(
        tmp_path,
        sys.executable,
        "-c",
        f"import sys; sys.stderr.write({IMA!r} + '\\n'); sys.exit(3)",
    )
    assert p.returncode == 3 and "the command failed (exit 3)" in p.stderr
    (run,) = _runs(tmp_path)
    assert IMA in (run / "output.log").read_text()
    assert (run / "kb-diagnosis.json").is_file()


def test_other_runs_folders_stay(tmp_path):
    earlier = tmp_path / "kb-runs" / "20260101-000000-1"
    earlier.mkdir(parents=True)
    assert _kb(tmp_path, sys.executable, "-c", "pass").returncode == 0
    assert _runs(tmp_path) == [earlier]


@pytest.mark.parametrize(
    "argv, rc, words",
    [
        (["no-such-command-kb"], 127, "command not found"),
        (["./no-such-script.sh"], 127, "no such file or directory"),
        (["./not-executable.sh"], 126, "permission denied"),
    ],
)
def test_a_command_that_cannot_start_makes_nothing(tmp_path, argv, rc, words):
    (tmp_path / "not-executable.sh").write_text("echo hi\n")
    os.chmod(tmp_path / "not-executable.sh", 0o644)
    p = _kb(tmp_path, *argv)
    assert p.returncode == rc and f"kb: {words}: {argv[0]}" in p.stderr
    assert "failed" not in p.stderr
    assert not (tmp_path / "kb-runs").exists()
    # nor a folder the user named but kb would have had to make
    p = subprocess.run(
        [*KB, "--run-dir", str(tmp_path / "named"), "--", *argv],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert p.returncode == rc and not (tmp_path / "named").exists()


def _interrupt(tmp_path, code):
    """Start kb run on code, wait for its 'ready', then Ctrl-C (SIGINT) kb as a terminal would."""
    p = subprocess.Popen(
        [*KB, "--", sys.executable, "-u", "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
    )
    try:
        assert p.stdout.readline() == b"ready\n"
        p.send_signal(signal.SIGINT)
        _out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    return p.returncode, err.decode()


@pytest.mark.parametrize(
    "code",
    [
        # dies of the KeyboardInterrupt (Python re-raises SIGINT: a death by SIGINT)
        "import time; print('ready'); time.sleep(60)",
        # catches it and exits 1, as a launcher does
        "import sys, time\ntry:\n    print('ready'); time.sleep(60)\nexcept KeyboardInterrupt:\n    sys.exit(1)",
    ],
)
def test_ctrl_c_is_an_interrupt_not_a_failure(tmp_path, code):
    rc, err = _interrupt(tmp_path, code)
    assert rc == 130
    assert "kb: interrupted" in err
    assert "failed" not in err and "kb lookup" not in err
    assert not (tmp_path / "kb-runs").exists()


def test_ctrl_c_after_a_failure_keeps_the_folder(tmp_path):
    # an error, then a hang (a collective that never returns): the user's Ctrl-C ends it
    code = f"import sys, time; sys.stderr.write({IMA!r} + '\\n'); print('ready'); time.sleep(60)"
    rc, err = _interrupt(tmp_path, code)
    assert rc == 130
    assert "interrupted, after the command had shown a failure" in err
    assert "cuda-illegal-memory-access" in err
    (run,) = _runs(tmp_path)
    assert IMA in (run / "output.log").read_text()
