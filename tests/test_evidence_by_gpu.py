"""Evidence per GPU kind: what each kind of GPU was seen doing and when, in `kb list` and
`kb show`, read only from the records (run counts included)."""

from __future__ import annotations

import json

import pytest
from test_verify_support import FIXTURES, kb_home  # noqa: F401

import kb.paths
from kb.cli.main import main
from kb.knowledge.evidence import load_evidence, write_evidence
from kb.knowledge.evidence_summary import by_gpu, gpu_kind, per_gpu_line, run_counts
from kb.model.entry import Evidence
from kb.model.record import replace
from kb.verify.probe import Environment
from kb.verify.verifier import FIX_VERIFIED, NOT_REPRODUCED, REPRODUCED, Outcome, combine_runs
from kb.verify.verifier import evidence_for as evidence_from_outcome

pytestmark = pytest.mark.warm_home  # runs kb as a user would after its first run; tests no cache

H100 = Evidence(
    entry="fake-illegal-access",
    status="reproduced",
    fix_status="fix-verified",
    gpu="NVIDIA H100 80GB HBM3",
    gpu_memory_mib=81559,
    driver="580.159.04",
    cuda="13.0",
    torch="2.11.0+cu130",
    date="2026-11-23",
    duration_s=5.0,
    runs=3,
    reproduced_runs=3,
)


@pytest.mark.parametrize(
    "name,kind",
    [
        ("NVIDIA H100 80GB HBM3", "H100"),
        ("NVIDIA H200", "H200"),
        ("NVIDIA A100-SXM4-80GB", "A100"),
        ("NVIDIA A100 80GB PCIe", "A100"),
        ("Tesla V100-SXM2-16GB", "V100"),
        ("NVIDIA GeForce RTX 4090", "RTX 4090"),
        ("NVIDIA H100 NVL", "H100"),
        ("NVIDIA L40S", "L40S"),
        ("no GPU", "no GPU"),
    ],
)
def test_gpu_kind(name, kind):
    assert gpu_kind(name) == kind


def test_run_counts_from_fields_and_from_older_records_words():
    assert run_counts(H100) == (3, 3)
    old = replace(H100, runs=0, reproduced_runs=0)
    assert run_counts(replace(old, detail="matched x; exit code 1")) == (0, 0)  # says nothing
    assert run_counts(replace(old, detail="matched x (all 3 runs agree; exit codes 1/0)")) == (
        3,
        3,
    )
    agree_not = replace(old, status="not-reproduced", detail="... (all 3 runs agree; ...)")
    assert run_counts(agree_not) == (0, 3)
    flaky = replace(
        old, status="flaky", detail="runs disagree: not-reproduced 1/3; reproduced 2/3; exit"
    )
    assert run_counts(flaky) == (2, 3)
    never = replace(old, status="flaky", detail="runs disagree: not-reproduced 2/3; timeout 1/3")
    assert run_counts(never) == (0, 3)


def test_one_line_per_gpu_kind_newest_record_first():
    older = replace(H100, date="2026-10-01", status="not-reproduced", fix_status="")
    assert by_gpu([older, H100])["H100"].record is H100
    line = per_gpu_line([older, H100], kinds=["H100", "H200"])
    assert line == "H100: reproduced 3/3, fix-verified, 2026-11-23 · H200: not yet verified"
    single = replace(H100, gpu="NVIDIA H200", runs=0, reproduced_runs=0, date="2026-11-21")
    assert per_gpu_line([single]) == "H200: reproduced, fix-verified, 2026-11-21"
    flaky = replace(H100, status="flaky", fix_status="", reproduced_runs=2)
    assert per_gpu_line([flaky]) == "H100: flaky, reproduced 2/3, 2026-11-23"


def test_repeat_counts_reach_the_record(tmp_path):
    ok = Outcome("e", REPRODUCED, FIX_VERIFIED, exit_code=1, fix_exit_code=0)
    bad = Outcome("e", NOT_REPRODUCED, exit_code=-11)
    assert (ok.runs, ok.reproduced_runs, bad.reproduced_runs) == (1, 1, 0)
    o = combine_runs([ok, bad, ok])
    assert (o.status, o.runs, o.reproduced_runs) == ("flaky", 3, 2)
    ev = evidence_from_outcome(o, Environment(), today="2026-11-24")
    path = write_evidence(tmp_path, ev)
    assert "runs: 3" in path.read_text() and "reproduced_runs: 2" in path.read_text()
    [back] = load_evidence(tmp_path)["e"]
    assert run_counts(back) == (2, 3)


@pytest.fixture
def records(monkeypatch, tmp_path):
    """The verify fixtures as the knowledge base, with an H100 record for one entry and an H200
    record for another."""
    root = tmp_path / "evidence"
    write_evidence(root, H100)
    write_evidence(
        root,
        replace(
            H100,
            entry="fake-wrong-error",
            gpu="NVIDIA H200",
            status="not-reproduced",
            fix_status="",
            date="2026-11-21",
            runs=1,
            reproduced_runs=0,
        ),
    )
    monkeypatch.setattr(kb.paths, "bundled_entries_folder", lambda: str(FIXTURES))
    monkeypatch.setattr(kb.paths, "evidence_folder", lambda: str(root))
    monkeypatch.setenv("COLUMNS", "220")
    return root


def test_kb_show_names_every_gpu_kind(records, capsys):
    assert main(["show", "fake-illegal-access"]) == 0
    out = capsys.readouterr().out
    section = out.split("Verification", 1)[1]
    assert "H100  reproduced 3/3, fix-verified, 2026-11-23" in section
    assert "H200  not yet verified" in section
    assert main(["show", "fake-wrong-error", "--markdown"]) == 0
    md = capsys.readouterr().out
    assert "- **H100**: not yet verified" in md
    assert "- **H200**: not-reproduced 1/1, 2026-11-21 (NVIDIA H200, driver" in md


def test_kb_list_has_a_column_per_gpu_kind(records, capsys):
    assert main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    head = lines[0].split()
    assert head[3:5] == ["H100", "H200"]
    row = next(ln for ln in lines if ln.startswith("fake-illegal-access"))
    assert "fix-verified 3/3 2026-11-23" in row and "not yet" in row
    row = next(ln for ln in lines if ln.startswith("fake-wrong-error"))
    assert "not-reproduced 1/1 2026-11-21" in row
    assert main(["list", "--json"]) == 0
    rows = {r["id"]: r for r in json.loads(capsys.readouterr().out)}
    by = rows["fake-illegal-access"]["by_gpu"]
    assert by["H200"] is None and by["H100"]["runs"] == 3 and by["H100"]["date"] == "2026-11-23"


def test_kb_list_without_any_record_has_one_verification_column(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(kb.paths, "bundled_entries_folder", lambda: str(FIXTURES))
    monkeypatch.setattr(kb.paths, "evidence_folder", lambda: str(tmp_path / "none"))
    assert main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[3] == "verification"
    assert "not yet" in next(ln for ln in lines if ln.startswith("fake-illegal-access"))


@pytest.mark.parametrize("columns", [80, 100, 120])
def test_kb_list_on_a_narrow_terminal_keeps_every_id_whole(records, capsys, monkeypatch, columns):
    # A terminal of that width (a pipe is never cut: tests/test_cli_firstuse.py).
    import kb.render.style

    monkeypatch.setenv("COLUMNS", str(columns))
    monkeypatch.setattr(kb.render.style, "terminal_width", lambda con: columns)
    assert main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert all(len(ln) <= columns for ln in lines)
    ids = {ln.split()[0] for ln in lines[1:-1]}
    assert {"fake-illegal-access", "fake-wrong-error", "fake-fix-still-matches"} <= ids
    row = next(ln for ln in lines if ln.startswith("fake-illegal-access"))
    assert "3/3" in row  # the GPU kind's verdict survives, shortened
