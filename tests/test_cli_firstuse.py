"""What a new user meets first, through the real entry point: tables in a pipe and at 80 columns,
word of long work on a terminal, the JSON a script reads, and messages that say what is true.

A terminal is a real pseudo-terminal (its size set with TIOCSWINSZ), a pipe is a pipe."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from _repo import REPO


def run(*argv, stdin=None, env=None, cwd=REPO):
    p = subprocess.run(
        [sys.executable, "-m", "kb", *argv],
        capture_output=True,
        input=stdin,
        cwd=cwd,
        env={**os.environ, **(env or {})},
    )
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def run_tty(*argv, columns=80, env=None, cwd=REPO, stdin=subprocess.DEVNULL, stderr_tty=False):
    """kb with its standard output (and standard error with stderr_tty) on a terminal of
    `columns` columns: (exit code, what the terminal showed, stderr when it was not the tty)."""
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    e = {**os.environ, "COLUMNS": str(columns), "TERM": "xterm", "NO_COLOR": "1", **(env or {})}
    p = subprocess.Popen(
        [sys.executable, "-m", "kb", *argv],
        stdin=stdin,
        stdout=slave,
        stderr=slave if stderr_tty else subprocess.PIPE,
        cwd=cwd,
        env=e,
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            b = os.read(master, 65536)
        except OSError:  # EIO: the other side closed
            break
        if not b:
            break
        chunks.append(b)
    os.close(master)
    err = p.stderr.read().decode("utf-8", "replace") if p.stderr else ""
    rc = p.wait()
    shown = b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")
    return rc, _ANSI.sub("", shown), err


_ANSI = __import__("re").compile(r"\x1b\[[0-9;?]*[A-Za-z]")


# ---------------------------------------------------------------- tables
def _entries():
    rc, out, _ = run("list", "--json")
    assert rc == 0
    return json.loads(out)


def test_piped_list_is_never_cut():
    """`kb list | grep -c attention` counts every entry that says attention, with its title
    whole (a pipe used to get an 80-column table: the area cut to `att…`, the title gone)."""
    rows = _entries()
    p = subprocess.run(
        f"{sys.executable} -m kb list | grep -c attention",
        shell=True,
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "COLUMNS": "80"},
    )
    want = sum("attention" in (r["id"] + r["area"] + r["title"]) for r in rows)
    assert want >= 3 and p.stdout.strip() == str(want)
    rc, out, _ = run("list", env={"COLUMNS": "80"})
    assert rc == 0
    lines = out.splitlines()
    for r in rows:
        line = next(ln for ln in lines if ln.split()[:1] == [r["id"]])
        assert r["title"] in line and r["area"] in line.split()
    assert all(ln == ln.rstrip() for ln in lines)


@pytest.mark.parametrize("columns", [80, 100])
def test_list_on_a_narrow_terminal_cuts_no_id_and_no_code(columns):
    rows = _entries()
    rc, shown, _ = run_tty("list", columns=columns)
    assert rc == 0
    lines = shown.splitlines()
    assert all(len(ln) <= columns for ln in lines), max(lines, key=len)
    assert "…" not in "".join(ln.split("  ")[0] for ln in lines)  # no id ends in an ellipsis
    words = set(shown.split())
    for r in rows:
        assert r["id"] in words
    # Every code of every entry is there, whole (a long list wraps onto more lines).
    for r in rows:
        for c in r["codes"]:
            api, value = c.split(":")
            if api == "runtime":
                assert value in words, (r["id"], value)
    assert "left out at this width" in shown  # what went is said


@pytest.mark.parametrize("columns", [80, 100])
def test_triage_summary_on_a_narrow_terminal_keeps_the_numbers(columns, tmp_path):
    """The jobs and share columns had width 0 at 80 columns and read `j…`/`sh…` at 100."""
    rc, shown, _ = run_tty(
        "triage",
        str(REPO / "docs" / "examples" / "fleet"),
        "--out",
        str(tmp_path / "d.duckdb"),
        "--quiet",
        columns=columns,
    )
    assert rc == 0, shown
    lines = [ln.rstrip() for ln in shown.splitlines()]
    assert all(len(ln) <= columns for ln in lines), max(lines, key=len)
    i = lines.index("Failure classes")
    head = [c.strip() for c in lines[i + 1].split("┃")]
    assert head[:3] == ["class", "jobs", "share"], head
    body = lines[i + 3 : i + 7]
    for ln in body:
        cells = [c.strip() for c in ln.split("│")]
        assert cells[1] == "1" and cells[2] == "25%", ln
    assert {ln.split("│")[0].strip() for ln in body} == {
        "cuda-oom",
        "file-not-found",
        "gpu-lost",
        "nvidia-xid",
    }
    j = lines.index("Whose problem")
    assert [c.strip() for c in lines[j + 1].split("┃")] == ["domain", "jobs", "share"]


# ---------------------------------------------------------------- OOM advice
OOM_CUT = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
    "capacity of 79.10 GiB of which 1.02 GiB is free."
)


def test_oom_advice_claims_nothing_the_message_does_not_say():
    """No allocated or per-process figure in the message: no "the live tensors fill it", and
    the commands that show the missing figures."""
    rc, out, _ = run("lookup", OOM_CUT)
    assert rc == 0 and out.startswith("cuda-oom")
    diagnosis = out.split("Diagnosis", 1)[1].split("Likely causes", 1)[0]
    assert "live tensors fill it" not in diagnosis
    assert "does not say what holds" in diagnosis
    assert "78.08 GiB" in diagnosis  # 79.10 - 1.02: what the figures it has do show
    flat = " ".join(diagnosis.split())
    assert "torch.cuda.memory_summary()" in flat
    assert "nvidia-smi --query-compute-apps=pid,used_memory --format=csv" in flat
    rc, out, _ = run("lookup", "--json", OOM_CUT)
    oom = next(f for f in json.loads(out)["diagnosis"] if f["topic"] == "oom")
    assert "fill it" not in oom["verdict"]
    assert any("memory_summary" in a for a in oom["advice"])


def test_oom_advice_from_a_whole_message_still_reads_its_figures():
    rc, out, _ = run("lookup", "--stdin", stdin=(REPO / "docs/examples/oom.log").read_bytes())
    assert rc == 0
    assert "the live tensors fill it" in out and "memory_summary" not in out


# ---------------------------------------------------------------- CUDA codes
def test_code_says_different_only_when_the_readings_differ():
    rc, out, _ = run("code", "700")
    assert rc == 0 and "means different things" not in out
    assert out.splitlines()[0] == (
        "700 means the same in every API and CUDA version that has it: "
        "an illegal memory access was encountered"
    )
    assert "cudaErrorIllegalAddress" in out and "CUDA_ERROR_ILLEGAL_ADDRESS" in out
    rc, out, _ = run("code", "719")
    assert rc == 0 and "means different things" not in out
    rc, out, _ = run("code", "4")  # driver shutting down today, a launch failure before 10.1
    assert rc == 0 and out.startswith("4 means different things")
    rc, out, _ = run("code", "cudaErrorAssert")  # 710 today, 59 before CUDA 10.1
    assert rc == 0 and "has a different number" in out.splitlines()[0]


def test_lookup_of_a_bare_code_with_one_meaning_is_not_ambiguous():
    rc, out, _ = run("lookup", "CUDA error 719")
    assert rc == 0 and "ambiguous" not in out
    assert '719 is "unspecified launch failure" in every API' in " ".join(out.split())
    rc, out, _ = run("lookup", "CUDA error 4")
    assert "ambiguous" in out
