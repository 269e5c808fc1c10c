"""The log scan's paths give the same lines whichever way the bytes come.

A log read from a pipe, from a file, or given as a list of chunks; its middle searched a step at a time at any step size; its
newlines counted natively or with bytes.count: the lines kept, their numbers and counts, the
skimmed and dropped counts are the same.
"""

from __future__ import annotations

import os
import random
import threading

import pytest

import kb.scan.extract as extract
from kb.scan.reader import ChunkReader, read_scan


def _log(mib: float, seed: int = 7) -> bytes:
    """A long log: noise, repeated warnings, error-looking and failure lines spread through it
    (some in the skimmed middle), a long carriage-return line, the root error near the end."""
    rnd = random.Random(seed)
    out = []
    size = 0
    step = 0
    while size < mib * (1 << 20):
        step += 1
        r = rnd.random()
        if r < 0.001:
            line = f"[rank{step % 4}]: RuntimeError: worker {step} stopped: bad value {step}\n"
        elif r < 0.002:
            line = f"ValueError: batch {step} has NaN\n"
        elif r < 0.003:
            line = "Killed\n"
        elif r < 0.02:
            line = "  warnings.warn('the given NumPy array is not writable')\n"
        elif r < 0.03:
            line = "\r".join(f"Epoch 1: {i}%|####| {i}/100 [00:01<00:02]" for i in range(40))
            line += "\n"
        else:
            line = f"step {step} loss {rnd.random():.4f} lr 3e-4 tokens/s {rnd.randrange(9999)}\n"
        out.append(line)
        size += len(line)
    out.append(
        'Traceback (most recent call last):\n  File "train.py", line 9, in <module>\n'
        "    loss.backward()\n"
        "RuntimeError: CUDA error: an illegal memory access was encountered\n"
        "step done\n"
    )
    return "".join(out).encode()


_BIG: list[bytes] = []


def _big() -> bytes:
    if not _BIG:
        _BIG.append(_log(40, seed=9))
    return _BIG[0]


def _summary(s):
    return (
        [(ln.number, ln.text, ln.count, ln.rank, ln.context) for ln in s.lines],
        s.total_lines,
        s.total_bytes,
        s.skimmed,
        s.dropped,
        s.dropped_kinds,
        s.binary,
    )


def _piped(data: bytes, size: int | None = None):
    r, w = os.pipe()

    def write() -> None:
        with os.fdopen(w, "wb") as fh:
            fh.write(data)

    t = threading.Thread(target=write)
    t.start()
    with os.fdopen(r, "rb") as fh:
        reader = ChunkReader(fh, "<pipe>", size)
        s = extract.scan(reader)
        s.warnings.extend(reader.warnings)
    t.join()
    return s


@pytest.fixture(params=["hyperscan", "no-hyperscan"])
def engine_mode(request, monkeypatch):
    if request.param == "no-hyperscan":
        monkeypatch.setenv("KB_NO_HYPERSCAN", "1")
    else:
        pytest.importorskip("hyperscan")
    return request.param


def _small(monkeypatch) -> None:
    """Windows small enough that a 3 MiB log has a head, a skimmed middle and a tail."""
    monkeypatch.setattr(extract, "TAIL_BYTES", 256 << 10)
    monkeypatch.setattr(extract, "HEAD_BYTES", 256 << 10)
    monkeypatch.setattr(extract, "KEEP_HEAD", 40)
    monkeypatch.setattr(extract, "KEEP_TAIL", 80)
    monkeypatch.setattr(extract, "KEEP_MIDDLE", 10)


def test_pipe_file_and_chunks_give_the_same_scan(tmp_path, monkeypatch, engine_mode):
    _small(monkeypatch)
    data = _log(3)
    path = tmp_path / "train.log"
    path.write_bytes(data)
    size = 64 << 10  # many chunks, many seams between them
    piped = _piped(data, size)
    with open(path, "rb") as fh:
        reader = ChunkReader(fh, str(path), size)
        filed = extract.scan(reader)
    listed = extract.scan([data[i : i + size] for i in range(0, len(data), size)])
    assert piped.skimmed > 0 and piped.total_lines == data.count(b"\n")
    assert any("illegal memory access" in ln.text for ln in piped.lines)
    assert _summary(piped) == _summary(filed) == _summary(listed)


def test_the_middle_gives_the_same_lines_at_any_step(monkeypatch, engine_mode):
    _small(monkeypatch)
    data = _log(3, seed=11)
    chunks = [data[i : i + (64 << 10)] for i in range(0, len(data), 64 << 10)]
    got = []
    for step in (1 << 20, 96 << 10, 3000):
        monkeypatch.setattr(extract, "STEP", step)
        got.append(_summary(extract.scan(chunks)))
    assert got[0][3] > 0  # lines were skimmed
    assert got[0] == got[1] == got[2]


def test_newlines_counts_as_bytes_count_does(monkeypatch):
    rnd = random.Random(1)
    data = bytes(rnd.choice(b"ab\n\r\x00\xff") for _ in range(300_000))
    spans = [(0, len(data)), (1, len(data) - 1), (70_000, 200_001), (5, 9), (0, 0)]
    for native in (False, None):  # bytes.count; then whatever this machine has
        monkeypatch.setattr(extract, "_COUNT", native)
        for a, b in spans:
            assert extract.newlines(data, a, b) == data.count(b"\n", a, b)
            assert extract.newlines(bytearray(data), a, b) == data.count(b"\n", a, b)
        assert extract.newlines(data) == data.count(b"\n")


def test_stringzilla_counts_as_bytes_count_does(monkeypatch):
    pytest.importorskip("stringzilla")
    monkeypatch.delenv("KB_NO_STRINGZILLA", raising=False)
    count = extract._native_count()
    assert count
    data = _log(0.5, seed=2)
    for a, b in [(0, len(data)), (3, len(data) - 7), (100_000, 400_000)]:
        assert count(data, b"\n", a, b) == data.count(b"\n", a, b)


def test_no_stringzilla_switch(monkeypatch):
    monkeypatch.setenv("KB_NO_STRINGZILLA", "1")
    assert extract._native_count() is False


def test_read_scan_of_a_pipe_and_a_file_agree_at_full_size(tmp_path, engine_mode):
    """The real windows (16 MiB head and tail, 8 MiB chunks): a 40 MiB log skims its middle
    the same way from a pipe as from a file."""
    data = _big()
    path = tmp_path / "big.log"
    path.write_bytes(data)
    piped = _piped(data)
    with open(path, "rb") as fh:
        filed = read_scan(fh, str(path))
    assert piped.skimmed > 0
    assert _summary(piped) == _summary(filed)


def _line_starts_of(body: bytes, offs) -> set[int]:
    return {body.rfind(b"\n", 0, o) + 1 for o in offs}


def test_the_pure_python_errorish_search_finds_the_regex_lines():
    """The pure-Python search for error-looking lines (bytes.find per word) finds the lines
    ERRORISH's regex finds, and no others, including at the edges of the searched span."""
    from kb.scan import triggers

    pieces = [
        b"RuntimeError: CUDA error: out of memory",
        b"errors were reported",  # "error" followed by a letter: no
        b"Error",  # at the end of a line (the newline follows)
        b"ValueError]",
        b"some Exception raised",
        b"ERROR\r",
        b"FAILED tests/test_x.py",
        b"default settings",  # "fault" inside a word, then a space: yes, as the regex does
        b"Fatal:",
        b"Killed",
        b"terminate called after throwing",
        b"AssertionError: x",
        b"node1:12:12 [0] NCCL WARN Cuda failure",
        b"Signal 9 (SIGKILL) received",
        b"Signal x (SIGKILL)",  # no digits: no
        b"Signal 15",  # cut: no
        b"nothing here",
        b"Errorless",
        b"error",
    ]
    rnd = random.Random(4)
    for _ in range(30):
        lines = [rnd.choice(pieces) for _ in range(rnd.randrange(1, 40))]
        body = b"\n".join(lines) + rnd.choice([b"\n", b""])
        for start, end in [(0, len(body)), (3, len(body) - 2), (0, max(0, len(body) - 1))]:
            # spans of whole lines, as the scan gives them
            start = body.rfind(b"\n", 0, start) + 1 if start else 0
            want = [m.start() for m in triggers._rx("ERRORISH").finditer(body, start, end)]
            got = triggers._errorish_found(body, start, end)
            assert got == sorted(got)
            assert _line_starts_of(body, got) == _line_starts_of(body, want), (body, start, end)


def test_a_prepared_set_loads_its_failure_search_instead_of_compiling_it(monkeypatch):
    """The failure search (the middle's last room) comes serialised with the set, like the
    other two: a process that unpickles the set compiles nothing."""
    import pickle

    pytest.importorskip("hyperscan")
    monkeypatch.delenv("KB_NO_HYPERSCAN", raising=False)
    from kb.scan.triggers import Triggers

    t = Triggers(["widget frobnication failed"])
    t.prepare()
    assert set(t.hs) == {"triggers", "errorish", "failure"}
    loaded = pickle.loads(pickle.dumps(t))

    def no_compile(self, kind):
        raise AssertionError(f"compiled {kind}")

    monkeypatch.setattr(Triggers, "_compile", no_compile)
    body = b"ok\nRuntimeError: boom\nfine\n"
    assert loaded.failure_offsets(body, 0, len(body), hyperscan=True)
    assert loaded.database("failure") is not None


# A Windows OOM message wrapped by the terminal, as pasted: its figures on the last line, with no
# line break after it.
WRAPPED_TAIL = (
    "RuntimeError: [enforce fail at ..\\c10\\core\\CPUAllocator.cpp:72] data. "
    "DefaultCPUAllocator: not enough memory: you tried\n"
    "to allocate 16777216000 bytes. Buy new RAM!"
)


@pytest.mark.parametrize("lines_before", [0, 30, 3000, 120_000])
@pytest.mark.parametrize("newline_at_end", [False, True])
def test_a_text_gets_one_answer_by_every_path(tmp_path, lines_before, newline_at_end):
    """The same text as an argument, a pipe and a file: the same matches and root line. A short
    one is read as a pasted message whatever path it came by; a last line without a line break
    is read with the lines before it (here: the wrapped message's figures)."""
    import io

    import kb

    text = "epoch 3 step 120 loss 0.4187 lr 3.0e-04\n" * lines_before + WRAPPED_TAIL
    text += "\n" if newline_at_end else ""
    path = tmp_path / "train.log"
    path.write_text(text)
    engine = kb.Engine()
    results = [engine.lookup(io.BytesIO(text.encode())), engine.lookup(path)]
    if lines_before < 1000:  # the string path is for pasted messages
        results.append(engine.lookup(text))
    answers = {(tuple(m.id for m in r.matches), r.root.line if r.root else None) for r in results}
    assert len(answers) == 1, answers
    assert results[0].matches and results[0].matches[0].id == "cpu-oom"
    s = read_scan(io.BytesIO(text.encode()))
    assert s.total_bytes == len(text.encode())  # the line break added at the end is not counted
    assert s.total_lines == text.count("\n") + (not newline_at_end)
