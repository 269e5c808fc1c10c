"""A job's folder is read whole, or says exactly what it left out and why; a file or folder that
cannot be read is reported and the readable ranks are still diagnosed; links are followed,
without loops. And the verdict of a job whose root has no entry of its own leads with the root,
never with a consequence's entry (issue 29, items 7 and 13)."""

import gzip
import json
import os
import subprocess
import sys

import pytest
from _repo import REPO

import kb.job.inputs as inputs
import kb.job.lookup as job_lookup
from kb.diagnosis.engine import default_engine
from kb.job.lookup import lookup_paths

pytestmark = pytest.mark.warm_home  # runs kb as a user would after its first run; tests no cache

ENGINE = default_engine()
JOBS = REPO / "tests" / "fixtures" / "jobs"

# A rank that fails (cuda-oom) and one that times out waiting for it: lines as torch prints them
# (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp; the OOM message from c10/cuda).
ROOT = (
    "[rank7]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 7 has a "
    "total capacity of 79.10 GiB of which 1.06 GiB is free.\n"
)
WAITER = (
    "[E1123 10:00:30.000000000 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=4, NumelOut=4, "
    "Timeout(ms)=600000) ran for 600013 milliseconds before timing out.\n"
)


def _job(folder, root_name="rank7.log", waiters=(0, 1)):
    folder.mkdir(parents=True, exist_ok=True)
    for r in waiters:
        (folder / f"rank{r}.log").write_text(WAITER.format(r=r))
    (folder / root_name).write_text(ROOT)
    return folder


def test_a_folder_of_more_than_4096_files_is_read_whole(tmp_path):
    """4,100 checkpoint shards sort before the rank logs: a cut at 4,096 files lost the root."""
    job = _job(tmp_path / "job")
    for i in range(4100):
        (job / f"a_shard_{i:05d}.pt").write_bytes(b"PK\x03\x04")
    jl = lookup_paths(ENGINE, [str(job)])
    assert jl.job.root.rank == 7 and jl.job.root.id == "cuda-oom"
    # the shards are left out as not logs, each listed, none said in the verdict
    assert sum(1 for _, why in jl.left_out if why == "not a log by its name") == 4100
    assert not jl.job.problems


def test_past_the_limit_says_what_it_left_out(tmp_path, monkeypatch):
    monkeypatch.setattr(inputs, "MAX_FILES", 2)
    job = _job(tmp_path / "job")
    jl = lookup_paths(ENGINE, [str(job)])
    said = " ".join(jl.job.problems)
    assert "1 files left out over the 2 kb reads in one folder" in said
    assert str(job / "rank7.log") in said  # by name order, the last one
    assert (str(job / "rank7.log"), "over the 2 files kb reads in one folder") in jl.left_out


def test_an_unreadable_file_is_reported_and_the_others_diagnosed(tmp_path, monkeypatch):
    job = _job(tmp_path / "job", waiters=(0, 1, 2))
    real = job_lookup._scan_file

    def scan(path, engine):
        if path.endswith("rank2.log"):
            raise job_lookup.InputError(f"permission denied: {path}")
        return real(path, engine)

    monkeypatch.setattr(job_lookup, "_scan_file", scan)
    jl = lookup_paths(ENGINE, [str(job)])
    assert jl.job.root.rank == 7
    assert any("permission denied" in p and "rank2.log" in p for p in jl.job.problems)


def test_a_truncated_gzip_rank_log(tmp_path):
    job = _job(tmp_path / "job", waiters=(0,))
    data = gzip.compress((WAITER.format(r=1) * 200).encode())
    (job / "rank1.log.gz").write_bytes(data[: len(data) // 2])
    jl = lookup_paths(ENGINE, [str(job)])
    assert jl.job.root.rank == 7
    assert jl.job.rank(1).cause == "timeout"  # what it held before the cut was read
    assert any("truncated" in w for w in jl.result.warnings)


def test_links_are_followed_without_loops(tmp_path):
    job = tmp_path / "job"
    job.mkdir()
    elsewhere = _job(job / ".logs")  # hidden: read only through the links (links out of the
    for name in ("rank0.log", "rank1.log", "rank7.log"):  # job's folder are not followed)
        (job / name).symlink_to(elsewhere / name)
    (job / "again").symlink_to(job)  # a loop
    (job / "gone.log").symlink_to(job / "nowhere.log")
    jl = lookup_paths(ENGINE, [str(job)])
    assert jl.job.root.rank == 7 and {v.rank for v in jl.job.ranks} == {0, 1, 7}
    assert (str(job / "again"), "a link to a folder already read") in jl.left_out
    assert any("gone.log: a broken link" in p for p in jl.job.problems)


def test_an_unreadable_subfolder_is_reported(tmp_path, monkeypatch):
    job = _job(tmp_path / "job")
    (job / "node2").mkdir()
    (job / "node2" / "rank9.log").write_text(WAITER.format(r=9))
    real = os.scandir

    def scandir(path):
        if str(path).endswith("node2"):
            raise PermissionError(13, "Permission denied")
        return real(path)

    monkeypatch.setattr(inputs.os, "scandir", scandir)
    jl = lookup_paths(ENGINE, [str(job)])
    assert jl.job.root.rank == 7
    assert any(p.startswith("cannot read folder") and "node2" in p for p in jl.job.problems)


def test_left_out_files_are_in_the_json(tmp_path):
    job = _job(tmp_path / "job")
    (job / "model.pt").write_bytes(b"PK")
    out = subprocess.run(
        [sys.executable, "-m", "kb", "lookup", "--json", str(job)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    d = json.loads(out.stdout)
    assert {"path": str(job / "model.pt"), "why": "not a log by its name"} in [
        {"path": os.path.abspath(x["path"]), "why": x["why"]} for x in d["input"]["left_out"]
    ]


# ---------------------------------------------------------------- a root with no entry leads
def _kb(*args):
    return subprocess.run(
        [sys.executable, "-m", "kb", "lookup", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "NO_COLOR": "1"},
    )


def test_github_titles_the_annotation_with_the_roots_verdict():
    gh = _kb("--format", "github", "tests/fixtures/jobs/cpu-stall/run").stdout
    title = gh.split("title=", 1)[1].split("::", 1)[0]
    assert title == "kb%3A stalled (rank 1)"
    assert "gloo-connection-error" not in title


@pytest.mark.parametrize("fmt", ["text", "markdown"])
def test_the_detail_leads_with_the_root_not_a_consequence(fmt):
    out = _kb("--format", fmt, "tests/fixtures/jobs/cpu-stall/run").stdout
    assert "Try first" not in out  # gloo-connection-error's first fix is rank 0's, not rank 1's
    if fmt == "text":
        body = out.split("\n\n", 1)[1]
        assert body.startswith("What rank 1 was last doing")
        assert "stall.py:15 in main" in body  # where it last called a collective, from its dump
