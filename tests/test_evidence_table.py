"""The README's verification table is what the evidence records produce, and nothing else."""

from __future__ import annotations

import subprocess
import sys

import pytest
from _repo import REPO

from kb.knowledge.evidence import load_evidence
from kb.model.entry import Evidence
from kb.model.record import replace
from kb.render.evidence_table import END, START, current_block, render_table, replace_block

EV = Evidence(
    entry="a",
    status="reproduced",
    fix_status="fix-verified",
    gpu="NVIDIA H100 80GB HBM3",
    gpu_memory_mib=81559,
    driver="580.159.04",
    cuda="13.0",
    torch="2.11.0+cu130",
    date="2026-11-23",
    duration_s=1.0,
    runs=3,
    reproduced_runs=3,
)


def test_readme_table_is_what_the_records_say():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    want = render_table(load_evidence(REPO / "evidence"))
    assert current_block(readme) == want, "stale: run python scripts/evidence_table.py"


def test_script_check_agrees():
    out = subprocess.run(
        [sys.executable, "scripts/evidence_table.py", "--check"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_rows_per_environment_with_counts_and_the_entries_that_did_not_pass():
    evidence = {
        "a": [EV, replace(EV, gpu="NVIDIA H200", date="2026-11-21", runs=0, reproduced_runs=0)],
        "b": [replace(EV, entry="b", fix_status="fix-failed")],
        "c": [replace(EV, entry="c", status="not-reproduced", fix_status="", reproduced_runs=0)],
        "d": [replace(EV, entry="d", status="flaky", fix_status="", reproduced_runs=2)],
    }
    table = render_table(evidence)
    lines = table.splitlines()
    assert lines[2] == (
        "| NVIDIA H100 80GB HBM3 | 580.159.04 | 2.11.0+cu130 | 13.0 | 2026-11-23 | 3 | 4 | 2 "
        "| 1 | 1 | 1 | 1 | 0 |"
    )
    assert lines[3] == (
        "| NVIDIA H200 | 580.159.04 | 2.11.0+cu130 | 13.0 | 2026-11-21 | - | 1 | 1 | 1 | 0 "
        "| 0 | 0 | 0 |"
    )
    assert lines[-1] == (
        "- NVIDIA H100 80GB HBM3, torch 2.11.0+cu130 (2026-11-23): not reproduced: `c`; "
        "fix failed: `b`; flaky: `d`"
    )
    assert render_table({}) == "No verification records yet.\n"


def test_the_block_between_the_markers_is_replaced_and_nothing_else():
    text = f"intro\n{START}\nold table\n{END}\nafter\n"
    new = replace_block(text, "| new |\n")
    assert new == f"intro\n{START}\n| new |\n{END}\nafter\n"
    assert current_block(new) == "| new |\n"
    with pytest.raises(ValueError):
        replace_block("no markers here", "x")
    with pytest.raises(ValueError):
        replace_block(f"{END}\n{START}", "x")
