"""Regular expressions compiled in one process and put back into `re` in the next
(kb.knowledge.regex_cache): the patterns are the ones re.compile makes, a table of another
interpreter is never used, and the kb command keeps one made by a lookup that read its caches."""

from __future__ import annotations

import os
import subprocess
import sys

from _repo import REPO

from kb.knowledge import regex_cache

MSG = "CUDA error: an illegal memory access was encountered"


def _fresh(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=REPO
    )


def test_a_seeded_pattern_is_the_one_re_compile_makes(tmp_path):
    patterns = [
        (r"^(?P<type>[A-Z]\w*Error): (?P<msg>.*)$", 0),
        (r"cuda (?:error|failure)\b(?P<rest>[^\n]*)", 2),  # re.IGNORECASE
        ("[\x00-\x08\u200b-\u200f\U000e0001]", 0),
    ]
    table = regex_cache.make_table(patterns)
    assert [t[:2] for t in table["table"]] == patterns
    import pickle

    (tmp_path / "t.pickle").write_bytes(pickle.dumps(table))
    code = (
        "import pickle, re, sys\n"
        "from kb.knowledge import regex_cache\n"
        "doc = pickle.loads(open(sys.argv[1], 'rb').read())\n"
        "print(regex_cache.seed(doc))\n"
        "seeded = [re._cache[(str, p, f)] for p, f, *_ in doc['table']]\n"
        "made = [re._compiler.compile(p, f) for p, f, *_ in doc['table']]\n"
        "print(all(a == b and a is re.compile(a.pattern, f) for a, b, (_, f, *__) in"
        " zip(seeded, made, doc['table'])))\n"
        "m = re.search(doc['table'][0][0], 'ValueError: no')\n"
        "print(m.group('type'), m.group('msg'))\n"
        "print(regex_cache.seed(doc))\n"
    )
    out = _fresh(code, str(tmp_path / "t.pickle"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:4] == ["3", "True", "ValueError no", "0"]


def test_a_table_of_another_interpreter_or_damaged_is_not_used():
    table = regex_cache.make_table([(r"\bfoo(?P<n>\d+)", 0)])
    assert regex_cache.seed({**table, "tag": "3.0.0|0|4|1114111"}) is None
    assert regex_cache.seed(None) is None
    assert regex_cache.seed({"tag": regex_cache.tag(), "table": [("x",)]}) == 0


def test_the_kb_command_keeps_the_table_of_a_lookup_that_read_its_caches(tmp_path):
    """The first lookup in an empty state folder builds the entry cache (and compiles what
    reading entry files needs): no table. The next one keeps what it compiled; the one after
    that starts from it, and every one answers the same."""
    env = {k: v for k, v in os.environ.items() if k != "KB_PATH"}
    env["KB_HOME"] = str(tmp_path / "home")
    table = tmp_path / "home" / regex_cache.file_name()
    outs = []
    for n in range(3):
        out = subprocess.run(
            [sys.executable, "-m", "kb", "lookup", MSG],
            capture_output=True,
            text=True,
            cwd=REPO,
            env=env,
        )
        assert out.returncode == 0, out.stderr
        outs.append(out.stdout)
        assert table.exists() == (n > 0)
        if n == 1:
            made = table.stat().st_mtime_ns
    assert table.stat().st_mtime_ns == made  # read, not written again
    assert outs[0] == outs[1] == outs[2]
    assert not table.stat().st_mode & 0o077  # private, as every cache file
