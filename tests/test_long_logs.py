"""A long log's middle is skimmed: its start and end are read in full, the part between is
searched only for error-looking lines (with Hyperscan in a second thread while the lines are
counted), and how much was skimmed is said. The sizes are shrunk here so that a few hundred KiB
take the path a GiB log takes."""

from __future__ import annotations

import io
import json

import pytest

import kb.scan.extract as ex
from kb import Engine

CHUNK = 64 << 10
NOISE = "Epoch 3 step {i} loss=0.1234 lr=3e-4\n  warnings.warn('The given NumPy array is not writable')\n"
ROOT = "RuntimeError: CUDA error: an illegal memory access was encountered"
QUIET = "NCCL INFO Channel 00 : the remote buffer is not registered"  # a trigger line, not error-looking
OOM_HEAD = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a"
OOM_REST = "total capacity of 79.11 GiB of which 1.50 GiB is free."


@pytest.fixture(params=["hyperscan", "no-hyperscan"])
def small(monkeypatch, request):
    monkeypatch.setattr(ex, "HEAD_BYTES", 2 * CHUNK)
    monkeypatch.setattr(ex, "TAIL_BYTES", 2 * CHUNK)
    monkeypatch.setattr(ex, "HYPERSCAN_MIN", 1024)  # the threaded Hyperscan path on small spans
    monkeypatch.setenv("KB_NO_HYPERSCAN", "1" if request.param == "no-hyperscan" else "")
    return request.param


def noise(n: int, start: int = 0) -> list[str]:
    return [ln for i in range(start, start + n) for ln in NOISE.format(i=i).splitlines()]


def long_log() -> tuple[list[str], int, int, int]:
    lines = noise(6000)  # ~500 KiB: head, then the middle
    root_at = len(lines)
    lines.append(ROOT)
    quiet_at = len(lines)
    lines.append(QUIET)  # lost in the middle: not error-looking
    lines += noise(6000, 6000)
    end_quiet_at = len(lines)
    lines.append(QUIET.replace("remote", "far"))  # in the last part: read in full
    lines += noise(20, 12000)
    return lines, root_at + 1, quiet_at + 1, end_quiet_at + 1


def scan_lines(lines: list[str]):
    data = ("\n".join(lines) + "\n").encode()
    return ex.scan(ex.iter_chunks(io.BytesIO(data), size=CHUNK))


def test_the_middle_is_skimmed_for_error_lines_only(small):
    lines, root_no, _, end_quiet_no = long_log()
    s = scan_lines(lines)
    assert s.total_lines == len(lines)
    kept = {ln.text: ln.number for ln in s.lines}
    assert kept[ROOT] == root_no  # error-looking: kept from the middle, at its own line number
    assert QUIET not in kept  # a trigger line in the skimmed middle is not
    assert kept[QUIET.replace("remote", "far")] == end_quiet_no  # the end is read in full
    assert 0 < s.skimmed < len(lines)
    # Whatever was skimmed was counted: the lines read in full plus those skimmed are all lines.
    whole = ex.scan(ex.iter_chunks(io.BytesIO(("\n".join(lines) + "\n").encode()), size=1 << 30))
    assert whole.skimmed == 0 and QUIET in {ln.text for ln in whole.lines}


@pytest.mark.parametrize(
    "line",
    [
        "Killed",  # the shell's report: an error word at the end of its line
        "Bus error",
        "node3:1234:1300 [0] NCCL WARN Net : Connection closed by remote peer",
        "torch.distributed.elastic.multiprocessing.api: Signal 9 (SIGKILL) received by PID 42",
    ],
)
def test_error_lines_without_an_error_colon_are_kept_from_the_middle(small, line):
    lines = noise(6000) + [line] + noise(6000, 6000) + noise(20, 12000)
    s = scan_lines(lines)
    assert s.skimmed > 0
    assert {ln.text: ln.number for ln in s.lines}.get(line) == 6000 * 2 + 1


def test_a_message_across_a_chunk_seam_at_the_end_is_read_whole(small):
    lines = noise(8000)
    tail = noise(40, 9000)
    data = ("\n".join(lines) + "\n").encode()
    # Put the OOM message's first line so that its figures start the next chunk.
    pad = CHUNK - (len(data) % CHUNK) - len(OOM_HEAD) - 1
    text = data.decode() + "#" * max(pad, 0) + "\n" + OOM_HEAD + "\n" + OOM_REST + "\n"
    text += "\n".join(tail) + "\n"
    s = ex.scan(ex.iter_chunks(io.BytesIO(text.encode()), size=CHUNK))
    oom = [ln for ln in s.lines if ln.text.startswith("torch.OutOfMemoryError")]
    assert oom and "total capacity of 79.11 GiB" in oom[0].after


def test_both_searches_of_the_middle_agree(monkeypatch):
    lines, *_ = long_log()
    results = []
    for no_hs in ("", "1"):
        monkeypatch.setattr(ex, "HEAD_BYTES", 2 * CHUNK)
        monkeypatch.setattr(ex, "TAIL_BYTES", 2 * CHUNK)
        monkeypatch.setattr(ex, "HYPERSCAN_MIN", 1024)
        monkeypatch.setenv("KB_NO_HYPERSCAN", no_hs)
        s = scan_lines(lines)
        results.append(([(ln.number, ln.text, ln.count) for ln in s.lines], s.skimmed))
    assert results[0] == results[1]


def test_a_lookup_says_how_much_it_skimmed(small, monkeypatch):
    import kb.scan.reader

    monkeypatch.setattr(kb.scan.reader, "CHUNK", CHUNK)
    lines, root_no, *_ = long_log()
    r = Engine().lookup(io.BytesIO(("\n".join(lines) + "\n").encode()))
    assert r.best is not None and r.best.id == "cuda-illegal-memory-access"
    assert r.best.line_number == root_no
    assert r.skimmed > 0 and any("searched only for error lines" in w for w in r.warnings)
    from kb.render.report import result_dict

    assert json.loads(json.dumps(result_dict(r)))["input"]["skimmed"] == r.skimmed
