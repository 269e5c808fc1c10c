"""Collective semantics as data (kb/data/collectives.yaml): which collectives must agree on sizes
and dtypes across the members of a group and which legitimately differ, by the names torch's
Flight Recorder writes; the job view names a size mismatch only where the op requires agreement,
and an op-type or order mismatch always."""

import pickle
import shutil

import pytest
from _repo import REPO

import kb.job.parsers.flight_recorder as fr
from kb.job.collectives import agreed, analyze, semantics
from kb.knowledge.data import load_data
from kb.lint import check_data


@pytest.mark.parametrize(
    ("name", "op"),
    [
        ("nccl:all_reduce", "all_reduce"),
        ("gloo:all_reduce", "all_reduce"),
        ("nccl:_allgather_base", "all_gather_into_tensor"),
        ("nccl:_all_gather_base", "all_gather_into_tensor"),
        ("nccl:all_gather_into_tensor_coalesced", "all_gather_into_tensor_coalesced"),
        ("nccl:_reduce_scatter_base", "reduce_scatter_tensor"),
        ("nccl:allreduce_coalesced", "all_reduce_coalesced"),
        ("nccl:all_reduce_barrier", "barrier"),
        ("gloo:all_to_all", "all_to_all"),
        ("nccl:all_to_all", "all_to_all"),
        ("nccl:send 0->1", "send"),
        ("nccl:recv 1<-0", "recv"),
        ("nccl:coalesced", "coalesced"),
        ("nccl:REDUCE_SCATTER_coalesced", "coalesced"),
    ],
)
def test_profiling_names_come_to_their_op(name, op):
    assert semantics(name).op == op


def test_unknown_names_and_backends_are_no_op():
    assert semantics("nccl:frobnicate") is None
    assert semantics("mylib:all_reduce") is None  # not a backend the data names


def test_what_must_agree():
    def e(op, sizes):
        return fr.Entry("0", 2, op, "completed", sizes, ("Float",))

    # all_reduce: sizes are part of what members agree on; all_to_all: only the op and dtypes
    assert agreed(e("nccl:all_reduce", ((4,),))) != agreed(e("nccl:all_reduce", ((8,),)))
    assert agreed(e("nccl:all_to_all", ((4,),))) == agreed(e("nccl:all_to_all", ((9,),)))
    assert agreed(e("gloo:all_gather", ((4,),))) == agreed(e("gloo:all_gather", ((7,),)))
    # one op, two spellings of it (the out-of-place broadcast of NCCL's uneven all_gather)
    assert agreed(e("nccl:broadcast", ((4,),)))[0] == agreed(e("nccl:_broadcast_oop", ((4,),)))[0]
    # an op the data does not name: compared by its name only
    assert agreed(e("nccl:frobnicate", ((4,),))) == agreed(e("nccl:frobnicate", ((5,),)))


def test_the_data_file_is_read_by_the_entries_loader_and_linted(tmp_path):
    data = load_data()
    assert data.collectives is not None and not data.problems
    assert any(o.op == "all_to_all" and not o.sizes_agree for o in data.collectives.ops)
    assert not [p for p in check_data() if p.path.endswith("collectives.yaml")]
    # an example that comes to another op, and a name given to two ops, are lint problems
    for f in (REPO / "kb" / "data").iterdir():
        shutil.copy(f, tmp_path / f.name)
    text = (tmp_path / "collectives.yaml").read_text()
    text = text.replace('examples: ["nccl:broadcast",', 'examples: ["nccl:reduce",', 1)
    text = text.replace("names: [gather]", "names: [gather, scatter]", 1)
    (tmp_path / "collectives.yaml").write_text(text)
    got = [p for p in check_data(str(tmp_path)) if p.path.endswith("collectives.yaml")]
    msgs = " | ".join(p.message for p in got)
    assert all(p.code == "KB009" for p in got)
    assert "example 'nccl:reduce' of 'broadcast' is read as 'reduce'" in msgs
    assert "name 'scatter' is given to" in msgs


# ---------------------------------------------------------------- the comparison
def _entry(seq, op, sizes, state="completed", pg=("0", "default_pg")):
    return {
        "pg_id": 0,
        "process_group": list(pg),
        "collective_seq_id": seq,
        "p2p_seq_id": 0,
        "profiling_name": op,
        "time_created_ns": seq,
        "input_sizes": [list(s) for s in sizes],
        "input_dtypes": ["Float"] * len(sizes),
        "state": state,
        "is_p2p": False,
        "frames": [],
    }


def _dumps(tmp_path, per_rank, world, completed=None):
    """per_rank: rank -> its entries; completed: rank -> its last completed collective."""
    out = []
    ranks = str(list(range(world)))
    for r, ents in per_rank.items():
        last = max(e["collective_seq_id"] for e in ents)
        done = (completed or {}).get(r, last)
        d = {
            "version": "2.10",
            "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": ranks}},
            "pg_status": {
                "0": {
                    "last_enqueued_collective": last,
                    "last_started_collective": -1,
                    "last_completed_collective": done,
                }
            },
            "entries": ents,
        }
        p = tmp_path / f"nccl_trace_rank_{r}"
        p.write_bytes(pickle.dumps(d, protocol=2))
        out.append(fr.load(p))
    return out


def _uneven(rank, seq):
    # what an expert-parallel rank sends: another number of tokens every step
    return ((rank * 3 + seq) % 7 + 1, 16)


def test_uneven_all_to_all_is_no_mismatch(tmp_path):
    """Four ranks run all_to_all with sizes of their own every step, all completed: nothing is
    wrong, no rank is named."""
    per = {
        r: [
            e
            for s in range(1, 7, 2)
            for e in (
                _entry(s, "nccl:all_to_all", (_uneven(r, s),)),
                _entry(s + 1, "nccl:all_reduce", ((4,),)),
            )
        ]
        for r in range(4)
    }
    c = analyze(_dumps(tmp_path, per, 4))
    assert c.roots == [] and not any(f.kind == "mismatch" for f in c.findings)


def test_uneven_all_to_all_then_a_stall_names_the_staller_alone(tmp_path):
    """The same, then rank 2 never enqueues the all_reduce its peers wait in: rank 2 alone."""
    per = {}
    for r in range(4):
        ents = [
            _entry(1, "nccl:all_to_all", (_uneven(r, 1),)),
            _entry(2, "nccl:all_reduce", ((4,),)),
        ]
        ents.append(_entry(3, "nccl:all_to_all", (_uneven(r, 3),)))
        if r != 2:
            ents.append(_entry(4, "nccl:all_reduce", ((4,),), state="scheduled"))
        per[r] = ents
    c = analyze(_dumps(tmp_path, per, 4, completed={0: 3, 1: 3, 2: 3, 3: 3}))
    assert c.roots == [2] and c.faults[2].kind == "stalled"


def test_an_op_mismatch_at_an_all_to_all_is_named(tmp_path):
    """Sizes of an all_to_all may differ; its op may not: rank 1 ran an all_reduce there."""
    per = {
        r: [
            _entry(1, "nccl:all_reduce", ((4,),)),
            _entry(2, "nccl:all_reduce" if r == 1 else "nccl:all_to_all", (_uneven(r, 2),)),
        ]
        for r in range(4)
    }
    c = analyze(_dumps(tmp_path, per, 4, completed=dict.fromkeys(range(4), 1)))
    assert c.roots == [1] and c.faults[1].kind == "mismatch"
    assert "different ops" in c.faults[1].finding.detail


def test_a_size_mismatch_where_sizes_must_agree_is_named(tmp_path):
    per = {
        r: [
            _entry(1, "gloo:all_reduce", ((4,),)),
            _entry(2, "gloo:all_reduce", ((8 if r == 3 else 4,),)),
        ]
        for r in range(4)
    }
    c = analyze(_dumps(tmp_path, per, 4, completed=dict.fromkeys(range(4), 1)))
    assert c.roots == [3] and "different sizes" in c.faults[3].finding.detail


def _rounds(n, ops=(("nccl:all_reduce", ((4,),)), ("nccl:broadcast", ((2,),)))):
    out = []
    seq = 0
    for _ in range(n):
        for op, sizes in ops:
            seq += 1
            out.append(_entry(seq, op, sizes))
    return out


@pytest.mark.parametrize(
    ("odd", "why"),
    [
        (("nccl:all_reduce", ((8,),)), "a size never run before"),
        (("nccl:broadcast", ((4,),)), "an op never run there before"),
        (("nccl:broadcast", ((2,),)), "a broadcast where the all_reduce comes (it skipped one)"),
    ],
)
def test_half_and_half_is_told_apart_by_each_ranks_own_past(tmp_path, odd, why):
    """Two ranks of four run something else at #7 (after three rounds of all_reduce, broadcast):
    no majority, but the two whose collective is unlike what followed a broadcast in their own
    past are the ones named."""
    per = {}
    for r in range(4):
        ents = _rounds(3)
        op, sizes = odd if r in (1, 2) else ("nccl:all_reduce", ((4,),))
        ents.append(_entry(7, op, sizes, state="scheduled"))
        per[r] = ents
    c = analyze(_dumps(tmp_path, per, 4, completed=dict.fromkeys(range(4), 6)))
    assert c.roots == [1, 2], why
    assert {f.kind for f in c.faults.values()} == {"mismatch"}


def test_half_and_half_without_a_past_names_both(tmp_path):
    per = {r: [_entry(1, "nccl:all_reduce", ((4 if r == 0 else 8,),))] for r in range(2)}
    c = analyze(_dumps(tmp_path, per, 2, completed={0: 0, 1: 0}))
    assert c.roots == [0, 1]


# ---------------------------------------------------------------- several groups, gloo's dumps
def _gloo_dump(tmp_path, rank, ents):
    """A dump as gloo's recorder writes it: pg_status per group, no pg_config ranks."""
    status = {}
    for e in ents:
        pg = e["process_group"][0]
        e["pg_id"] = int(pg)  # every rank makes every group: their ids are their names here
        status[pg] = {
            "last_enqueued_collective": e["collective_seq_id"],
            "last_started_collective": -1,
            "last_completed_collective": e["collective_seq_id"],  # gloo: done, even a timeout
        }
    d = {"version": "2.10", "pg_config": {}, "pg_status": status, "entries": ents}
    p = tmp_path / f"nccl_trace_rank_{rank}"
    p.write_bytes(pickle.dumps(d, protocol=2))
    return fr.load(p)


def _steps(rank, steps, stop=None, skip=None):
    """A rank's collectives: every step an all_reduce in its pair (group "1" for ranks 0-1, "2"
    for 2-3), then one over the world ("0"). stop: the step it stalls at, before its pair's
    all_reduce ("pair") or the world's ("world"); skip: the step it skips its pair's at."""
    pair = ("1", "undefined") if rank < 2 else ("2", "undefined")
    world = ("0", "default_pg")
    out, ps = [], 0
    for step in range(steps):
        if stop == (step, "pair"):
            break
        if skip != step:
            ps += 1
            out.append(_entry(ps, "gloo:all_reduce", ((4,),), "scheduled", pair))
        if stop == (step, "world"):
            break
        out.append(_entry(step + 1, "gloo:all_reduce", ((2,),), "scheduled", world))
    return out


def test_a_rank_waiting_in_its_pair_is_no_root_of_the_worlds_wait(tmp_path):
    """Rank 1 holds the GIL before its pair's all_reduce and writes no dump; rank 0 waits in
    that all_reduce (its own program runs it before the world's), ranks 2 and 3 wait in the
    world's for rank 0. gloo's dumps do not list the pair's members: the member rank 0 waits for
    is the one rank of the job that left no dump. Rank 1 alone is named."""
    dumps = [
        _gloo_dump(tmp_path, 0, _steps(0, 4, stop=(3, "world"))),
        _gloo_dump(tmp_path, 2, _steps(2, 4)),
        _gloo_dump(tmp_path, 3, _steps(3, 4)),
    ]
    c = analyze(dumps, {0, 1, 2, 3})
    assert c.roots == [1] and c.faults[1].kind == "missing"
    lag = next(f for f in c.findings if f.pg == "0")
    assert lag.faulty == (0,) and lag.elsewhere == (0,)
    assert c.waited[0].pg == "1"


def test_a_rank_that_skipped_its_pairs_all_reduce_is_named_not_its_waiting_peer(tmp_path):
    """Rank 1 skips its pair's all_reduce at step 3 and waits in the world's; rank 0 waits in
    the pair's; ranks 2, 3 wait in the world's for rank 0. A cycle: rank 0 is behind in the world,
    rank 1 in the pair. Rank 0's own past says the pair's comes first (it waits there); rank 1
    ran two of the world's since its last of the pair's (it went on): rank 1 is named."""
    dumps = [
        _gloo_dump(tmp_path, 0, _steps(0, 4, stop=(3, "world"))),
        _gloo_dump(tmp_path, 1, _steps(1, 4, skip=3)),
        _gloo_dump(tmp_path, 2, _steps(2, 4)),
        _gloo_dump(tmp_path, 3, _steps(3, 4)),
    ]
    c = analyze(dumps, {0, 1, 2, 3})
    assert c.roots == [1]  # (gloo marks its collectives completed: "stalled", not "stopped-short")


def test_a_rank_that_finished_its_pairs_all_reduce_then_stalled_is_named(tmp_path):
    """Rank 2 finished its pair's all_reduce with rank 3 and stalled before the world's: its
    newest entry is the pair's, but rank 3 got past it. Rank 2 is behind in the world, a root."""
    dumps = [
        _gloo_dump(tmp_path, 0, _steps(0, 4)),
        _gloo_dump(tmp_path, 1, _steps(1, 4)),
        _gloo_dump(tmp_path, 2, _steps(2, 4, stop=(3, "world"))),
        _gloo_dump(tmp_path, 3, _steps(3, 4)),
    ]
    c = analyze(dumps, {0, 1, 2, 3})
    assert c.roots == [2]


def test_one_sided_mismatch_is_found_on_the_senders_side(tmp_path):
    """gloo's size check aborted rank 0 (no dump) on receiving rank 1's 8 floats: rank 1's dump
    alone shows its pair's all_reduce of another size than at every earlier step. A mismatch
    seen on one side, which the job view admits only when the other side died of it."""
    ents = _steps(1, 4, stop=(3, "world"))
    ents[-1] = _entry(
        ents[-1]["collective_seq_id"], "gloo:all_reduce", ((8,),), "scheduled", ("1", "undefined")
    )
    dumps = [
        _gloo_dump(tmp_path, 1, ents),
        _gloo_dump(tmp_path, 2, _steps(2, 4)),
        _gloo_dump(tmp_path, 3, _steps(3, 4)),
    ]
    c = analyze(dumps, {0, 1, 2, 3})
    f = c.faults[1]
    assert f.kind == "mismatch" and f.finding.one_sided and f.finding.unseen == (0,)
    assert "[8]" in f.finding.detail and "[4]" in f.finding.detail
    assert c.unseen_peers(1) == (0,)
