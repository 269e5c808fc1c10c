"""A new failure class is one YAML file: a local entry whose wording holds no word the scan knew
by heart is found anywhere in a log, because the scan's trigger set comes from the entries."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import kb.scan.extract as ex
from kb.diagnosis.engine import Engine
from kb.knowledge.base import load
from kb.lint import lint
from kb.scan.triggers import ERRORISH_TEXT, Triggers

# No other entry uses this wording, and it holds no generic trigger word and no error word.
LINE = "Quokka reactor 7 drifted past its flux envelope by 0.25 units"
ENTRY = """\
id: quokka-flux-drift
title: "Quokka reactor drifted past its flux envelope"
summary: A local class of failure, written by a user for their own reactors.
tags: [local, reactor]
signatures:
  - id: drift
    pattern: 'Quokka reactor (?P<reactor>\\d+) drifted past its flux envelope'
causes:
  - {title: The envelope is set too tight, detail: The drift limit is below the reactor's noise.}
diagnostics:
  - {title: Read the envelope, command: quokka envelope --show}
fixes:
  - {title: Widen the envelope, detail: Raise the limit above the noise.}
examples:
  match:
    - "Quokka reactor 7 drifted past its flux envelope by 0.25 units"
    - "[rank0]: Quokka reactor 12 drifted past its flux envelope"
    - "2026-11-20 10:00:00 Quokka reactor 3 drifted past its flux envelope (twice)"
  no_match:
    - {text: "Quokka reactor 7 stayed inside its flux envelope", belongs: none}
    - {text: "reactor drifted", belongs: none}
references: []
"""
# Noise lines as training jobs print them; some hold generic trigger words (NCCL INFO, a
# traceback's worth of "error" lines), so the window's head is full long before the end.
NOISE = (
    "Epoch {i} step {i}/5000 loss={l:.4f} lr=3.0e-04 grad_norm=0.812 tokens/s=51234\n",
    "[rank0]: NCCL INFO Channel {c:02d} : 0[0] -> 1[1] via P2P/IPC\n",
    "wandb: logging metrics step={i} eval/error_rate={l:.3f}\n",
    "moving batch to cuda:0, dtype=torch.bfloat16, shape=[8, 4096]\n",
)


def noise(i: int) -> str:
    return NOISE[i % len(NOISE)].format(i=i, l=(i % 97) / 97, c=i % 32)


@pytest.fixture
def local_kb(tmp_path):
    folder = tmp_path / "my-entries" / "reactors"
    folder.mkdir(parents=True)
    (folder / "quokka-flux-drift.yaml").write_text(ENTRY, encoding="utf-8")
    return folder.parent


def test_the_wording_is_new_to_kb(local_kb):
    assert not Triggers().has(LINE)  # no generic trigger word
    assert not ERRORISH_TEXT.search(LINE)  # and nothing error-looking
    bundled = Engine()
    assert not bundled.triggers.has(LINE)  # no bundled entry's literal either
    assert bundled.lookup(LINE, fulltext=False).best is None


def test_the_local_entry_is_lint_clean(local_kb):
    kb = load([str(local_kb)], use_cache=False)
    mine = [p for p in lint(kb) if "quokka" in p.path]
    assert mine == []
    assert kb.get("quokka-flux-drift") is not None


@pytest.mark.parametrize(
    "how,no_hs",
    [("kb-dir", ""), ("kb-dir", "1"), ("KB_PATH", "")],
    ids=["kb-dir-hyperscan", "kb-dir-no-hyperscan", "KB_PATH-hyperscan"],
)
def test_found_at_the_end_of_a_5000_line_log(local_kb, tmp_path, monkeypatch, how, no_hs):
    monkeypatch.setenv("KB_NO_HYPERSCAN", no_hs)
    monkeypatch.setattr(ex, "HYPERSCAN_MIN", 1024)  # the Hyperscan path on a small log too
    log = tmp_path / "train.log"
    log.write_text("".join(noise(i) for i in range(5000)) + LINE + "\n")
    if how == "KB_PATH":
        monkeypatch.setenv("KB_PATH", str(local_kb))
        engine = Engine()
    else:
        monkeypatch.delenv("KB_PATH", raising=False)
        engine = Engine([str(local_kb)])
    r = engine.lookup(Path(log), fulltext=False)
    assert r.best is not None and r.best.id == "quokka-flux-drift", r.matches
    assert r.best.line_number == 5001 and r.best.entry.local
    assert r.best.captures["reactor"] == "7"
    # The bundled knowledge base alone does not look at that line at all.
    monkeypatch.delenv("KB_PATH", raising=False)
    others = Engine().lookup(Path(log), fulltext=False).matches
    assert all(m.id != "quokka-flux-drift" for m in others)


def test_found_in_the_middle_of_a_64_mib_log(local_kb, tmp_path):
    """Streamed to a file in the test's folder and deleted after: the line sits past the head
    (16 MiB) and before the tail (the last 16 MiB), where only error-looking lines and the
    knowledge base's literals are searched for."""
    log = tmp_path / "big.log"
    block = "".join(noise(i) for i in range(4000)).encode()
    target = 64 << 20
    line_no = 0
    with open(log, "wb") as fh:
        written = 0
        while written < target // 2:
            fh.write(block)
            written += len(block)
            line_no += 4000
        fh.write(LINE.encode() + b"\n")
        where = line_no + 1
        while written < target:
            fh.write(block)
            written += len(block)
    try:
        assert os.path.getsize(log) >= target
        r = Engine([str(local_kb)]).lookup(Path(log), fulltext=False)
        assert r.skimmed > 0  # the line was in the skimmed middle
        assert r.best is not None and r.best.id == "quokka-flux-drift", r.matches
        assert r.best.line_number == where
    finally:
        log.unlink()


@pytest.mark.parametrize("no_hs", ["", "1"], ids=["hyperscan", "no-hyperscan"])
def test_both_searches_of_the_middle_find_it(local_kb, tmp_path, monkeypatch, no_hs):
    """The pure-Python search of a long log's middle uses the same generated set (sizes shrunk
    so that a few hundred KiB take a long log's path)."""
    import io

    chunk = 64 << 10
    monkeypatch.setattr(ex, "HEAD_BYTES", 2 * chunk)
    monkeypatch.setattr(ex, "TAIL_BYTES", 2 * chunk)
    monkeypatch.setattr(ex, "HYPERSCAN_MIN", 1024)
    monkeypatch.setenv("KB_NO_HYPERSCAN", no_hs)
    text = "".join(noise(i) for i in range(6000)) + LINE + "\n"
    text += "".join(noise(i) for i in range(6000, 12000))
    engine = Engine([str(local_kb)])
    s = ex.scan(ex.iter_chunks(io.BytesIO(text.encode()), size=chunk), triggers=engine.triggers)
    assert s.skimmed > 0
    assert {ln.text: ln.number for ln in s.lines}.get(LINE) == 6001
    # Without the knowledge base's literals, the line is skimmed past.
    s = ex.scan(ex.iter_chunks(io.BytesIO(text.encode()), size=chunk), triggers=Triggers())
    assert LINE not in {ln.text for ln in s.lines}
