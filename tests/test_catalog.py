"""The message catalog: mining templates from source, matching log lines to them, mapping them to
entries, and the coverage figures."""

from __future__ import annotations

import gzip
import json

import pytest

from kb.catalog import coverage, families, store
from kb.catalog.cli import main as coverage_main
from kb.catalog.matcher import Matcher
from kb.catalog.mine import mine_cpp, mine_file, mine_python
from kb.catalog.template import Hole, Template, parse_text

# ---------------------------------------------------------------- miner: C++ ----------------

CPP = r"""
namespace at::native {

TORCH_IMPL_FUNC(index_add_cpu_out)
(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, const Tensor& result) {
  TORCH_CHECK(self.scalar_type() == source.scalar_type(),
              "index_add_(): self (", self.scalar_type(), ") and source (", source.scalar_type(),
              ") must have the same scalar type");
  auto f = [&]() {
    TORCH_CHECK_INDEX(idx < numel, "index out of range in self");
  };
}

Tensor& embedding_renorm_cpu_(Tensor& self, const Tensor& indices) {
  TORCH_CHECK_VALUE(max_norm > 0, "max_norm must be positive, got ", max_norm);
  TORCH_CHECK_TYPE(indices.is_floating_point() == false, "expected indices of integer type but got float");
  TORCH_CHECK_NOT_IMPLEMENTED(false, "embedding renorm is not implemented for sparse layouts");
  TORCH_INTERNAL_ASSERT(self.dim() == 2, "renorm expects a two dimensional weight here");
  AT_ERROR("embedding renorm got an unexpected ", "layout ", layout);
  C10_THROW_ERROR(ValueError, c10::str("renorm cannot handle ", n, " rows with negative norms"));
  throw std::runtime_error(fmt::format("renorm failed for {} rows out of {}", bad, total));
  std::string msg = c10::str("renorm could not open the weight file ", path, " for reading");
  TORCH_CHECK(ok);
  TORCH_CHECK(ok, "bad");
  return self;
}

}  // namespace at::native

static const char* status_string(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
  }
}

void legacy(THCState* state) {
  THError("cuda runtime error (%d) : %s at %s:%d", err, cudaGetErrorString(err), file, line);
  THArgCheck(n > 0, 2, "size must be positive but got %ld elements", n);
}
"""


def _by_text(mined):
    return {m.text: m for m in mined}


def test_cpp_checks_become_templates_with_holes_type_function_and_op():
    got = _by_text(mine_cpp(CPP, "aten/src/ATen/native/Index.cpp"))
    t = got[
        "index_add_(): self ({scalar_type}) and source ({scalar_type}) must have the same scalar type"
    ]
    assert (t.exc, t.kind, t.func, t.op) == (
        "RuntimeError",
        "TORCH_CHECK",
        "index_add_cpu_out",
        "index_add_",
    )
    assert t.line == 6
    # the lambda inside the function is no function of its own
    assert got["index out of range in self"].func == "index_add_cpu_out"
    assert got["index out of range in self"].exc == "IndexError"
    assert got["max_norm must be positive, got {max_norm}"].exc == "ValueError"
    assert got["max_norm must be positive, got {max_norm}"].op == "embedding_renorm_"
    assert got["expected indices of integer type but got float"].exc == "TypeError"
    assert (
        got["embedding renorm is not implemented for sparse layouts"].exc == "NotImplementedError"
    )
    assert got["renorm expects a two dimensional weight here"].kind == "TORCH_INTERNAL_ASSERT"
    assert got["embedding renorm got an unexpected layout {layout}"].kind == "AT_ERROR"
    assert got["renorm cannot handle {n} rows with negative norms"].exc == "ValueError"
    assert got["renorm failed for {bad} rows out of {total}"].exc == "RuntimeError"
    assert got["renorm could not open the weight file {path} for reading"].kind == "message"
    assert got["CUBLAS_STATUS_EXECUTION_FAILED"].kind == "status"
    assert got["cuda runtime error ({}) : {} at {}:{}"].kind == "THError"
    assert got["size must be positive but got {} elements"].kind == "THArgCheck"
    # a check without a message and a one-word message say nothing: dropped
    assert "bad" not in got
    assert all(m.text for m in got.values())


def test_nccl_warn_lines_are_printf_templates():
    src = "ncclResult_t f() {\n  WARN(\"Cuda failure %d '%s'\", err, cudaGetErrorString(err));\n}\n"
    (m,) = mine_file("src/include/checks.h", src)
    assert (m.text, m.kind, m.func) == ("Cuda failure {} '{}'", "nccl-warn", "f")


def test_comments_and_strings_do_not_confuse_the_miner():
    src = (
        '// TORCH_CHECK(false, "this is only a comment here")\n'
        'void g() { auto s = "TORCH_CHECK(false, \\"inside a string literal\\")"; '
        'TORCH_CHECK(x, "the real check of function g fires"); }\n'
    )
    texts = [m.text for m in mine_cpp(src, "a.cpp")]
    assert texts == ["the real check of function g fires"]


# ---------------------------------------------------------------- miner: Python ---------------

PY = """
import warnings

class Loader:
    def load(self, path, n):
        if n < 0:
            raise ValueError("n must be non-negative, got %d" % n)
        if not path:
            raise FileNotFoundError(f"checkpoint {path} was not found on this machine")
        msg = "the checkpoint holds {} tensors".format(n)
        msg += " but the model expects more of them"
        if n > 3:
            raise RuntimeError(msg)
        raise KeyError("the state dict "
                       "has no key for this module")

def helper(x):
    warnings.warn(f"falling back to the slow path for {x}", UserWarning)
    raise TypeError("bad")
"""


def test_python_raises_in_every_string_form():
    got = _by_text(mine_python(PY, "pkg/loader.py"))
    assert got["n must be non-negative, got {}"].exc == "ValueError"
    assert got["checkpoint {path} was not found on this machine"].exc == "FileNotFoundError"
    msg = got["the checkpoint holds {n} tensors but the model expects more of them"]
    assert (msg.exc, msg.func) == ("RuntimeError", "load")
    assert got["the state dict has no key for this module"].exc == "KeyError"
    warn = got["falling back to the slow path for {x}"]
    assert (warn.kind, warn.exc, warn.func) == ("warn", "UserWarning", "helper")
    assert "bad" not in got


PY_EXC = '''
import logging
logger = logging.getLogger(__name__)


class UnsupportedThingError(RuntimeError):
    def __init__(self, name, version, supported):
        if supported is not None:
            msg = f"Exporting the thing '{name}' at version {version} needs version {supported}"
        else:
            msg = f"Exporting the thing '{name}' at version {version} is not supported"
        super().__init__(msg)


class BuildStepError(DiagnosticError, InstallError):
    reference = "build-step-exited-with-error"

    def __init__(self, *, step, code):
        super().__init__(message=f"{step} did not run to its end, exit code {code}", hint=None)


class PassThroughError(ValueError):
    def __init__(self, msg):
        super().__init__(msg)


class ShownError(ValueError):
    def __str__(self):
        return f"Requested {self.req} has metadata that cannot be read: {self.error}"


def build(name, step):
    logger.error("Failed building the wheel for %s in %d steps", name, step)
    logger.warning("plain warning text with %s kept as it is")
    return NotFoundError(f"No matching build found for {name} at all")


def locate(target, full_key):
    msg = f"Error locating the target '{target}'"
    raise InstantiationError(_with_full_key(msg, full_key))


def text_of(ok):
    if ok:
        msg = dedent(f"""\\
        Cannot find the primary config '{ok}'. Check the search path.
        """)
    else:
        msg = "Could not find the group option at all"
    raise MissingConfigError(msg)
'''


def test_python_messages_built_where_the_exception_is_made():
    got = _by_text(mine_python(PY_EXC, "pkg/errors.py"))
    # an exception class's own __init__ message, one per branch that sets it
    one = got["Exporting the thing '{name}' at version {version} needs version {supported}"]
    two = got["Exporting the thing '{name}' at version {version} is not supported"]
    assert one.exc == two.exc == "UnsupportedThingError" and one.kind == "raise"
    # pip's diagnostic errors: the `error: <reference>` line and the message= keyword
    assert got["error: build-step-exited-with-error"].exc == "BuildStepError"
    assert got["{step} did not run to its end, exit code {code}"].exc == "BuildStepError"
    # a message that is only the caller's argument is mined where it is raised, not here
    assert not any(t == "{msg}" for t in got)
    assert got["Requested {req} has metadata that cannot be read: {error}"].exc == "ShownError"
    # logging's %-formats become holes only when arguments fill them
    assert got["Failed building the wheel for {} in {} steps"].kind == "log-error"
    assert "plain warning text with %s kept as it is" in got
    # an exception made here and raised by the caller
    assert got["No matching build found for {name} at all"].exc == "NotFoundError"
    # a message handed through a helper, and one set in two branches
    assert got["Error locating the target '{target}'{}"].exc == "InstantiationError"
    assert "Cannot find the primary config '{ok}'. Check the search path." in got
    assert got["Could not find the group option at all"].exc == "MissingConfigError"


def test_onnx_checker_and_inference_macros():
    src = """
void check(const NodeProto& node) {
  fail_check("Field '", field, "' of '", node.name(), "' is required but missing.");
  fail_shape_inference("Input rank must be >= ", 2, " for this operator.");
}
"""
    got = _by_text(mine_cpp(src, "onnx/checker.cc"))
    assert got["Field '{field}' of '{name}' is required but missing."].exc == "ValidationError"
    inf = got["[ShapeInferenceError] Input rank must be >= {} for this operator."]
    assert (inf.exc, inf.kind) == ("InferenceError", "fail_shape_inference")


def test_python_that_does_not_parse_gives_nothing():
    assert mine_python("def f(:\n", "broken.py") == []


def test_template_text_round_trips_through_parts():
    parts = parse_text("a {{literal}} brace and a {hole} then {}")
    assert parts == ["a {literal} brace and a ", Hole("hole"), " then ", Hole("")]


# ---------------------------------------------------------------- matcher -------------------


def _t(text, **kw):
    return Template(source="test", version="0", text=text, **kw)


SMALL = [
    _t("{}_(): self ({}) and source ({}) must have the same scalar type"),
    _t("Expected all tensors to be on the same device, but found at least two devices, {} and {}!"),
    _t("index {} is out of bounds for dimension {} with size {}"),
    _t(
        "CUDA out of memory. Tried to allocate {}. GPU {} has a total capacity of {} of which {} is free. "
        "Of the allocated memory {} is allocated by PyTorch"
    ),
    _t("the model expects a pooled output from the encoder but got {}"),
]


@pytest.fixture(scope="module")
def small():
    return Matcher(SMALL)


def test_matcher_full_line_captures_holes(small):
    (m,) = small.match(
        "RuntimeError: index_add_(): self (Float) and source (BFloat16) must have the same scalar type"
    )[:1]
    assert m.template is SMALL[0]
    assert m.captures == ("index_add", "Float", "BFloat16")
    assert (m.cut, m.prefix) == (False, "RuntimeError")


def test_matcher_without_prefix_and_lower_cased(small):
    m = small.match("index 7 is out of bounds for dimension 0 with size 3")[0]
    assert (m.template, m.captures, m.prefix) == (SMALL[2], ("7", "0", "3"), "")
    low = small.match(
        "runtimeerror: expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"
    )[0]
    assert low.template is SMALL[1] and low.captures == ("cuda:0", "cpu")


def test_matcher_cut_line(small):
    m = small.match(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capac"
    )[0]
    assert m.template is SMALL[3]
    assert m.cut and 0.3 < m.coverage < 1
    assert m.captures[:2] == ("2.00 GiB", "0")
    # too little of the template shown: no claim
    assert small.match("CUDA out of") == []


def test_matcher_cut_line_must_go_on_with_its_last_word():
    t = _t("stack expects a non-empty list of tensors")
    m = Matcher([t])
    # the line's last word may be cut, but only if the template goes on with its letters
    assert m.match("RuntimeError: stack expects a non-empty list of ten")[0].cut
    assert m.match("RuntimeError: stack expects a non-empty li")[0].template is t
    # another message that shares the template's head is not the template cut short
    assert m.match("RuntimeError: stack expects a non-empty TensorList") == []


def test_matcher_wrapped_at_fixed_width_and_at_a_word(small):
    text = "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"
    a, b = text[:50], text[50:]  # fold -w 50: the break falls inside a word
    assert small.match_pair(a, b)[0].template is SMALL[1]
    assert small.match_pair(a, b)[0].wrapped
    a, b = text[:47].rstrip(), text[47:].lstrip()  # a word wrap drops the space it broke at
    m = small.match_pair(a, b)[0]
    assert (m.template, m.cut, m.captures) == (SMALL[1], False, ("cuda:0", "cpu"))
    # two lines that each fit alone are not a wrap
    assert (
        small.match_pair("index 1 is out of bounds for dimension 0 with size 1", "unrelated") == []
    )


def test_matcher_does_not_fit_unrelated_or_partial_words(small):
    assert small.match("Epoch 3: loss 0.123, accuracy 0.98") == []
    # the literal must start a word: 'unexpected all tensors' is not 'Expected all tensors'
    assert all(
        m.template is not SMALL[1]
        for m in small.match(
            "Unexpected all tensors to be on the same device, but found at least two devices, a and b!"
        )
    )


def test_matcher_prefilter_keeps_candidates_few():
    cat = store.load()
    m = Matcher(cat.templates)
    line = "RuntimeError: index_add_(): self (Float) and source (BFloat16) must have the same scalar type"
    assert len(m.candidates(line)) < 100
    best = m.match(line)[0]
    assert (
        best.template.source == "pytorch" and "must have the same scalar type" in best.template.text
    )
    assert "BFloat16" in best.captures


# ---------------------------------------------------------------- families -------------------


@pytest.fixture(scope="module")
def fams():
    return families.load()


def _find(cat, source, pred):
    hits = [t for t in cat.templates if t.source == source and pred(t)]
    assert hits, f"no {source} template fits"
    return hits


@pytest.mark.parametrize(
    "source,needle,entry",
    [
        ("pytorch", "must have the same scalar type", "dtype-mismatch"),
        (
            "pytorch",
            "Expected all tensors to be on the same device, but found at least two devices",
            "cuda-device-mismatch",
        ),
        ("pytorch", "is out of bounds for dimension", "index-out-of-range"),
        ("pytorch", "mat1 and mat2 shapes cannot be multiplied", "shape-mismatch"),
        ("pytorch", "must match the size of tensor b", "broadcast-size-mismatch"),
        ("pytorch", "CUDA out of memory. Tried to allocate", "cuda-oom"),
        ("pytorch", "CUBLAS_STATUS_EXECUTION_FAILED", "cublas-execution-failed"),
        ("pytorch", "is a view and", "autograd-view-inplace"),
        ("nccl", "unhandled cuda error", "nccl-error"),
        (
            "pip",
            "because these package versions have conflicting dependencies",
            "pip-resolution-impossible",
        ),
        ("pip", "Could not build wheels for", "pip-wheel-build-failed"),
        ("pip", "No matching distribution found for", "pip-no-matching-distribution"),
        ("pip", "error: externally-managed-environment", "pip-externally-managed-environment"),
        ("peft", "not found in the base model", "peft-target-modules-not-found"),
        ("omegaconf", "is not in struct", "omegaconf-key-not-found"),
        ("omegaconf", "Missing mandatory value", "omegaconf-missing-mandatory-value"),
        ("hydra", "Error locating target", "hydra-instantiate-error"),
        ("hydra", "Cannot find primary config", "hydra-config-not-found"),
        ("bitsandbytes", "CUDA Setup failed despite GPU being available", "bnb-cuda-setup-failed"),
        ("pytorch", "to ONNX opset version", "onnx-export-unsupported-operator"),
    ],
)
def test_real_templates_map_to_their_entries(fams, source, needle, entry):
    cat = store.load()
    hits = _find(cat, source, lambda t: needle in t.text and not t.is_warning)
    mapped = [fams.map(t) for t in hits]
    assert all(m is not None and m.entry == entry for m in mapped), [
        (t.text, m) for t, m in zip(hits, mapped) if m is None or m.entry != entry
    ][:3]


def test_cuda_codes_map_by_the_entries_codes(fams):
    cat = store.load()
    (t,) = _find(cat, "cuda", lambda t: t.api == "runtime" and t.code == 700)
    assert t.text == "CUDA error: an illegal memory access was encountered"
    assert fams.map(t).entry == "cuda-illegal-memory-access"
    (legacy,) = _find(cat, "cuda", lambda t: t.api == "runtime-legacy" and t.code == 59)
    assert fams.map(legacy).entry == "cuda-device-side-assert"


def test_hints_and_fallbacks_never_claim(fams):
    cat = store.load()
    hits = _find(cat, "pytorch", lambda t: t.kind == "warn" and "Falling back" in t.text)
    assert all(fams.map(t) is not None and not fams.map(t).claims for t in hits)


def test_nccl_enum_names_are_not_errors(fams):
    cat = store.load()
    hits = _find(cat, "nccl", lambda t: t.kind == "status" and t.text == "ReduceScatter")
    assert all(fams.map(t) is None for t in hits)


def test_every_family_names_a_real_entry(fams):
    from kb.paths import bundled_entries_dir

    ids = {p.stem for p in bundled_entries_dir().glob("*/*.yaml")}
    assert fams.entries() - ids == set()


def test_new_sources_keep_their_own_placeholders_and_markup_out():
    """pip's rich markup and OmegaConf's $KEY placeholders are no literal text of a message."""
    cat = store.load()
    pip = [t.text for t in cat.templates if t.source == "pip"]
    assert pip and not any("[/]" in t or "[green]" in t for t in pip)
    assert "{} did not run successfully.\nexit code: {exit_code}" in pip
    omega = [t.text for t in cat.templates if t.source == "omegaconf"]
    assert omega and not any("$KEY" in t or "$FULL_KEY" in t for t in omega)
    # an older version keeps only the wordings no newer one has
    by_version = {}
    for t in cat.templates:
        if t.source in ("pip", "bitsandbytes", "pytorch"):
            by_version.setdefault((t.source, t.text), set()).add(t.version)
    assert all(len(v) == 1 for v in by_version.values())


def test_families_file_errors_are_clear(tmp_path):
    bad = tmp_path / "f.yaml"
    bad.write_text("families:\n  - {id: x, entry: a, confidence: sure, text: 'a'}\n")
    with pytest.raises(families.FamiliesError, match="confidence"):
        families.load(str(bad))
    bad.write_text("families:\n  - {id: x, entry: a, text: '(unclosed'}\n")
    with pytest.raises(families.FamiliesError, match="bad regex"):
        families.load(str(bad))


# ---------------------------------------------------------------- store and coverage ---------


def test_data_files_are_deterministic_and_read_back(tmp_path):
    info = store.SourceInfo(source="demo", version="1.0", origin="test")
    ts = [
        _t("b second message of the demo {x}", file="b.py", line=2, exc="ValueError"),
        _t("a first message of the demo", file="a.py", line=1, code=5, api="runtime"),
    ]
    one = store.dumps(info, ts)
    assert one == store.dumps(info, list(reversed(ts)))
    path = store.write(info, ts, str(tmp_path))
    got_info, got = store.read_file(path)
    assert (got_info.source, got_info.version, got_info.count) == ("demo", "1.0", 2)
    assert [t.text for t in got] == [
        "a first message of the demo",
        "b second message of the demo {x}",
    ]
    assert got[0].code == 5 and got[1].exc == "ValueError"


def test_unreadable_data_file_is_a_clear_error(tmp_path):
    path = tmp_path / "x.jsonl.gz"
    path.write_bytes(gzip.compress(b'{"not": "meta"}\n'))
    with pytest.raises(store.CatalogError, match="source description"):
        store.read_file(str(path))


def test_coverage_figures_are_consistent_with_the_data():
    from kb.catalog import cache

    cat = store.load()
    cov = coverage.compute(cat, cache.mapped(cat))
    sources = {s.source for s in cov.sources}
    for name in (
        "pytorch",
        "nccl",
        "cuda",
        "triton",
        "transformers",
        "accelerate",
        "huggingface_hub",
        "safetensors",
        "datasets",
        "deepspeed",
        "bitsandbytes",
        "flash-attention",
        "xformers",
        "vllm",
        "lightning",
        "torchvision",
        "torchaudio",
        "apex",
        "onnxruntime",
        "peft",
        "trl",
        "tokenizers",
        "hydra",
        "omegaconf",
        "onnx",
        "pip",
    ):
        assert name in sources
    for s in cov.sources:
        info = next(i for i in cat.sources if (i.source, i.version) == (s.source, s.version))
        assert s.templates == info.count == len(cat.of(s.source, s.version))
        assert s.to_entry + s.to_family + s.no_claim + s.unmapped == s.templates
        assert sum(s.by_entry.values()) == s.to_entry == sum(s.entry_by_confidence.values())
        assert sum(g.count for g in s.unmapped_by_folder) <= s.unmapped
    t, e, f, h = cov.total()
    assert t == len(cat.templates) and e + f + h <= t
    pt, pe, pf, ph = cov.total("pytorch")
    assert (pe + pf + ph) / pt > 0.9  # PyTorch's own templates: nearly all named
    data = json.loads(json.dumps(cov.to_json()))
    assert data["total"]["templates"] == t


def test_coverage_command(capsys):
    assert coverage_main(["--json", "--source", "nccl"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [s["source"] for s in data["sources"]] == ["nccl"]
    assert coverage_main(["--source", "nope"]) == 1
    assert "known:" in capsys.readouterr().err
    assert coverage_main(["--brief"]) == 0
    out = capsys.readouterr().out
    assert "pytorch" in out and "unmapped" in out
    # The legends wrap at the table's width: at 80-100 columns none runs off as one long line.
    assert "entry: mapped to a kb entry" in out and "w/o hints" in out
    assert max(len(line) for line in out.splitlines()) <= 96


# ---------------------------------------------------------------- how often users meet them ---


def _freq_fixture(tmp_path):
    fam = tmp_path / "families.yaml"
    fam.write_text(
        "families:\n"
        "  - {id: hint, text: 'has no attribute', entry: null, claims: false}\n"
        "  - {id: shape, text: 'must match the size', entry: shape-mismatch}\n"
        "  - {id: area, source: demo, file: 'core/', entry: null}\n"
    )

    def demo(text, file):
        return Template(source="demo", version="1.0", text=text, file=file)

    ts = [
        demo("The size of tensor a ({a}) must match the size of tensor b ({b})", "core/a.py"),
        demo("'{}' object has no attribute '{}'", "core/b.py"),
        demo("layout is only implemented for dense tensors here", "core/c.py"),
        demo("a message nobody has met in any thread", "other/d.py"),
    ]
    cat = store.Catalog(
        (store.SourceInfo(source="demo", version="1.0", origin="test", count=len(ts)),), tuple(ts)
    )
    freq = coverage.Frequency(
        date="2026-01-01",
        queries=2,
        results=24,
        threads=5,
        lines=6,
        fitted=5,
        fits=(
            ("t1", "demo", "1.0", ts[0].text),
            ("t2", "demo", "1.0", ts[0].text),
            ("t3", "demo", "1.0", ts[1].text),
            ("t4", "demo", "0.9", ts[2].text),  # an older version's fit, found by its text
            ("t5", "demo", "1.0", "a template the catalog no longer holds"),
        ),
    )
    return cat, families.load(str(fam), codes={}), freq


def test_frequency_weights_templates_by_the_threads_that_show_them(tmp_path):
    cat, fams, freq = _freq_fixture(tmp_path)
    cov = coverage.compute(cat, fams, freq)
    (row,) = cov.sources
    assert (row.met, row.met_entry, row.met_hint) == (4, 2, 1)
    assert cov.unplaced == 1
    (lib,) = cov.libraries()
    assert (lib.templates, lib.to_entry, lib.met, lib.met_entry) == (4, 1, 4, 2)
    assert lib.entry_share == 0.25 and lib.met_entry_share == 0.5
    assert lib.met_own_entry_share == 2 / 3  # the hint's thread left out
    data = json.loads(json.dumps(cov.to_json()))
    assert data["frequency"]["unplaced"] == 1
    assert data["libraries"][0]["met_entry_share"] == 0.5
    text = coverage.render_text(cov, detail=False)
    assert "weighted by how often users meet them" in text and "2 50%" in text
    # without a sample the figures say nothing of frequency
    plain = coverage.compute(cat, fams)
    assert plain.sources[0].met == 0 and "weighted by" not in coverage.render_text(plain)


def test_the_committed_frequency_sample_fits_the_catalog():
    """Every thread-template pair in kb/catalog/frequency.json names a template the catalog holds
    (re-mining must keep them placed, or the sample be attributed again)."""
    from kb.catalog import cache

    freq = coverage.load_frequency()
    assert freq is not None and freq.fits
    cat = store.load()
    cov = coverage.compute(cat, cache.mapped(cat), freq)
    assert cov.unplaced == 0
    assert sum(s.met for s in cov.sources) == len(freq.fits)
    assert freq.fitted >= len(freq.fits) and freq.lines >= freq.fitted
    assert freq.threads >= len({f[0] for f in freq.fits})
    pytorch = next(lib for lib in cov.libraries() if lib.source == "pytorch")
    assert pytorch.met and 0 <= pytorch.met_entry <= pytorch.met


def test_frequency_lines_are_attributed_as_a_lookup_reads_them():
    import importlib.util

    from kb.catalog.matcher import Matcher
    from tests._repo import REPO

    spec = importlib.util.spec_from_file_location(
        "catalog_frequency", REPO / "scripts" / "catalog_frequency.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    words = ("must match the size of tensor", "index out of range", "out of range")
    m = Matcher([t for t in store.load().templates if any(w in t.text for w in words)])
    t = mod.attribute(
        m,
        "RuntimeError: The size of tensor a (3) must match the size of tensor b (4) at "
        "non-singleton dimension 0",
    )
    assert t is not None and t.source == "pytorch" and "must match the size of tensor b" in t.text
    # a known phrase inside a message of the user's own is no fit
    assert (
        mod.attribute(m, "ValueError: my loader says: index out of range, whatever that means here")
        is None
    )
