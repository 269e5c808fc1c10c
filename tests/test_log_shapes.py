"""The shapes real logs come in: wrapped by a terminal, quoted in a reply, bolded in an issue,
inside JSON records, on endless progress-bar lines, cut off, and inside other tools' wrappers.
Each is looked up as a whole log; the entry and its confidence are what a user would read."""

from __future__ import annotations

import pytest

from kb import Engine


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine()


def best(engine: Engine, text: str) -> tuple[str, str, str] | None:
    m = engine.lookup(text).best
    return (m.id, m.confidence, str(m.line)) if m else None


def test_a_line_hard_wrapped_inside_the_message_is_joined(engine):
    msg = "RuntimeError: CUDA error: an illegal memory access was encountered"
    prefix = "[2024-01-01 12:00:00] step 1200 rank 3: ".ljust(46)
    full = prefix + msg + " (compile with TORCH_USE_CUDA_DSA to enable device-side assertions)"
    lines = [full[i : i + 80] for i in range(0, len(full), 80)]
    assert lines[0].endswith("an illeg") and lines[1].startswith("al memory")  # cut mid-word
    got = best(engine, "\n".join(lines))
    assert got is not None
    assert got[:2] == ("cuda-illegal-memory-access", "high")
    assert msg in got[2]


def test_a_quoted_paste_whose_wrapped_lines_were_joined_is_read_without_the_markers(engine):
    """A blockquote copied with its lines joined keeps each continuation's '>' in the line."""
    parts = [
        "RuntimeError: Attempting to deserialize object on a CUDA device but"
        " torch.cuda.is_available() is",
        "False. If you are running on a CPU-only machine, please use torch.load with",
        "map_location=torch.device('cpu') to map your storages to the CPU.",
    ]
    got = best(engine, " >".join(parts))
    assert got is not None and got[0] == "cuda-not-available"


def test_a_comparison_or_an_arrow_is_not_taken_for_a_quote_marker():
    from kb.knowledge.signatures import _QUOTE_JOIN

    assert _QUOTE_JOIN.sub(" ", "a >= b -> c >> d x > y") == "a >= b -> c >> d x > y"
    assert _QUOTE_JOIN.sub(" ", "is >False. with >map_location") == "is False. with map_location"


def test_records_of_one_length_in_a_row_are_not_taken_for_a_wrap(engine):
    # Two ranks print the same warning, stamped alike and of the same length; the next line is a
    # kernel assertion. Joining them would glue the warning's tail onto the assertion's path.
    warn = (
        "[W1123 07:01:46.8682{}18 Utils.hpp:137] Warning: Environment variable TORCH_X_BUFFER_SIZE "
        "is deprecated; use TORCH_Y_BUFFER_SIZE instead, it will be removed (function operator())"
    )
    assertion = (
        "/pytorch/aten/src/ATen/native/cuda/Loss.cu:245: nll_loss_forward_reduce_cuda_kernel_2d: "
        "block: [0,0,0], thread: [0,0,0] Assertion `t >= 0 && t < n_classes` failed."
    )
    assert len(warn.format(9)) > len(assertion)  # the assertion would fit a wrap's last piece
    r = engine.lookup("\n".join([warn.format(9), warn.format(3), assertion]))
    assert r.best is not None and r.best.id == "cuda-device-side-assert"
    assert r.best.captures["file"] == "/pytorch/aten/src/ATen/native/cuda/Loss.cu"


def test_records_as_long_as_a_terminal_is_wide_are_not_a_wrap(engine):
    # Two ranks print the same 160-character line (a common terminal width): neither is the
    # first piece of a wrapped line, and the launcher's report after them is a record of its
    # own. Glued together, the report's low-level hint would sit on the missing file's line.
    missing = "/opt/env/bin/python3: can't open file '/srv/jobs/exp/{}': [Errno 2] No such file or directory"
    name = "t" * (160 - len(missing.format("")))
    line = missing.format(name)
    assert len(line) == 160
    report = (
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 2) local_rank: 0 "
        "(pid: 4242) of binary: /opt/env/bin/python3"
    )
    assert len(report) < len(line)  # it would fit a wrap's last piece
    r = engine.lookup("\n".join(["step 0", line, line, report]))
    assert r.best is not None and r.best.id == "file-not-found"
    assert r.best.line == line


@pytest.mark.parametrize(
    "text",
    [
        "**RuntimeError: CUDA error: misaligned address**",  # bold in an issue
        "> RuntimeError: CUDA error: misaligned address",  # quoted in a reply
        ">> > RuntimeError: CUDA error: misaligned address",  # quoted twice
        '{"level": "error", "msg": "Traceback (most recent call last):\\n'
        'RuntimeError: CUDA error: misaligned address"}',  # a JSON log record
        "Epoch 1:  10%|#   | 10/100 \r" * 20000 + "RuntimeError: CUDA error: misaligned address\n",
    ],
    ids=["bold", "quoted", "quoted-twice", "json-record", "progress-bar-line"],
)
def test_the_message_is_found_in_its_wrapping(engine, text):
    got = best(engine, text)
    assert got is not None and got[:2] == ("cuda-misaligned-address", "high")


def test_a_line_cut_off_mid_word_matches_at_medium_confidence(engine):
    assert best(engine, "RuntimeError: CUDA error: an illegal memory acc")[:2] == (
        "cuda-illegal-memory-access",
        "medium",
    )


def test_a_line_cut_after_a_long_head_matches_at_medium_confidence(engine):
    # Cut on a word boundary: seven words of one message's head are that message's alone...
    text = "RuntimeError: Expected all tensors to be on the same device, but found at least two"
    assert best(engine, text)[:2] == ("cuda-device-mismatch", "medium")
    # ...a few words may be a whole, shorter message of another kind: Python's own list
    # IndexError, never read as a cut tensor index error.
    assert best(engine, "IndexError: list index out of range")[0] == "python-index-error"


def test_a_line_cut_too_short_claims_nothing(engine):
    assert best(engine, "RuntimeError: CUDA err") is None


@pytest.mark.parametrize(
    "text",
    [
        "RuntimeError: Triton Error [CUDA]: an illegal memory access was encountered",
        "RuntimeError: HIP error: an illegal memory access was encountered",
        "CUDA error (/src/kernels/attn.cu:88): an illegal memory access was encountered",
        "pycuda._driver.LogicError: cuCtxSynchronize failed: an illegal memory access was "
        "encountered",
        "numba.cuda.cudadrv.driver.CudaAPIError: [700] Call to cuCtxSynchronize results in "
        "UNKNOWN_CUDA_ERROR",
    ],
    ids=["triton", "hip", "extension", "api-call-failed", "numba-driver-number"],
)
def test_the_cuda_error_is_read_out_of_other_wrappers(engine, text):
    got = best(engine, text)
    assert got is not None and got[0] == "cuda-illegal-memory-access"


def test_a_call_named_before_failed_must_be_a_cuda_call(engine):
    # "cuX failed: <text>" reads the text as a CUDA error only after a cu/cuda call name.
    assert best(engine, "step failed: unknown error") is None
    assert best(engine, "cuInit failed: unknown error")[0] == "cuda-unknown-error"


@pytest.mark.parametrize(
    "text,entry",
    [
        ("index out of range in self", "index-out-of-range"),
        (
            "element 0 of tensors does not require grad and does not have a grad_fn",
            "autograd-no-grad-fn",
        ),
    ],
)
def test_a_message_pasted_without_its_exception_class_matches(engine, text, entry):
    # No trigger word on the line (its "RuntimeError:" was left out): a short message is read
    # line by line all the same.
    got = best(engine, text)
    assert got is not None and got[0] == entry


def test_a_long_log_still_reads_only_trigger_lines():
    from kb.scan.extract import SHORT_TEXT_BYTES, scan_text

    noise = "step 12 loss 0.25\n" * (SHORT_TEXT_BYTES // 16)
    # A line no entry's literal and no generic trigger word is in: skipped in a long log.
    s = scan_text(noise + "the widget counter rolled over in self\n" + "RuntimeError: boom\n")
    assert [ln.text for ln in s.lines] == ["RuntimeError: boom"]
    assert len(scan_text("step 12 loss 0.25\nRuntimeError: boom\n").lines) == 2


@pytest.mark.parametrize(
    "text,entry",
    [
        ("段错误 (核心已转储)", "segfault"),
        (
            "./run.sh: line 3: 4242 已放弃               (核心已转储) python train.py",
            "cpp-terminate-abort",
        ),
        ("[1]+  已杀死               python train.py", "cpu-oom-killed"),
        ("Speicherzugriffsfehler (Speicherabzug geschrieben)", "segfault"),
    ],
    ids=["zh-segfault", "zh-abort", "zh-killed", "de-segfault"],
)
def test_the_shells_signal_report_in_another_language(engine, text, entry):
    got = best(engine, text)
    assert got is not None and got[0] == entry
    # In a long log too: these lines hold no English trigger word.
    got = best(engine, "epoch 1 step 5\n" * 5000 + text + "\n")
    assert got is not None and got[0] == entry


def test_the_root_error_is_kept_ahead_of_a_long_log(engine):
    # The first error, then thousands of lines of noise and a later, consequential error: the
    # root is what the lookup shows first.
    noise = "\n".join(f"step {i} loss 0.{i % 97:02d}" for i in range(50000))
    text = (
        "RuntimeError: CUDA error: an illegal memory access was encountered\n"
        + noise
        + "\nRuntimeError: CUDA error: unspecified launch failure\n"
    )
    got = best(engine, text)
    assert got is not None and got[0] == "cuda-illegal-memory-access"


def _walk_back(keys, keep):
    """The plain loop fold_tail stands for: walk back, fold repeats, stop at `keep` distinct."""
    firsts = {}
    j = len(keys)
    while j > 0 and len(firsts) < keep:
        j -= 1
        _, count = firsts.get(keys[j], (j, 0))
        firsts[keys[j]] = (j, count + 1)
    return j, firsts


def test_fold_tail_is_the_walk_back_loop():
    import random

    from kb.scan.extract import fold_tail

    rng = random.Random(7)
    for _ in range(300):
        n = rng.randrange(0, 60)
        alphabet = [f"line {k}".encode() for k in range(rng.randrange(1, 12))]
        keys = [rng.choice(alphabet) for _ in range(n)]
        keep = rng.randrange(1, 10)
        assert fold_tail(keys, keep) == _walk_back(keys, keep), (keys, keep)


@pytest.mark.parametrize(
    "text,entry",
    [
        (
            "RuntimeError: Expected all tensors to be on the same device, but found at least two\n"
            "devices, cuda:0 and cpu!\n",
            "cuda-device-mismatch",
        ),
        (
            "[rank1]: RuntimeError: one of the variables needed for gradient computation has been "
            "modified\n[rank1]: by an inplace operation: [torch.cuda.FloatTensor [16, 64]], which "
            "is output 0 of ReluBackward0, is at version 2; expected version 1 instead.\n",
            "autograd-inplace-modified",
        ),
        (
            "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:799] connect \n"
            "[10.1.2.3]:29591: Connection refused\n",
            "gloo-connection-error",
        ),
    ],
    ids=["plain", "rank-prefixed", "bracket-after-a-trailing-space"],
)
def test_a_message_word_wrapped_by_a_console_is_joined(engine, text, entry):
    got = best(engine, text)
    assert got is not None and got[0] == entry


def test_a_word_wrap_join_stops_at_a_new_record():
    from kb.scan.extract import scan_text

    line = "RuntimeError: Expected all tensors to be on the same device, but found at least two"
    for nxt in (
        "Traceback (most recent call last):",
        '  File "train.py", line 3, in <module>',
        "2026-11-23 12:00:01 INFO devices, cuda:0 and cpu!",
        "ValueError: devices, cuda:0 and cpu!",
        "[rank0]: devices, cuda:0 and cpu!",
    ):
        texts = [ln.text for ln in scan_text(line + "\n" + nxt + "\n").lines]
        assert not any(t.startswith(line + " ") for t in texts), nxt
    # A bracket starts a record after a line that ends in a word (no space where a wrap fell).
    texts = [ln.text for ln in scan_text(line + "\n[10.1.2.3]:29591: refused\n").lines]
    assert not any(t.startswith(line + " ") for t in texts)
    # A line that ends its sentence is not joined either.
    texts = [ln.text for ln in scan_text(line + ".\ndevices, cuda:0 and cpu!\n").lines]
    assert not any(len(t) > len(line) + 1 for t in texts)
