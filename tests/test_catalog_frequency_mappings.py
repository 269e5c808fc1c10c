"""Templates users met in public issue threads (kb/catalog/frequency.json) that families.yaml
maps to an entry: the real wording, as a thread printed it, is answered with that entry, and the
coverage figure the sample gives for PyTorch reads the mapping."""

from __future__ import annotations

import pytest

from kb.catalog import cache, store
from kb.catalog.coverage import compute, load_frequency
from kb.diagnosis.engine import lookup_text
from kb.knowledge.base import load

KB = load()

MET = [
    ("RuntimeError: Inference tensors do not track version counter.", "autograd-no-grad-fn"),
    (
        "RuntimeError: index_select(): Expected dtype int32 or int64 for index",
        "op-not-implemented-for-dtype",
    ),
    (
        "RuntimeError: You must implement the backward function for custom autograd.Function.",
        "autograd-custom-function",
    ),
    ("IndexError: too many indices for tensor of dimension 2", "shape-mismatch"),
    ("RuntimeError: write(): fd 29 failed with Input/output error", "disk-full"),
    (
        "AttributeError: cannot assign module before Module.__init__() call",
        "module-init-not-called",
    ),
    (
        "IndexError: invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
        "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number",
        "zero-dim-tensor-index",
    ),
    (
        "TypeError: tensor(): argument 'dtype' must be torch.dtype, not type",
        "torch-dtype-argument-invalid",
    ),
    (
        "ValueError: Error initializing torch.distributed using tcp:// rendezvous: rank parameter missing",
        "init-method-rank-missing",
    ),
]


@pytest.mark.parametrize("line,entry", MET, ids=[e for _, e in MET])
def test_a_met_wording_is_answered_by_its_entry(line: str, entry: str) -> None:
    r = lookup_text(line, kb=KB, top=5)
    assert r.matches, f"nothing answered {line!r}"
    assert r.matches[0].entry.id == entry


def test_the_sample_maps_at_least_half_of_the_pytorch_templates_met() -> None:
    freq = load_frequency()
    assert freq is not None and len(freq.fits) >= 50
    # The mapping kept beside the data (fresh: tests/test_catalog_lookup.py holds it so) gives
    # families.yaml's answers without matching 40,000 templates again.
    cat = store.load()
    cov = compute(cat, cache.mapped(cat), freq)
    lib = {x.source: x for x in cov.libraries()}["pytorch"]
    assert lib.met >= 50
    assert lib.met_entry / lib.met >= 0.5
