"""Logs cannot drive the terminal (issue 36): whatever came from input (log lines, file and folder
names, table cells, local entries) reaches a terminal inert, through one function
(kb.render.terminal.inert), in every output: lookup's text, Markdown and GitHub forms, `kb show`
and `kb list`, the triage summary and its `--sql` tables; JSON keeps the same characters as
escapes. Input is never Rich markup."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import unicodedata
from contextlib import redirect_stdout
from pathlib import Path

import pytest
from _repo import REPO

from kb.render.terminal import for_terminal, inert, json_text

pytestmark = pytest.mark.warm_home  # runs kb as a user would after its first run; tests no cache

# What the hostile trial sent: reset (ESC c), DEC line drawing (ESC ( 0), screen alignment
# (ESC # 8), save cursor (ESC 7), backspaces, the one-character CSI (U+009B, bytes C2 9B) with
# its parameters, DEL, a right-to-left override, a window title (OSC 2), cursor moves.
HOSTILE = (
    "\x1bc\x1b(0\x1b#8\x1b7\x08\x08\u009b2J\x7f\u202e\x1b]2;pwned\x07\x1b[2J\x1b[H\r\u2066\u2028"
)
ILLEGAL = "RuntimeError: CUDA error: an illegal memory access was encountered"
_ALLOWED_SGR = re.compile(r"\x1b\[[0-9;]*m")


def obeyed(text: str, *, colour: bool = False) -> list[str]:
    """The characters of text a terminal would act on (or reorder), with where they are; when
    colour is allowed, SGR colour sequences are not counted."""
    if colour:
        text = _ALLOWED_SGR.sub("", text)
    bad = []
    for i, c in enumerate(text):
        cat = unicodedata.category(c)
        if c in "\n\t":
            continue
        if cat in ("Cc", "Cf", "Cs", "Zl", "Zp"):
            bad.append(f"{i}:{c!r} in {text[max(0, i - 20) : i + 20]!r}")
    return bad


def _kb(*args, stdin=None, env=None, cwd=REPO):
    r = subprocess.run(
        [sys.executable, "-m", "kb", *args],
        input=stdin,
        capture_output=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        timeout=120,
    )
    return (
        r.returncode,
        r.stdout.decode("utf-8", "surrogateescape"),
        r.stderr.decode("utf-8", "surrogateescape"),
    )


# ------------------------------------------------------------------ the one function
@pytest.mark.parametrize(
    "raw, shown",
    [
        ("a\x1bcb", "ab"),  # reset: removed whole
        ("x\x1b(0y", "xy"),  # line drawing
        ("\x1b#8z", "z"),
        ("\x1b7q\x1b8", "q"),
        ("a\x08b", "a\\x08b"),  # shown, not obeyed
        ("\u009b31mred", "\\x9b31mred"),
        ("del\x7f", "del\\x7f"),
        ("\u202eevil", "\\u202eevil"),
        ("\x1b]2;title\x07t", "t"),
        ("\x1b]0;title\x1b\\t", "t"),
        ("\x1b]2;no end", "2;no end"),  # its ESC gone, the rest plain text
        ("lone\x1b", "lone\\x1b"),
        ("\x1b[31mred\x1b[0m", "red"),
        ("bad\udc9bbyte", "bad\\x9bbyte"),  # a byte that was not UTF-8, never written raw
        ("a\nb\rc", "a\\nb\\rc"),  # one line stays one line
        ("tab\tand [/] [bold]", "tab\tand [/] [bold]"),  # text is text
        ("naïve 日本語 ✓", "naïve 日本語 ✓"),
    ],
)
def test_inert(raw, shown):
    assert inert(raw) == shown
    assert not obeyed(inert(raw))
    assert inert(inert(raw)) == inert(raw)


def test_every_control_and_format_character_is_caught():
    """Every character of the categories a terminal acts on or that reorder text (Cc but tab and
    newline, Cf, Zl, Zp, Cs) in this Python's Unicode is shown as an escape."""
    missed = [
        hex(cp)
        for cp in range(sys.maxunicode + 1)
        if unicodedata.category(chr(cp)) in ("Cc", "Cf", "Cs", "Zl", "Zp")
        and chr(cp) not in "\t\n"
        and inert(chr(cp)) == chr(cp)
    ]
    assert not missed
    assert inert("a\nb", newlines=True) == "a\nb"


def test_a_rendering_keeps_only_kbs_own_colours():
    text = "\x1b[1mkb\x1b[0m " + HOSTILE + " \x1b[8mhidden\x1b[0m \x1b[41mbg\x1b[0m"
    out = for_terminal(text, colour=True)
    assert "\x1b[1mkb\x1b[0m" in out and "\x1b[8m" not in out and "\x1b[41m" not in out
    assert not obeyed(out, colour=True)
    assert not obeyed(for_terminal(text, colour=False))


def test_json_keeps_the_characters_escaped():
    doc = {"line": "a\x1bcb \u202e \u009b \x7f"}
    text = json_text(json.dumps(doc, ensure_ascii=False))
    assert not obeyed(text)
    assert json.loads(text) == doc


# ------------------------------------------------------------------ kb lookup
@pytest.mark.parametrize("fmt", ["text", "markdown", "github", "jsonl"])
def test_lookup_output_is_inert_in_every_format(fmt):
    log = f"{HOSTILE}{ILLEGAL}{HOSTILE}\n".encode()
    rc, out, err = _kb("lookup", "--stdin", "--format", fmt, stdin=log)
    assert rc == 0, err
    assert "cuda-illegal-memory-access" in out
    assert not obeyed(out)


def test_lookup_text_in_colour_keeps_only_colours():
    log = f"{HOSTILE}{ILLEGAL}{HOSTILE}\n".encode()
    rc, out, _ = _kb("lookup", "--stdin", stdin=log, env={"FORCE_COLOR": "1", "NO_COLOR": ""})
    assert rc == 0 and "\x1b[" in out  # coloured...
    assert not obeyed(out, colour=True)  # ...and nothing else


def test_a_root_failure_no_entry_knows_is_shown_inert():
    bits = "\x1bc\x1b]2;pwned\x07\u202e"  # the whole set reads as binary, not a log
    log = (
        'Traceback (most recent call last):\n  File "t.py", line 3, in <module>\n'
        f"{bits}ValueError: frobnicated {bits} widget\n"
    )
    _, out, err = _kb("lookup", "--stdin", stdin=log.encode())
    assert "root failure" in out, out + err
    assert not obeyed(out)


def test_file_and_folder_names_are_shown_inert(tmp_path):
    """A job folder and rank logs whose names hold a title sequence, a reset and a newline: the
    job view names them without obeying them or breaking a line of its own."""
    job = tmp_path / "job\x1b]2;pwned\x07\x1bc"
    job.mkdir()
    (job / "rank0\x1b(0.log").write_text(
        "[rank0]: " + ILLEGAL + "\n[rank0]: Traceback (most recent call last):\n"
    )
    (job / "rank1\nfake.log").write_text(
        "[rank1]:[E ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
        "ran for 600012 milliseconds before timing out.\n"
    )
    rc, out, err = _kb("lookup", str(job))
    assert rc == 0, err
    assert not obeyed(out) and not obeyed(err)


def test_batch_names_are_inert(tmp_path):
    one = tmp_path / "a\x1bc\u202e.log"
    one.write_text(ILLEGAL + "\n")
    two = tmp_path / "b.log"
    two.write_text(ILLEGAL + "\n")
    rc, out, err = _kb("lookup", "--batch", str(one), str(two))
    assert rc == 0, err
    assert not obeyed(out)


def test_lookup_json_keeps_the_bytes_escaped():
    log = f"{HOSTILE}{ILLEGAL}\n".encode()
    rc, out, _ = _kb("lookup", "--stdin", "--json", stdin=log)
    assert rc == 0
    assert not obeyed(out)
    doc = json.loads(out)
    line = doc["matches"][0]["line"]
    assert any(c in line for c in "\u202e\u009b\u2066\u2028")  # the data kept, only escaped


# ------------------------------------------------------------------ kb show, kb list
GOOD = (REPO / "tests" / "fixtures" / "good_entry.yaml").read_text()
_LOCAL = (
    GOOD.replace("id: good-entry", "id: hostile-entry")
    .replace(
        'title: "Widget error: the widget exploded"',
        'title: "Hostile\\e]2;pwned\\a\\ec widget [/] error"',
    )
    .replace(
        "summary: A test entry whose signatures and examples agree.",
        'summary: "A local entry with \\e(0 sequences, a \\u202e override and [bold]markup[/]."',
    )
    .replace("{title: Too much pressure,", '{title: "Pressure \\e#8 [/]",')
    .replace("command: widget --inspect}", 'command: "widget --inspect \\e7"}')
)


@pytest.fixture
def hostile_entry(tmp_path):
    d = tmp_path / "mine" / "local"
    d.mkdir(parents=True)
    (d / "hostile-entry.yaml").write_text(_LOCAL)
    return str(tmp_path / "mine")


@pytest.mark.parametrize("cmd", [["show", "hostile-entry"], ["list"]])
def test_a_local_entrys_text_is_shown_inert(hostile_entry, cmd):
    rc, out, err = _kb(*cmd, "--kb-dir", hostile_entry)
    assert rc == 0, err
    assert "Hostile" in out
    assert not obeyed(out)
    rc, out, err = _kb(*cmd, "--kb-dir", hostile_entry, env={"FORCE_COLOR": "1", "NO_COLOR": ""})
    assert not obeyed(out, colour=True)


# ------------------------------------------------------------------ kb triage
def _triage(*argv: str) -> tuple[int, str]:
    from kb.fleet.cli import main

    buf = io.StringIO()
    with redirect_stdout(buf):
        code = main(list(argv))
    return code, buf.getvalue()


@pytest.fixture
def hostile_jobs(tmp_path) -> Path:
    root = tmp_path / "jobs"
    for name, text in [
        ("job-[bold]b", f"{ILLEGAL}\n"),
        ("job-\x1b]2;pwned\x07\x1bc", f"{HOSTILE}{ILLEGAL}\n"),
        ("job-root", "Traceback (most recent call last):\nValueError: frobnicated [/] widget\n"),
    ]:
        (root / name).mkdir(parents=True)
        (root / name / "rank0.log").write_text(text)
    return root


def test_triage_summary_and_sql_tables_are_inert_and_never_markup(hostile_jobs, tmp_path):
    db = tmp_path / "day.duckdb"
    code, summary = _triage(str(hostile_jobs), "--out", str(db), "--quiet", "--workers", "1")
    assert code == 0
    assert not obeyed(summary)
    base = f"replace(job, '{hostile_jobs}/', '')"  # the name whole in a narrow cell
    code, table = _triage(
        "--out", str(db), "--sql", f"SELECT {base} AS job, root_line FROM jobs ORDER BY job"
    )
    assert code == 0, table  # a root line with [/] is no MarkupError
    assert "job-[bold]b" in table  # a folder's name is its name, not a style
    assert "frobnicated [/] widget" in table
    assert not obeyed(table)
    code, header = _triage("--out", str(db), "--sql", 'SELECT 1 AS "[bold]x[/]"')
    assert code == 0 and "[bold]x[/]" in header
    for fmt in ("csv", "jsonl"):
        code, rows = _triage(
            "--out", str(db), "--sql", "SELECT job, root_line FROM jobs", "--format", fmt
        )
        assert code == 0 and not obeyed(rows)
