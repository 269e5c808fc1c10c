"""kb triage stopped or starved (issue 36): SIGTERM ends it with no worker left behind (none
holding the caller's pipe) and its spool removed; a full temporary folder is one clear message;
an --out kb cannot write and a malformed --meta are said before any job is read; and rows of a
finished run are never lost to a late error."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from contextlib import redirect_stdout
from pathlib import Path

import pytest
from _repo import REPO

from kb.fleet import store
from kb.fleet.cli import main

ILLEGAL = "RuntimeError: CUDA error: an illegal memory access was encountered"


def _jobs(root: Path, n: int) -> Path:
    for i in range(n):
        d = root / f"job-{i:04d}"
        d.mkdir(parents=True)
        (d / "rank0.log").write_text(f"step {i}\n[rank0]: {ILLEGAL}\n")
    return root


def _cli(*argv: str) -> tuple[int, str]:
    buf = io.StringIO()
    with redirect_stdout(buf):
        code = main(list(argv))
    return code, buf.getvalue()


def _children(pid: int) -> set[int]:
    out: set[int] = set()
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as fh:
                out |= {int(x) for x in fh.read().split()}
    except OSError:
        pass
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs /proc")
def test_sigterm_leaves_no_worker_and_no_spool(tmp_path):
    jobs = _jobs(tmp_path / "jobs", 400)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "KB_HOME": str(tmp_path / "state")}
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kb",
            "triage",
            str(jobs),
            "--out",
            str(tmp_path / "t.duckdb"),
            "--workers",
            "2",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
        env=env,
    )
    workers: set[int] = set()
    end = time.monotonic() + 120
    while time.monotonic() < end and not list(tmp.glob("kb-triage-*.jsonl")):
        time.sleep(0.1)
    while time.monotonic() < end and len(workers) < 2:  # the pool's workers are up
        workers |= {c for c in _children(p.pid) if _alive(c)}
        time.sleep(0.1)
    assert workers and list(tmp.glob("kb-triage-*.jsonl"))
    time.sleep(1)
    workers |= _children(p.pid)
    p.send_signal(signal.SIGTERM)
    # the caller's pipe closes: nobody is left holding it (`kb triage ... | tail` returns)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 128 + 15, err
    assert b"terminated" in err and b"Traceback" not in err
    end = time.monotonic() + 30
    while time.monotonic() < end and any(_alive(w) for w in workers):
        time.sleep(0.1)
    assert not [w for w in workers if _alive(w)]
    assert not list(tmp.glob("kb-triage-*"))


def _mount(where: Path, opts: str) -> bool:
    if os.geteuid() != 0:
        return False
    where.mkdir(exist_ok=True)
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(where)], capture_output=True
    )
    return r.returncode == 0


def _umount(where: Path) -> None:
    subprocess.run(["umount", "-l", str(where)], capture_output=True)


def test_a_full_temporary_folder_is_one_clear_message(tmp_path):
    tmp = tmp_path / "small"
    if not _mount(tmp, "size=16k"):
        pytest.skip("needs root to mount a small tmpfs")
    try:
        jobs = _jobs(tmp_path / "jobs", 60)
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "kb",
                "triage",
                str(jobs),
                "--out",
                str(tmp_path / "t.duckdb"),
                "--workers",
                "1",
                "--quiet",
            ],
            capture_output=True,
            text=True,
            cwd=REPO,
            env={**os.environ, "TMPDIR": str(tmp), "KB_HOME": str(tmp_path / "state")},
            timeout=300,
        )
        assert r.returncode == 2, r.stderr
        assert "Traceback" not in r.stderr and r.stderr.count("No space left") == 1, r.stderr
        assert "TMPDIR" in r.stderr
        assert not list(tmp.glob("kb-triage-*"))  # the partial spool removed, the room back
    finally:
        _umount(tmp)


def test_an_out_on_a_read_only_file_system_is_said_before_any_job(tmp_path, monkeypatch):
    ro = tmp_path / "ro"
    if not _mount(ro, "ro,size=64k"):
        pytest.skip("needs root to mount a read-only tmpfs")
    try:
        jobs = _jobs(tmp_path / "jobs", 3)
        read: list[str] = []
        from kb.fleet import local

        monkeypatch.setattr(local, "triage", lambda job, *a: read.append(job.path) or {})
        code, _ = _cli(str(jobs), "--out", str(ro / "t.duckdb"), "--quiet", "--workers", "1")
        assert code == 2 and not read
    finally:
        _umount(ro)


@pytest.mark.parametrize(
    "body, said",
    [
        ("a,99999999999,2026-01-01T00:00:00,2026-01-01T01:00:00\n", "more than any job holds"),
        ("a,8,0001-01-01T00:00:00+05:00,2026-01-01T01:00:00\n", "not a time kb can hold"),
        ("a" * 140_000 + ",8,,\n", "line 2"),
        ("a" * 5000 + ",8,,\n", "a cell of 5,000 characters"),
    ],
    ids=["gpus-99999999999", "year-1-with-offset", "cell-of-140k", "cell-of-5000"],
)
def test_a_malformed_jobs_file_is_said_before_any_job(tmp_path, capsys, body, said):
    jobs = _jobs(tmp_path / "jobs", 2)
    meta = tmp_path / "jobs.csv"
    meta.write_text("job,gpus,start,end\n" + body)
    code, _ = _cli(str(jobs), "--out", str(tmp_path / "t.duckdb"), "--meta", str(meta), "--quiet")
    err = capsys.readouterr().err
    assert code == 2 and said in err and "Traceback" not in err
    assert not (tmp_path / "t.duckdb").exists()


def test_rows_of_a_finished_run_survive_a_late_error(tmp_path, monkeypatch, capsys):
    jobs = _jobs(tmp_path / "jobs", 3)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(store.tempfile, "tempdir", None)

    def fails(spool, out):
        raise store.StoreError(f"cannot write {out}: the disk went away")

    monkeypatch.setattr(store, "write", fails)
    code, _ = _cli(str(jobs), "--out", str(tmp_path / "t.duckdb"), "--quiet", "--workers", "1")
    err = capsys.readouterr().err
    assert code == 2
    kept = list(tmp_path.glob("kb-triage-*.jsonl"))
    assert len(kept) == 1 and str(kept[0]) in " ".join(err.split())
    assert len(kept[0].read_text().splitlines()) == 3
