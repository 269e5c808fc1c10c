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


# ---------------------------------------------------------------- the first minute
def test_long_work_is_said_on_a_terminal(tmp_path):
    """A first lookup (empty KB_HOME) and `kb lint` say what they are doing on a terminal's
    stderr while they work, and erase it when done (KB_PROGRESS_DELAY=0: at once, for the
    test; by default after half a second)."""
    env = {"KB_HOME": str(tmp_path / "home"), "KB_PROGRESS_DELAY": "0"}
    rc, shown, _ = run_tty("lookup", IMA.strip(), env=env, stderr_tty=True, columns=100)
    assert rc == 0 and "reading the knowledge base" in shown
    assert "cuda-illegal-memory-access" in shown
    line = next(ln for ln in shown.split("\r") if "reading the knowledge base" in ln)
    assert len(line) < 100  # one line of the terminal, redrawn in place
    rc, shown, _ = run_tty("lint", env=env, stderr_tty=True, columns=100)
    assert "checking the entries" in shown
    # The word of work is erased; the result stays, on a line of its own.
    last = shown.rstrip().split("\n")[-1].split("\r")[-1]
    assert " files checked" in last, last


def test_long_work_is_silent_in_a_pipe(tmp_path):
    env = {"KB_HOME": str(tmp_path / "home"), "KB_PROGRESS_DELAY": "0"}
    rc, out, err = run("lookup", IMA.strip(), env=env)
    assert rc == 0 and err == "" and "\r" not in out
    rc, out, err = run("lint", env=env)
    assert rc in (0, 1) and "\r" not in out + err and "checking the entries" not in out + err


# ---------------------------------------------------------------- lint and the schema
BAD_ENTRY = """\
id: My Entry
title: something
summary: x
signatures:
  - id: a
    pattern: "foo bar"
causes: []
fixes: []
"""


def test_lint_of_one_bad_file_counts_it_and_says_what_to_change(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(BAD_ENTRY)
    rc, out, err = run("lint", str(bad))
    assert rc == 1
    assert "0 entries checked" not in err
    assert err.strip().splitlines()[-1].startswith("1 file checked: ")
    assert "`kb schema`" in err
    # No path into kb's repository, which an installed kb does not have.
    assert "kb/knowledge" not in out + err and "schema.json" not in out + err
    lines = out.splitlines()
    assert any("'tags' is a required property (add 'tags:'" in ln for ln in lines)
    assert any("'x' is too short (write at least" in ln for ln in lines)
    assert all("KB004" not in ln or "`kb schema` shows the fields" in ln for ln in lines)
    rc, out, _ = run("lint", "--json", str(bad))
    d = json.loads(out)
    assert rc == 1 and d["files"] == 1 and d["entries"] == 0


def test_schema_shows_the_fields_kb_lint_checks():
    rc, out, _ = run("schema")
    assert rc == 0
    for field in ("id", "title", "summary", "tags", "signatures", "causes", "fixes"):
        assert f"* {field}:" in out, field  # required, marked
    assert "  * pattern: string" in out  # a signature's own fields, under it
    rc, out, _ = run("schema", "--json")
    assert rc == 0 and json.loads(out)["required"][0] == "id"
    rc, out, _ = run("schema", "evidence")
    assert rc == 0 and "* entry:" in out
    rc, _, err = run("schema", "nothing")
    assert rc == 2 and "known: entry" in err


# ---------------------------------------------------------------- JSON for scripts
def test_lookup_json_says_which_kb_and_knowledge_and_what_the_entry_says():
    rc, out, _ = run("lookup", "--json", IMA.strip())
    d = json.loads(out)
    _, version, _ = run("--version")
    assert d["kb"]["version"] == version.split()[1]
    assert len(d["kb"]["knowledge"]) == 12 and int(d["kb"]["knowledge"], 16) >= 0
    m = d["matches"][0]
    rc, out, _ = run("show", m["id"], "--json")
    entry = json.loads(out)
    assert m["summary"] == " ".join(entry["summary"].split())
    assert m["fix"]["title"] == entry["fixes"][0]["title"]
    assert m["fix"]["code"] == entry["fixes"][0]["code"]
    # The job view and JSON Lines carry it too.
    rc, out, _ = run("lookup", "--format", "jsonl", "--stdin", stdin=IMA.encode())
    assert rc == 0 and json.loads(out)["kb"] == d["kb"]


def test_the_json_shape_is_in_kb_itself():
    """`kb lookup --help` points at `kb help json`, which an installed kb has (docs/json.md is
    the same text), and it documents every field a match has."""
    rc, out, _ = run("lookup", "--help")
    assert rc == 0 and "docs/json.md" not in out and "kb help json" in out
    rc, shown, _ = run("help", "json")
    assert rc == 0
    assert shown == (REPO / "docs" / "json.md").read_text(encoding="utf-8")
    rc, out, _ = run("lookup", "--json", IMA.strip())
    match = json.loads(out)["matches"][0]
    for field in match:
        assert f'"{field}"' in shown, field
    assert '"kb"' in shown
    rc, out, _ = run("help")
    assert rc == 0 and "json" in out.split("topics", 1)[1]
    rc, out, _ = run("help", "lookup")
    assert rc == 0 and out.startswith("usage: kb lookup")


# ---------------------------------------------------------------- pipes
def test_lookup_reads_a_pipe_without_being_told():
    """`echo ... | kb lookup` reads standard input, as grep does; on a terminal with no
    argument it is still a usage error (it would wait for typing nobody meant)."""
    p = subprocess.run(
        f"echo 'CUDA error: device-side assert triggered' | {sys.executable} -m kb lookup",
        shell=True,
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert p.returncode == 0 and p.stdout.startswith("cuda-device-side-assert")
    import pty

    master, slave = pty.openpty()
    try:
        rc, _, err = run_tty("lookup", stdin=slave)
    finally:
        os.close(master)
        os.close(slave)
    assert rc == 2 and "give the error text" in err


IMA = "RuntimeError: CUDA error: an illegal memory access was encountered\n"


def test_an_installed_kb_has_its_json_shape_and_schemas(tmp_path):
    """From a wheel, unpacked as pip installs it and run away from the repository: `kb help
    json`, `kb schema` and lint's advice need no file of the checkout."""
    import zipfile

    out = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
        + ["-w", str(tmp_path / "w"), str(REPO)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    site = tmp_path / "site"
    zipfile.ZipFile(next((tmp_path / "w").glob("*.whl"))).extractall(site)
    away = tmp_path / "elsewhere"
    away.mkdir()
    env = {"PYTHONPATH": str(site), "KB_HOME": str(tmp_path / "home")}
    rc, shown, _ = run("help", "json", env=env, cwd=away)
    assert rc == 0 and shown == (REPO / "docs" / "json.md").read_text(encoding="utf-8")
    rc, out, _ = run("schema", env=env, cwd=away)
    assert rc == 0 and "* signatures:" in out
    (away / "bad.yaml").write_text(BAD_ENTRY)
    rc, out, err = run("lint", "bad.yaml", env=env, cwd=away)
    assert rc == 1 and "`kb schema`" in out + err and "kb/knowledge" not in out + err


# ---------------------------------------------------------------- kb show
def test_show_leads_with_what_the_error_looks_like_not_regexes():
    """`kb show` opened with ~40 lines of regex in a narrow column: now the entry's own
    examples come first (a traceback's error line, not 'Traceback ...'), the regexes only with
    --patterns."""
    rc, out, _ = run("show", "cuda-oom")
    assert rc == 0
    assert "(?P<" not in out  # no regex
    shown = out.split("What it looks like", 1)[1].split("Causes", 1)[0]
    assert "CUDA out of memory" in shown and "Traceback (most recent call last)" not in shown
    assert "kb show cuda-oom --patterns" in shown
    assert out.index("What it looks like") < out.index("Causes")
    rc, out, _ = run("show", "cuda-oom", "--patterns")
    assert rc == 0 and "(?P<requested>" in out and "oom-2x" in out


def test_no_word_of_work_over_what_the_user_types(tmp_path):
    """`kb lookup --stdin` on a terminal reads what the user types or pastes there: no line of
    kb's is drawn over it, however long they take."""
    import pty
    import time

    home = str(tmp_path / "home")
    run("lookup", "warm the cache", env={"KB_HOME": home})  # kb then waits on the user at once
    import fcntl
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    env = {**os.environ, "KB_HOME": home, "KB_PROGRESS_DELAY": "0", "NO_COLOR": "1"}
    p = subprocess.Popen(
        [sys.executable, "-m", "kb", "lookup", "--stdin"],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        cwd=REPO,
        env=env,
    )
    os.close(slave)
    time.sleep(1.0)  # the user takes a moment
    os.write(master, b"CUDA error: device-side assert triggered\n")
    import select

    chunks = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if p.poll() is None:
            os.write(master, b"\x04")  # end of input, said again until kb has read it
        ready, _, _ = select.select([master], [], [], 0.5)
        if not ready:
            continue
        try:
            b = os.read(master, 65536)
        except OSError:
            break
        if not b:
            break
        chunks.append(b)
    os.close(master)
    assert p.wait(timeout=10) == 0
    shown = b"".join(chunks).decode("utf-8", "replace")
    assert "cuda-device-side-assert" in shown and "reading the input" not in shown
