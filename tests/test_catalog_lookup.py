"""The message catalog in the lookup (kb.diagnosis.catalog_match): lines no specific entry claims
are read as catalog templates, cut, wrapped, retyped or without their exception prefix; a
template mapped to an entry answers with it, an unmapped one says where the message comes from;
the built index is cached in KB_HOME; `kb coverage` reads the same cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from _repo import REPO

from kb.catalog import cache
from kb.catalog.matcher import CatalogMatch
from kb.catalog.template import Template
from kb.cli.main import main
from kb.diagnosis import catalog_match
from kb.diagnosis.engine import lookup_text
from kb.knowledge.base import load

KB = load()


def lookup(text: str):
    return lookup_text(text, kb=KB, top=5)


def first(text: str):
    r = lookup(text)
    return r.matches[0] if r.matches else None


TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "train.py", line 9, in <module>\n'
    "    out.index_add_(0, idx, src)\n"
)


# ---------------------------------------------------------------- lines read as templates
def test_a_template_mapped_to_an_entry_answers_with_it_and_says_where_it_comes_from():
    m = first(
        "RuntimeError: index_add_(): self (Float) and source (BFloat16) must have the same "
        "scalar type"
    )
    assert m is not None and m.id == "dtype-mismatch"
    assert m.source == "catalog" and m.confidence == "high"
    assert m.captures["template_file"].startswith("aten/src/ATen/native/")
    assert m.captures["template_op"] == "index_add_"
    assert m.captures["template_source"].startswith("pytorch ")
    # both holes kept, though the source names them alike
    assert {m.captures["scalar_type"], m.captures["scalar_type_2"]} == {"Float", "BFloat16"}


def test_a_cut_line_is_read_as_its_template_and_the_entries_signatures_decide():
    """The input and weight types differ in device, not dtype: the entry's own signature on the
    message as PyTorch prints it says so, although the line stops before its end."""
    m = first(
        "RuntimeError: Input type (torch.FloatTensor) and weight type "
        "(torch.cuda.FloatTensor) should be the s"
    )
    assert m is not None and m.id == "cuda-device-mismatch"
    assert m.source == "catalog"
    assert m.confidence == "medium"  # a cut line: one level below the signature's own
    assert m.captures["param_type"] == "torch.cuda.FloatTensor"


def test_a_message_wrapped_at_a_fixed_width_is_joined():
    r = lookup(
        TRACEBACK
        + "RuntimeError: index_add_(): self (Float) and source (BFloat16) must h\n"
        + "ave the same scalar type\n"
    )
    assert r.matches and r.matches[0].id == "dtype-mismatch"
    assert r.matches[0].source == "catalog"


def test_a_lower_cased_line_without_its_exception_prefix():
    m = first("index_add_(): self (float) and source (bfloat16) must have the same scalar type")
    assert m is not None and m.id == "dtype-mismatch"


def test_an_unmapped_template_says_where_the_message_comes_from_and_claims_nothing():
    r = lookup(
        TRACEBACK + "RuntimeError: layout_impl is only implemented for TensorImpl subclasses.\n"
    )
    assert r.matches == []
    assert r.root is not None and r.root.printed_by is not None
    origin = r.root.printed_by
    assert origin.project == "pytorch" and origin.kind == "TORCH_CHECK"
    assert origin.describe().startswith("PyTorch's argument check in layout_impl (")
    assert r.root.to_dict()["printed_by"]["describe"] == origin.describe()


def test_the_origin_is_shown_and_the_exit_code_is_a_root_failure(capsys):
    rc = main(
        [
            "lookup",
            TRACEBACK + "RuntimeError: layout_impl is only implemented for TensorImpl subclasses.",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 4
    assert "printed by  PyTorch's argument check in layout_impl" in out
    assert "not in the knowledge base" in out


def test_python_s_own_wordings_claim_nothing():
    """A library re-raising "list index out of range" is Python's IndexError (the generic
    entry), not a tensor index out of range."""
    m = first("IndexError: list index out of range")
    assert m is not None and m.id == "python-index-error"


def test_python_s_wordings_copied_by_dynamo_s_polyfills_claim_nothing():
    """torch/_dynamo/polyfills re-implement builtins with Python's messages: os.fspath's
    TypeError from a diffusers pipeline is not a compile failure."""
    r = lookup("TypeError: expected str, bytes or os.PathLike object, not NoneType")
    assert "dynamo-unsupported" not in [m.id for m in r.matches]
    assert r.root is not None and r.root.exception == "TypeError"


def test_another_accelerator_s_oom_is_not_cuda_s():
    r = lookup(
        "torch.OutOfMemoryError: XPU out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
        "total capacity of 15.11 GiB of which 1.00 GiB is free."
    )
    assert "cuda-oom" not in [m.id for m in r.matches]


def test_a_phrase_inside_another_message_is_no_fit():
    """The template "index out of bounds" inside a kernel's assertion text is not the line's
    message: the assertion is the device-side assert's."""
    r = lookup('-sizes[i] <= index && index < sizes[i] && "index out of bounds"` failed.')
    assert not any(m.source == "catalog" for m in r.matches)


def test_a_line_a_specific_entry_claimed_is_not_read():
    r = lookup("RuntimeError: CUDA error: an illegal memory access was encountered")
    assert [m.source for m in r.matches] == ["signature"]


# ---------------------------------------------------------------- the precision rules
def test_nccl_carries_the_cuda_error_its_last_error_names():
    r = lookup(
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
        "ProcessGroupNCCL.cpp:1970, unhandled cuda error (run with NCCL_DEBUG=INFO for details), "
        "NCCL version 2.19.3\nncclUnhandledCudaError: Call to CUDA function failed.\nLast error:\n"
        "Cuda failure 'an illegal memory access was encountered'\n"
    )
    assert [m.id for m in r.matches[:2]] == ["cuda-illegal-memory-access", "nccl-error"]


def test_an_unexpected_keyword_in_the_user_s_own_code_is_no_version_mismatch():
    r = lookup(
        "Traceback (most recent call last):\n"
        '  File "/home/me/finetune.py", line 40, in <module>\n'
        "    cfg = RunConfig(**kwargs)\n"
        "TypeError: RunConfig.__init__() got an unexpected keyword argument 'use_cache'\n"
    )
    assert r.matches and r.matches[0].id == "python-type-error"
    assert "library-version-mismatch" not in [m.id for m in r.matches]


def test_an_unexpected_keyword_raised_inside_a_library_is_a_version_mismatch():
    r = lookup(
        "Traceback (most recent call last):\n"
        '  File "/home/me/train.py", line 12, in <module>\n'
        "    model = AutoModel.from_pretrained(name, peft_config=cfg)\n"
        '  File "/usr/lib/python3.10/site-packages/transformers/modeling_utils.py", line 2493, '
        "in from_pretrained\n"
        "    model = cls(config, *model_args, **model_kwargs)\n"
        "TypeError: __init__() got an unexpected keyword argument 'peft_config'\n"
    )
    assert r.matches and r.matches[0].id == "library-version-mismatch"


# ---------------------------------------------------------------- pieces
def _fit(template: str, line: str) -> CatalogMatch:
    from kb.catalog.matcher import Matcher

    got = Matcher(
        [Template("pytorch", "2.11.0", template, kind="TORCH_CHECK", exc="RuntimeError")]
    ).match(line)
    assert got, line
    return got[0]


def test_the_message_is_rebuilt_with_the_holes_the_line_shows():
    m = _fit(
        "Input type ({}) and weight type ({}) should be the same",
        "input type (a) and weight type (b) shou",
    )
    assert m.cut
    assert catalog_match.message(m) == "Input type (a) and weight type (b) should be the same"


@pytest.mark.parametrize(
    "printed,raised,ok",
    [
        ("RuntimeError", "RuntimeError", True),
        ("ValueError", "RuntimeError", False),
        ("FileNotFoundError", "OSError", True),  # a subclass
        ("torch.OutOfMemoryError", "RuntimeError", True),  # a library's type: unknown base
        ("", "RuntimeError", True),
        ("AssertionError", "RuntimeError", False),
    ],
)
def test_an_exception_type_that_cannot_come_from_the_source_rules_a_template_out(
    printed, raised, ok
):
    assert catalog_match._compatible(printed, raised) is ok


# ---------------------------------------------------------------- the cache
def test_the_built_index_is_cached_and_reads_the_same(tmp_path):
    codes = cache.codes_of(KB.entries)
    ix = cache.index(str(tmp_path), codes)
    names = sorted(os.listdir(tmp_path))
    assert any(n.endswith(".index.pickle") for n in names)
    assert any(n.endswith(".coverage.pickle") for n in names)
    cache._MEMO.clear()  # the next read comes from the file
    again = cache.index(str(tmp_path), codes)
    assert again.keys == ix.keys and again.blob == ix.blob and len(again) == len(ix) > 30000


def test_the_compact_reader_fits_what_the_matcher_fits(tmp_path):
    from kb.catalog.matcher import Matcher
    from kb.catalog.store import load as load_catalog

    templates = load_catalog().templates
    reader = cache.CatalogReader(cache.index(str(tmp_path), cache.codes_of(KB.entries)))
    matcher = Matcher(templates)
    lines = [
        "RuntimeError: index_add_(): self (Float) and source (BFloat16) must have the same scalar type",
        "input type (torch.floattensor) and weight type (torch.cuda.floattensor) should be th",
        "NCCL WARN Cuda failure 'out of memory'",
        "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!",
        "nothing in here looks like any template at all",
    ]
    for line in lines:
        a = [(m.template.text, m.template.file, m.captures, m.cut) for m in matcher.match(line)]
        b = [(m.template.text, m.template.file, m.captures, m.cut) for m in reader.match(line)]
        assert a == b, line


def test_the_mapping_kept_beside_the_data_is_fresh():
    """families.yaml, the data files or the entries' codes changed without
    `python scripts/mine_catalog.py --mapping`: a first lookup would map every template again."""
    from kb.catalog.families import entry_codes
    from kb.catalog.store import load as load_catalog

    assert cache.shipped_mapping(load_catalog(), entry_codes()) is not None


def test_a_claimed_one_line_lookup_does_not_load_the_catalog(tmp_path):
    code = (
        "import sys\nfrom kb.cli.main import main\n"
        "rc = main(['lookup', 'CUDA error: an illegal memory access was encountered'])\n"
        "print('LOADED', [m for m in sys.modules if m.startswith('kb.catalog')], rc)\n"
    )
    env = dict(os.environ, KB_HOME=str(tmp_path))
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO
    )
    assert out.stdout.strip().splitlines()[-1] == "LOADED [] 0", out.stderr


# ---------------------------------------------------------------- kb coverage
def test_kb_coverage_lists_every_source(capsys):
    assert main(["coverage", "--brief"]) == 0
    out = capsys.readouterr().out
    for source in ("pytorch", "nccl", "cuda", "transformers", "triton", "vllm", "xformers"):
        assert f"\n{source} " in out
    assert out.splitlines()[0].split()[:3] == ["source", "version", "templates"]


def test_kb_coverage_json_and_one_source(capsys):
    assert main(["coverage", "--json", "--source", "pytorch"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {s["source"] for s in data["sources"]} == {"pytorch"}
    t = data["total"]
    assert (
        t["templates"]
        == t["to_entry"] + t["to_family_without_entry"] + t["hints_no_claim"] + t["unmapped"]
    )
    # PyTorch's own messages: nearly all named by an entry or a family
    assert (t["templates"] - t["unmapped"]) / t["templates"] > 0.95


def test_kb_coverage_unknown_source_is_a_clear_message(capsys):
    assert main(["coverage", "--source", "no-such-project"]) == 1
    err = capsys.readouterr().err
    assert "no source 'no-such-project'" in err and "pytorch" in err
