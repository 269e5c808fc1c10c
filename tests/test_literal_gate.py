"""The Hyperscan gate for the signatures filed under no word (kb.knowledge.literal_gate) admits
every signature the plain `in` tests would: hits are the same with and without it."""

from __future__ import annotations

import glob
import os

import pytest

import kb
from kb.knowledge import signatures as S
from kb.knowledge.literal_gate import LiteralGate
from kb.scan.extract import scan_text

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def knowledge():
    return kb.load()


def _lines(knowledge) -> list[str]:
    """Every example of every entry (both ways) and every candidate line of the captured logs:
    lines that hold the unfiled literals, lines that almost do, and ordinary ones."""
    out: list[str] = []
    for e in knowledge.entries:
        for text in list(e.examples_match) + [n.text for n in e.examples_no_match]:
            out.extend(text.splitlines())
    for path in sorted(glob.glob(os.path.join(REPO, "tests", "logs", "*", "*.log"))):
        with open(path, encoding="utf-8", errors="replace") as fh:
            out.extend(ln.text for ln in scan_text(fh.read()).lines)
    return out


def _hits(index: S.SignatureIndex, lines: list[str]) -> list[tuple[str, str, int]]:
    return [
        (h.entry.id, h.signature.id, i) for i, ln in enumerate(lines) for h in index.match_line(ln)
    ]


def test_gated_index_finds_the_same_hits(knowledge, monkeypatch):
    lines = _lines(knowledge)
    assert len(lines) > 1000
    plain = S.SignatureIndex(knowledge.entries)
    monkeypatch.setattr(S, "GATE_AFTER", 1)
    gated = S.SignatureIndex(knowledge.entries)
    got = _hits(gated, lines)
    assert gated._gate is not None and gated._gate.usable, "Hyperscan should be installed here"
    monkeypatch.setattr(S, "GATE_AFTER", 10**9)
    assert got == _hits(plain, lines)
    assert plain._gate is None
    # the examples do reach the unfiled signatures: the gate is not vacuous
    unfiled = {(e.id, s.id) for e, s in plain.always}
    assert len(unfiled & {(e, s) for e, s, _ in got}) >= 20


def test_gate_rules_out_lines_without_the_literals(knowledge):
    index = S.SignatureIndex(knowledge.entries)
    gate = LiteralGate(index.always)
    assert gate.usable
    admitted = gate.admitted("epoch 3 step 200 loss 0.2134 lr 3e-4")
    assert admitted is not None
    # only the caseless and literal-free pairs are left for the plain tests
    assert len(admitted) < len(index.always) // 4
    hit = gate.admitted("Segmentation fault (core dumped)")
    assert any(s.literal == "egmentation fault" for _e, s in hit)
    # a needle present but not the pair's literal: the pair stays out
    hit = gate.admitted("CUBLAS_STATUS_ALLOC_FAILED when calling cublasCreate(handle)")
    ids = {s.literal for _e, s in hit}
    assert "CUBLAS_STATUS_ALLOC_FAILED" in ids and "CUBLAS_STATUS_EXECUTION_FAILED" not in ids


def test_without_hyperscan_the_gate_stands_aside(knowledge, monkeypatch):
    monkeypatch.setenv("KB_NO_HYPERSCAN", "1")
    index = S.SignatureIndex(knowledge.entries)
    gate = LiteralGate(index.always)
    assert not gate.usable and gate.admitted("Segmentation fault") is None
    monkeypatch.setattr(S, "GATE_AFTER", 1)
    assert [h.entry.id for h in index.match_line("Segmentation fault (core dumped)")] == [
        "segfault"
    ]
