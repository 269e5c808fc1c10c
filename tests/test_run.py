"""`kb run -- COMMAND`: the command's output unchanged, its exit status kept, the evidence turned
on, signals forwarded, a diagnosis only on failure."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from _repo import REPO

pytestmark = pytest.mark.warm_home  # runs kb as a user would after its first run; tests no cache

KB = [sys.executable, "-m", "kb", "run"]


def kb_run(tmp_path, code, *extra, env=None, timeout=60):
    run_dir = tmp_path / "run"
    p = subprocess.run(
        [*KB, "--run-dir", str(run_dir), *extra, "--", sys.executable, "-c", code],
        capture_output=True,
        cwd=REPO,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )
    return p.returncode, p.stdout, p.stderr, run_dir


def test_success_prints_nothing_of_its_own(tmp_path):
    code = "import sys; sys.stdout.write('out\\n' * 3); sys.stderr.write('err\\n'); print('\\x00bin\\xff', end='')"
    rc, out, err, run_dir = kb_run(tmp_path, code)
    assert rc == 0
    assert out == b"out\nout\nout\n\x00bin\xc3\xbf" and err == b"err\n"  # byte for byte
    log = (run_dir / "output.log").read_bytes()
    assert b"out\nout\nout\n" in log and b"err\n" in log
    rec = json.loads((run_dir / "kb-run.json").read_text())
    assert rec["returncode"] == 0 and not (run_dir / "kb-diagnosis.json").exists()


def test_evidence_is_turned_on_unless_set(tmp_path):
    code = (
        "import os, json; print(json.dumps({k: os.environ.get(k) for k in ('TORCHELASTIC_ERROR_FILE', "
        "'TORCH_NCCL_TRACE_BUFFER_SIZE', 'TORCH_FR_BUFFER_SIZE', 'TORCH_NCCL_DUMP_ON_TIMEOUT', "
        "'TORCH_NCCL_DEBUG_INFO_TEMP_FILE', 'TORCH_FR_DUMP_TEMP_FILE', 'PET_LOG_DIR')}))"
    )
    env = dict.fromkeys((), "")
    for k in (
        "TORCHELASTIC_ERROR_FILE",
        "TORCH_NCCL_TRACE_BUFFER_SIZE",
        "TORCH_FR_BUFFER_SIZE",
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE",
        "TORCH_FR_DUMP_TEMP_FILE",
        "PET_LOG_DIR",
        "TORCH_NCCL_DUMP_ON_TIMEOUT",
    ):
        os.environ.pop(k, None)
    _rc, out, _, run_dir = kb_run(tmp_path, code, env={**env, "TORCH_NCCL_TRACE_BUFFER_SIZE": "50"})
    seen = json.loads(out)
    assert seen["TORCHELASTIC_ERROR_FILE"] == str(run_dir / "error.json")
    assert seen["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] == str(run_dir / "fr" / "nccl_trace_rank_")
    assert seen["TORCH_FR_DUMP_TEMP_FILE"] == seen["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"]
    assert seen["TORCH_NCCL_DUMP_ON_TIMEOUT"] == "1" and seen["PET_LOG_DIR"] == str(
        run_dir / "torchrun"
    )
    # The user's own setting wins, and its sibling name is left alone too.
    assert seen["TORCH_NCCL_TRACE_BUFFER_SIZE"] == "50" and seen["TORCH_FR_BUFFER_SIZE"] is None
    assert (run_dir / "fr").is_dir()


def test_failure_keeps_the_exit_code_and_diagnoses(tmp_path):
    code = (
        "import sys; print('step 1'); "
        "sys.stderr.write('RuntimeError: CUDA error: an illegal memory access was encountered\\n'); sys.exit(3)"
    )
    rc, out, err, run_dir = kb_run(tmp_path, code, "--json", str(tmp_path / "d.json"))
    assert rc == 3
    assert out == b"step 1\n"
    text = err.decode()
    assert text.startswith(
        "RuntimeError: CUDA error: an illegal memory access"
    )  # the command's own first
    assert "the command failed (exit 3)" in text and "cuda-illegal-memory-access" in text
    d = json.loads((tmp_path / "d.json").read_text())
    assert d["matches"][0]["id"] == "cuda-illegal-memory-access" and d["run"]["returncode"] == 3
    assert (
        json.loads((run_dir / "kb-diagnosis.json").read_text())["matches"][0]["id"]
        == "cuda-illegal-memory-access"
    )


def test_error_file_of_a_record_decorated_process(tmp_path):
    # What torch's @record writes (error_handler.py, record_exception), done by hand: no torch here.
    code = (
        "import os, json, time; json.dump({'message': {'message': 'RuntimeError: CUDA error: an illegal memory "
        "access was encountered', 'extraInfo': {'py_callstack': 'Traceback (most recent call last):\\nRuntimeError: "
        "CUDA error: an illegal memory access was encountered\\n', 'timestamp': str(int(time.time()))}}}, "
        "open(os.environ['TORCHELASTIC_ERROR_FILE'], 'w')); raise SystemExit(1)"
    )
    rc, _out, err, run_dir = kb_run(tmp_path, code)
    assert rc == 1 and (run_dir / "error.json").exists()
    assert "cuda-illegal-memory-access" in err.decode()


def test_signal_death_is_128_plus_n(tmp_path):
    rc, _, err, _ = kb_run(tmp_path, "import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    assert rc == 128 + 9
    assert "killed by SIGKILL (signal 9); exit 137" in err.decode()


def test_command_not_found(tmp_path):
    p = subprocess.run(
        [*KB, "--run-dir", str(tmp_path / "r"), "--", "no-such-command-kb"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert p.returncode == 127 and "command not found" in p.stderr


def test_no_command_is_a_usage_error():
    p = subprocess.run([*KB], capture_output=True, text=True, cwd=REPO)
    assert p.returncode == 2


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signals_reach_the_whole_process_group(tmp_path, sig):
    """Ctrl-C (SIGINT) and SIGTERM sent to kb reach the command's whole process group: the child
    and the child's own child (torchrun and its workers)."""
    marker = tmp_path / "got"
    script = tmp_path / "tree.py"
    script.write_text(
        "import os, signal, subprocess, sys, time\n"
        "def h(n, f):\n"
        f"    open({str(marker)!r} + '-' + str(os.getpid()), 'w').write(str(n))\n"
        "    sys.exit(0)\n"
        f"signal.signal({int(sig)}, h)\n"
        "kids = [] if sys.argv[1:] else [subprocess.Popen([sys.executable, __file__, 'child'])]\n"
        "time.sleep(0.5)\n"
        "print('ready', flush=True)\n"
        "time.sleep(30)\n"
    )
    p = subprocess.Popen(
        [*KB, "--run-dir", str(tmp_path / "run"), "--", sys.executable, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
    )
    assert p.stdout.readline() == b"ready\n"
    time.sleep(0.5)  # the grandchild has installed its handler too
    p.send_signal(sig)
    p.wait(timeout=20)
    got = sorted(tmp_path.glob("got-*"))
    assert len(got) == 2 and all(g.read_text() == str(int(sig)) for g in got)
    rec = json.loads((tmp_path / "run" / "kb-run.json").read_text())
    assert rec["forwarded_signals"] == [sig.name]


def test_no_per_line_work_large_output(tmp_path):
    """200 MB through kb run: copied in big chunks, so it costs little more than the command alone."""
    code = "import sys\nb = (b'x' * 99 + b'\\n') * 100000\nfor _ in range(20): sys.stdout.buffer.write(b)"
    t0 = time.monotonic()
    p = subprocess.run(
        [*KB, "--run-dir", str(tmp_path / "run"), "--", sys.executable, "-c", code],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=REPO,
        timeout=120,
    )
    took = time.monotonic() - t0
    assert p.returncode == 0 and (tmp_path / "run" / "output.log").stat().st_size == 200_000_000
    assert took < 30, took


# ------------------------------------------------------------------ never changes the job
@pytest.mark.parametrize("code", [255, 200, 130, 1])
def test_an_ordinary_exit_is_an_exit_not_a_signal(tmp_path, code):
    rc, _, err, run_dir = kb_run(tmp_path, f"raise SystemExit({code})")
    assert rc == code
    text = err.decode()
    assert f"the command failed (exit {code})" in text and "signal" not in text
    rec = json.loads((run_dir / "kb-run.json").read_text())
    assert rec["exit_code"] == code and rec["signal"] is None


def test_a_real_signal_is_named(tmp_path):
    rc, _, err, run_dir = kb_run(
        tmp_path, "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"
    )
    assert rc == 128 + 15
    assert "killed by SIGTERM (signal 15); exit 143" in err.decode()
    rec = json.loads((run_dir / "kb-run.json").read_text())
    assert rec["signal"] == "SIGTERM" and rec["exit_code"] is None


NOISY = (
    "import sys\n"
    "for i in range(20000): print('line', i)\n"
    "sys.stderr.write('RuntimeError: CUDA error: an illegal memory access was encountered\\n')\n"
    "sys.exit(3)\n"
)


def _check_full_disk(p, run_dir):
    assert p.returncode == 3  # the command's own status
    assert p.stdout.decode().splitlines() == [f"line {i}" for i in range(20000)]  # all of it
    err = p.stderr.decode()
    assert "Traceback" not in err
    assert "cannot keep the command's output" in err and "No space left on device" in err
    assert "RuntimeError: CUDA error: an illegal memory access" in err  # passed through


@pytest.fixture
def full_tmpfs(tmp_path):
    """A filesystem of 16 KiB, filled: a real full disk (where this machine lets a test mount)."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    m = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(mnt)], capture_output=True
    )
    if m.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {m.stderr.decode().strip()}")
    try:
        fd = os.open(mnt / "fill", os.O_WRONLY | os.O_CREAT)
        try:
            with pytest.raises(OSError):
                for _ in range(64):
                    os.write(fd, b"\0" * 4096)
        finally:
            os.close(fd)
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_a_full_disk_never_stops_the_job(full_tmpfs):
    """The run folder on a full filesystem: the output still streams whole, the exit status is
    the command's, and kb says once that it could not keep the output (no traceback)."""
    run_dir = full_tmpfs / "run"
    p = subprocess.run(
        [*KB, "--run-dir", str(run_dir), "--", sys.executable, "-c", NOISY],
        capture_output=True,
        cwd=REPO,
        timeout=120,
    )
    _check_full_disk(p, run_dir)


def test_an_unwritable_log_never_stops_the_job(tmp_path):
    """The same through /dev/full (every write fails with ENOSPC), which needs no mount."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "output.log").symlink_to("/dev/full")
    p = subprocess.run(
        [*KB, "--run-dir", str(run_dir), "--", sys.executable, "-c", NOISY],
        capture_output=True,
        cwd=REPO,
        timeout=120,
    )
    _check_full_disk(p, run_dir)
    rec = json.loads((run_dir / "kb-run.json").read_text())
    assert rec["output_error"] == "No space left on device" and rec["output_kept_bytes"] == 0


def test_a_run_folder_that_cannot_be_made_still_runs_the_job(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    p = subprocess.run(
        [
            *KB,
            "--run-dir",
            str(blocker / "run"),
            "--",
            sys.executable,
            "-c",
            "print('ran'); raise SystemExit(4)",
        ],
        capture_output=True,
        cwd=REPO,
        timeout=60,
    )
    assert p.returncode == 4 and p.stdout == b"ran\n"
    assert "cannot create the run folder" in p.stderr.decode() and b"Traceback" not in p.stderr


ALTERNATE = (
    "import sys\n"
    "for i in range(5000):\n"
    "    sys.stdout.write(f'o{i}\\n'); sys.stdout.flush()\n"
    "    sys.stderr.write(f'e{i}\\n'); sys.stderr.flush()\n"
)
IN_ORDER = [x for i in range(5000) for x in (f"o{i}", f"e{i}")]


def test_2_to_1_keeps_the_order(tmp_path):
    """stdout and stderr into one pipe (`2>&1`): the command gets one pipe for both, so 10,000
    alternating lines arrive in the order they were written, on the pipe and in the log."""
    run_dir = tmp_path / "run"
    p = subprocess.run(
        [*KB, "--run-dir", str(run_dir), "--", sys.executable, "-c", ALTERNATE],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=REPO,
        timeout=120,
    )
    assert p.returncode == 0
    assert p.stdout.decode().split() == IN_ORDER
    assert (run_dir / "output.log").read_text().split() == IN_ORDER


def test_one_terminal_for_both_streams_keeps_the_order(tmp_path):
    """stdout and stderr on one terminal: one pseudo-terminal for both, in order."""
    import pty
    import select

    master, slave = pty.openpty()
    p = subprocess.Popen(
        [*KB, "--run-dir", str(tmp_path / "run"), "--", sys.executable, "-c", ALTERNATE],
        stdout=slave,
        stderr=slave,
        cwd=REPO,
    )
    os.close(slave)
    got = b""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        r, _, _ = select.select([master], [], [], 0.5)
        if r:
            try:
                data = os.read(master, 1 << 16)
            except OSError:  # EIO: every writer closed it
                break
            if not data:
                break
            got += data
        elif p.poll() is not None:
            break
    p.wait(timeout=30)
    os.close(master)
    assert p.returncode == 0
    assert got.decode().split() == IN_ORDER


TREE = """
import os, signal, subprocess, sys, time
if {ignore}:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if not sys.argv[1:]:
    kid = subprocess.Popen([sys.executable, __file__, "kid"])
    open({pids!r}, "w").write(f"{{os.getpid()}} {{kid.pid}}")
    print("ready", flush=True)
time.sleep(300)
"""


def _tree(tmp_path, ignore_term: bool):
    script = tmp_path / "tree.py"
    pids = tmp_path / "pids"
    script.write_text(TREE.format(ignore=ignore_term, pids=str(pids)))
    return script, pids


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # A zombie waiting for its reaper is gone too: it runs nothing.
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _wait_gone(pids, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(_gone(p) for p in pids):
            return True
        time.sleep(0.1)
    return False


def _start(tmp_path, script, *extra):
    p = subprocess.Popen(
        [*KB, "--run-dir", str(tmp_path / "run"), *extra, "--", sys.executable, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
    )
    assert p.stdout.readline() == b"ready\n"
    time.sleep(0.3)  # the grandchild is up
    return p


def _kill_leftovers(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_three_sigterms_end_a_group_that_ignores_sigterm(tmp_path):
    script, pids_file = _tree(tmp_path, ignore_term=True)
    p = _start(tmp_path, script)
    pids = [int(x) for x in pids_file.read_text().split()]
    try:
        for _ in range(3):
            p.send_signal(signal.SIGTERM)
            time.sleep(0.2)
        p.wait(timeout=20)
        assert p.returncode == 128 + 9
        assert _wait_gone(pids, 10), "the command's group outlived kb"
        err = p.stderr.read().decode()
        assert "killed by SIGKILL (signal 9) from kb" in err
        rec = json.loads((tmp_path / "run" / "kb-run.json").read_text())
        assert rec["killed_by_kb"] is True and rec["forwarded_signals"] == ["SIGTERM"] * 3
    finally:
        _kill_leftovers(pids)


def test_a_group_that_ignores_sigterm_is_killed_after_the_grace_period(tmp_path):
    script, pids_file = _tree(tmp_path, ignore_term=True)
    p = _start(tmp_path, script, "--kill-after", "1")
    pids = [int(x) for x in pids_file.read_text().split()]
    try:
        t0 = time.monotonic()
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=20)
        assert p.returncode == 128 + 9 and time.monotonic() - t0 >= 1.0
        assert _wait_gone(pids, 10)
    finally:
        _kill_leftovers(pids)


@pytest.mark.parametrize("ignore_term", [False, True])
def test_the_command_dies_with_kb(tmp_path, ignore_term):
    """kill -9 of kb: the command gets SIGTERM (its parent-death signal), and kb's watcher ends
    the whole group, with SIGKILL after the grace period for one that ignores SIGTERM."""
    script, pids_file = _tree(tmp_path, ignore_term)
    p = _start(tmp_path, script, "--kill-after", "1")
    pids = [int(x) for x in pids_file.read_text().split()]
    try:
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=10)
        assert _wait_gone(pids, 15), "the command outlived kb"
    finally:
        _kill_leftovers(pids)


@pytest.mark.parametrize("bad", ["nan", "inf", "-1", "soon"])
def test_kill_after_must_be_a_finite_number(tmp_path, bad):
    p = subprocess.run(
        [*KB, "--run-dir", str(tmp_path / "r"), "--kill-after", bad, "--", "true"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert p.returncode == 2 and "--kill-after" in p.stderr and "Traceback" not in p.stderr
    assert not (tmp_path / "r").exists()  # refused before anything ran


# ------------------------------------------------------------------ the run folder
WRITES_ERROR_FILE = (
    "import os, json, time; json.dump({'message': {'message': 'RuntimeError: CUDA error: an illegal memory "
    "access was encountered', 'extraInfo': {'py_callstack': 'Traceback (most recent call last):\\nRuntimeError: "
    "CUDA error: an illegal memory access was encountered\\n', 'timestamp': str(int(time.time()))}}}, "
    "open(os.environ['TORCHELASTIC_ERROR_FILE'], 'w')); raise SystemExit(1)"
)


def test_a_reused_run_dir_never_answers_with_an_earlier_error_file(tmp_path):
    rc, _, err, run_dir = kb_run(tmp_path, WRITES_ERROR_FILE)
    assert rc == 1 and "cuda-illegal-memory-access" in err.decode()
    rc, _, err, run_dir = kb_run(
        tmp_path, "print('torch.OutOfMemoryError: CUDA out of memory.'); raise SystemExit(2)"
    )
    assert rc == 2
    text = err.decode()
    assert "cuda-oom" in text and "cuda-illegal-memory-access" not in text
    doc = json.loads((run_dir / "kb-diagnosis.json").read_text())
    assert [m["id"] for m in doc["matches"]][:1] == ["cuda-oom"]
    assert all(m["id"] != "cuda-illegal-memory-access" for m in doc["matches"])
    # Nothing deleted: the earlier run's files are set aside, whole, in a hidden folder.
    (earlier,) = (run_dir / ".kb-earlier").iterdir()
    assert {p.name for p in earlier.iterdir()} >= {"error.json", "output.log", "kb-run.json"}
    assert not (run_dir / "error.json").exists()
    # And `kb lookup` of the folder reads this run only.
    p = subprocess.run(
        [sys.executable, "-m", "kb", "lookup", "--json", str(run_dir)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert "cuda-illegal-memory-access" not in p.stdout


def test_run_dir_dot_reads_only_what_the_run_wrote(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "old.log").write_text(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    )
    (work / "error.json").write_text(
        '{"message": "RuntimeError: CUDA error: an illegal memory access was encountered"}'
    )
    p = subprocess.run(
        [*KB, "--run-dir", ".", "--", sys.executable, "-c", "print('step 1'); raise SystemExit(3)"],
        capture_output=True,
        text=True,
        cwd=work,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=60,
    )
    assert p.returncode == 3
    assert "cuda-oom" not in p.stderr and "cuda-illegal-memory-access" not in p.stderr
    assert "kb lookup output.log" in p.stderr  # the hint names this run's files, not the folder
    assert (work / "old.log").exists() and (work / "error.json").exists()  # never moved
