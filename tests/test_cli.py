"""Each command's exit codes and output, through the real entry point."""

import json
import subprocess
import sys

import pytest
from _repo import REPO

from kb.cli.main import main

pytestmark = pytest.mark.warm_home  # runs kb as a user would, after its first run


def run(*argv, stdin=None):
    p = subprocess.run(
        [sys.executable, "-m", "kb", *argv], capture_output=True, input=stdin, cwd=REPO
    )
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def test_version_and_help():
    rc, out, _ = run("--version")
    assert rc == 0 and out.startswith("kb ")
    for cmd in ("lookup", "run", "show", "list", "lint", "code", "index", "verify", "tui"):
        rc, out, _ = run(cmd, "--help")
        assert rc == 0 and "examples:" in out, cmd


def test_no_command_is_usage_error():
    rc, out, _ = run()
    assert rc == 2 and "COMMAND" in out


def test_unknown_option_is_usage_error():
    rc, _, err = run("lookup", "--bogus")
    assert rc == 2 and "kb: error" in err


def test_list_text_and_json(kb_bundled):
    rc, out, _ = run("list")
    assert rc == 0 and "cuda-illegal-memory-access" in out
    rc, out, _ = run("list", "--json")
    rows = json.loads(out)
    assert {r["id"] for r in rows} == {e.id for e in kb_bundled.entries}
    assert all({"id", "title", "area", "codes", "verification"} <= set(r) for r in rows)


def test_show_text_json_markdown():
    rc, out, _ = run("show", "cuda-illegal-memory-access")
    assert rc == 0 and "Causes" in out and "Fixes" in out
    rc, out, _ = run("show", "cuda-illegal-memory-access", "--json")
    d = json.loads(out)
    assert d["id"] == "cuda-illegal-memory-access" and d["signatures"]
    rc, out, _ = run("show", "cuda-illegal-memory-access", "--markdown")
    assert rc == 0 and out.startswith("## ") and "### Fixes" in out


def test_show_unknown_suggests():
    rc, out, err = run("show", "cuda-ilegal-memory-access")
    assert rc == 1 and "cuda-illegal-memory-access" in err and out == ""


def test_lint_exit_codes(tmp_path):
    rc, out, _ = run("lint")
    assert rc == 0, out
    bad = tmp_path / "bad.yaml"
    bad.write_text("- not a mapping\n")
    rc, out, _ = run("lint", str(bad))
    assert rc == 1 and "KB003" in out and str(bad) in out
    rc, out, _ = run("lint", "--json", str(bad))
    assert rc == 1 and json.loads(out)["problems"][0]["code"] == "KB003"
    rc, _, err = run("lint", str(tmp_path / "missing"))
    assert rc == 2 and "no such file" in err


def test_code_command():
    rc, out, _ = run("code", "700")
    assert rc == 0 and "cudaErrorIllegalAddress" in out and "cuda-illegal-memory-access" in out
    rc, out, _ = run("code", "4", "--json")
    names = {r["name"] for r in json.loads(out)}
    assert {
        "cudaErrorCudartUnloading",
        "cudaErrorLaunchFailure",
        "CUDA_ERROR_DEINITIALIZED",
    } <= names
    rc, _, err = run("code", "123456")
    assert rc == 1 and "not a CUDA" in err


def test_lookup_exit_codes_and_json():
    rc, out, _ = run("lookup", "RuntimeError: CUDA error: an illegal memory access was encountered")
    assert rc == 0 and out.startswith("cuda-illegal-memory-access")
    rc, out, _ = run("lookup", "--json", "CUDA error: an illegal memory access was encountered")
    d = json.loads(out)
    m = d["matches"][0]
    assert m["id"] == "cuda-illegal-memory-access" and m["confidence"] == "high"
    assert {
        "id",
        "title",
        "confidence",
        "score",
        "signature",
        "line",
        "line_number",
        "captures",
    } <= set(m)
    assert set(d) >= {"matches", "facts", "diagnosis"}
    rc, out, _ = run("lookup", "--json", "everything is fine, training finished")
    assert rc == 1 and json.loads(out)["matches"] == []
    rc, out, _ = run("lookup", "everything is fine")
    assert rc == 1 and "no known entry" in out and "root failure" not in out
    # A failure no entry knows: exit 4, its root failure first, marked as not from the KB.
    rc, out, _ = run("lookup", "SomeLibraryError: the frobnicator failed to converge")
    assert rc == 4 and out.startswith("root failure  SomeLibraryError  (not in the knowledge base)")
    assert "Likely causes" not in out and "Try first" not in out
    rc, out, _ = run("lookup", "--json", "SomeLibraryError: the frobnicator failed to converge")
    d = json.loads(out)
    assert rc == 4 and d["matches"] == [] and d["root"]["exception"] == "SomeLibraryError"


def test_lookup_stdin_and_file(tmp_path):
    log = (
        b"epoch 1\n" * 1000
        + b"[rank0]: RuntimeError: CUDA error: an illegal memory access was encountered\n"
    )
    rc, out, _ = run("lookup", "--stdin", stdin=log)
    assert rc == 0 and "line 1001" in out
    import gzip

    gz = tmp_path / "run.log.gz"
    gz.write_bytes(gzip.compress(log))
    rc, out, _ = run("lookup", "--file", str(gz), "--json")
    assert rc == 0 and json.loads(out)["matches"][0]["line_number"] == 1001


@pytest.mark.parametrize(
    "args,msg",
    [
        # `kb lookup` alone: a usage error on a terminal, standard input in a pipe
        # (tests/test_cli_firstuse.py, with a real terminal).
        (["lookup", "--file", "/nonexistent/log"], "no such file"),
        (["lookup", "--file", "/"], "folder"),
        (["lookup", "--top", "0", "x"], "--top"),
        (["lookup", "missing/rank0.log"], "no such file"),
        (["lookup", "a.log", "b.log"], "no such file"),
        (["lookup", "--stdin", "--file", "x.log"], "not both"),
    ],
)
def test_lookup_usage_errors(args, msg):
    rc, _, err = run(*args)
    assert rc == 2 and msg in err and "Traceback" not in err


def test_lookup_corrupt_gz(tmp_path):
    p = tmp_path / "bad.gz"
    p.write_bytes(b"\x1f\x8b\x08\x00garbage-not-gzip")
    rc, _, err = run("lookup", "--file", str(p))
    assert rc == 2 and "cannot read" in err and "Traceback" not in err


def test_lookup_markdown():
    rc, out, _ = run(
        "lookup", "--format", "markdown", "CUDA error: an illegal memory access was encountered"
    )
    assert rc == 0 and out.startswith("### kb: `cuda-illegal-memory-access`")


def test_main_in_process(capsys):
    assert main(["code", "cudaErrorAssert"]) == 0
    assert "710" in capsys.readouterr().out


IMA = "RuntimeError: CUDA error: an illegal memory access was encountered\n"
TIMEOUT = (
    "[E1123 10:00:30.1 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=3, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600001 "
    "milliseconds before timing out.\n"
)


def test_lookup_files_of_one_job(tmp_path):
    (tmp_path / "rank0.log").write_text(TIMEOUT)
    (tmp_path / "rank1.log").write_text("step 1\n" + IMA)
    for argv in (
        ["lookup", str(tmp_path / "rank0.log"), str(tmp_path / "rank1.log")],
        ["lookup", "--file", str(tmp_path / "rank0.log"), "--file", str(tmp_path / "rank1.log")],
        ["lookup", str(tmp_path)],
    ):
        rc, out, _ = run(*argv, "--json")
        d = json.loads(out)
        assert rc == 0 and d["job"]["root"]["rank"] == 1, argv
        assert d["matches"][0]["id"] == "cuda-illegal-memory-access"
        assert d["matches"][0]["path"].endswith("rank1.log") and d["matches"][0]["line_number"] == 2
    rc, out, _ = run("lookup", str(tmp_path))
    assert out.startswith("job  root cause: rank 1")


def test_lookup_batch_jsonl(tmp_path):
    (tmp_path / "a.log").write_text(IMA)
    (tmp_path / "b.log").write_text("all good\n")
    rc, out, _ = run(
        "lookup", "--batch", "--format", "jsonl", str(tmp_path / "a.log"), str(tmp_path / "b.log")
    )
    rows = [json.loads(x) for x in out.splitlines()]
    assert rc == 0 and [r["input"]["name"] for r in rows] == [
        str(tmp_path / "a.log"),
        str(tmp_path / "b.log"),
    ]
    assert rows[0]["matches"][0]["id"] == "cuda-illegal-memory-access" and rows[1]["matches"] == []
    rc, out, _ = run("lookup", "--batch", "--format", "jsonl", str(tmp_path / "b.log"))
    assert rc == 1
    rc, out, _ = run("lookup", "--format", "jsonl", "--stdin", stdin=IMA.encode())
    assert (
        len(out.splitlines()) == 1
        and json.loads(out)["matches"][0]["id"] == "cuda-illegal-memory-access"
    )


def test_lookup_github_annotations(tmp_path):
    rc, out, _ = run(
        "lookup", "--format", "github", "--stdin", stdin=("100% done\n" + IMA).encode()
    )
    assert rc == 0 and out.startswith("::error title=kb%3A cuda-illegal-memory-access::")
    assert out.count("\n") == 1
    rc, out, _ = run("lookup", "--format", "github", "nothing wrong here")
    assert rc == 1 and out.startswith("::warning ")
