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
    assert "signal 9" in err.decode()


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
