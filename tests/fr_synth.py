"""Synthetic Flight Recorder dumps of a training job with tensor-, pipeline-, data- and expert-
parallel process groups, written as torch's recorder writes them (the keys of
torch/distributed/flight_recorder/components/types.py), with faults injected on chosen ranks.

The job is simulated, not guessed: every rank runs the same schedule of collectives per step
(tensor-parallel all_reduces, an expert-parallel all_to_all, pipeline send/recv, data-parallel
reduce_scatter and all_gather, and the loss all_reduce over the world that the host waits for).
As with NCCL, a rank's Python thread enqueues collectives without waiting, except at the step's
end, where it waits until all it enqueued completed; its GPU stream runs them in order; a
collective starts on a rank's stream once the one before it there completed, and completes once
every member of its group started it. The simulation runs until nothing moves (a hang), and each
rank's ring buffer and pg_status are dumped as they stand.

Faults (each names the ranks a correct analysis must name, and no other):
  stall        the rank's thread stops enqueuing at one collective (a hang, a held GIL)
  gil          the same, mid-step, after its peers went on ahead
  skip         the rank skips one tensor-parallel collective and goes on (it stops short)
  stuck        the rank's copy of one collective starts and never completes
  mismatch     the rank runs one data-parallel collective with other sizes
Several faults may be injected at once (two faults in different groups).
"""

from __future__ import annotations

import json
import os
import pickle
import tarfile
from dataclasses import dataclass, field

T0 = 1_795_400_000_000_000_000  # ns: a fixed start, so dumps are byte-identical across runs
TICK = 1_000_000  # ns per simulation round


@dataclass(frozen=True)
class Layout:
    name: str
    tp: int
    pp: int
    dp: int
    ep: int = 1  # expert-parallel groups subdivide the data-parallel ones

    @property
    def world(self) -> int:
        return self.tp * self.pp * self.dp

    def coords(self, rank: int) -> tuple[int, int, int]:
        """(t, d, p): tensor-parallel fastest, as Megatron orders ranks."""
        t = rank % self.tp
        d = (rank // self.tp) % self.dp
        p = rank // (self.tp * self.dp)
        return t, d, p

    def rank(self, t: int, d: int, p: int) -> int:
        return t + self.tp * (d + self.dp * p)


def layouts(world: int) -> list[Layout]:
    """Four layouts of `world` ranks (16 or 1,024)."""
    if world == 16:
        return [
            Layout("tp4-dp4", 4, 1, 4),
            Layout("tp2-pp2-dp4", 2, 2, 4),
            Layout("tp2-pp2-dp4-ep2", 2, 2, 4, 2),
            Layout("pp4-dp4-ep4", 1, 4, 4, 4),
        ]
    if world == 1024:
        return [
            Layout("tp8-dp128", 8, 1, 128),
            Layout("tp8-pp4-dp32", 8, 4, 32),
            Layout("tp4-pp4-dp64-ep8", 4, 4, 64, 8),
            Layout("pp8-dp128-ep16", 1, 8, 128, 16),
        ]
    raise ValueError(world)


@dataclass
class Group:
    name: str
    desc: str
    ranks: tuple[int, ...]


def groups(lay: Layout) -> list[Group]:
    """The job's process groups in the order every rank creates them (the names are torch's
    counter of new_group calls, the same on every rank)."""
    out = [Group("0", "default_pg", tuple(range(lay.world)))]

    def add(desc: str, sets: list[tuple[int, ...]]) -> None:
        for s in sets:
            if len(s) > 1:
                out.append(Group(str(len(out)), desc, tuple(sorted(s))))

    add(
        "TENSOR_MODEL_PARALLEL_GROUP",
        [
            tuple(lay.rank(t, d, p) for t in range(lay.tp))
            for p in range(lay.pp)
            for d in range(lay.dp)
        ],
    )
    add(
        "DATA_PARALLEL_GROUP",
        [
            tuple(lay.rank(t, d, p) for d in range(lay.dp))
            for p in range(lay.pp)
            for t in range(lay.tp)
        ],
    )
    add(
        "PIPELINE_MODEL_PARALLEL_GROUP",
        [
            tuple(lay.rank(t, d, p) for p in range(lay.pp))
            for d in range(lay.dp)
            for t in range(lay.tp)
        ],
    )
    if lay.ep > 1:
        add(
            "EXPERT_MODEL_PARALLEL_GROUP",
            [
                tuple(lay.rank(t, d, p) for d in range(c, c + lay.ep))
                for p in range(lay.pp)
                for t in range(lay.tp)
                for c in range(0, lay.dp, lay.ep)
            ],
        )
    return out


@dataclass
class Op:
    kind: str  # tp | ep | pp | dp | world
    op: str
    sizes: tuple
    p2p: bool = False
    sync: bool = False  # the host waits here for everything it enqueued


def schedule(lay: Layout) -> list[Op]:
    """One step's collectives, as each rank issues them."""
    ops: list[Op] = []
    if lay.tp > 1:
        ops += [
            Op("tp", "nccl:all_reduce", ((8, 1024),)),
            Op("tp", "nccl:all_reduce", ((8, 1024),)),
        ]
    if lay.ep > 1:
        ops.append(Op("ep", "nccl:all_to_all", ((64, 512),)))
    if lay.pp > 1:
        ops.append(Op("pp", "nccl:send", ((8, 1024),), p2p=True))
    if lay.tp > 1:
        ops.append(Op("tp", "nccl:all_reduce", ((8, 1024),)))
    if lay.dp > 1:
        ops += [
            Op("dp", "nccl:reduce_scatter", ((4096,),)),
            Op("dp", "nccl:_allgather_base", ((4096,),)),
        ]
    ops.append(Op("world", "nccl:all_reduce", ((1,),), sync=True))
    return ops


@dataclass
class Fault:
    kind: str  # stall | gil | skip | stuck | mismatch
    rank: int
    step: int
    index: int  # the index in the step's schedule (of an op of the right kind)


@dataclass
class _Rec:
    pg: Group
    pg_id: int
    seq: int
    op: Op
    sizes: tuple
    created: int
    state: str = "scheduled"
    started: int | None = None
    completed: int | None = None
    stuck: bool = False


@dataclass
class _Rank:
    rank: int
    member: dict[str, Group]  # kind -> its group of that kind
    pg_ids: dict[str, int]  # group name -> its local id
    seq: dict[str, int] = field(default_factory=dict)  # group name -> last seq enqueued
    p2p_seq: int = 0
    pc: int = 0  # index in the flattened program
    recs: list[_Rec] = field(default_factory=list)  # every collective enqueued, in order
    stream: int = 0  # index in recs of the next collective its GPU stream runs
    stopped: bool = False
    waiting: bool = False  # its host waits at the step's end


def simulate(
    lay: Layout, faults: list[Fault], steps: int = 6, buffer: int = 2000
) -> dict[int, dict]:
    """Each rank's dump (a dict in torch's shape) once the job hangs."""
    gs = groups(lay)
    kinds = {
        "TENSOR_MODEL_PARALLEL_GROUP": "tp",
        "DATA_PARALLEL_GROUP": "dp",
        "PIPELINE_MODEL_PARALLEL_GROUP": "pp",
        "EXPERT_MODEL_PARALLEL_GROUP": "ep",
        "default_pg": "world",
    }
    ranks: list[_Rank] = []
    for r in range(lay.world):
        member = {kinds[g.desc]: g for g in gs if r in g.ranks}
        ids = {g.name: i for i, g in enumerate(g for g in gs if r in g.ranks)}
        ranks.append(_Rank(r, member, ids))
    sched = schedule(lay)
    program = [(s, i, op) for s in range(steps) for i, op in enumerate(sched)]
    by_key = {(f.rank, f.step, f.index): f for f in faults}
    # (group name, seq) -> the records of its members
    coll: dict[tuple[str, int], list[_Rec]] = {}
    tick = 0
    moved = True
    while moved:
        moved = False
        tick += 1
        now = T0 + tick * TICK
        # Python threads: enqueue until the host waits
        for rk in ranks:
            while not rk.stopped and rk.pc < len(program):
                if rk.waiting:
                    # the host waits at the step's end (the loss .item()) for all it enqueued
                    if any(r.completed is None for r in rk.recs):
                        break
                    rk.waiting = False
                step, i, op = program[rk.pc]
                f = by_key.get((rk.rank, step, i))
                if f is not None and f.kind in ("stall", "gil"):
                    rk.stopped = True
                    break
                rk.pc += 1
                moved = True
                if f is not None and f.kind == "skip":
                    continue
                g = rk.member.get(op.kind)
                if g is None:
                    continue
                sizes = op.sizes
                if f is not None and f.kind == "mismatch":
                    sizes = tuple(tuple(2 * x for x in s) for s in op.sizes)
                if op.p2p:
                    rk.p2p_seq += 1
                    seq = rk.p2p_seq
                else:
                    seq = rk.seq.get(g.name, 0) + 1
                    rk.seq[g.name] = seq
                # ranks run in lockstep on synchronised clocks: a collective enqueued later in
                # a round is later by a microsecond on every rank
                rec = _Rec(g, rk.pg_ids[g.name], seq, op, sizes, now + 1000 * (rk.pc % TICK))
                rec.stuck = f is not None and f.kind == "stuck"
                rk.recs.append(rec)
                if not op.p2p:
                    coll.setdefault((g.name, seq), []).append(rec)
                if op.sync:
                    rk.waiting = True
        # GPU streams: start the next collective where the one before completed
        for rk in ranks:
            while rk.stream < len(rk.recs):
                rec = rk.recs[rk.stream]
                if rec.started is None:
                    rec.started = now
                    rec.state = "started"
                    moved = True
                if rec.op.p2p:
                    # point-to-point: modelled as completing at once (the analysis skips them)
                    rec.completed, rec.state = now, "completed"
                    rk.stream += 1
                    continue
                peers = coll.get((rec.pg.name, rec.seq), [])
                everyone = len(peers) == len(rec.pg.ranks) and all(
                    p.started is not None for p in peers
                )
                agree = len({p.sizes for p in peers}) == 1
                if everyone and agree and not rec.stuck:
                    rec.completed, rec.state = now, "completed"
                    rk.stream += 1
                    moved = True
                    continue
                break
    return {rk.rank: _dump(rk, gs, buffer) for rk in ranks}


def _dump(rk: _Rank, gs: list[Group], buffer: int) -> dict:
    mine = [g for g in gs if rk.rank in g.ranks]
    status = {}
    for g in mine:
        recs = [r for r in rk.recs if r.pg is g and not r.op.p2p]
        status[str(rk.pg_ids[g.name])] = {
            "last_enqueued_collective": max((r.seq for r in recs), default=0),
            "last_started_collective": max(
                (r.seq for r in recs if r.started is not None), default=-1
            ),
            "last_completed_collective": max(
                (r.seq for r in recs if r.completed is not None), default=0
            ),
        }
    entries = []
    for i, r in enumerate(rk.recs[-buffer:]):
        n = len(rk.recs) - len(rk.recs[-buffer:]) + i
        entries.append(
            {
                "record_id": n,
                "pg_id": rk.pg_ids[r.pg.name],
                "process_group": (r.pg.name, r.pg.desc),
                "collective_seq_id": 0 if r.op.p2p else r.seq,
                "p2p_seq_id": r.seq if r.op.p2p else 0,
                "op_id": n + 1,
                "profiling_name": r.op.op,
                "time_created_ns": r.created,
                "duration_ms": None,
                "input_sizes": [list(s) for s in r.sizes],
                "input_dtypes": ["BFloat16"],
                "output_sizes": [list(s) for s in r.sizes],
                "output_dtypes": ["BFloat16"],
                "state": r.state,
                "time_discovered_started_ns": r.started,
                "time_discovered_completed_ns": r.completed,
                "retired": r.completed is not None,
                "timeout_ms": 600000,
                "is_p2p": r.op.p2p,
                "frames": [
                    {
                        "name": "all_reduce",
                        "filename": "/opt/venv/lib/python3.12/site-packages/torch/distributed/distributed_c10d.py",
                        "line": 2950,
                    },
                    {
                        "name": f"{r.op.kind}_step",
                        "filename": "/workspace/train/parallel.py",
                        "line": 120 + len(r.op.kind),
                    },
                    {"name": "train_step", "filename": "/workspace/train/loop.py", "line": 88},
                ],
                "thread_id": "140000000000000",
                "thread_name": "pt_main_thread",
            }
        )
    return {
        "version": "2.10",
        "comm_lib_version": "2.28.9",
        "pg_config": {
            g.name: {"name": g.name, "desc": g.desc, "ranks": str(list(g.ranks))} for g in mine
        },
        "pg_status": status,
        "entries": entries,
    }


# ---------------------------------------------------------------- writing them out
def write(dumps: dict[int, dict], folder: str, style: str = "torch") -> list[str]:
    """Write the dumps the way a job leaves them: "torch" (nccl_trace_rank_<r> pickles),
    "json" (<job>_dump_<r>.json), "folders" (a folder per rank, rank<r>/fr.pkl), "prefix"
    (TORCH_FR_DUMP_TEMP_FILE=<folder>/trace- : trace-<r>), "tar" (a tarball of pickles)."""
    os.makedirs(folder, exist_ok=True)
    paths = []
    if style == "tar":
        path = os.path.join(folder, "fr_dumps.tar.gz")
        with tarfile.open(path, "w:gz") as tar:
            for r, d in sorted(dumps.items()):
                raw = pickle.dumps(d, protocol=2)
                info = tarfile.TarInfo(f"fr/nccl_trace_rank_{r}")
                info.size = len(raw)
                import io

                tar.addfile(info, io.BytesIO(raw))
        return [path]
    for r, d in sorted(dumps.items()):
        if style == "torch":
            p = os.path.join(folder, f"nccl_trace_rank_{r}")
        elif style == "json":
            p = os.path.join(folder, f"job42_dump_{r}.json")
        elif style == "folders":
            os.makedirs(os.path.join(folder, f"rank{r}"), exist_ok=True)
            p = os.path.join(folder, f"rank{r}", "fr.pkl")
        elif style == "prefix":
            p = os.path.join(folder, f"trace-{r}")
        else:
            raise ValueError(style)
        with open(p, "wb") as fh:
            if style == "json":
                fh.write(json.dumps(d).encode())
            else:
                fh.write(pickle.dumps(d, protocol=2))
        paths.append(p)
    return paths


# ---------------------------------------------------------------- the scenarios
def ops_of(lay: Layout, kind: str) -> list[int]:
    return [i for i, op in enumerate(schedule(lay)) if op.kind == kind and not op.p2p]


def scenarios(lay: Layout, at: int = 2) -> dict[str, list[Fault]]:
    """The faults of each scenario, from step `at` on (run at least at + 3 steps); their ranks
    are the hand-worked verdict."""
    w = lay.world
    a = (5 * w) // 16 + 1  # ranks inside the job, not its first or last
    b = (11 * w) // 16 + 2
    sub = "tp" if lay.tp > 1 else ("ep" if lay.ep > 1 else "dp")
    sub_ops = ops_of(lay, sub)
    dp_ops = ops_of(lay, "dp")
    out = {
        "stall": [Fault("stall", a, at + 1, 0)],
        "gil": [Fault("gil", b, at + 1, len(schedule(lay)) - 2)],
        "skip": [Fault("skip", a, at + 1, sub_ops[-1])],
        "stuck": [Fault("stuck", b, at, sub_ops[0])],
        "mismatch": [Fault("mismatch", a, at, dp_ops[0])],
        # both before the job hangs: a stalls at the step's first collective while b, in other
        # groups, runs its data-parallel collective with other sizes
        "two": [
            Fault("stall", a, at, sub_ops[0]),
            Fault("mismatch", _other_dp(lay, a), at, dp_ops[0]),
        ],
    }
    return out


def _other_dp(lay: Layout, a: int) -> int:
    """A rank in another data-parallel group (and another tensor-parallel group) than a's."""
    t, d, p = lay.coords(a)
    return (
        lay.rank((t + 1) % lay.tp, (d + 2) % lay.dp, (p + 1) % lay.pp)
        if lay.tp > 1
        else lay.rank(0, (d + 2) % lay.dp, (p + 1) % lay.pp)
    )
