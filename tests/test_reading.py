"""Reading inputs safely (kb.scan.reader): devices, pipes and FIFOs read once, `-`, UTF-16,
truncated and concatenated gzip, gzip bombs, endless lines, lines cut short. Each limit is
checked with bounded time and memory: the limits are made small here, the code paths are real."""

from __future__ import annotations

import gzip
import io
import os
import subprocess
import sys
import threading

import pytest

import kb.scan.reader as reader
from kb.diagnosis.engine import Engine
from kb.errors import InputError
from kb.scan.extract import CUT, KEEP_LINE, scan_text
from kb.scan.reader import ChunkReader, Gunzip, open_log, read_scan

ILLEGAL = b"RuntimeError: CUDA error: an illegal memory access was encountered\n"


def _kb(*args: str, stdin: bytes | None = None, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kb", *args],
        input=stdin,
        capture_output=True,
        timeout=120,
        cwd=cwd,
    )


def _log(n: int = 2000) -> bytes:
    return b"".join(b"step %d loss 0.1\n" % i for i in range(n)) + ILLEGAL + b"after\n" * 50


def test_a_device_file_is_refused_in_one_line():
    with pytest.raises(InputError, match="is a device"):
        open_log("/dev/zero")
    out = _kb("lookup", "--file", "/dev/zero")
    assert out.returncode == 2
    assert out.stderr.decode().strip() == "kb: /dev/zero is a device, not a log file"


def test_a_fifo_is_opened_once_and_read(tmp_path):
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)

    def write():
        with open(fifo, "wb") as fh:  # blocks until kb opens the FIFO; a second open would hang
            fh.write(_log())

    t = threading.Thread(target=write, daemon=True)
    t.start()
    out = _kb("lookup", "--file", str(fifo))
    t.join(timeout=10)
    assert out.returncode == 0, out.stderr
    assert out.stdout.decode().startswith("cuda-illegal-memory-access")


@pytest.mark.parametrize("how", [["-"], ["--file", "-"], ["--file", "/dev/stdin"]])
def test_standard_input_by_name(how):
    out = _kb("lookup", *how, stdin=_log())
    assert out.returncode == 0, out.stderr
    assert out.stdout.decode().startswith("cuda-illegal-memory-access")


def test_utf16_log_is_text_not_binary(tmp_path):
    p = tmp_path / "ps.log"
    p.write_bytes(_log().decode().encode("utf-16"))  # with a byte-order mark, as PowerShell
    r = Engine().lookup(p)
    assert not r.binary
    assert r.best is not None and r.best.id == "cuda-illegal-memory-access"
    assert any("UTF-16" in w for w in r.warnings)


def test_truncated_gzip_gives_the_lines_before_the_cut(tmp_path):
    data = _log(20000) + b"".join(b"tail line %d\n" % i for i in range(200000))
    packed = gzip.compress(data)
    p = tmp_path / "cut.log.gz"
    p.write_bytes(packed[: len(packed) * 2 // 3])
    r = Engine().lookup(p)
    assert r.best is not None and r.best.id == "cuda-illegal-memory-access"
    assert any("truncated" in w for w in r.warnings)
    # zcat recovers about the same: lines up to the cut, not the whole file
    assert 20000 < r.lines_scanned < 220000


def test_concatenated_gzip_members_are_all_read():
    data = gzip.compress(b"first\n" * 10) + gzip.compress(_log(10))
    fh = Gunzip(io.BytesIO(data))
    assert fh.read(1 << 30) + fh.read(1 << 30) == b"first\n" * 10 + _log(10)
    assert not fh.truncated


def test_damaged_gzip_data_is_reported_not_raised():
    data = bytearray(gzip.compress(_log(5000)))
    data[len(data) // 2 : len(data) // 2 + 64] = b"\xff" * 64
    r = ChunkReader(Gunzip(io.BytesIO(bytes(data))), "bad.gz")
    got = b"".join(r)
    # what came before the damage is given back (the check at the end then fails)
    assert r.stopped and "damaged" in r.warnings[0]
    assert got.startswith(_log(5000)[:10000])


def test_a_gzip_bomb_stops_at_its_ratio(monkeypatch):
    monkeypatch.setattr(reader, "BOMB_MIN", 1 << 20)
    bomb = gzip.compress(b"\n" * (64 << 20), compresslevel=9)  # 64 MiB from ~64 KiB
    r = ChunkReader(Gunzip(io.BytesIO(bomb)), "bomb.gz", size=1 << 20)
    n = sum(len(b) for b in r)
    # stopped once past 500x what was read of the compressed data (read 1 MiB at a time)
    assert r.stopped and n < (64 << 20) and n <= reader.BOMB_RATIO * len(bomb) + (1 << 20)
    assert "grew" in r.warnings[0]


def test_a_real_log_compressing_well_is_not_a_bomb(monkeypatch):
    monkeypatch.setattr(reader, "BOMB_MIN", 1 << 20)
    data = b"".join(b"epoch 1 step %d loss=0.%d lr=1e-4\n" % (i, i % 97) for i in range(200000))
    r = ChunkReader(Gunzip(io.BytesIO(gzip.compress(data))), "ok.gz", size=1 << 20)
    assert b"".join(r) == data and not r.stopped


def test_an_endless_line_stops(monkeypatch):
    monkeypatch.setattr(reader, "MAX_RUN", 4 << 20)

    class Endless(io.RawIOBase):
        def readinto(self, b):
            b[:] = b"a" * len(b)
            return len(b)

        def readable(self):
            return True

    s = read_scan(
        io.BufferedReader(Endless()),
        "zero",
    )
    assert any("no line break" in w for w in s.warnings)
    assert s.total_bytes < (64 << 20)


def test_a_line_kept_short_is_marked_so_dollar_anchors_do_not_match_its_cut():
    line = "RuntimeError: widget " + "a" * (KEEP_LINE + 100) + "b"
    s = scan_text(line)
    assert s.lines[0].text.endswith(CUT)
    import re

    # A signature anchored at the line's end (`widget a+$`) would have matched the cut (all
    # 'a's) before; the real line ends in 'b'.
    assert not re.search(r"widget a+$", s.lines[0].text)
