"""Every example of every bundled entry, through the same lookup a user runs."""

import pytest

from kb.diagnosis.engine import lookup_text
from kb.knowledge.base import load

KB = load()
MATCH = [(e.id, i, ex) for e in KB.entries for i, ex in enumerate(e.examples_match)]
NO_MATCH = [(e.id, i, n) for e in KB.entries for i, n in enumerate(e.examples_no_match)]


@pytest.mark.parametrize("entry_id,i,text", MATCH, ids=[f"{e}-{i}" for e, i, _ in MATCH])
def test_match_example_finds_its_entry_first(entry_id, i, text):
    r = lookup_text(text, kb=KB, top=5)
    assert r.matches, f"no match for example {i} of {entry_id}"
    assert r.matches[0].id == entry_id, [(m.id, m.signature, m.line_number) for m in r.matches]
    # At the level its signature states (one lower only for a line the example cuts off).
    best = r.matches[0]
    sig = best.entry.signature(best.signature or "")
    stated = sig.level if sig is not None and best.source == "signature" else "medium"
    assert ("high", "medium", "low").index(best.confidence) <= ("high", "medium", "low").index(
        stated
    ) + 1, (best.confidence, stated)
    assert best.confidence in ("high", "medium") or stated == "low"


@pytest.mark.parametrize("entry_id,i,near", NO_MATCH, ids=[f"{e}-{i}" for e, i, _ in NO_MATCH])
def test_no_match_example_goes_where_it_says(entry_id, i, near):
    """Both directions: the entry does not claim its near-miss, and the entry the example names
    (or none) is what a lookup puts first."""
    r = lookup_text(near.text, kb=KB, top=5)
    assert entry_id not in [m.id for m in r.matches]
    first = r.matches[0].id if r.matches else "none"
    assert first == near.belongs, (
        f"no_match {i} of {entry_id} says it belongs to {near.belongs}, lookup names {first}"
    )


@pytest.mark.parametrize("entry", KB.entries, ids=[e.id for e in KB.entries])
def test_entry_is_proven_or_says_why_not(entry):
    """A repro with a fix check, or an honest note of what today's stack cannot print."""
    if entry.repro is None:
        assert entry.not_reproducible, f"{entry.id}: no repro and no not_reproducible reason"
    else:
        assert entry.fix_check is not None, f"{entry.id}: a repro needs a fix_check"
    assert len(entry.examples_match) >= 3 and len(entry.examples_no_match) >= 2
    assert entry.path.endswith(f"/{entry.area}/{entry.id}.yaml")


REQUIRED = [
    "cublas-execution-failed",
    "torch-internal-assert",
    "cuda-device-side-assert",
    "cuda-illegal-memory-access",
    "cuda-invalid-configuration",
    "cuda-unspecified-launch-failure",
    "cuda-driver-shutting-down",
    "cuda-oom",
    "cublas-alloc-or-init-failed",
    "cublas-invalid-value",
    "cudnn-error",
    "cuda-launch-out-of-resources",
    "cuda-no-kernel-image",
    "cuda-driver-too-old",
    "cuda-not-available",
    "cuda-device-mismatch",
    "cuda-invalid-device-ordinal",
    "cuda-fork-reinit",
    "cuda-misaligned-address",
    "cuda-illegal-instruction",
    "cuda-invalid-value",
    "cuda-ecc-error",
    "cuda-device-busy",
    "cuda-launch-timeout",
    "cuda-stream-capture",
    "nccl-timeout",
    "nccl-error",
    "triton-out-of-resources",
    "dtype-mismatch",
    "shape-mismatch",
]


def test_the_required_entries_exist():
    missing = sorted(set(REQUIRED) - {e.id for e in KB.entries})
    assert not missing, missing


def test_codes_have_one_owner():
    owners = {}
    for e in KB.entries:
        for c in e.codes:
            key = (c.api, c.value)
            assert key not in owners, f"{key} claimed by {owners.get(key)} and {e.id}"
            owners[key] = e.id
