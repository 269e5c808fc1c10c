"""Flight Recorder dumps read without torch and without trusting them: the real dumps the CPU jobs
left (tests/fixtures/jobs/*/run/fr/), hand-made ones in the same shape, dumps known by what they
hold whatever their names, and hostile pickles and JSON (bounded in time and memory)."""

import json
import os
import pickle
import subprocess
import sys
import tarfile
import textwrap

import pytest
from _repo import REPO

import kb.job.parsers.flight_recorder as fr
from kb.job.collectives import analyze

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


def dump(entries, last_enqueued, version="2.10", ranks="[0, 1]", completed=None):
    return {
        "version": version,
        "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": ranks}},
        "pg_status": {
            "0": {
                "last_enqueued_collective": last_enqueued,
                "last_started_collective": -1,
                "last_completed_collective": last_enqueued - 1 if completed is None else completed,
            }
        },
        "entries": entries,
    }


def _write(path, d):
    path.write_bytes(pickle.dumps(d, protocol=2))
    return path


def test_real_dumps_of_the_stalled_job():
    dumps = [fr.load(FIX / "cpu-stall" / "run" / "fr" / f"nccl_trace_rank_{r}") for r in (0, 1)]
    assert [d.rank for d in dumps] == [0, 1]
    assert [d.rank_from for d in dumps] == ["name", "name"]  # gloo's dumps do not say
    assert [d.last_enqueued("0") for d in dumps] == [2, 1]
    c = analyze(dumps)
    assert c.roots == [1] and c.faults[1].kind == "stalled"
    f = c.faults[1].finding
    assert (f.seq, f.op, f.waiting, f.pg, f.desc) == (2, "gloo:all_reduce", (0,), "0", "default_pg")
    assert c.waited[0] is f


def test_missing_rank_from_pickles_and_json(tmp_path):
    (tmp_path / "nccl_trace_rank_0").write_bytes(
        pickle.dumps(dump([entry(1), entry(2, state="scheduled")], 2), protocol=2)
    )
    (tmp_path / "nccl_trace_rank_1.json").write_text(json.dumps(dump([entry(1)], 1)))
    dumps = [fr.load(tmp_path / "nccl_trace_rank_0"), fr.load(tmp_path / "nccl_trace_rank_1.json")]
    c = analyze(dumps)
    assert c.roots == [1]
    f = c.faults[1].finding
    assert (f.seq, f.op, f.kind, f.waiting) == (2, "nccl:all_reduce", "lag", (0,))


def test_mismatched_sizes_of_two_ranks_name_both(tmp_path):
    a = fr.load(_write(tmp_path / "t0", dump([entry(1), entry(2, sizes=((10,),))], 2)))
    b = fr.load(_write(tmp_path / "t1", dump([entry(1), entry(2, sizes=((20,),))], 2)))
    c = analyze([a, b])
    # half and half: no majority says which one is wrong
    assert c.roots == [0, 1] and {f.kind for f in c.faults.values()} == {"mismatch"}
    assert "different sizes" in c.faults[0].finding.detail


def test_a_mismatch_names_the_rank_unlike_the_others(tmp_path):
    ranks = "[0, 1, 2, 3]"
    ds = []
    for r in range(4):
        size = ((20,),) if r == 2 else ((10,),)
        d = dump([entry(1), entry(2, sizes=size)], 2, ranks=ranks)
        ds.append(fr.load(_write(tmp_path / f"nccl_trace_rank_{r}", d)))
    c = analyze(ds)
    assert c.roots == [2] and c.faults[2].kind == "mismatch"
    assert set(c.waited) == {0, 1, 3}


def test_evicted_entries_are_not_compared(tmp_path):
    # Ring buffers keep the last N: rank 1 no longer has seq 1; seq 2 agrees.
    a = fr.load(_write(tmp_path / "t0", dump([entry(1, sizes=((9,),)), entry(2)], 2)))
    b = fr.load(_write(tmp_path / "t1", dump([entry(2)], 2)))
    assert analyze([a, b]).roots == []


def test_a_member_that_left_no_dump(tmp_path):
    """Rank 1 (in pg_config's ranks) left no dump while rank 0 waited in #2, never completed."""
    d = fr.load(
        _write(tmp_path / "nccl_trace_rank_0", dump([entry(1), entry(2, state="scheduled")], 2))
    )
    c = analyze([d])
    assert c.roots == [1] and c.faults[1].kind == "missing"


# ---------------------------------------------------------------- known by what they hold
def test_dumps_are_known_by_content_whatever_their_names(tmp_path):
    from kb.job.inputs import collect

    d = dump([entry(1)], 1)
    (tmp_path / "job42_dump_3.json").write_text(json.dumps(d))
    (tmp_path / "trace-5").write_bytes(pickle.dumps(d, protocol=2))
    (tmp_path / "rank7").mkdir()
    (tmp_path / "rank7" / "fr.pkl").write_bytes(pickle.dumps(d, protocol=2))
    (tmp_path / "weights.pkl").write_bytes(pickle.dumps({"layer": [1.0, 2.0]}, protocol=2))
    (tmp_path / "metrics.json").write_text(json.dumps({"loss": 1.5}))
    inputs = collect([str(tmp_path)])
    found = {os.path.basename(s.path): s.rank for s in inputs.dumps}
    assert found == {"job42_dump_3.json": 3, "trace-5": 5, "fr.pkl": 7}
    assert not inputs.logs  # the pickle and JSON that are not dumps are left out, and said
    why = dict(inputs.left_out)
    assert why[str(tmp_path / "weights.pkl")] == "not a log by its name"


def test_the_rank_comes_from_the_dump_when_it_says(tmp_path):
    d = dump([entry(1)], 1)
    d["rank"] = 12
    p = _write(tmp_path / "nccl_trace_rank_3", d)
    got = fr.load(p)
    assert (got.rank, got.rank_from) == (12, "dump")
    # Its groups pin it down: tensor-parallel {4, 5} and data-parallel {5, 7} meet at rank 5.
    d = dump([entry(1)], 1)
    d["pg_config"] = {
        "1": {"name": "1", "desc": "TENSOR_MODEL", "ranks": "[4, 5]"},
        "2": {"name": "2", "desc": "DATA_PARALLEL", "ranks": "[5, 7]"},
    }
    got = fr.load(_write(tmp_path / "some_dump", d))
    assert (got.rank, got.rank_from) == (5, "groups")


def _sub_group_dump(seqs, last, ranks="[2, 3]"):
    """An NCCL sub-group's dump from a job whose default group is gloo: it configures its own
    group only."""
    d = dump([entry(s, pg=("1", "TENSOR_MODEL")) for s in seqs], last)
    d["pg_config"] = {"1": {"name": "1", "desc": "TENSOR_MODEL", "ranks": ranks}}
    d["pg_status"] = {"1": d["pg_status"].pop("0")}
    return d


def test_a_dump_named_by_its_rank_within_the_group(tmp_path):
    """ProcessGroupNCCL names the dump by its rank in the first NCCL group the process made when
    the default group is another backend: global rank 2 of group [2, 3] writes ..._rank_0."""
    got = fr.load(_write(tmp_path / "nccl_trace_rank_0", _sub_group_dump([1], 1)))
    assert (got.rank, got.rank_from, got.named_rank) == (2, "in-group", 0)
    got = fr.load(_write(tmp_path / "nccl_trace_rank_1", _sub_group_dump([1], 1)))
    assert (got.rank, got.rank_from) == (3, "in-group")
    # a folder per rank settles it before the position does
    (tmp_path / "rank3").mkdir()
    got = fr.load(_write(tmp_path / "rank3" / "nccl_trace_rank_0", _sub_group_dump([1], 1)))
    assert (got.rank, got.rank_from, got.named_rank) == (3, "folder", 0)
    # a name past the group's size stays unknown, and says so
    got = fr.load(_write(tmp_path / "nccl_trace_rank_5", _sub_group_dump([1], 1)))
    assert (got.rank, got.rank_from) == (None, "contradicted")
    assert "its name says rank 5" in analyze([got]).notes[0]


def test_one_ranks_dumps_of_two_backends_are_read_as_one(tmp_path):
    """Rank 3's gloo dump of the default group beside its NCCL dump of group [2, 3]: both are
    compared; rank 2 never enqueued group 1's collective #2, which rank 3 waits in."""
    (tmp_path / "rank2").mkdir()
    (tmp_path / "rank3").mkdir()
    world = [
        fr.load(
            _write(tmp_path / f"nccl_trace_rank_{r}", dump([entry(1)], 1, ranks="[]", completed=1))
        )
        for r in (0, 1, 2, 3)
    ]
    sub = [
        fr.load(_write(tmp_path / "rank2" / "nccl_trace_rank_0", _sub_group_dump([1], 1))),
        fr.load(_write(tmp_path / "rank3" / "nccl_trace_rank_1", _sub_group_dump([1, 2], 2))),
    ]
    c = analyze(world + sub)
    assert not any("two Flight Recorder dumps" in n for n in c.notes)
    assert c.roots == [2] and c.faults[2].finding.pg == "1"
    assert set(c.waited) == {3}


def test_a_tarball_of_dumps(tmp_path):
    import io

    path = tmp_path / "dumps.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for r, last in ((0, 2), (1, 1)):
            raw = pickle.dumps(dump([entry(s) for s in range(1, last + 1)], last), protocol=2)
            info = tarfile.TarInfo(f"fr/rank{r}/trace")
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))
        info = tarfile.TarInfo("README")
        info.size = 5
        tar.addfile(info, io.BytesIO(b"hello"))
    dumps, problems, others = fr.read_tarball(str(path))
    assert sorted(d.rank for d in dumps) == [0, 1] and not problems
    assert others == [f"{path}:README"]
    assert analyze(dumps).roots == [1]


# ---------------------------------------------------------------- hostile dumps
def test_hostile_pickles_are_refused_without_running_anything(tmp_path):
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    p = tmp_path / "nccl_trace_rank_0"
    p.write_bytes(pickle.dumps({"version": "2.10", "entries": [Evil()]}, protocol=2))
    with pytest.raises(fr.DumpError, match="refused to load global"):
        fr.read_file(p)
    assert not marker.exists()
    p.write_bytes(pickle.dumps({"version": "2.10", "entries": [], "x": Evil()}, protocol=4))
    assert fr.load(p) is None and not marker.exists()
    p.write_bytes(b"\x80\x02}q\x00(X\x07\x00\x00\x00versionX\x07\x00\x00\x00entries")  # truncated
    with pytest.raises(fr.DumpError, match="damaged pickle"):
        fr.read_file(p)


def test_not_a_dump(tmp_path):
    p = tmp_path / "trace_rank_0"
    p.write_bytes(pickle.dumps([1, 2, 3]))
    assert fr.load(p) is None
    p.write_text("RuntimeError: not a dump\n")
    assert fr.load(p) is None and not fr.looks_like_dump(p)


def _u(text: str) -> bytes:
    b = text.encode()
    return b"X" + len(b).to_bytes(4, "little") + b


def _jit_dump(builder: str) -> bytes:
    """A dump as torch::jit::Pickler writes a typed int list, assembled opcode by opcode:
    {"version": "2.10", "entries": [{"collective_seq_id": 1, "profiling_name": "nccl:all_reduce",
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
    return b"\x80\x02}(" + _u("version") + _u("2.10") + _u("entries") + b"](" + ent + b"e" + b"u."


def test_torch_jit_list_builders_are_rebuilt_locally(tmp_path):
    """GLOBAL torch.jit._pickle build_intlist gives a plain list; torch is not imported, and any
    other global is refused."""
    p = tmp_path / "nccl_trace_rank_0"
    p.write_bytes(_jit_dump("build_intlist"))
    d = fr.load(p)
    assert d is not None and d.entries[0].sizes == ((4,),) and "torch" not in sys.modules
    p.write_bytes(_jit_dump("build_tensor_from_id"))
    assert fr.load(p) is None


def memo_bomb(levels: int = 40, where: str = "input_sizes", width: int = 2) -> bytes:
    """An 889-byte kind of dump: level k is a list holding level k-1 `width` times, by pickle
    memo reference (BINGET), so 40 levels are 2**40 leaves to anything that walks them."""
    out = bytearray(b"\x80\x02]q\x000")  # level 0: an empty list, memo 0, off the stack
    for k in range(1, levels + 1):
        out += b"(" + (b"h" + bytes([k - 1])) * width + b"lq" + bytes([k])
        if k < levels:
            out += b"0"  # POP: only the top level stays, as the value
    bomb = bytes(out[2:])  # the opcodes after PROTO
    ent = b"}(" + _u("collective_seq_id") + b"K\x01" + _u("profiling_name") + _u("nccl:all_reduce")
    if where == "input_sizes":
        ent += _u("input_sizes") + bomb
        ent += b"u"
        return b"\x80\x02}(" + _u("version") + _u("2.10") + _u("entries") + b"](" + ent + b"eu."
    ent += b"u"
    return (
        b"\x80\x02}("
        + _u("version")
        + _u("2.10")
        + _u("entries")
        + b"]("
        + ent
        + b"e"
        + _u("x")
        + bomb
        + b"u."
    )


def deep_list(depth: int = 200_000) -> bytes:
    """input_sizes nested `depth` lists deep: `depth` EMPTY_LISTs, then APPENDs that put each in
    the one below it."""
    nested = b"]" * depth + b"a" * (depth - 1)
    ent = (
        b"}("
        + _u("collective_seq_id")
        + b"K\x01"
        + _u("profiling_name")
        + _u("nccl:all_reduce")
        + _u("input_sizes")
        + nested
        + b"u"
    )
    return b"\x80\x02}(" + _u("version") + _u("2.10") + _u("entries") + b"](" + ent + b"eu."


# Run in a child with its address space capped: a runaway read fails there, fast, instead of
# taking this machine's memory; the child reports its peak RSS and its time.
_CHILD = textwrap.dedent(
    """
    import resource, sys, time
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
    sys.path.insert(0, {repo!r})
    import kb.job.parsers.flight_recorder as fr
    t = time.monotonic()
    try:
        d = fr.read_file(sys.argv[1])
        out = "read" if d is not None else "not a dump"
    except fr.DumpError as e:
        out = "refused: " + str(e)
    # VmHWM, not ru_maxrss: Linux carries the parent's peak into ru_maxrss across exec, so a
    # child of a large test process would report the parent's size.
    rss = next(int(ln.split()[1]) for ln in open("/proc/self/status") if ln.startswith("VmHWM:"))
    print(out)
    print(rss, time.monotonic() - t)
    """
)


def _read_in_child(path) -> tuple[str, int, float]:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD.format(repo=str(REPO)), str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    what, figures = out.stdout.strip().splitlines()[-2:]
    rss, secs = figures.split()
    return what, int(rss), float(secs)


def test_a_memo_reference_bomb_is_refused_in_bounded_memory(tmp_path):
    p = tmp_path / "nccl_trace_rank_0"
    p.write_bytes(memo_bomb())
    assert len(p.read_bytes()) < 1000
    what, rss_kib, _ = _read_in_child(p)
    assert what.startswith("refused") and "nested more than" in what, what
    assert rss_kib < 300 * 1024  # well under the 1 GiB cap: nothing was expanded
    # shallow and wide: 12 levels of 8 references, 8**12 leaves, within the depth limit
    p.write_bytes(memo_bomb(levels=12, width=8))
    what, rss_kib, _ = _read_in_child(p)
    assert what.startswith("refused") and "values to read" in what, what
    assert rss_kib < 300 * 1024


def test_a_bomb_where_kb_never_reads_is_harmless(tmp_path):
    p = tmp_path / "nccl_trace_rank_0"
    p.write_bytes(memo_bomb(where="x"))
    what, rss_kib, _ = _read_in_child(p)
    assert what == "read" and rss_kib < 300 * 1024


def test_a_200000_deep_list_is_refused_not_a_recursion_error(tmp_path):
    p = tmp_path / "nccl_trace_rank_0"
    p.write_bytes(deep_list())
    what, rss_kib, _ = _read_in_child(p)
    assert what.startswith("refused") and "nested more than" in what, what
    assert rss_kib < 500 * 1024
    # the same as JSON: refused, not a RecursionError
    j = tmp_path / "job_dump_1.json"
    j.write_text(
        '{"version": "2.10", "pg_status": {}, "entries": [{"input_sizes": '
        + "[" * 200_000
        + "]" * 200_000
        + "}]}"
    )
    with pytest.raises(fr.DumpError, match=r"nested too deep|nested more than"):
        fr.read_file(j)


def test_a_pickle_of_empty_containers_is_refused_before_it_is_built(tmp_path):
    p = tmp_path / "nccl_trace_rank_0"
    n = fr.MAX_OBJECTS + 10
    p.write_bytes(
        b"\x80\x02}(" + _u("version") + _u("2.10") + _u("entries") + b"](" + b"}" * n + b"eu."
    )
    with pytest.raises(fr.DumpError, match="could build up to"):
        fr.read_file(p)


def test_hostile_dumps_in_a_job_folder_are_reported_per_file(tmp_path):
    """The readable ranks are diagnosed; each refused dump is named with why."""
    from kb.diagnosis.engine import default_engine
    from kb.job.lookup import lookup_paths

    (tmp_path / "fr").mkdir()
    (tmp_path / "fr" / "nccl_trace_rank_0").write_bytes(
        pickle.dumps(dump([entry(1), entry(2, state="scheduled")], 2), protocol=2)
    )
    (tmp_path / "fr" / "nccl_trace_rank_1").write_bytes(
        pickle.dumps(dump([entry(1)], 1), protocol=2)
    )
    (tmp_path / "fr" / "nccl_trace_rank_2").write_bytes(memo_bomb())
    (tmp_path / "fr" / "nccl_trace_rank_3").write_bytes(deep_list())
    jl = lookup_paths(default_engine(), [str(tmp_path)])
    job = jl.job
    assert [r.rank for r in job.roots] == [1]
    problems = " | ".join(job.problems)
    assert "nccl_trace_rank_2: refused" in problems and "nccl_trace_rank_3: refused" in problems


# ---------------------------------------------------------------- reading many dumps fast
def _synth_dumps(world=16, name="two"):
    import fr_synth as S

    lay = S.layouts(world)[2]  # tensor, pipeline, data and expert parallel
    return S.simulate(lay, S.scenarios(lay)[name])


def test_the_fast_read_of_an_entry_is_the_careful_one():
    """Entries of the shape every dump has are read from what earlier ones were read as; each
    must be what _entry, which copies and bounds every field, reads from it."""
    for r, d in sorted(_synth_dumps().items()):
        raw = pickle.dumps(d, protocol=2)
        got = fr.read_bytes(raw, f"fr/nccl_trace_rank_{r}")
        data = pickle.loads(raw)
        budget = fr._Budget("x", len(raw))
        newest = len(data["entries"]) - fr.FRAMES_KEPT
        careful = [fr._entry(e, budget, i >= newest) for i, e in enumerate(data["entries"])]
        assert list(got.entries) == careful
        assert all(type(e) is fr.Entry for e in got.entries)
        assert all(e.frames for e in got.entries[newest:]) and not got.entries[0].frames


def test_fields_of_another_shape_are_read_as_before(tmp_path):
    """Each field the fast read does not expect (a list for the group, a bool or a string in a
    size, an op past 200 characters, a missing is_p2p) is read by the careful path."""
    base = entry(1)
    odd = [
        {**base, "process_group": ["0", "default_pg"]},
        {**base, "input_sizes": [[True, 4]]},
        {**base, "input_sizes": [["4"]]},
        {**base, "profiling_name": "nccl:" + "x" * 300},
        {k: v for k, v in base.items() if k != "is_p2p"},
        {**base, "input_dtypes": ["Float", 3]},
        {**base, "pg_id": "0"},
    ]
    for e in odd:
        fr._CANON = fr._Canon()
        # the same entry twice: first to be learnt (if it may), then read again
        got = fr.read_bytes(pickle.dumps(dump([base, e, e], 1), protocol=2), "fr/nccl_trace_rank_0")
        careful = fr._entry(pickle.loads(pickle.dumps(e, protocol=2)), fr._Budget("x"), False)
        assert got.entries[1] == careful and got.entries[2] == careful, e
        assert repr(got.entries[1]) == repr(careful)


def test_a_reference_bomb_in_an_entry_of_the_usual_shape_is_refused(tmp_path):
    """The fast read takes input_sizes as it is only when it is small and plain: a memo
    reference bomb in an entry with every usual field still meets the bounded walk."""
    p = tmp_path / "nccl_trace_rank_0"
    bomb = memo_bomb(levels=12, width=8)
    # splice the usual fields in front of the bomb's entry: the same bytes, more keys
    ent_head = b"}(" + _u("collective_seq_id")
    fields = pickle.dumps({k: v for k, v in entry(1).items() if k != "input_sizes"}, protocol=2)
    items = fields[3:-2].lstrip(b"q\x00(")  # the key/value opcodes of that dict (no memo puts)
    p.write_bytes(bomb.replace(ent_head, b"}(" + items + _u("collective_seq_id"), 1))
    what, rss_kib, _ = _read_in_child(p)
    assert what.startswith("refused") and "values to read" in what, what
    assert rss_kib < 300 * 1024


def test_what_is_learnt_stays_small():
    fr._CANON = fr._Canon()
    ents = [entry(i, sizes=((i,),)) for i in range(1, 25_001)]
    d = fr.read_bytes(pickle.dumps(dump(ents, 25_000), protocol=2), "fr/nccl_trace_rank_0")
    assert len(d.entries) == 25_000 and d.entries[-1].sizes == ((25_000,),)
    assert len(fr._canon().known) <= fr.CANON_MAX


def test_many_dumps_read_by_a_pool_are_those_read_here(tmp_path, monkeypatch):
    """Workers read as this process does, refuse what it refuses, and their dumps come back in
    the order asked for, entries as Entry."""
    import threading

    import fr_synth as S

    paths = S.write(_synth_dumps(), str(tmp_path / "fr"), "torch")
    (tmp_path / "fr" / "nccl_trace_rank_99").write_bytes(memo_bomb())
    (tmp_path / "fr" / "nccl_trace_rank_98").write_text("not a dump\n")
    # the bomb first (a worker's share), what is not a dump in the middle
    sources = [(str(tmp_path / "fr" / "nccl_trace_rank_99"), None)] + [(p, None) for p in paths]
    sources.insert(9, (str(tmp_path / "fr" / "nccl_trace_rank_98"), None))
    monkeypatch.setenv("KB_FR_WORKERS", "1")
    assert fr.workers(sources) == 1
    here = fr.read_files(sources)
    assert len(here[0]) == 16 and len(here[1]) == 1 and "nccl_trace_rank_99: refused" in here[1][0]
    assert [d.rank for d in here[0]] == [fr.rank_from_name(p) for p in paths]
    monkeypatch.setenv("KB_FR_WORKERS", "3")
    # a process with other threads is not forked (a lock one of them holds would be copied)
    assert fr.workers(sources) == (3 if threading.active_count() == 1 else 1)
    if threading.active_count() == 1:
        for n in (2, 3):
            pooled = fr._read_in_pool(sources, n)
            assert pooled == here
            assert all(type(e) is fr.Entry for d in pooled[0] for e in d.entries)
    # without the variable: a pool only for many dumps
    monkeypatch.delenv("KB_FR_WORKERS")
    assert fr.workers(sources) == 1
