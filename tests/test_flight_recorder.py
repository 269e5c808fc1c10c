"""Flight Recorder dumps read without torch and without trusting them: the real dumps the CPU jobs
left (tests/fixtures/jobs/*/run/fr/), hand-made ones in the same shape, and hostile pickles."""

import json
import os
import pickle

from _repo import REPO

import kb.job.parsers.flight_recorder as fr

FIX = REPO / "tests" / "fixtures" / "jobs"


def entry(seq, op="nccl:all_reduce", sizes=((4,),), state="completed", pg=("0", "default_pg")):
    # The keys of an entry (torch/distributed/flight_recorder/components/types.py, loader.py).
    return {
        "record_id": seq - 1,
        "pg_id": 0,
        "process_group": pg,
        "collective_seq_id": seq,
        "p2p_seq_id": 0,
        "op_id": seq,
        "profiling_name": op,
        "time_created_ns": 1,
        "input_sizes": [list(s) for s in sizes],
        "input_dtypes": ["Float"],
        "output_sizes": [list(s) for s in sizes],
        "output_dtypes": ["Float"],
        "state": state,
        "retired": state == "completed",
        "timeout_ms": 20000,
        "is_p2p": False,
        "frames": [],
    }


def dump(entries, last_enqueued, version="2.10"):
    return {
        "version": version,
        "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}},
        "pg_status": {
            "0": {
                "last_enqueued_collective": last_enqueued,
                "last_started_collective": -1,
                "last_completed_collective": last_enqueued - 1,
            }
        },
        "entries": entries,
    }


def test_real_dumps_of_the_stalled_job():
    dumps = [fr.load(FIX / "cpu-stall" / "run" / "fr" / f"nccl_trace_rank_{r}") for r in (0, 1)]
    assert [d.rank for d in dumps] == [0, 1]
    assert [d.last_enqueued("0") for d in dumps] == [2, 1]
    found = fr.desync(dumps)
    assert (found.seq, found.op, found.missing, found.waiting) == (2, "gloo:all_reduce", [1], [0])


def test_missing_rank_from_pickles_and_json(tmp_path):
    (tmp_path / "nccl_trace_rank_0").write_bytes(
        pickle.dumps(dump([entry(1), entry(2, state="scheduled")], 2), protocol=2)
    )
    (tmp_path / "nccl_trace_rank_1.json").write_text(json.dumps(dump([entry(1)], 1)))
    dumps = [fr.load(tmp_path / "nccl_trace_rank_0"), fr.load(tmp_path / "nccl_trace_rank_1.json")]
    found = fr.desync(dumps)
    assert (found.seq, found.op, found.missing, found.by) == (
        2,
        "nccl:all_reduce",
        [1],
        "flight-recorder",
    )


def test_mismatched_sizes(tmp_path):
    a = fr.load(_write(tmp_path / "t0", dump([entry(1), entry(2, sizes=((10,),))], 2)))
    b = fr.load(_write(tmp_path / "t1", dump([entry(1), entry(2, sizes=((20,),))], 2)))
    found = fr.desync([a, b])
    assert found.seq == 2 and found.missing == [] and "different sizes" in found.detail


def test_evicted_entries_are_not_compared(tmp_path):
    # Ring buffers keep the last N: rank 1 no longer has seq 1; seq 2 agrees.
    a = fr.load(_write(tmp_path / "t0", dump([entry(1, sizes=((9,),)), entry(2)], 2)))
    b = fr.load(_write(tmp_path / "t1", dump([entry(2)], 2)))
    assert fr.desync([a, b]) is None


def test_hostile_pickles_are_refused_without_running_anything(tmp_path):
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    p = tmp_path / "nccl_trace_rank_0"
    p.write_bytes(pickle.dumps({"entries": [Evil()]}, protocol=2))
    assert fr.load(p) is None and not marker.exists()
    p.write_bytes(pickle.dumps({"entries": [], "x": Evil()}, protocol=4))
    assert fr.load(p) is None and not marker.exists()
    p.write_bytes(b"\x80\x02}q\x00(X\x07\x00\x00\x00entries")  # truncated
    assert fr.load(p) is None


def test_not_a_dump(tmp_path):
    p = tmp_path / "trace_rank_0"
    p.write_bytes(pickle.dumps([1, 2, 3]))
    assert fr.load(p) is None
    p.write_text("RuntimeError: not a dump\n")
    assert fr.load(p) is None and not fr.looks_like_dump(p)


def _write(path, d):
    path.write_bytes(pickle.dumps(d, protocol=2))
    return path


def _u(text: str) -> bytes:
    b = text.encode()
    return b"X" + len(b).to_bytes(4, "little") + b


def _jit_dump(builder: str) -> bytes:
    """A dump as torch::jit::Pickler writes a typed int list, assembled opcode by opcode:
    {"entries": [{"collective_seq_id": 1, "profiling_name": "nccl:all_reduce",
                  "input_sizes": [<builder>([4])]}]}"""
    sizes = b"]c" + b"torch.jit._pickle\n" + builder.encode() + b"\n](K\x04e\x85Ra"
    ent = (
        b"}("
        + _u("collective_seq_id")
        + b"K\x01"
        + _u("profiling_name")
        + _u("nccl:all_reduce")
        + _u("input_sizes")
        + sizes
        + b"u"
    )
    return b"\x80\x02}(" + _u("entries") + b"](" + ent + b"e" + b"u."


def test_torch_jit_list_builders_are_rebuilt_locally(tmp_path):
    """GLOBAL torch.jit._pickle build_intlist gives a plain list; torch is not imported, and any
    other global is refused."""
    import sys

    p = tmp_path / "nccl_trace_rank_0"
    p.write_bytes(_jit_dump("build_intlist"))
    d = fr.load(p)
    assert d is not None and d.entries[0].sizes == [[4]] and "torch" not in sys.modules
    p.write_bytes(_jit_dump("build_tensor_from_id"))
    assert fr.load(p) is None
