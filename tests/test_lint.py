"""Every lint check fires on a broken fixture, names file and line, and the others still load."""

from pathlib import Path

import pytest

from kb.knowledge.base import load
from kb.lint import lint

GOOD = (Path(__file__).parent / "fixtures" / "good_entry.yaml").read_text()


def run_lint(root: Path):
    kb = load(bundled=[root], use_cache=False)
    return kb, lint(kb)


def codes(problems):
    return sorted({p.code for p in problems})


def test_good_entry_is_clean(entry_dir):
    entry_dir("good-entry.yaml", GOOD)
    kb, problems = run_lint(entry_dir.root)
    assert problems == []
    assert [e.id for e in kb.entries] == ["good-entry"]


BROKEN = {
    "KB001": (b"id: bad\ntitle: \xff\xfe broken\n", "bad.yaml", 2),
    "KB002": ("id: bad\ntitle: [unclosed\nsummary: x\n", "bad.yaml", None),
    "KB003": ("- just\n- a list\n", "bad.yaml", 1),
    "KB004": (
        GOOD.replace("id: good-entry", "id: good-entry\nsurprise: field", 1),
        "good-entry.yaml",
        1,
    ),
    "KB005": (GOOD, "other-name.yaml", 1),
    "KB007": (
        GOOD.replace(
            r"widget runtime error \(3\) : exploded", r"widget runtime error (3 : exploded"
        ),
        "good-entry.yaml",
        11,
    ),
    "KB008": (
        GOOD.replace(r"widget runtime error \(3\) : exploded", r"(?:x)?"),
        "good-entry.yaml",
        11,
    ),
    "KB009": (
        GOOD.replace(
            '    - "RuntimeError: Widget error: the widget exploded"',
            '    - "RuntimeError: Gadget error: it fizzled"',
        ),
        "good-entry.yaml",
        None,
    ),
    "KB010": (
        GOOD.replace(
            '{text: "Widget error: the widget imploded"',
            '{text: "Widget error: the widget exploded again"',
        ),
        "good-entry.yaml",
        None,
    ),
    "KB011": (
        GOOD.replace("expect: [modern]", "expect: [modern, nonexistent]"),
        "good-entry.yaml",
        None,
    ),
    "KB013": (GOOD.replace("  - id: legacy", "  - id: modern"), "good-entry.yaml", None),
    "KB014": (
        GOOD.replace(
            "{api: runtime, value: 700, name: cudaErrorIllegalAddress}",
            "{api: runtime, value: 4242}",
        ),
        "good-entry.yaml",
        None,
    ),
    "KB015": (
        GOOD.replace(
            "references:", "not_reproducible:\n  - {signature: nope, reason: old}\nreferences:"
        ),
        "good-entry.yaml",
        None,
    ),
    "KB016": (
        GOOD.replace(
            '"widget runtime error (3) : exploded at THWidget.cu:1"',
            '"Widget error: the widget exploded!"',
        ),
        "good-entry.yaml",
        None,
    ),
    "KB017": (
        GOOD.replace("belongs: none}", "belongs: no-such-entry}", 1),
        "good-entry.yaml",
        None,
    ),
}


@pytest.mark.parametrize("code", sorted(BROKEN))
def test_check_fires(entry_dir, code):
    text, name, line = BROKEN[code]
    path = entry_dir(name, text)
    entry_dir("zz-fine.yaml", GOOD.replace("good-entry", "zz-fine"))
    kb, problems = run_lint(entry_dir.root)
    mine = [p for p in problems if p.path == str(path)]
    assert code in codes(mine), problems
    p = next(p for p in mine if p.code == code)
    assert p.path.endswith(name) and p.line >= 1 and p.column >= 1
    if line is not None:
        assert p.line == line, p
    # A broken file never takes the others down.
    assert "zz-fine" in {e.id for e in kb.entries}
    assert not [p for p in problems if p.path.endswith("zz-fine.yaml")]


def test_schema_problem_points_at_the_field(entry_dir):
    text = GOOD.replace("title: Inflate less", "titel: Inflate less")
    entry_dir("good-entry.yaml", text)
    _, problems = run_lint(entry_dir.root)
    p = next(p for p in problems if p.code == "KB004")
    want = text.splitlines().index(next(ln for ln in text.splitlines() if "titel" in ln)) + 1
    assert p.line == want
    assert "fixes/0" in p.message


def test_duplicate_id_kb006(entry_dir, tmp_path):
    entry_dir("good-entry.yaml", GOOD)
    other = tmp_path / "more" / "x"
    other.mkdir(parents=True)
    (other / "good-entry.yaml").write_text(GOOD)
    kb = load(bundled=[entry_dir.root, other.parent], use_cache=False)
    assert [p.code for p in kb.problems] == ["KB006"]
    assert len(kb.entries) == 1


def test_huge_file_kb012(entry_dir):
    path = entry_dir("huge.yaml", "")
    with open(path, "wb") as fh:
        fh.truncate(50 * 1024 * 1024)  # 50 MB, sparse: costs no real disk
    _, problems = run_lint(entry_dir.root)
    assert codes(problems) == ["KB012"]


def test_nul_bytes_kb001(entry_dir):
    entry_dir("nul.yaml", GOOD.replace("summary:", "summary:\x00", 1))
    _, problems = run_lint(entry_dir.root)
    assert codes(problems) == ["KB001"]
    assert "NUL" in problems[0].message


def test_problem_message_has_a_hint(entry_dir):
    entry_dir("bad.yaml", "id: bad\ntitle: [unclosed\n")
    _, problems = run_lint(entry_dir.root)
    text = str(problems[0])
    assert text.startswith(str(entry_dir.root)) and "KB002" in text and "(" in text


def test_bundled_knowledge_base_is_clean(kb_bundled):
    problems = lint(kb_bundled)
    assert problems == [], "\n".join(map(str, problems))
    assert len(kb_bundled.entries) >= 1


def test_explained_by_must_name_another_entry(entry_dir):
    text = GOOD.replace(
        "    pattern: 'widget runtime error",
        "    explained_by: [no-such-entry, good-entry]\n    pattern: 'widget runtime error",
        1,
    )
    assert text != GOOD
    entry_dir("good-entry.yaml", text)
    _, problems = run_lint(entry_dir.root)
    msgs = [p.message for p in problems if p.code == "KB017"]
    assert len(msgs) == 2 and "'no-such-entry'" in msgs[0] + msgs[1], msgs
