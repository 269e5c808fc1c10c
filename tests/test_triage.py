"""kb triage: jobs found under folders, one row each, the table in DuckDB / Parquet, the summary as
SQL over it, the faulty-node view, the jobs file join, and the same rows from every engine.

The jobs are the repository's own captured jobs (tests/fixtures/jobs/*/run, real torchrun runs
through `kb run`) and logs made of the entries' own example lines (real wordings)."""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import tarfile
from collections import Counter
from contextlib import redirect_stdout
from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import pytest
from _repo import REPO

import kb
from kb.fleet import local, store
from kb.fleet.cli import main
from kb.fleet.discover import Job, discover
from kb.fleet.meta import read as read_meta
from kb.fleet.triage import COLUMN_NAMES, triage

pytestmark = pytest.mark.warm_home  # runs kb as a user would after its first run; tests no cache

JOBS = REPO / "tests" / "fixtures" / "jobs"
RUNS = sorted(JOBS.glob("*/run"))


def _example(entry_id: str, *needles: str) -> str:
    """An example line of an entry (a real wording) holding every needle."""
    for text in kb.load().get(entry_id).examples_match:
        if all(n in text for n in needles):
            return text
    raise AssertionError(f"{entry_id} has no example with {needles}")


def _same(rows: list[dict]) -> list[dict]:
    """Rows without the time each took (the only column that differs between runs)."""
    return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]


def _cli(*argv: str) -> tuple[int, str]:
    buf = io.StringIO()
    with redirect_stdout(buf):
        code = main(list(argv))
    return code, buf.getvalue()


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> Path:
    """A folder of one-log jobs: a lost GPU on a named host, an Xid on node17 twice (GSP timeout,
    row-remapping failure) and an illegal memory access next to an application Xid there."""
    d = tmp_path_factory.mktemp("logs")
    lost = _example("gpu-lost", "gpu-node-12 kernel", "Xid")
    gsp = _example("nvidia-xid", "node17 kernel", "119")
    remap = _example("cuda-ecc-error", "node17 kernel", "64")
    app_xid = _example("nvidia-xid", "): 13,")
    ima = _example("cuda-illegal-memory-access", "RuntimeError: CUDA error: an illegal memory")
    (d / "lost.log").write_text(
        "2026-05-18 19:02:30,100 INFO step 100\n" + lost + "\n" + _example("gpu-lost", "GPUIsLost")
    )
    (d / "gsp.log").write_text(gsp + "\n")
    (d / "remap.log").write_text(remap + "\n")
    # The application's own error on node17 (an Xid 13 in its syslog): a user-code failure,
    # which must not count against the node.
    (d / "ima.log").write_text("May 20 04:00:00 node17 kernel: " + app_xid + "\n" + ima + "\n")
    return d


# ---------------------------------------------------------------- rows
@pytest.mark.parametrize("run", RUNS, ids=[r.parent.name for r in RUNS])
def test_fixture_job_row_is_the_job_view_verdict(run):
    row = triage(str(run))
    assert set(row) == set(COLUMN_NAMES)
    assert row["error"] is None
    found = kb.lookup_job([str(run)])
    best, view = found.result.best, found.job
    assert row["id"] == (best.id if best else None)
    assert row["root_rank"] == view.root.rank
    assert row["kind"] == view.kind and type(row["kind"]) is str  # plain text, not kb's enum
    if best is not None:
        assert (row["domain"], row["action"]) == (best.entry.domain, best.entry.action)
        assert row["domain"] in ("user-code", "environment", "infrastructure", "unknown")
    assert row["kb_version"] == kb.__version__
    # torchrun's summary names the host; in gil's GPU capture torchrun died reading a killed
    # rank's half-written error file (a JSONDecodeError) and printed no summary
    summary = "host      : localhost" in (run / "output.log").read_text(errors="replace")
    assert row["host"] == ("localhost" if summary else None)
    assert row["ranks"] == len(view.ranks) and row["lines"] > 0 and row["bytes"] > 0
    # The first failure falls inside the run, as `kb run` recorded its start and end.
    record = json.loads((run / "kb-run.json").read_text())
    start, end = (
        datetime.strptime(record[k], "%Y-%m-%dT%H:%M:%S%z").replace(tzinfo=None)
        for k in ("start", "end")
    )
    first = datetime.fromisoformat(row["first_failure"])
    assert start - timedelta(seconds=1) <= first <= end + timedelta(seconds=1)


def test_fixture_rows_known_answers():
    rows = {r.parent.name: triage(str(r)) for r in RUNS}
    oom = rows["oom"]
    assert (oom["id"], oom["domain"], oom["action"]) == ("cuda-oom", "user-code", "fix-code")
    assert oom["root_rank"] == 1 and oom["root_line"].startswith("torch.OutOfMemoryError")
    assert oom["exception"] == "OutOfMemoryError" and oom["generic"] is False
    stall = rows["stall"]
    assert (stall["id"], stall["kind"], stall["root_rank"]) == ("nccl-timeout", "desync", 1)
    assert "Watchdog caught collective operation timeout" in stall["root_line"]
    # the watchdog's glog time (no year in it), the year from torchrun's summary of the same job
    assert stall["first_failure"] == "2026-11-23 07:02:18.175166"
    assert rows["device_assert"]["id"] == "cuda-device-side-assert"


def test_log_file_gz_and_tarball_are_jobs(logs, tmp_path):
    row = triage(str(logs / "lost.log"))
    assert (row["id"], row["domain"], row["action"]) == ("gpu-lost", "infrastructure", "drain-node")
    assert (row["host"], row["gpu"]) == ("gpu-node-12", "0000:3b:00")
    assert row["root_line"].startswith("May 18 19:02:39 gpu-node-12 kernel: NVRM: Xid")
    assert row["first_failure"].endswith("-05-18 19:02:39")  # syslog has no year

    gz = tmp_path / "lost.log.gz"
    gz.write_bytes(gzip.compress((logs / "lost.log").read_bytes()))
    row_gz = triage(str(gz))
    assert {k: v for k, v in row_gz.items() if k not in ("job", "seconds", "bytes")} == {
        k: v for k, v in row.items() if k not in ("job", "seconds", "bytes")
    }

    tarball = tmp_path / "job-oom.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(JOBS / "oom" / "run", arcname="job-oom")
    folder = triage(str(JOBS / "oom" / "run"))
    packed = triage(str(tarball))
    assert packed["job"] == str(tarball) and packed["error"] is None
    for col in ("id", "root_rank", "kind", "root_line", "first_failure", "domain", "host"):
        assert packed[col] == folder[col], col


def test_unknown_error_still_has_its_root_line(tmp_path):
    log = tmp_path / "train.log"
    log.write_text(
        'Traceback (most recent call last):\n  File "train.py", line 3, in <module>\n'
        "    main()\nmylib.WidgetError: the frobnicator refused the widget\n"
    )
    row = triage(str(log))
    assert row["id"] is None and row["error"] is None
    assert (row["kind"], row["exception"]) == ("exception", "WidgetError")
    assert row["root_line"] == "mylib.WidgetError: the frobnicator refused the widget"


def test_unreadable_jobs_are_rows_with_error(tmp_path):
    bad = tmp_path / "job-9.tar.gz"
    bad.write_bytes(b"\x1f\x8b" + b"not a tarball" * 20)
    row = triage(str(bad))
    assert row["id"] is None and "not a tar archive" in row["error"]
    gone = triage(Job(str(tmp_path / "vanished.log"), "file"))  # deleted after it was found
    assert "no such file" in gone["error"]
    empty = tmp_path / "job-empty"
    empty.mkdir()
    assert "no log files" in triage(str(empty))["error"]
    # The run goes on: the bad job is a row, the good one is answered, exit 0.
    good = tmp_path / "job-ok.log"
    good.write_text(_example("cuda-oom", "torch.OutOfMemoryError") + "\n")
    out = tmp_path / "t.duckdb"
    code, text = _cli(str(bad), str(good), "--out", str(out), "--quiet")
    assert code == 0
    rows = duckdb.connect(str(out)).execute("SELECT job, id, error FROM jobs").fetchall()
    assert [(Path(j).name, i, e is not None) for j, i, e in rows] == [
        ("job-9.tar.gz", None, True),
        ("job-ok.log", "cuda-oom", False),
    ]
    assert "1 unreadable" in text and "not a tar archive" in text


# ---------------------------------------------------------------- discovery
def test_discover_a_day_of_jobs(tmp_path):
    day = tmp_path / "day"
    for name in ("job-1", "job-2"):
        shutil.copytree(JOBS / "oom" / "run", day / name)  # `kb run` folders
    ranks = day / "job-3"
    for r in (0, 1):
        (ranks / str(r)).mkdir(parents=True)
        (ranks / str(r) / "stderr.log").write_text("x\n")
    (day / "job-4.log").write_text("x\n")
    shutil.copy(JOBS / "oom" / "run" / "output.log", day / "job-5.log")
    with tarfile.open(day / "job-6.tar.gz", "w:gz") as tar:
        tar.add(JOBS / "oom" / "run", arcname="job-6")
    slurm = day / "slurm"
    slurm.mkdir()
    for jid in (101, 102):
        (slurm / f"slurm-{jid}.out").write_text("x\n")
    (day / "notes.json").write_text("{}")  # not a log: no job
    found = [(Path(j.path).relative_to(day).as_posix(), j.kind) for j in discover([day])]
    assert found == [
        ("job-4.log", "file"),
        ("job-5.log", "file"),
        ("job-6.tar.gz", "tarball"),
        ("job-1", "folder"),
        ("job-2", "folder"),
        ("job-3", "folder"),  # per-rank folders: one job
        ("slurm/slurm-101.out", "file"),  # Slurm's default names: one job per file
        ("slurm/slurm-102.out", "file"),
    ]
    # A job folder given itself is one job; a path given twice is one job.
    assert discover([day / "job-1", day / "job-1" / ".." / "job-1"]) == [
        Job(str(day / "job-1"), "folder")
    ]
    # --files: every log file is a job
    assert len(discover([day / "job-3"], files=True)) == 2


def test_missing_path_and_bad_out_are_usage_errors(tmp_path, capsys):
    assert main([str(tmp_path / "nope"), "--out", str(tmp_path / "t.duckdb")]) == 2
    assert "no such file or folder" in capsys.readouterr().err
    assert main([str(RUNS[0]), "--out", str(tmp_path / "t.csv")]) == 2
    assert ".duckdb or .parquet" in capsys.readouterr().err
    assert main(["--out", str(tmp_path / "none.duckdb"), "--sql", "SELECT 1"]) == 2
    assert "no such file" in capsys.readouterr().err


# ---------------------------------------------------------------- the table
def test_parquet_and_duckdb_tables_read_back(tmp_path):
    paths = [str(r) for r in RUNS]
    pq, db = tmp_path / "day.parquet", tmp_path / "day.duckdb"
    assert _cli(*paths, "--out", str(pq), "--quiet", "--workers", "1")[0] == 0
    assert _cli(*paths, "--out", str(db), "--quiet", "--workers", "1")[0] == 0
    con = duckdb.connect()
    from_pq = con.execute(f"SELECT * EXCLUDE (seconds) FROM read_parquet('{pq}')").fetchall()
    with duckdb.connect(str(db), read_only=True) as dbc:
        from_db = dbc.execute("SELECT * EXCLUDE (seconds) FROM jobs").fetchall()
        types = dict(dbc.execute("SELECT column_name, column_type FROM (DESCRIBE jobs)").fetchall())
        assert dbc.execute("SELECT count(*) FROM faulty_nodes").fetchone() == (0,)
    assert from_pq == from_db and len(from_db) == len(RUNS)
    assert list(types) == [n for n, _ in store.COLUMNS]
    assert types["first_failure"] == "TIMESTAMP" and types["root_rank"] == "INTEGER"
    by_job = {r[0]: r for r in from_db}
    assert by_job[str(JOBS / "oom" / "run")][1] == "cuda-oom"
    assert [r[0] for r in from_db] == sorted(paths)  # sorted by job


def test_sql_queries_a_written_table(tmp_path):
    db = tmp_path / "day.duckdb"
    assert _cli(*[str(r) for r in RUNS], "--out", str(db), "--quiet", "--workers", "1")[0] == 0
    code, text = _cli(
        "--out",
        str(db),
        "--sql",
        "SELECT id, count(*) AS n FROM jobs WHERE id IS NOT NULL GROUP BY id ORDER BY n DESC, id",
        "--format",
        "csv",
    )
    assert code == 0
    lines = text.splitlines()
    assert lines[0] == "id,n"
    counts = {k: int(v) for k, v in (line.split(",") for line in lines[1:])}
    expected = Counter(kb.lookup_job([str(r)]).result.best.id for r in RUNS)
    assert counts == expected and counts["cuda-oom"] >= 1
    code, _ = _cli("--out", str(db), "--sql", "SELECT nope FROM jobs")
    assert code == 2
    # the table may also be given as the one path
    code, again = _cli("--sql", "SELECT count(*) AS n FROM jobs", str(db), "--format", "csv")
    assert code == 0 and again.splitlines() == ["n", str(len(RUNS))]


def test_faulty_node_view_counts_only_hardware_failures(logs, tmp_path):
    db = tmp_path / "day.duckdb"
    code, text = _cli(str(logs), "--files", "--out", str(db), "--quiet", "--workers", "1")
    assert code == 0
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT job, id, domain, host, gpu FROM jobs ORDER BY job").fetchall()
        got = {Path(j).name: (i, d, h, g) for j, i, d, h, g in rows}
        faulty = con.execute(
            "SELECT level, host, gpu, failures, classes, jobs FROM faulty_nodes"
        ).fetchall()
    assert got["gsp.log"] == ("nvidia-xid", "infrastructure", "node17", "0000:65:00")
    assert got["remap.log"] == ("cuda-ecc-error", "infrastructure", "node17", "0000:65:00")
    assert got["ima.log"][:3] == ("cuda-illegal-memory-access", "user-code", "node17")
    assert got["lost.log"][2] == "gpu-node-12"
    # node17: two hardware-class failures on one GPU; the user's own error there is not one;
    # gpu-node-12 failed once.
    assert [(lv, h, g, n, c) for lv, h, g, n, c, _ in faulty] == [
        ("host", "node17", None, 2, ["cuda-ecc-error", "nvidia-xid"]),
        ("gpu", "node17", "0000:65:00", 2, ["cuda-ecc-error", "nvidia-xid"]),
    ]
    assert [Path(j).name for j in faulty[0][5]] == ["gsp.log", "remap.log"]
    code, text = _cli("--out", str(db), "--sql", "SELECT host FROM faulty_nodes")
    assert code == 0 and "node17" in text and "gpu-node-12" not in text
    code, summary = _cli(str(logs), "--files", "--out", str(db), "--quiet", "--workers", "1")
    assert "repeated hardware-class failures" in summary and "node17" in summary


# ---------------------------------------------------------------- the jobs file
def test_meta_join_and_gpu_hours(tmp_path):
    day = tmp_path / "day"
    for name in ("1001", "1002", "1003"):
        shutil.copytree(JOBS / ("oom" if name != "1003" else "stall") / "run", day / name)
    shutil.copy(JOBS / "oom" / "run" / "output.log", day / "slurm-1004.out")
    csv = tmp_path / "jobs.csv"
    csv.write_text(
        "JobID|AllocTRES|Start|End|User\n"
        "1001|billing=64,cpu=64,gres/gpu=8,mem=1T|2026-11-23T01:00:00|2026-11-23T03:00:00|alice\n"
        f"{day / '1002'}|4|2026-11-23T05:00:00|2026-11-23T05:30:00|bob\n"
        "1003|2|1795402000|1795405600|carol\n"
        "1004|1|2026-11-23T00:00:00|Unknown|dave\n"
        "9999|8|2026-11-23T00:00:00|2026-11-23T01:00:00|erin\n"
    )
    meta = read_meta(str(csv))
    assert meta.find(str(day / "1001")).gpu_hours == 16.0  # 8 GPUs x 2 h
    db = tmp_path / "day.duckdb"
    # a day of jobs: three job folders (named by Slurm job id) and one slurm-<id>.out
    code, text = _cli(str(day), "--out", str(db), "--meta", str(csv), "--quiet")
    assert code == 0
    with duckdb.connect(str(db), read_only=True) as con:
        rows = dict(con.execute("SELECT job, gpu_hours FROM jobs").fetchall())
        users = dict(con.execute("SELECT user, gpus FROM jobs").fetchall())
        per_class = dict(con.execute("SELECT id, sum(gpu_hours) FROM jobs GROUP BY id").fetchall())
    assert sorted(Path(j).name for j in rows) == ["1001", "1002", "1003", "slurm-1004.out"]
    assert users == {"alice": 8, "bob": 4, "carol": 2, "dave": 1}
    assert rows[str(day / "slurm-1004.out")] is None  # still running: no end, no hours
    assert per_class["cuda-oom"] == pytest.approx(16.0 + 2.0)  # 1001 (8 x 2 h) + 1002 (4 x 0.5 h)
    assert per_class["nccl-timeout"] == pytest.approx(2.0)  # 1003: 2 GPUs x 3600 s
    assert "GPU hours lost: 20.0" in text


def test_meta_errors_are_usage_errors(tmp_path, capsys):
    csv = tmp_path / "jobs.csv"
    csv.write_text("job,gpus,start\n1,2,2026-11-23T00:00:00\n")
    assert main([str(RUNS[0]), "--out", str(tmp_path / "t.duckdb"), "--meta", str(csv)]) == 2
    assert "no column for end" in capsys.readouterr().err
    csv.write_text("job,gpus,start,end\n1,two,2026-11-23T00:00:00,2026-11-23T01:00:00\n")
    assert main([str(RUNS[0]), "--out", str(tmp_path / "t.duckdb"), "--meta", str(csv)]) == 2
    assert "line 2: gpus 'two' is not a number" in capsys.readouterr().err


# ---------------------------------------------------------------- engines
def test_pool_gives_the_same_rows_in_the_same_order(logs):
    jobs = discover([str(r) for r in RUNS] + [str(logs)], files=False)
    one = list(local.run(jobs, workers=1))
    two = list(local.run(jobs, workers=2))
    assert [r["job"] for r in two] == [j.path for j in jobs]  # the order given
    differ = [
        (a["job"], k, a[k], b[k]) for a, b in zip(_same(one), _same(two)) for k in a if a[k] != b[k]
    ]
    assert differ == [] and len(one) == len(two)


@pytest.fixture(scope="module")
def ray_local():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.mark.ray
def test_ray_engine_gives_the_local_rows(ray_local, logs, tmp_path):
    from kb.fleet import ray_engine

    jobs = discover([str(r) for r in RUNS] + [str(logs)], files=True)
    expected = list(local.run(jobs, workers=1))
    got = list(ray_engine.run(jobs, workers=2))
    differ = [
        (a["job"], k, a[k], b[k])
        for a, b in zip(_same(got), _same(expected))
        for k in a
        if a[k] != b[k]
    ]
    assert differ == [] and len(got) == len(expected)
    assert [r["job"] for r in got] == [j.path for j in jobs]  # order preserved too
    # and through the command line, into the same table as the local engine's
    a, b = tmp_path / "local.duckdb", tmp_path / "ray.duckdb"
    paths = [str(r) for r in RUNS]
    assert _cli(*paths, "--out", str(a), "--quiet", "--workers", "1")[0] == 0
    assert _cli(*paths, "--out", str(b), "--quiet", "--engine", "ray", "--workers", "2")[0] == 0
    q = "SELECT * EXCLUDE (seconds) FROM jobs"
    with duckdb.connect(str(a), read_only=True) as ca, duckdb.connect(str(b), read_only=True) as cb:
        assert ca.execute(q).fetchall() == cb.execute(q).fetchall()


def test_rows_are_json_safe(logs):
    row = triage(str(logs / "lost.log"))
    assert json.loads(json.dumps(row)) == row
    assert os.path.basename(row["job"]) == "lost.log"


def test_a_job_with_no_failure_is_counted_as_such_not_as_without_an_answer(tmp_path):
    ok = tmp_path / "job-ok.log"
    ok.write_text("epoch 1 loss 0.51\nepoch 2 loss 0.43\ntraining done\n")
    unknown = tmp_path / "job-unknown.log"
    unknown.write_text(
        'Traceback (most recent call last):\n  File "train.py", line 3, in <module>\n'
        "    main()\nmylib.WidgetError: the frobnicator refused the widget\n"
    )
    out = tmp_path / "t.duckdb"
    code, text = _cli(str(ok), str(unknown), "--out", str(out), "--quiet")
    assert code == 0
    assert "2 jobs: 0 answered (0%), 1 without an answer, 1 with no failure, 0 unreadable" in text
    # The jobs without an answer are those that show a failure no entry knows.
    no_answer = text.split("Jobs without an answer", 1)[1]
    assert "WidgetError" in no_answer and "none" not in no_answer.split("\n\n", 1)[0]


def test_a_folder_of_linked_job_folders_says_why_it_holds_no_job(tmp_path, capsys):
    real = tmp_path / "real"
    links = tmp_path / "links"
    links.mkdir()
    for name in ("job-a", "job-b"):
        (real / name).mkdir(parents=True)
        (real / name / "rank0.log").write_text("KeyError: 'lr'\n")
        (links / name).symlink_to(real / name)
    code, _ = _cli(str(links), "--out", str(tmp_path / "t.duckdb"), "--quiet")
    said = capsys.readouterr().err
    assert code == 0
    assert "2 symbolic link(s) under the paths not followed" in said
    assert f"kb triage {links}/*" in said
    # As the message says: named as paths, the links are read (a path given is followed).
    code, out = _cli(
        *(str(p) for p in sorted(links.iterdir())), "--out", str(tmp_path / "u.duckdb")
    )
    assert code == 0 and "2 jobs: 2 answered" in out
    assert "not followed" not in capsys.readouterr().err


def test_the_root_line_time_comes_from_the_scan_not_a_second_read(tmp_path, monkeypatch):
    """The scan keeps what it peeled off the root's line (RootFailure.prefix): a job's time is
    read from it, the log is never opened again for it."""
    import kb.fleet.triage as triage_mod

    log = tmp_path / "train.log"
    log.write_text(
        "2026-11-28 10:00:00,001 INFO step 1\n"
        "2026-11-28 10:00:09,120 ERROR RuntimeError: CUDA error: an illegal memory access was "
        "encountered\n"
        "2026-11-28 10:00:10,002 INFO shutting down\n"
    )

    def no_second_read(*a):
        raise AssertionError("the log was read again")

    monkeypatch.setattr(triage_mod, "_line_at", no_second_read)
    row = triage(str(log))
    assert row["id"] == "cuda-illegal-memory-access"
    assert row["first_failure"] == "2026-11-28 10:00:09.120000"
