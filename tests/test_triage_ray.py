"""kb triage --engine ray (issues 36, 38, 39): an address where no Ray answers ends in a bounded
time with one line and exit code 2, never a hang nor a traceback; stdout carries kb's output
alone (Ray's lines go to stderr, or nowhere with --quiet); `ray://` addresses reach a cluster
through Ray Client; many jobs ride in one Ray task, rows in the jobs' order, the same rows as the
local engine's; an actor that dies loses no row.

The tests that start Ray are marked `ray` and skip where Ray is not installed; the others test
the parts that need no Ray (the address probe, the output redirection, the batch size)."""

from __future__ import annotations

import csv
import io
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from contextlib import closing
from pathlib import Path

import pytest
from _repo import REPO

from kb.fleet import local, ray_engine
from kb.fleet.cli import main
from kb.fleet.discover import discover

ILLEGAL = "RuntimeError: CUDA error: an illegal memory access was encountered"
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"


def _jobs(root: Path, n: int) -> Path:
    """n small jobs of two kinds: folders of rank logs and single logs."""
    for i in range(n):
        if i % 2:
            d = root / f"job-{i:04d}"
            d.mkdir(parents=True)
            (d / "rank0.log").write_text(f"step {i}\n[rank0]: {ILLEGAL}\n")
            (d / "rank1.log").write_text(f"step {i}\nwaiting for rank 0\n")
        else:
            root.mkdir(parents=True, exist_ok=True)
            (root / f"job-{i:04d}.log").write_text(f"epoch {i}\n{OOM}\n")
    return root


def _kb(*argv: str, env: dict | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kb", "triage", *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ, **(env or {})),
    )


def _free_port() -> int:
    with closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ray() -> None:
    pytest.importorskip("ray")


# ---------------------------------------------------------------- without Ray
def test_nothing_listening_is_said_at_once():
    port = _free_port()  # bound a moment ago, closed: nothing listens there now
    for address in (f"127.0.0.1:{port}", f"ray://127.0.0.1:{port}"):
        t0 = time.monotonic()
        with pytest.raises(ray_engine.RayUnavailable) as e:
            ray_engine._probe(address)
        assert time.monotonic() - t0 < ray_engine.PROBE_SECONDS
        assert str(e.value) == f"cannot reach the Ray cluster at {address}: Connection refused"


def test_a_listening_address_and_forms_ray_reads_itself_pass_the_probe():
    with closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        ray_engine._probe(f"127.0.0.1:{port}")
        ray_engine._probe(f"ray://127.0.0.1:{port}")
    ray_engine._probe("auto")  # no port: Ray finds the cluster itself


def test_many_jobs_ride_in_one_task_and_every_actor_gets_several():
    assert ray_engine.batch_size(10_000, 2) == ray_engine.BATCH
    assert ray_engine.batch_size(10_000, 1) == ray_engine.BATCH
    # a short list is spread: each of 2 actors gets SPREAD batches
    assert ray_engine.batch_size(40, 2) == 5
    assert ray_engine.batch_size(3, 2) == 1
    assert ray_engine.batch_size(1, 8) == 1


@pytest.mark.parametrize("quiet", [False, True])
def test_what_ray_writes_never_reaches_stdout(quiet):
    """Ray's native code, the processes it starts and its warnings write to the descriptors:
    while Ray runs, fd 1 is fd 2 (both /dev/null when quiet); kb's own output after it is
    stdout's alone."""
    code = textwrap.dedent(
        f"""
        import os, subprocess, sys, warnings
        from kb.fleet.ray_engine import _ray_output
        print("kb before")
        with _ray_output({quiet}):
            os.write(1, b"native line on fd 1\\n")
            os.write(2, b"native line on fd 2\\n")
            print("python print")
            warnings.warn("a warning of Ray's")
            subprocess.run([sys.executable, "-c", "print('a child process')"])
        print("kb after")
        """
    )
    r = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == "kb before\nkb after\n"
    said = ("native line on fd 1", "native line on fd 2", "python print", "a child process")
    if quiet:
        assert r.stderr == ""
    else:
        assert all(s in r.stderr for s in said), r.stderr
        assert "a warning of Ray's" in r.stderr


def test_without_ray_the_engine_says_how_to_install_it(tmp_path):
    try:
        import ray  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("Ray is installed here")
    jobs = _jobs(tmp_path / "day", 2)
    r = _kb(str(jobs), "--out", str(tmp_path / "t.duckdb"), "--engine", "ray", "--quiet")
    assert r.returncode == 2 and r.stdout == ""
    assert "pip install 'kb-cuda[fleet]'" in r.stderr and "Traceback" not in r.stderr


# ---------------------------------------------------------------- with Ray, no cluster
@pytest.mark.ray
def test_an_address_with_no_ray_ends_at_once_with_one_line(tmp_path):
    _ray()
    jobs = _jobs(tmp_path / "day", 2)
    t0 = time.monotonic()
    r = _kb(
        str(jobs),
        "--out",
        str(tmp_path / "t.duckdb"),
        "--engine",
        "ray",
        "--address",
        "127.0.0.1:1",
        timeout=60,
    )
    assert time.monotonic() - t0 < 30  # it used to retry for many minutes
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().splitlines()[-1] == (
        "kb triage: cannot reach the Ray cluster at 127.0.0.1:1: Connection refused"
    )
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "t.duckdb").exists()


@pytest.mark.ray
def test_a_listener_that_is_not_ray_ends_after_the_connect_time(tmp_path):
    """Something accepts the connection but never answers as Ray: ray.init would retry for
    many minutes; kb gives up after CONNECT_SECONDS (3 here)."""
    _ray()
    jobs = _jobs(tmp_path / "day", 2)
    code = textwrap.dedent(
        f"""
        import sys
        from kb.fleet import ray_engine
        from kb.fleet.cli import main
        ray_engine.CONNECT_SECONDS = 3
        sys.exit(main([{str(jobs)!r}, "--out", {str(tmp_path / "t.duckdb")!r}, "--engine",
                       "ray", "--address", sys.argv[1], "--quiet"]))
        """
    )
    with closing(socket.socket()) as s:
        s.bind(("0.0.0.0", 0))  # Ray dials the node's own address for 127.0.0.1
        s.listen()
        t0 = time.monotonic()
        r = subprocess.run(
            [sys.executable, "-c", code, f"127.0.0.1:{s.getsockname()[1]}"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=90,
        )
        took = time.monotonic() - t0
    assert r.returncode == 2 and r.stdout == "", r.stderr
    assert "did not answer within 3 s" in r.stderr and "Traceback" not in r.stderr
    assert took < 45


# ---------------------------------------------------------------- with a local Ray
@pytest.mark.ray
def test_quiet_csv_is_the_query_result_alone_on_both_streams(tmp_path):
    """A local Ray started by kb for the run: stdout is exactly the CSV, stderr is empty."""
    _ray()
    jobs = _jobs(tmp_path / "day", 6)
    out = tmp_path / "t.duckdb"
    q = "SELECT regexp_extract(job, '[^/]+$') AS name, id FROM jobs ORDER BY name"
    r = _kb(
        str(jobs),
        "--out",
        str(out),
        "--engine",
        "ray",
        "--workers",
        "2",
        "--quiet",
        "--sql",
        q,
        "--format",
        "csv",
    )
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    rows = list(csv.reader(io.StringIO(r.stdout)))
    assert rows[0] == ["name", "id"]
    expected = [
        [
            f"job-{i:04d}" + ("" if i % 2 else ".log"),
            "cuda-illegal-memory-access" if i % 2 else "cuda-oom",
        ]
        for i in range(6)
    ]
    assert rows[1:] == expected


@pytest.fixture(scope="module")
def ray_local():
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        ray.shutdown()
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def _same(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]


@pytest.mark.ray
def test_batched_rows_are_the_local_engines_in_the_jobs_order(ray_local, tmp_path, capfd):
    jobs = discover([str(_jobs(tmp_path / "day", 40))])
    expected = list(local.run(jobs, workers=1))
    got = list(ray_engine.run(jobs, workers=2))  # 8 batches of 5 jobs over 2 actors
    assert [r["job"] for r in got] == [j.path for j in jobs]
    assert _same(got) == _same(expected)
    assert capfd.readouterr().out == ""  # nothing of Ray's on stdout
    # and through the command line: stdout holds the query's result alone
    out = tmp_path / "t.duckdb"
    code = main(
        [
            str(tmp_path / "day"),
            "--out",
            str(out),
            "--engine",
            "ray",
            "--workers",
            "2",
            "--sql",
            "SELECT count(*) AS n, count(id) AS answered FROM jobs",
            "--format",
            "csv",
        ]
    )
    captured = capfd.readouterr()
    assert code == 0 and captured.out == "n,answered\n40,40\n"
    assert "40 job(s) in" in captured.err  # kb's own line, on stderr


@pytest.mark.ray
def test_the_time_one_job_may_take_holds_on_ray(ray_local, tmp_path):
    """Ray runs an actor's tasks on its main thread: the SIGALRM budget applies there too."""
    day = tmp_path / "day"
    day.mkdir()
    for i in range(3):
        (day / f"job-{i}.log").write_text(("step ok\n" * 200_000) + ILLEGAL + "\n")
    jobs = discover([str(day)], files=True)
    assert len(jobs) == 3
    rows = list(ray_engine.run(jobs, workers=1, seconds=0.001))
    assert len(rows) == 3
    assert all(r["error"] and "stopped after 0.001 s" in r["error"] for r in rows), rows
    rows = list(ray_engine.run(jobs, workers=1, seconds=0))  # 0: no limit
    assert all(r["error"] is None and r["id"] == "cuda-illegal-memory-access" for r in rows)


def _actors_under(pid: int) -> list[int]:
    """The processes of this test's own Ray (under this process) that are kb's actors."""
    return [k for k in _descendants(pid) if _named(k, b"ray::_Triage")]


@pytest.mark.ray
@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs /proc")
def test_an_actor_that_dies_loses_no_row(ray_local, tmp_path):
    jobs = discover([str(_jobs(tmp_path / "day", 40))])
    expected = _same(list(local.run(jobs, workers=1)))
    pool = ray_engine._Pool(ray_local, 2, [], None)
    rows = []
    for row in pool.run(jobs):
        if not rows:  # the first batch is back: the actors hold the next ones
            victims = _actors_under(os.getpid())
            assert victims
            os.kill(victims[0], signal.SIGKILL)
        rows.append(row)
    assert pool.lost >= 1  # a batch came back from a dead actor and was read again
    assert _same(rows) == expected


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/task/{p}/children") as fh:
                kids = [int(x) for x in fh.read().split()]
        except OSError:
            continue
        found += kids
        todo += kids
    return found


def _named(pid: int, prefix: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().startswith(prefix)
    except OSError:
        return False


@pytest.mark.ray
@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs /proc")
def test_sigterm_ends_a_ray_run_as_ctrl_c_does_and_leaves_no_ray_behind(tmp_path):
    """ray.init puts its own SIGTERM handler in place (exit at once, Ray's processes left to
    their reaper); kb keeps its own: one line, rc 143, the actors and the local Ray stopped."""
    _ray()
    day = tmp_path / "day"
    day.mkdir()
    one = tmp_path / "job.log"
    one.write_text(f"epoch 1\n[rank0]: {ILLEGAL}\n")
    for i in range(30_000):  # enough that the run is still reading when the signal comes
        os.link(one, day / f"job-{i}.log")  # links: directory entries, no data blocks
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kb",
            "triage",
            str(day),
            "--files",
            "--out",
            str(tmp_path / "t.duckdb"),
            "--engine",
            "ray",
            "--workers",
            "2",
            "--quiet",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not any(_named(k, b"ray::_Triage") for k in _descendants(p.pid)):
            assert p.poll() is None, p.communicate()
            assert time.monotonic() < deadline, "no actor started"
            time.sleep(0.1)
        ray_procs = _descendants(p.pid)
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 143, err
    assert out == "" and err.strip() == "kb triage: terminated"
    deadline = time.monotonic() + 30
    while [k for k in ray_procs if os.path.exists(f"/proc/{k}")]:
        assert time.monotonic() < deadline, "Ray's processes outlived kb triage"
        time.sleep(0.2)


# ---------------------------------------------------------------- with a Ray Client server
@pytest.mark.ray
def test_a_ray_client_address_reaches_the_cluster(tmp_path):
    """`ray://` through Ray Client (the fleet extra installs it), to a head started here."""
    _ray()
    pytest.importorskip("grpc")
    ray_cli = shutil.which("ray", path=os.path.dirname(sys.executable))
    if ray_cli is None:
        pytest.skip("no `ray` command beside this Python")
    port = _free_port()
    # A short folder of its own: Ray's socket paths must stay under 108 characters, and its
    # ray_current_cluster file there tells no other Ray on this machine about this head.
    temp = tempfile.mkdtemp(prefix="kbray-")
    env = dict(os.environ, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(16))
    env.pop("RAY_ADDRESS", None)
    head = subprocess.Popen(
        [
            ray_cli,
            "start",
            "--head",
            "--block",
            "--port=0",
            f"--ray-client-server-port={port}",
            "--num-cpus=1",
            "--include-dashboard=false",
            "--disable-usage-stats",
            f"--temp-dir={temp}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 90
        while True:
            assert head.poll() is None, "the Ray head did not start"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the Ray Client server did not start"
                time.sleep(0.5)
        jobs = _jobs(tmp_path / "day", 3)
        r = _kb(
            str(jobs),
            "--out",
            str(tmp_path / "t.duckdb"),
            "--engine",
            "ray",
            "--address",
            f"ray://127.0.0.1:{port}",
            "--quiet",
            "--sql",
            "SELECT count(id) AS answered FROM jobs",
            "--format",
            "csv",
            env=env,
        )
        assert r.returncode == 0, r.stderr
        assert r.stdout == "answered\n3\n" and r.stderr == ""
    finally:
        head.send_signal(signal.SIGTERM)  # --block: it stops the processes it started
        try:
            head.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait(10)
        shutil.rmtree(temp, ignore_errors=True)
