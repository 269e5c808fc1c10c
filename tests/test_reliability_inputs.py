"""Archives and links that cannot hang a fleet run (issue 36): a job's tarball is read as a stream
within bounds (members of any kind, bytes passed over, a compression bomb), only what the job
view reads is written out, one odd member leaves the rest readable; a job's folder counts its
folders toward the file limit, never follows a link out of itself, never opens a FIFO, a device
or a file of /proc; and every triage job has a time that ends in an error row."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from _repo import REPO

import kb.fleet.tarball as tarball
import kb.job.inputs as inputs
from kb.diagnosis.engine import default_engine
from kb.fleet import triage as triage_mod
from kb.fleet.triage import triage
from kb.job.lookup import lookup_paths

ENGINE = default_engine()
# torch's lines (c10/cuda's OOM message, ProcessGroupNCCL's watchdog), as test_job_inputs has them
ROOT = (
    "[rank7]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 7 has a "
    "total capacity of 79.10 GiB of which 1.06 GiB is free.\n"
)
WAITER = (
    "[E1123 10:00:30.000000000 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=4, NumelOut=4, "
    "Timeout(ms)=600000) ran for 600013 milliseconds before timing out.\n"
)


def _job(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for r in (0, 1):
        (folder / f"rank{r}.log").write_text(WAITER.format(r=r))
    (folder / "rank7.log").write_text(ROOT)
    return folder


def _add(tar: tarfile.TarFile, name: str, data: bytes = b"", **kw) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    for k, v in kw.items():
        setattr(info, k, v)
    tar.addfile(info, io.BytesIO(data))


class _Zeros(io.RawIOBase):
    """n zero bytes, made as they are read (a member of 32 MiB costs no memory to add)."""

    def __init__(self, n: int):
        self.left = n

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        k = min(len(b), self.left)
        b[:k] = bytes(k)
        self.left -= k
        return k


def _row_ok(row: dict, root: int = 7) -> None:
    assert row["error"] is None, row["error"]
    assert row["id"] == "cuda-oom" and row["root_rank"] == root


# ------------------------------------------------------------------ tarballs
def test_a_compression_bomb_is_stopped_at_once_and_nothing_is_written(tmp_path, monkeypatch):
    """Nine members of 32 MiB of zeros (a 300 KiB .tar.gz, 1,000x): passed over as a bomb once
    256 MiB have come out, the row says so, and no more than that was written."""
    bomb = tmp_path / "bomb.tar.gz"
    with tarfile.open(bomb, "w:gz", compresslevel=9) as tar:
        for r in (0, 1):
            _add(tar, f"job/rank{r}.log", WAITER.format(r=r).encode())
        for i in range(9):
            info = tarfile.TarInfo(f"job/rank{i + 10}.log")
            info.size = 32 << 20
            tar.addfile(info, _Zeros(info.size))
    assert bomb.stat().st_size < 2 << 20
    spool = tmp_path / "tmp"
    spool.mkdir()
    monkeypatch.setenv("TMPDIR", str(spool))
    monkeypatch.setattr(triage_mod.tempfile, "tempdir", None)
    written: list[int] = []
    real = tarball._write

    def count(out, head, src, mtime):
        why = real(out, head, src, mtime)
        written.append(out.stat().st_size if out.exists() else 0)
        return why

    monkeypatch.setattr(tarball, "_write", count)
    t0 = time.monotonic()
    row = triage(str(bomb))
    assert time.monotonic() - t0 < 60
    assert row["error"] and "bomb" in row["error"], row
    assert sum(written) < 300 << 20  # the members before the bound, never the whole
    assert not list(spool.iterdir())  # and nothing left behind


def test_members_of_every_kind_count_toward_the_bound(tmp_path, monkeypatch):
    """Folders, links and devices are members too: 3,000 empty folders in a job's tarball pass
    a bound of 2,000 members, whatever the bound on files."""
    monkeypatch.setattr(tarball, "MAX_MEMBERS", 2000)
    tb = tmp_path / "dirs.tar"
    with tarfile.open(tb, "w") as tar:
        for i in range(3000):
            _add(tar, f"job/d{i:05d}", type=tarfile.DIRTYPE, mode=0o755)
        _add(tar, "job/rank7.log", ROOT.encode())
    row = triage(str(tb))
    assert row["error"] and "more than 2,000 members" in row["error"]


def test_only_what_the_job_view_reads_is_written(tmp_path, monkeypatch):
    """A checkpoint shard and an image beside the logs are passed over, never unpacked."""
    tb = tmp_path / "job.tar.gz"
    with tarfile.open(tb, "w:gz") as tar:
        for r in (0, 1):
            _add(tar, f"job/rank{r}.log", WAITER.format(r=r).encode())
        _add(tar, "job/rank7.log", ROOT.encode())
        _add(tar, "job/model.pt", b"PK\x03\x04" + bytes(1 << 20))
        _add(tar, "job/loss.png", b"\x89PNG" + bytes(1 << 20))
    names: list[str] = []
    real = tarball._write
    monkeypatch.setattr(tarball, "_write", lambda out, *a: names.append(out.name) or real(out, *a))
    _row_ok(triage(str(tb)))
    assert sorted(names) == ["rank0.log", "rank1.log", "rank7.log"]


def test_one_odd_member_leaves_the_rest_readable(tmp_path):
    """A file where a folder of the same name follows, a 300-character name and a member dated
    1e30: each is passed over (or its name shortened, or its time left unset), and the rank logs
    still answer."""
    tb = tmp_path / "odd.tar"
    with tarfile.open(tb, "w", format=tarfile.PAX_FORMAT) as tar:
        _add(tar, "job/node", b"a file where a folder comes next\n")
        _add(tar, "job/node/rank3.log", WAITER.format(r=3).encode())
        _add(tar, "job/" + "x" * 300 + "_rank1.log", WAITER.format(r=1).encode())
        _add(tar, "job/rank0.log", WAITER.format(r=0).encode(), mtime=1e30)
        _add(tar, "job/rank7.log", ROOT.encode())
    _row_ok(triage(str(tb)))
    skipped = tarball.unpack(str(tb), str(tmp_path / "out"))
    assert any("job/node/rank3.log" in s for s in skipped)
    assert any(p.name.endswith("_rank1.log") for p in (tmp_path / "out" / "job").iterdir())


# ------------------------------------------------------------------ a job's folder
def test_folders_count_toward_the_file_limit(tmp_path, monkeypatch):
    """A job folder of 300 empty folders and its rank logs, with a limit of 100 entries: the
    walk stops at the limit and says so (folders were free before: millions took minutes)."""
    monkeypatch.setattr(inputs, "MAX_FILES", 100)
    job = _job(tmp_path / "job")
    for i in range(300):
        (job / f"a{i:04d}").mkdir()
    jl = lookup_paths(ENGINE, [str(job)])
    said = " ".join(jl.job.problems if jl.job else jl.result.warnings)
    assert "files and folders both count" in said


def test_a_huge_folder_is_listed_only_as_far_as_the_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(inputs, "MAX_FILES", 50)
    job = _job(tmp_path / "job")
    big = job / "shards"
    big.mkdir()
    for i in range(2000):
        (big / f"s{i:05d}.pt").touch()
    listed: list[int] = []
    real = os.scandir

    class Counting:
        def __init__(self, it):
            self.it, self.n = it, 0

        def __enter__(self):
            self.it.__enter__()
            return self

        def __exit__(self, *a):
            listed.append(self.n)
            return self.it.__exit__(*a)

        def __iter__(self):
            for e in self.it:
                self.n += 1
                yield e

    monkeypatch.setattr(inputs.os, "scandir", lambda p: Counting(real(p)))
    lookup_paths(ENGINE, [str(job)])
    assert max(listed) <= 51  # never the 2,000 entries of the folder


def test_links_out_of_the_job_are_not_followed(tmp_path):
    """A link to /usr (a job of 150 invented hosts, 206 s) and a rank-named link to a file of
    /proc: both left out, said, never read; the job's own logs answer."""
    job = _job(tmp_path / "job")
    (job / "usr").symlink_to("/usr")
    (job / "rank5.log").symlink_to("/proc/self/status")
    outside = tmp_path / "elsewhere.log"
    outside.write_text(WAITER.format(r=4))
    (job / "rank4.log").symlink_to(outside)
    jl = lookup_paths(ENGINE, [str(job)])
    assert jl.job.root.rank == 7 and {v.rank for v in jl.job.ranks} == {0, 1, 7}
    why = dict(jl.left_out)
    for name in ("usr", "rank5.log", "rank4.log"):
        assert why[str(job / name)].startswith("a link out of the job's folder")


def test_a_folder_of_links_only_says_why_it_holds_no_log(tmp_path):
    """Every job folder linked from elsewhere: no log is read, and the refusal names the links
    (it said only "no log files in DIR")."""
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "rank0.log").write_text(WAITER.format(r=0))
    (tmp_path / "links").mkdir()
    (tmp_path / "links" / "job-1").symlink_to(tmp_path / "real")
    from kb.errors import InputError

    with pytest.raises(InputError) as e:
        lookup_paths(ENGINE, [str(tmp_path / "links")])
    assert "a link out of the job's folder" in str(e.value)
    assert str(tmp_path / "links" / "job-1") in str(e.value)


def test_a_file_of_proc_given_by_name_is_refused():
    r = subprocess.run(
        [sys.executable, "-m", "kb", "lookup", "/proc/self/status"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert r.returncode == 2 and "a file of the kernel's" in r.stderr, r.stdout + r.stderr


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_triage_never_opens_a_fifo(tmp_path):
    """A FIFO nobody writes to, given to kb triage or lying in a job's folder: said, never
    waited on (it hung the run forever)."""
    fifo = tmp_path / "pipe.log"
    os.mkfifo(fifo)
    r = subprocess.run(
        [sys.executable, "-m", "kb", "triage", str(fifo), "--out", str(tmp_path / "t.duckdb")],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert r.returncode == 2 and "FIFO" in r.stderr
    job = _job(tmp_path / "job")
    os.mkfifo(job / "rank9.log")
    row = triage(str(job))
    _row_ok(row)


# ------------------------------------------------------------------ the time of one job
def test_a_job_past_its_time_is_an_error_row_and_the_run_goes_on(tmp_path, monkeypatch):
    job = _job(tmp_path / "job")
    real = triage_mod.kb.lookup_job

    def slow(*a, **k):
        time.sleep(30)
        return real(*a, **k)

    monkeypatch.setattr(triage_mod.kb, "lookup_job", slow)
    t0 = time.monotonic()
    row = triage(str(job), seconds=0.5)
    assert time.monotonic() - t0 < 10
    assert row["error"] and "stopped after 0.5 s" in row["error"]
    monkeypatch.setattr(triage_mod.kb, "lookup_job", real)
    _row_ok(triage(str(job), seconds=60))  # the next job is read as usual
