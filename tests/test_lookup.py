"""The lookup on messy real-world logs: prefixes, noise, repeats, root errors, facts, bad input."""

import gzip
import io
import os
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kb.diagnosis.engine import lookup_stream, lookup_text
from kb.knowledge.base import load
from kb.scan.extract import clean_line, iter_chunks, scan, scan_text

pytestmark = pytest.mark.warm_home  # runs kb as a user would after its first run; tests no cache

KB = load()
IMA = "RuntimeError: CUDA error: an illegal memory access was encountered"


@pytest.mark.parametrize(
    "raw",
    [
        "\x1b[31m" + IMA + "\x1b[0m\r",
        "2024-05-01T10:00:00.123Z [rank3]: " + IMA,
        "[default0]:" + IMA,
        "[1,0]<stderr>:" + IMA,
        "3: " + IMA,
        "##[error]" + IMA,
        "2022-12-28 16:13:02 [ERROR]  " + IMA,
        "│ " + IMA + "    │",
        # a node's container log (/var/log/containers/*.log): time, stream, full or partial
        "2026-11-28T10:00:01.123456789Z stderr F [rank1]: " + IMA,
        "2026-11-28T10:00:01.123456789Z stdout P " + IMA,
        # pytest's short test summary (-rf / -ra): the test's node id, then its exception line
        "FAILED tests/test_model.py::test_forward[cuda-bf16] - " + IMA,
        "ERROR tests/test_model.py::test_setup - " + IMA,
        # Docker's json-file log driver: one JSON record per line the program printed
        '{"log":"\\u001b[31m[rank1]: ' + IMA + '\\u001b[0m\\n","stream":"stderr",'
        '"time":"2026-11-28T10:00:01.123456789Z"}',
        # a line pasted as Markdown inline code, closed on the line or not
        "`" + IMA + "`",
        "`" + IMA,
        "> `" + IMA + "`",
    ],
)
def test_prefixes_are_peeled(raw):
    assert clean_line(raw) == IMA


def test_a_message_that_quotes_a_name_keeps_its_backticks():
    for msg in ("`trust_remote_code` is not supported anymore.", "```python", "``x``"):
        assert clean_line(msg) == msg


def test_a_json_looking_line_that_is_no_docker_record_is_kept_as_it_is():
    assert clean_line('{"log":"unterminated') == '{"log":"unterminated'
    assert clean_line('{"log":"x", "stream": 5') == '{"log":"x", "stream": 5'
    assert clean_line('{"log":["not", "a string"]}') == '{"log":["not", "a string"]}'


def test_a_docker_json_log_is_read_with_its_rank():
    import json

    lines = ["epoch 1 step 40 loss 0.61\n", "[rank1]: " + IMA + "\n"]
    log = "".join(json.dumps({"log": t, "stream": "stderr", "time": "t"}) + "\n" for t in lines)
    s = scan_text(log)
    hit = [ln for ln in s.lines if ln.text == IMA]
    assert hit and hit[0].rank == 1
    r = lookup_text(log, kb=KB)
    assert r.matches[0].id == "cuda-illegal-memory-access"


def test_typographic_quotes_of_a_pasted_log_read_as_the_ascii_the_program_printed():
    pasted = "TypeError: TrainingArguments.__init__() got an unexpected keyword argument \u2018evaluation_strategy\u2019"
    assert clean_line(pasted).endswith("argument 'evaluation_strategy'")
    assert (
        clean_line("ValueError: \u201cpad\u201d missing \u2014 set it")
        == 'ValueError: "pad" missing \u2014 set it'
    )


def test_root_error_beats_the_cascade():
    log = "\n".join(
        [
            "step 10 loss 0.5",
            "/pytorch/aten/src/ATen/native/cuda/Loss.cu:245: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], "
            "thread: [5,0,0] Assertion `t >= 0 && t < n_classes` failed.",
            "Traceback (most recent call last):",
            "RuntimeError: CUDA error: device-side assert triggered",
            "RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasSgemm( handle, opa, opb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc)`",
            "[rank1]:[E ProcessGroupNCCL.cpp:563] [Rank 1] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600321 milliseconds before timing out.",
        ]
    )
    r = lookup_text(log, kb=KB)
    assert r.matches[0].id == "cuda-device-side-assert"
    assert r.matches[0].line_number == 2
    assert r.facts.assertion == "t >= 0 && t < n_classes"
    assert {"cublas-execution-failed", "nccl-timeout"} & {m.id for m in r.matches[1:]}


def test_thousands_of_repeats_fold_and_keep_the_root():
    noise = "".join(f"epoch {i} loss {random.random():.3f} on cuda:0\n" for i in range(20000))
    flood = "[W socket.cpp:558] NCCL WARN connection reset by peer, error 104\n" * 5000
    log = noise + IMA + "\n" + flood
    s = scan_text(log)
    assert len(s.lines) <= 3  # the flood folds into one line with a count
    r = lookup_text(log, kb=KB)
    assert r.matches[0].id == "cuda-illegal-memory-access"
    assert r.matches[0].line_number == 20001


def test_streaming_matches_in_memory_over_chunk_boundaries():
    log = ("x" * 97 + "\n") * 300000 + IMA + "\n" + "done\n"
    data = log.encode()
    whole = scan_text(data)
    chunked = scan(iter_chunks(io.BytesIO(data), size=65536))
    assert [(ln.number, ln.text) for ln in chunked.lines] == [
        (ln.number, ln.text) for ln in whole.lines
    ]
    assert chunked.total_lines == 300002


@pytest.mark.parametrize("no_hs", ["", "1"])
def test_both_scanners_give_the_same_lines(monkeypatch, no_hs):
    import kb.scan.extract as ex

    monkeypatch.setenv("KB_NO_HYPERSCAN", no_hs)
    data = (("Epoch 1 loss 0.1 ERROR-free\n" * 50000) + IMA + "\n").encode()
    s = ex.scan(iter_chunks(io.BytesIO(data)))
    assert s.lines[-1].text == IMA and s.lines[-1].number == 50001
    assert s.lines[0].count == 50000


def test_gzip_stream():
    data = gzip.compress((("ok\n" * 1000) + IMA + "\n").encode())
    r = lookup_stream(gzip.open(io.BytesIO(data)), kb=KB)
    assert r.matches[0].line_number == 1001


@pytest.mark.parametrize(
    "text,case,requested_gib",
    [
        (
            "RuntimeError: CUDA out of memory. Tried to allocate 2.00 MiB (GPU 0; 10.76 GiB total capacity; "
            "9.72 GiB already allocated; 1.94 MiB free; 9.81 GiB reserved in total by PyTorch)",
            "needs more",
            2 / 1024,
        ),
        (
            "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 11.17 GiB total capacity; "
            "8.45 GiB already allocated; 10.81 MiB free; 2.50 GiB cached)",
            "Fragmentation",
            20 / 1024,
        ),
        (
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 120.00 GiB. GPU 0 has a total capacity of "
            "79.19 GiB of which 78.00 GiB is free. Including non-PyTorch memory, this process has 1.10 GiB memory in use. "
            "Of the allocated memory 0 bytes is allocated by PyTorch, and 0 bytes is reserved by PyTorch but unallocated.",
            "larger than the whole GPU",
            120,
        ),
        (
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of "
            "79.19 GiB of which 500.00 MiB is free. Process 4242 has 40.00 GiB memory in use. Including non-PyTorch memory, "
            "this process has 38.60 GiB memory in use. Of the allocated memory 37.00 GiB is allocated by PyTorch, and "
            "1.00 GiB is reserved by PyTorch but unallocated.",
            "other processes",
            1,
        ),
    ],
)
def test_oom_formats_become_a_diagnosis(text, case, requested_gib):
    r = lookup_text(text, kb=KB)
    assert r.matches[0].id == "cuda-oom"
    assert abs(r.facts.oom.requested / (1 << 30) - requested_gib) < 1e-6
    oom = next(f for f in r.diagnosis if f.topic == "oom")
    assert case in oom.verdict, oom.verdict
    assert oom.lines  # the arithmetic is shown


def test_an_oom_without_figures_claims_no_case():
    r = lookup_text("torch.OutOfMemoryError: CUDA out of memory.", kb=KB)
    assert r.matches[0].id == "cuda-oom"
    oom = next(f for f in r.diagnosis if f.topic == "oom")
    assert "no memory figures" in oom.verdict and not oom.lines


def test_no_oom_finding_without_the_oom_entry():
    # "out of memory" on a line no signature claims is no proof of a CUDA OOM: the figures are
    # read from the captures of the signatures that matched, so there are none, and no finding.
    r = lookup_text("frobnicator: widget cache out of memory, retrying", kb=KB)
    assert r.facts.oom is None
    assert r.matches == [] and r.diagnosis == []


def test_the_oom_figures_are_the_matched_signatures_captures():
    """Every figure comes from a named group of cuda-oom's signatures, and the finding says which
    entry and signatures gave it."""
    text = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total "
        "capacity of 79.19 GiB of which 500.00 MiB is free. Process 4242 has 40.00 GiB memory in "
        "use. Including non-PyTorch memory, this process has 38.60 GiB memory in use. Of the "
        "allocated memory 37.00 GiB is allocated by PyTorch, and 1.00 GiB is reserved by PyTorch "
        "but unallocated."
    )
    r = lookup_text(text, kb=KB)
    o = r.facts.oom
    gib = 1 << 30
    assert (o.requested, o.total, o.process_in_use, o.allocated) == (
        gib,
        int(79.19 * gib),
        int(38.60 * gib),
        37 * gib,
    )
    assert o.reserved == 38 * gib and o.format == "2.x" and o.gpu == 0
    assert o.other_processes == [{"pid": 4242, "bytes": 40 * gib}]
    finding = next(f for f in r.diagnosis if f.topic == "oom")
    assert finding.entries == ["cuda-oom"]
    entry, _, sigs = finding.source.partition("/")
    assert entry == "cuda-oom" and {"oom-2x", "oom-process-usage", "oom-2x-breakdown"} <= set(
        sigs.split("+")
    )
    for sig in sigs.split("+"):
        assert KB.get("cuda-oom").signature(sig).diagnosis == "gpu-memory"


def test_a_kernel_assertion_is_read_from_the_signatures_capture():
    line = (
        "/pytorch/aten/src/ATen/native/cuda/Loss.cu:245: nll_loss_forward_reduce_cuda_kernel_2d: "
        "block: [0,0,0], thread: [5,0,0] Assertion `t >= 0 && t < n_classes` failed."
    )
    r = lookup_text(line, kb=KB)
    f = next(f for f in r.diagnosis if f.topic == "assertion")
    assert f.verdict == "A kernel assertion failed: `t >= 0 && t < n_classes`."
    assert f.source == "cuda-device-side-assert/kernel-assertion"
    assert f.entries == ["cuda-device-side-assert"]


def test_bare_code_is_ambiguous_and_says_so():
    r = lookup_text("CUDA error 4", kb=KB)
    ids = [m.id for m in r.matches]
    assert ids[:2] == ["cuda-driver-shutting-down", "cuda-unspecified-launch-failure"]
    f = next(f for f in r.diagnosis if f.topic == "cuda-code")
    assert "ambiguous" in f.verdict and len(f.lines) == 3
    legacy = lookup_text(
        "RuntimeError: cuda runtime error (4) at /pytorch/aten/src/THC/foo.cu:12", kb=KB
    )
    assert legacy.matches[0].id == "cuda-unspecified-launch-failure"


def test_code_query():
    r = lookup_text("error 719", kb=KB)
    assert r.matches[0].id == "cuda-unspecified-launch-failure"


def test_unknown_message_is_no_match_with_suggestions_only():
    r = lookup_text("ValueError: the frobnicator refused to frobnicate the widget", kb=KB)
    assert r.matches == []


def test_known_code_without_entry_is_explained_not_guessed():
    r = lookup_text(
        "RuntimeError: CUDA error: peer access is not supported between these two devices", kb=KB
    )
    assert r.matches == [] and r.suggestions == []
    assert "cudaErrorPeerAccessUnsupported" in r.diagnosis[0].verdict


# ------------------------------------------------------------------ bad input, property-based
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=4096))
def test_random_bytes_never_crash(data):
    r = lookup_text(data, kb=KB)
    assert isinstance(r.matches, list)


REAL = [
    IMA,
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
    "RuntimeError: cublas runtime error : the GPU program failed to execute at /pytorch/aten/src/THC/THCBlas.cu:450",
    "THCudaCheck FAIL file=/pytorch/torch/csrc/generic/StorageSharing.cpp line=245 error=3 : initialization error",
]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(REAL), st.integers(0, 200), st.binary(max_size=8), st.integers(0, 3))
def test_mutated_real_messages_never_crash(msg, pos, junk, mode):
    raw = msg.encode()
    pos = min(pos, len(raw))
    mutated = [
        raw[:pos] + junk + raw[pos:],
        raw[:pos],
        raw.replace(b" ", junk or b"\x00"),
        b"\xff\xfe" + raw + b"\x00",
    ][mode]
    r = lookup_text(mutated, kb=KB)
    for m in r.matches:
        assert m.confidence in ("high", "medium", "low")


def test_nul_bytes_and_invalid_utf8_still_match():
    r = lookup_text(b"\x00\xff garbage\n" + IMA.encode() + b"\x00\n\xc3\x28\n", kb=KB)
    assert r.matches[0].id == "cuda-illegal-memory-access"


def test_giant_single_line_is_bounded():
    data = b"A" * (64 << 20) + b" " + IMA.encode()  # 64 MiB, no newline at all
    s = scan(iter_chunks(io.BytesIO(data)))
    assert all(len(ln.text) <= 4096 for ln in s.lines)
    assert s.total_bytes == len(data)


def test_binary_input_is_flagged():
    data = os.urandom(1 << 16) + b"\x00" * 4096
    r = lookup_text(data, kb=KB)
    assert r.binary and r.matches == []


def test_empty_input():
    r = lookup_text("", kb=KB)
    assert r.matches == [] and r.lines_scanned == 0


def test_an_explained_wording_follows_the_entry_that_explains_it():
    """'not implemented for Half' alone is a dtype error; after CUDA failed to initialise in the
    same log, the half model is on the CPU because of that, and the driver is the answer."""
    from kb.diagnosis.engine import Engine

    half = "RuntimeError: \"addmm_impl_cpu_\" not implemented for 'Half'"
    driver = (
        "UserWarning: CUDA initialization: The NVIDIA driver on your system is too old "
        "(found version 11000). Please update your GPU driver"
    )
    eng = Engine()
    assert eng.lookup(half).best.id == "op-not-implemented-for-dtype"
    for log in (f"{half}\n{driver}\n", f"{driver}\n{half}\n"):
        got = [m.id for m in eng.lookup(log).matches]
        assert got[:2] == ["cuda-driver-too-old", "op-not-implemented-for-dtype"], got
    # An integer dtype error is not explained by the driver: printed first, it stays the answer.
    long_err = "RuntimeError: \"normal_kernel_cpu\" not implemented for 'Long'"
    assert eng.lookup(f"{long_err}\n{driver}\n").best.id == "op-not-implemented-for-dtype"


_SPAWN = (
    "torch.multiprocessing.spawn.ProcessRaisedException:\n\n"
    "-- Process 0 terminated with the following error:\n"
    "Traceback (most recent call last):\n"
    '  File "/opt/venv/lib/python3.11/site-packages/torch/multiprocessing/spawn.py", line 90, '
    "in _wrap\n    fn(i, *args)\n"
)


@pytest.mark.parametrize(
    "tail,want",
    [
        ("", "torchrun-child-failed"),  # the child's exception is not in the log: the wrapper
        # shown: the child's own error answers (here the generic KeyError entry), not the wrapper
        ("KeyError: 'data'\n", "python-key-error"),
        ("RuntimeError: CUDA error: misaligned address\n", "cuda-misaligned-address"),
    ],
    ids=["cut", "unknown-child-error", "known-child-error"],
)
def test_a_line_announcing_the_childs_error_yields_to_it(tail, want):
    r = lookup_text(_SPAWN + tail, kb=KB)
    assert (r.matches[0].id if r.matches else None) == want
