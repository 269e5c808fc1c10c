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
    "KB019": (
        GOOD.replace("  - id: legacy\n", "  - id: legacy\n    weight: 0.6\n", 1),
        "good-entry.yaml",
        11,
    ),
}

# Another entry in the same folder, with wordings of its own (it claims no example of GOOD's).
FINE = GOOD.replace("good-entry", "zz-fine").replace("idget", "izmo")


@pytest.mark.parametrize("code", sorted(BROKEN))
def test_check_fires(entry_dir, code):
    text, name, line = BROKEN[code]
    path = entry_dir(name, text)
    entry_dir("zz-fine.yaml", FINE)
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


def test_weight_is_read_as_a_level_and_lint_says_it_is_deprecated(entry_dir):
    entry_dir(
        "good-entry.yaml", GOOD.replace("  - id: legacy\n", "  - id: legacy\n    weight: 0.4\n", 1)
    )
    kb, problems = run_lint(entry_dir.root)
    assert kb.entries[0].signature("legacy").level == "low"
    assert kb.entries[0].signature("modern").level == "high"
    (p,) = [p for p in problems if p.code == "KB019"]
    assert "level low" in p.message and "level: low" in p.hint


def test_two_entries_claiming_one_example_at_one_level_kb020(entry_dir):
    # A twin with the same wordings at the same level: only the order of the entries would
    # decide which one a lookup names.
    good = entry_dir("good-entry.yaml", GOOD)
    twin = entry_dir("twin-entry.yaml", GOOD.replace("good-entry", "twin-entry"))
    _, problems = run_lint(entry_dir.root)
    kb020 = [p for p in problems if p.code == "KB020"]
    assert {p.path for p in kb020} == {str(good), str(twin)}
    p = next(p for p in kb020 if p.path.endswith("good-entry.yaml"))
    assert "'twin-entry'" in p.message and "(high)" in p.message
    assert GOOD.splitlines()[p.line - 1].strip().startswith("- ")  # points at the example


MODERN = "  - id: modern\n"
LEGACY = "  - id: legacy\n"


@pytest.mark.parametrize(
    "stated",
    [
        # The twin's wording is one that other classes share: the entry that owns it comes first.
        MODERN + "    level: medium\n",
        # The twin's wording is caused by the entry's error: it follows the entry.
        MODERN + "    explained_by: [good-entry]\n",
    ],
    ids=["level", "explained_by"],
)
def test_a_stated_order_clears_kb020(entry_dir, stated):
    entry_dir("good-entry.yaml", GOOD)
    twin = GOOD.replace("good-entry", "twin-entry").replace(MODERN, stated, 1)
    twin = twin.replace(LEGACY, stated.replace(MODERN, LEGACY), 1)
    entry_dir("twin-entry.yaml", twin)
    kb, problems = run_lint(entry_dir.root)
    assert not [p for p in problems if p.code == "KB020" and "good-entry" in p.path], problems
    from kb.diagnosis.engine import engine_for

    best = engine_for(kb).lookup("RuntimeError: Widget error: the widget exploded").best
    assert best is not None and best.id == "good-entry"


# ---------------------------------------------------------------- kb/data's files
DATA = Path(__file__).resolve().parent.parent / "kb" / "data"


def data_copy(tmp_path, name: str, old: str, new: str) -> Path:
    folder = tmp_path / "data"
    folder.mkdir()
    from kb.knowledge.data import FILES

    for f in FILES:  # every data file kb reads, so only the one changed here has a problem
        (folder / f).write_text((DATA / f).read_text(encoding="utf-8"), encoding="utf-8")
    path = folder / name
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return path


def test_bundled_data_files_are_clean():
    from kb.lint import check_data

    assert check_data() == []


@pytest.mark.parametrize(
    "name,old,new,code",
    [
        # A regex that does not compile, in a wrapper frame.
        ("wrappers.yaml", r"(?P<text>[^\n]+)'", r"(?P<text>[^\n]+'", "KB007"),
        # A field the schema does not know.
        ("job-wordings.yaml", "  - role: abort\n", "  - role: abort\n    rol: x\n", "KB004"),
        # A role no one defined.
        ("job-wordings.yaml", "  - role: abort\n", "  - role: aborted\n", "KB004"),
        # An example its wording does not read.
        (
            "job-wordings.yaml",
            '["RuntimeError: NCCL communicator was aborted on rank 1."]',
            '["RuntimeError: NCCL communicator was never aborted."]',
            "KB009",
        ),
        # An example another wording, earlier in the file, reads as another role.
        (
            "job-wordings.yaml",
            '["RuntimeError: Connection reset by peer"]',
            '["RuntimeError: Socket Timeout, Connection reset by peer"]',
            "KB009",
        ),
        # A frame whose example names no CUDA error it can read.
        (
            "wrappers.yaml",
            '["CUDA kernel failed : invalid configuration argument"]',
            '["CUDA kernel failed : the widget broke"]',
            "KB009",
        ),
    ],
    ids=["regex", "schema-field", "schema-role", "example", "example-order", "frame-example"],
)
def test_data_file_checks_name_file_and_line(tmp_path, name, old, new, code):
    from kb.lint import check_data

    path = data_copy(tmp_path, name, old, new)
    problems = check_data(str(path.parent))
    assert [p.code for p in problems] == [code], problems
    (p,) = problems
    assert p.path == str(path)
    changed = next(ln for ln in new.splitlines() if ln.strip() and ln not in old)
    want = next(i for i, ln in enumerate(path.read_text().splitlines(), 1) if changed in ln)
    assert abs(p.line - want) <= 1, (p, want)
