"""Flight Recorder dumps, read without torch and without trusting them: what each rank's process
groups last did (the collectives it enqueued, started and completed, their ops and sizes).

ProcessGroupNCCL keeps a ring buffer of its collectives when TORCH_NCCL_TRACE_BUFFER_SIZE (or
TORCH_FR_BUFFER_SIZE) is > 0 and writes it on a timeout or error (TORCH_NCCL_DUMP_ON_TIMEOUT) to
<prefix><global rank>, prefix from TORCH_FR_DUMP_TEMP_FILE / TORCH_NCCL_DEBUG_INFO_TEMP_FILE
(default /tmp/nccl_trace_rank_, ~/.cache/torch/nccl_trace_rank_ in newer releases). The file is
a pickle written by torch::jit::Pickler of plain dicts, lists, strings and numbers (no classes);
torch._C._distributed_c10d._dump_nccl_trace_json() / _dump_fr_trace_json() (and the control
plane's "fr_trace_json" handler) give the same as JSON, which tools save under names of their own
(`<job>_dump_<rank>.json`, a folder per rank, a tarball of them). So a dump is known by what it
holds, not by its name: a dict with "entries" and the keys that come with them. Keys
(torch/distributed/flight_recorder/components/loader.py and types.py):
    {"version": "2.10", "pg_config": {"<pg name>": {"name", "desc", "ranks": "[0, 1]"}},
     "pg_status": {"<pg id>": {"last_enqueued_collective": 2, "last_started_collective": -1,
                               "last_completed_collective": 1}},
     "entries": [{"collective_seq_id": 2, "p2p_seq_id": 0, "pg_id": 0, "process_group": ["0",
     "default_pg"], "profiling_name": "nccl:all_reduce", "state": "scheduled" | "started" |
     "completed", "input_sizes": [[4]], "input_dtypes": ["Float"], "is_p2p": false,
     "time_created_ns": ..., "frames": [{"name", "filename", "line"}], ...}]}
A group's name (process_group[0], the pg_config key) is the same on every rank; its pg_id (the
pg_status key) is the rank's own count of the groups it created, mapped to the name through the
entries. torch's dumps do not say whose they are: the rank is a "rank" key when a tool added
one, else the one rank every group of the dump has in common (pg_config), else the number at the
end of the file's name (or of its folder's: a folder per rank).

A dump comes from a crashed job and may come from anywhere: it is never unpickled blindly, and
nothing in it is trusted to be small.
- Nothing is executed: the unpickler refuses every global (no class, no function can be named,
  so nothing can be called) but the three list builders torch's own pickler may name, which it
  replaces with a plain list(); and every persistent id.
- Memory is bounded before unpickling: a dump is at most MAX_BYTES, and one whose bytes could
  build more than MAX_OBJECTS containers (an upper bound counted from the opcodes that make
  them) is refused, so a file of empty-dict opcodes cannot take gigabytes.
- Every value kb reads is copied into plain tuples and numbers by a walk that counts what it
  visits (a sub-list shared through pickle memo references is counted each time it is reached:
  40 levels of sharing would be 2**40 visits) and how deep it goes; past MIN_VISITS plus one
  visit per byte of the dump, or MAX_DEPTH levels, the dump is refused with the reason, never a
  RecursionError or a runaway loop. Keys kb does not read are never walked.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import re
import sys
from functools import lru_cache, partial
from itertools import chain, repeat
from operator import add, itemgetter
from typing import NamedTuple  # typing: only a job's lookup imports this module

from kb.model.record import field, record

MAX_BYTES = 32 << 20  # torch's default ring of 2,000 collectives dumps to a few MB
# Containers a pickle of MAX_BYTES could build at most, counted from its container opcodes: a
# real dump has one per entry and frame (2,000 entries x ~12); a file of b"}" bytes has one per
# byte, 64 bytes of memory each.
MAX_OBJECTS = 2_000_000
# Values copied out of one dump, shared ones counted at each visit: a real dump has one for
# every 4 bytes or more of it (its keys and repeated strings are memo references of 2 bytes);
# a reference bomb has billions in a few hundred bytes.
MIN_VISITS = 1_000_000
MAX_DEPTH = 16  # a dump nests 6 deep (dump, entries, entry, input_sizes, one tensor's sizes)
MAX_FRAMES = 32  # the Python frames kept per entry (torch keeps the innermost 20 or so)
FRAMES_KEPT = 8  # entries of a dump whose frames are kept: the newest, what it was last doing
HEAD = 64 << 10  # bytes read to recognise a dump: its keys come first
_READ_CHUNK = 1 << 16  # what the unpickler takes from a dump's bytes at once

_RANK_SUFFIX = re.compile(r"(\d{1,6})(?:\.(?:json|pkl|pickle|pt|bin|dump|gz))*$", re.I)
_RANK_DIR = re.compile(r"^(?:.*?[^a-z])?(?:rank|r)?[_-]?(\d{1,6})$", re.I)
_INTS = re.compile(r"-?\d{1,9}")
# pickle opcodes that make a container (or a tuple) out of one byte or from the stack:
# EMPTY_DICT EMPTY_LIST EMPTY_SET TUPLE1 TUPLE2 TUPLE3 DICT LIST TUPLE FROZENSET
_CONTAINER_OPS = b"}]\x8f\x85\x86\x87dlt\x91"


class DumpError(ValueError):
    """A file that holds (or claims to hold) a dump, refused or unreadable, and why."""


def _as_list(items):
    return list(items)


# torch::jit::Pickler writes a list of ints, floats or bools that it knows the type of as a call
# to one of these (torch/csrc/jit/serialization/pickler.cpp, pushSpecializedList); each only
# rebuilds the list it is given, so a local stand-in that does the same is safe to call. Every
# other global is refused.
_LIST_BUILDERS = {
    ("torch.jit._pickle", n) for n in ("build_intlist", "build_doublelist", "build_boollist")
}


_new_entry = tuple.__new__  # an Entry from its fields as a tuple, without Entry.__new__'s frame


class _Refusing(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) in _LIST_BUILDERS:
            return _as_list
        raise pickle.UnpicklingError(f"refused to load global {module}.{name}")

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("refused a persistent id")


@record(frozen=True)
class Frame:
    name: str
    filename: str
    line: int

    def __str__(self) -> str:
        return f"{self.filename}:{self.line} in {self.name}"


class Entry(NamedTuple):
    """One collective (or point-to-point op) in a rank's ring buffer. A named tuple, not a
    record: a thousand ranks' dumps hold a few hundred thousand of them, and a tuple is made in
    a fraction of a record's time."""

    pg: str  # the group's name: the same on every rank
    seq: int  # collective_seq_id (p2p_seq_id for send/recv)
    op: str  # profiling_name: nccl:all_reduce, gloo:broadcast, nccl:send 0->1
    state: str  # scheduled | started | completed
    sizes: tuple = ()  # input_sizes, one tuple per tensor
    dtypes: tuple[str, ...] = ()
    p2p: bool = False
    created_ns: int = 0  # time_created_ns (0 when the dump has none)
    # (name, filename, line) innermost first, as torch records them, for the newest
    # FRAMES_KEPT entries of a dump (what a rank was last doing); frame_list() as Frames
    frames: tuple[tuple[str, str, int], ...] = ()
    pg_desc: str = ""
    pg_id: str = ""  # the rank's own id of the group (pg_status is keyed by it)

    def frame_list(self) -> list[Frame]:
        return [Frame(*f) for f in self.frames]

    @property
    def signature(self) -> tuple:
        """What every rank must agree on for the same collective."""
        return (self.op, self.sizes, self.dtypes)


_entry_of = partial(tuple.__new__, Entry)  # an Entry from a tuple of its fields, in C


@record(frozen=True)
class Group:
    name: str
    desc: str = ""
    ranks: tuple[int, ...] = ()  # empty when the dump does not say (gloo's dumps)


@record(frozen=True)
class Dump:
    path: str
    rank: int | None
    version: str
    entries: tuple[Entry, ...]
    status: dict[str, dict[str, int]]  # group name -> last_enqueued / started / completed
    groups: dict[str, Group] = field(default_factory=dict)  # group name -> its config
    rank_from: str = (
        "name"  # dump | groups | name | caller | folder | in-group | none | contradicted
    )
    comm_lib: str = ""  # comm_lib_version: the NCCL version
    named_rank: int | None = None  # the rank its path names, when that is not `rank`

    def last(self, pg: str, what: str = "enqueued") -> int | None:
        """The last collective this rank enqueued (started, completed) in group pg: pg_status
        when it says, else (enqueued only) the highest sequence number among the entries."""
        st = self.status.get(pg, {})
        v = st.get(f"last_{what}_collective")
        if v is not None:
            return v
        if what != "enqueued":
            return None
        seqs = [e.seq for e in self.entries if e.pg == pg and not e.p2p]
        return max(seqs) if seqs else None

    def last_enqueued(self, pg: str) -> int | None:
        return self.last(pg, "enqueued")

    def pgs(self) -> set[str]:
        """The groups this dump knows of: configured, with a status, or in an entry."""
        return (
            {g for g in self.groups if self.groups[g].ranks or g in self.status}
            | set(self.status)
            | {e.pg for e in self.entries if not e.p2p}
        )

    def newest_ns(self) -> int:
        return max((e.created_ns for e in self.entries), default=0)

    def to_dict(self) -> dict:
        return {
            "path": self.path,
            "rank": self.rank,
            "rank_from": self.rank_from,
            "version": self.version,
            "entries": len(self.entries),
            "pg_status": self.status,
        }


# ---------------------------------------------------------------- recognising a dump
def looks_like_dump(path_or_head: str | os.PathLike[str] | bytes) -> bool:
    """Whether these first bytes (or a file's) are a pickle or a JSON object whose first keys
    are a dump's. Cheap: only the head is read."""
    head = path_or_head if isinstance(path_or_head, bytes) else _read_head(path_or_head)
    others = (b"pg_status", b"pg_config", b"version")
    if head[:1] == b"\x80":  # pickle protocol 2 and later (torch writes 2)
        return b"entries" in head and any(k in head for k in others)
    body = head.lstrip()
    return (
        body[:1] == b"{" and b'"entries"' in body and any(b'"' + k + b'"' in body for k in others)
    )


def _read_head(path: str | os.PathLike[str]) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read(HEAD)
    except OSError:
        return b""


def rank_from_name(path: str) -> int | None:
    """The rank a dump's path names: the number its file name ends with (nccl_trace_rank_3,
    job_dump_3.json, trace-3.pkl), else the number its folder ends with (rank3/trace, 3/dump)."""
    parts = path.replace("\\", "/").split("/")
    m = _RANK_SUFFIX.search(parts[-1])
    if m:
        return int(m.group(1))
    if len(parts) > 1:
        m = _RANK_DIR.match(parts[-2])
        if m:
            return int(m.group(1))
    return None


# ---------------------------------------------------------------- reading one
def load(path: str | os.PathLike[str], rank: int | None = None) -> Dump | None:
    """The dump at path, or None when it is not one, or is refused (read_file says why)."""
    try:
        return read_file(path, rank)
    except DumpError:
        return None


# ---------------------------------------------------------------- reading a job's dumps
# A job's dumps are read by a pool of processes when there are enough of them for the pool to
# pay for itself: at least POOL_MIN_DUMPS files and POOL_MIN_BYTES. 1,024 dumps of 50 KB (53
# MB) take 1.2 s to read in one process; two quiet cores read them in 0.83 s for the same CPU,
# eight in 0.36 s for 1.9 s of CPU (the rows sent back, each worker learning the job's values
# anew); on a busy machine the pool adds up to a quarter to the CPU. KB_FR_WORKERS sets the
# number of processes (0 or 1: none).
POOL_MIN_DUMPS = 64
POOL_MIN_BYTES = 8 << 20
POOL_MAX_WORKERS = 8


def read_files(
    sources: list[tuple[str, int | None]],
) -> tuple[list[Dump], list[str]]:
    """The dumps among `sources` ((path, the rank the caller's layout names), as read_file
    takes them), in their order, and a problem line for each file refused or unreadable. Read in
    a pool of processes when there are many (workers()); each worker reads with the same
    refusing unpickler and bounds as read_file, and sends back what it read as plain tuples."""
    n = workers(sources)
    if n > 1:
        try:
            got = _read_in_pool(sources, n)
        except (OSError, RuntimeError):  # no fork, or a broken pool (a worker killed): here
            got = None
        if got is not None:
            return got
    dumps: list[Dump] = []
    problems: list[str] = []
    for got in _read_batch(sources, here=True):
        if isinstance(got, str):
            problems.append(got)
        else:
            dumps.append(got)
    return dumps, problems


def workers(sources: list[tuple[str, int | None]]) -> int:
    """How many processes read these dumps: 1 (this one) unless there are enough to pay for a
    pool, this process may fork (Linux, no other thread running, not itself a pool's worker)
    and more than one CPU is ours."""
    env = os.environ.get("KB_FR_WORKERS", "").strip()
    if env.isdigit():
        want = int(env)
    else:
        if len(sources) < POOL_MIN_DUMPS:
            return 1
        size = 0
        for path, _ in sources:
            try:
                size += os.path.getsize(path)
            except OSError:
                pass
        if size < POOL_MIN_BYTES:
            return 1
        try:
            want = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            want = os.cpu_count() or 1
    want = min(want, POOL_MAX_WORKERS, len(sources))
    if want <= 1 or not sys.platform.startswith("linux"):
        return 1
    import threading

    if threading.active_count() > 1:
        return 1  # forking a process with other threads may copy a lock one of them holds
    import multiprocessing

    if multiprocessing.parent_process() is not None:
        return 1  # a worker of kb's own pool (triage) or of another: its siblings use the CPUs
    return want


def _read_in_pool(sources: list[tuple[str, int | None]], n: int) -> tuple[list[Dump], list[str]]:
    """The dumps read by n processes: n - 1 workers forked here, and this one, which reads its
    share while they read theirs (it would only wait otherwise) and then takes theirs."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # this process's share is smaller: it also rebuilds what the workers send
    mine = len(sources) * 3 // (4 * n)
    theirs, here = sources[: len(sources) - mine], sources[len(sources) - mine :]
    # a few batches per worker, so one with the larger dumps does not hold the rest up
    size = max(1, -(-len(theirs) // ((n - 1) * 4)))
    batches = [theirs[i : i + size] for i in range(0, len(theirs), size)]
    dumps: list[Dump] = []
    problems: list[str] = []
    with ProcessPoolExecutor(
        n - 1, mp_context=multiprocessing.get_context("fork"), initializer=_worker_start
    ) as pool:
        futures = [pool.submit(_read_batch, b) for b in batches]
        own = _read_batch(here, here=True)
        for f in futures:
            for row in f.result():
                if type(row) is str:
                    problems.append(row)
                else:
                    dumps.append(_from_row(row))
    for row in own:
        if type(row) is str:
            problems.append(row)
        else:
            dumps.append(row)
    return dumps, problems


def _worker_start() -> None:
    # A worker lives for one job's dumps and makes no cycles: no collection needed (and one
    # would walk, and so copy, every object it shares with its parent).
    import gc

    gc.disable()


def _read_batch(batch: list[tuple[str, int | None]], here: bool = False) -> list:
    """Each dump of the batch, or its problem: in a worker, as a row of plain values (_row) to
    send back; `here`, as it is."""
    out: list = []
    for path, rank in batch:
        try:
            d = read_file(path, rank)
        except DumpError as e:
            out.append(str(e))
            continue
        if d is not None:
            out.append(d if here else _row(d))
    return out


def _row(d: Dump) -> tuple:
    # plain tuples, strings and numbers: pickled in C, and the values a job shares (a group's
    # name, an op, a size) are sent once per batch through the pickle's memo
    return (
        d.path,
        d.rank,
        d.version,
        list(map(tuple, d.entries)),
        d.status,
        [(g.name, g.desc, g.ranks) for g in d.groups.values()],
        d.rank_from,
        d.comm_lib,
        d.named_rank,
    )


def _from_row(row: tuple) -> Dump:
    path, rank, version, entries, status, groups, rank_from, comm_lib, named_rank = row
    return Dump(
        path,
        rank,
        version,
        tuple(map(_entry_of, entries)),
        status,
        {g[0]: Group(*g) for g in groups},
        rank_from,
        comm_lib,
        named_rank,
    )


def read_file(path: str | os.PathLike[str], rank: int | None = None) -> Dump | None:
    """The dump at path; None when the file is not a dump; DumpError when it looks like one but
    cannot be read or is refused. `rank` is the rank the caller's layout names (a torchrun
    folder), used when the dump does not say."""
    p = os.fspath(path)
    try:
        size = os.path.getsize(p)
        if size > MAX_BYTES:
            if not looks_like_dump(p):
                return None
            raise DumpError(
                f"{p}: a Flight Recorder dump of {size >> 20} MiB, over the "
                f"{MAX_BYTES >> 20} MiB kb reads"
            )
        with open(p, "rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
    except OSError as e:
        raise DumpError(f"cannot read {p}: {e.strerror or e}") from None
    return read_bytes(raw, p, rank)


def read_bytes(raw: bytes, name: str, rank: int | None = None) -> Dump | None:
    """A dump from its bytes (a file, a tarball's member); None when they are not a dump."""
    if raw[:2] == b"\x1f\x8b":  # a gzipped dump
        raw = _gunzip(raw, name)
    if not looks_like_dump(raw[:HEAD]):
        return None
    if len(raw) > MAX_BYTES:
        raise DumpError(f"{name}: a Flight Recorder dump over the {MAX_BYTES >> 20} MiB kb reads")
    data = _decode(raw, name)
    if not isinstance(data, dict) or not (
        isinstance(data.get("entries"), list) or isinstance(data.get("pg_status"), dict)
    ):
        raise DumpError(f"{name}: not a Flight Recorder dump (no entries list)")
    return _dump(data, name, rank, _Budget(name, len(raw)))


def _gunzip(raw: bytes, name: str) -> bytes:
    import zlib

    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = d.decompress(raw, MAX_BYTES + 1)
    except zlib.error as e:
        raise DumpError(f"{name}: a damaged gzip file ({e})") from None
    return out


def _decode(raw: bytes, name: str) -> object:
    if raw[:1] == b"\x80":
        n = len(raw) - len(raw.translate(None, _CONTAINER_OPS))  # one pass: their count
        if n > MAX_OBJECTS:
            raise DumpError(
                f"{name}: refused: the pickle could build up to {n:,} containers "
                f"(kb reads dumps of at most {MAX_OBJECTS:,})"
            )
        try:
            # through a buffered reader: the unpickler reads a stream that has peek() in
            # large chunks, but one without it (io.BytesIO) by a Python call per opcode (3x
            # the time)
            return _Refusing(io.BufferedReader(io.BytesIO(raw), _READ_CHUNK)).load()
        except pickle.UnpicklingError as e:
            raise DumpError(f"{name}: refused: {e}") from None
        except (EOFError, ValueError, TypeError, KeyError, IndexError, AttributeError) as e:
            raise DumpError(f"{name}: a damaged pickle ({type(e).__name__}: {e})") from None
        except (RecursionError, MemoryError) as e:
            raise DumpError(
                f"{name}: refused: the pickle is too large or too deep ({type(e).__name__})"
            ) from None
    try:
        return json.loads(raw)
    except RecursionError:
        raise DumpError(f"{name}: refused: JSON nested too deep") from None
    except (ValueError, MemoryError) as e:
        raise DumpError(f"{name}: damaged JSON ({type(e).__name__}: {str(e)[:120]})") from None


class _Budget:
    """What a dump may cost to read: values visited (shared ones at each visit) and depth."""

    __slots__ = ("left", "limit", "name")

    def __init__(self, name: str, size: int = 0):
        self.left = self.limit = MIN_VISITS + size
        self.name = name

    def spend(self, n: int = 1) -> None:
        self.left -= n
        if self.left < 0:
            raise DumpError(
                f"{self.name}: refused: more than {self.limit:,} values to read (lists shared "
                "through pickle references past what a dump of its size holds)"
            )

    def deep(self, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise DumpError(
                f"{self.name}: refused: values nested more than {MAX_DEPTH} levels deep "
                "(a dump nests 6)"
            )


def _plain(v: object, budget: _Budget, depth: int) -> object:
    """v as nested tuples of scalars, walked iteratively within the budget: shared and deep
    structures are refused, never followed without end."""
    budget.deep(depth)
    if not isinstance(v, (list, tuple)):
        budget.spend()
        return v if isinstance(v, (int, float, str, bool)) or v is None else str(v)[:200]
    # An explicit stack: a 200,000-deep list must not reach Python's recursion limit.
    root: list = []
    stack: list[tuple[list, object, int]] = [(root, v, depth)]
    while stack:
        out, item, d = stack.pop()
        budget.spend()
        if isinstance(item, (list, tuple)):
            budget.deep(d)
            budget.spend(len(item))
            inner: list = []
            out.append(inner)
            # children pushed in reverse so they are copied in order
            for child in reversed(item):
                stack.append((inner, child, d + 1))
        elif isinstance(item, (int, float, str, bool)) or item is None:
            out.append(item)
        else:
            out.append(str(item)[:200])
    return _freeze(root[0])


def _freeze(v: object) -> object:
    # lists built by _plain are at most MAX_DEPTH deep: recursion is safe here
    return tuple(_freeze(x) for x in v) if isinstance(v, list) else v


def _str(v: object, budget: _Budget, limit: int = 400) -> str:
    budget.spend()
    if isinstance(v, str):
        return v[:limit]
    if isinstance(v, (int, float, bool)) or v is None:
        return "" if v is None else str(v)
    return str(_plain(v, budget, 1))[:limit]


def _int(v: object) -> int | None:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, (str, float)):
        try:
            return int(v)
        except (TypeError, ValueError, OverflowError):
            return None
    return None


def _dump(data: dict, name: str, rank: int | None, budget: _Budget) -> Dump:
    raw_entries = data.get("entries")
    entries: list[Entry] = []
    id_to_name: dict[str, str] = {}
    if isinstance(raw_entries, list):
        # every entry's scalar fields (torch writes about 20), counted at once
        budget.spend(len(raw_entries) * 24)
        newest = len(raw_entries) - FRAMES_KEPT  # the ring buffer is in the order it was written
        canon = _canon()
        known, states = canon.known, canon.states
        fast = _columns(raw_entries, canon, budget)
        if fast is not None:
            entries = fast
            # pg_id -> group name, the first entry's where two say (reversed: dict() keeps
            # the last)
            id_to_name = dict(zip(map(_GID, reversed(fast)), map(_PG, reversed(fast))))
            id_to_name.pop("", None)
            raw_entries = ()  # read
        add = entries.append
        for i, e in enumerate(raw_entries):
            if type(e) is not dict:
                raise DumpError(f"{name}: entry {i} is not a record ({type(e).__name__})")
            # The shape every dump has, read in one go: its fields taken at once and their
            # types compared at once, and what the comparison reads of them looked up among
            # the entries already read (a job's hundreds of thousands of entries hold a few
            # dozen distinct groups, ops, sizes and dtypes, each kept once). Anything else (a
            # field missing, of another type, too long, not seen before) goes through _entry,
            # which bounds and copies it.
            ent = None
            try:
                v = _FIELDS(e)
            except KeyError:
                v = None
            if v is not None and tuple(map(type, v)) == _SHAPE:
                pg_key, cseq, pseq, op, state, sizes, dtypes, created, pg_id, p2p = v
                try:
                    # more than 64 tensors, or a size list longer than 16, is no
                    # collective's: not copied here
                    if len(sizes) > 64 or len(dtypes) > 64 or (sizes and max(map(len, sizes)) > 16):
                        raise KeyError
                    pg, desc, gid, op, sz, dt = known[
                        pg_key, pg_id, op, tuple(map(tuple, sizes)), tuple(dtypes)
                    ]
                    state = states[state]
                except (KeyError, TypeError):
                    pass
                else:
                    seq = pseq if p2p else cseq
                    frames = _frames(e.get("frames"), budget) if i >= newest else ()
                    ent = _new_entry(
                        Entry, (pg, seq, op, state, sz, dt, p2p, created, frames, desc, gid)
                    )
            if ent is None:
                ent = _entry(e, budget, i >= newest, canon)
                if ent is None:
                    continue
            add(ent)
            gid = ent.pg_id
            if gid and gid not in id_to_name:
                id_to_name[gid] = ent.pg
    groups: dict[str, Group] = {}
    cfg = data.get("pg_config")
    if isinstance(cfg, dict):
        budget.spend(len(cfg))
        for key, g in cfg.items():
            if not isinstance(g, dict):
                continue
            gname = _str(g.get("name", key), budget) or _str(key, budget)
            ranks = _ranks(g.get("ranks"), budget)
            groups[gname] = Group(gname, _str(g.get("desc", ""), budget), ranks)
    status: dict[str, dict[str, int]] = {}
    st = data.get("pg_status")
    if isinstance(st, dict):
        budget.spend(len(st))
        for key, s in st.items():
            if not isinstance(s, dict):
                continue
            k = _str(key, budget)
            pg = id_to_name.get(k) or k
            vals: dict[str, int] = {}
            for sk, sv in s.items():
                budget.spend()
                iv = _int(sv)
                if isinstance(sk, str) and iv is not None:
                    vals[sk[:64]] = iv
            status[pg] = vals
    path_rank = rank if rank is not None else rank_from_name(name)
    own, rank_from = _own_rank(data, groups)
    named = None
    if own is None:
        own, rank_from = path_rank, ("caller" if rank is not None else "name")
        if own is None:
            rank_from = "none"
        elif any(g.ranks and own not in g.ranks for g in groups.values()):
            # The name says a rank its own groups do not hold. ProcessGroupNCCL names its dump
            # by its rank within the first NCCL group the process made when the default group
            # is not NCCL: rank 2 of a group 2-3 writes <prefix>0. The folder's rank, or that
            # position in the group, settles it when the groups agree; else the rank is
            # unknown and the dump is not compared.
            named = own
            own, rank_from = _rank_within_group(name, named, groups)
    return Dump(
        name,
        own,
        _str(data.get("version", ""), budget, 32),
        tuple(entries),
        status,
        groups,
        rank_from,
        _str(data.get("comm_lib_version", ""), budget, 32),
        named,
    )


def _held_by_all(r: int, groups: dict[str, Group]) -> bool:
    return all(r in g.ranks for g in groups.values() if g.ranks)


def _rank_within_group(name: str, named: int, groups: dict[str, Group]) -> tuple[int | None, str]:
    """(rank, how it was found) for a dump whose name gives a rank its groups do not hold."""
    parts = name.replace("\\", "/").split("/")
    if len(parts) > 1:
        m = _RANK_DIR.match(parts[-2])
        if m and _held_by_all(int(m.group(1)), groups):
            return int(m.group(1)), "folder"
    # the group it was named in is the first it made: the lowest id of those it configures
    listed = sorted((g for g in groups.values() if g.ranks), key=lambda g: _group_key(g.name))
    if listed and named < len(listed[0].ranks):
        r = listed[0].ranks[named]
        if _held_by_all(r, groups):
            return r, "in-group"
    return None, "contradicted"


def _group_key(name: str) -> tuple:
    return (not name.isdigit(), int(name) if name.isdigit() else 0, name)


def _own_rank(data: dict, groups: dict[str, Group]) -> tuple[int | None, str]:
    """The rank the dump itself names: a "rank" key, else the one rank common to every group it
    configures (a rank of a tensor-, a pipeline- and a data-parallel group is pinned down by
    them; a dump of the default group alone is not)."""
    r = _int(data.get("rank"))
    if r is not None and r >= 0:
        return r, "dump"
    common: set[int] | None = None
    for g in groups.values():
        if g.ranks:
            common = set(g.ranks) if common is None else common & set(g.ranks)
    if common is not None and len(common) == 1:
        return next(iter(common)), "groups"
    return None, "none"


def _ranks(v: object, budget: _Budget) -> tuple[int, ...]:
    """pg_config's ranks: a string "[0, 1, 2]" in torch's dumps, a list in some tools'."""
    if isinstance(v, str):
        budget.spend(len(v) // 4 + 1)
        return _rank_list(v[: 8 << 20])
    if isinstance(v, (list, tuple)):
        flat = _plain(v, budget, 2)
        items = flat if isinstance(flat, tuple) else ()
        return tuple(sorted({x for x in items if isinstance(x, int)}))
    return ()


def _s(v: object, limit: int = 400) -> str:
    """A scalar as text (the caller has counted it in the budget)."""
    if type(v) is str:
        return v if len(v) <= limit else v[:limit]
    if v is None:
        return ""
    if isinstance(v, (int, float, bool)):
        return str(v)
    return type(v).__name__  # a container where text belongs: not walked


def _sizes(v: object, budget: _Budget) -> tuple:
    """input_sizes: a list of lists of ints in every dump; anything else goes through the
    bounded walk."""
    if type(v) is list and len(v) <= 64 and all(type(x) is list and len(x) <= 16 for x in v):
        out = tuple(map(tuple, v))
        if not out or all(set(map(type, x)) <= _INT_ONLY for x in out):
            return out
    got = _plain(v if v is not None else (), budget, 1)
    return got if isinstance(got, tuple) else (got,)


_INT_ONLY = {int}
_STR_ONLY = {str}


@lru_cache(maxsize=4096)
def _rank_list(text: str) -> tuple[int, ...]:
    # every dump of a job lists its world group and the groups it shares with others: parsed once
    return tuple(sorted({int(x) for x in _INTS.findall(text)}))


class _Canon:
    """What entries already read were read as, keyed by the raw values they were read from: a
    job's hundreds of thousands of entries have a few dozen distinct groups, ops, sizes and
    dtypes. Only what _entry read from plain values is put in (sizes of ints, dtypes of
    strings); a dump that floods it with distinct ones makes it start over, so it stays small.
    A key matches what compares equal: a size written 4.0 or True (no dump has one) reads as
    the 4 or 1 met before, which the comparison of ranks takes for the same anyway."""

    __slots__ = ("known", "states")

    def __init__(self) -> None:
        # (process_group, pg_id, profiling_name, tuple(map(tuple, input_sizes)),
        #  tuple(input_dtypes)) -> (group name, its description, pg_id as text, op, sizes, dtypes)
        self.known: dict[tuple, tuple[str, str, str, str, tuple, tuple[str, ...]]] = {}
        self.states: dict[str, str] = {}  # state -> the same text

    def full(self) -> bool:
        return len(self.known) + len(self.states) > CANON_MAX

    def learn(self, e: dict, ent: Entry) -> None:
        """Remember what `ent` was read as from `e`, when it was read from plain values only."""
        pg_key, pg_id, op, sizes, dtypes = (e.get(k) for k in _KNOWN_KEYS)
        if not (
            type(pg_key) is tuple
            and len(pg_key) == 2
            and type(pg_key[0]) is str
            and type(pg_key[1]) is str
            and type(pg_id) is int
            and type(op) is str
            and len(op) <= 200
            and type(sizes) is list
            and type(dtypes) is list
            and tuple(map(tuple, sizes)) == ent.sizes  # _entry read them as they are
            and all(set(map(type, x)) <= _INT_ONLY for x in ent.sizes)
            and tuple(dtypes) == ent.dtypes
        ):
            return
        self.known[pg_key, pg_id, op, ent.sizes, ent.dtypes] = (
            ent.pg,
            ent.pg_desc,
            ent.pg_id,
            ent.op,
            ent.sizes,
            ent.dtypes,
        )
        if type(ent.state) is str and ent.state == e.get("state"):
            self.states.setdefault(ent.state, ent.state)


# what an entry is read from when it has the shape every dump has (_dump), and those fields'
# types there: process_group (name, desc), the two sequence numbers, profiling_name, state,
# input_sizes, input_dtypes, time_created_ns, pg_id, is_p2p
_FIELDS = itemgetter(
    "process_group",
    "collective_seq_id",
    "p2p_seq_id",
    "profiling_name",
    "state",
    "input_sizes",
    "input_dtypes",
    "time_created_ns",
    "pg_id",
    "is_p2p",
)
_SHAPE = (tuple, int, int, str, str, list, list, int, int, bool)
_SHAPES = tuple({t} for t in _SHAPE)
_DICT_ONLY = {dict}
# (pg, desc, gid, op, sizes, dtypes, seq, state, p2p, created, frames) -> Entry's order
_IN_ORDER = itemgetter(0, 6, 3, 7, 4, 5, 8, 9, 10, 1, 2)
_PG = itemgetter(0)
_GID = itemgetter(10)
_KNOWN_KEYS = ("process_group", "pg_id", "profiling_name", "input_sizes", "input_dtypes")


CANON_MAX = 20_000
_CANON = _Canon()


def _canon() -> _Canon:
    global _CANON
    if _CANON.full():
        _CANON = _Canon()
    return _CANON


def _columns(raw: list, canon: _Canon, budget: _Budget) -> list[Entry] | None:
    """A dump's entries read column by column, each column in one pass in C, when every entry
    has the usual shape (_FIELDS of the types _SHAPE, sizes and dtypes small); None when one
    does not, for _dump to read them one by one. An entry whose values were not met before
    (canon) is read by _entry, which learns them."""
    n = len(raw)
    if not n:
        return []
    try:
        if set(map(type, raw)) != _DICT_ONLY:
            return None
        rows = list(map(_FIELDS, raw))
    except KeyError:
        return None
    columns = tuple(zip(*rows))
    for column, kinds in zip(columns, _SHAPES):
        if set(map(type, column)) != kinds:
            return None
    pgs, cseqs, pseqs, ops, states, sizes, dtypes, created, pg_ids, p2ps = columns
    try:
        # more than 64 tensors, or a size list longer than 16, is no collective's: those are
        # left to the careful read, which counts what it copies
        if max(map(len, sizes)) > 64 or max(map(len, dtypes)) > 64:
            return None
        if max(map(len, chain.from_iterable(sizes)), default=0) > 16:
            return None
        keys = list(
            zip(pgs, pg_ids, ops, map(tuple, map(map, repeat(tuple), sizes)), map(tuple, dtypes))
        )
        known = list(map(canon.known.get, keys))
    except TypeError:  # a size that is not a list, a value that cannot be a key
        return None
    seqs = [p if b else c for c, p, b in zip(cseqs, pseqs, p2ps)] if True in p2ps else cseqs
    sts = list(map(canon.states.get, states))
    if None in known or None in sts:
        out: list[Entry] = []
        get, get_state = canon.known.get, canon.states.get
        for i, (k, st) in enumerate(zip(known, sts)):
            if k is None or st is None:  # learnt from an entry before it in this dump?
                k, st = get(keys[i]), get_state(states[i])
            if k is None or st is None:
                ent = _entry(raw[i], budget, False, canon)
                if ent is None:  # not reached: every sequence number is an int
                    return None
                out.append(ent)
            else:
                out.append(
                    _entry_of(
                        (k[0], seqs[i], k[3], st, k[4], k[5], p2ps[i], created[i], (), k[1], k[2])
                    )
                )
    else:
        # known: (pg, desc, gid, op, sizes, dtypes) + (seq, state, p2p, created, frames) in the
        # order of Entry's fields
        extra = zip(seqs, sts, p2ps, created, repeat(()))
        out = list(map(_entry_of, map(_IN_ORDER, map(add, known, extra))))
    for i in range(max(0, n - FRAMES_KEPT), n):  # the newest: what the rank was last doing
        frames = _frames(raw[i].get("frames"), budget)
        if frames:
            out[i] = out[i]._replace(frames=frames)
    return out


def _frames(raw: object, budget: _Budget) -> tuple[tuple[str, str, int], ...]:
    """An entry's Python frames, (name, filename, line) innermost first, at most MAX_FRAMES."""
    if not isinstance(raw, (list, tuple)):
        return ()
    budget.spend(min(len(raw), MAX_FRAMES) * 4)
    return tuple(
        (_s(f.get("name", ""), 200), _s(f.get("filename", "")), _int(f.get("line")) or 0)
        for f in raw[:MAX_FRAMES]
        if isinstance(f, dict)
    )


def _entry(e: dict, budget: _Budget, frames_too: bool, canon: _Canon | None = None) -> Entry | None:
    # the caller counted its scalar fields in the budget; what nests is counted here
    get = e.get
    p2p = bool(get("is_p2p"))
    v = get("p2p_seq_id") if p2p else get("collective_seq_id")
    seq = v if type(v) is int else _int(v)
    if seq is None:
        return None
    pg = get("process_group")
    pg_id = get("pg_id")
    if isinstance(pg, (list, tuple)) and len(pg) == 2 and type(pg[0]) is str and type(pg[1]) is str:
        pg_name, pg_desc = pg[0][:200], pg[1][:200]  # as every dump has it
    elif isinstance(pg, (list, tuple)) and pg:
        pg_name = _s(pg[0], 200)
        pg_desc = _s(pg[1], 200) if len(pg) > 1 else ""
    else:
        pg_name, pg_desc = _s(get("pg_id", ""), 200), ""
    gid = "" if pg_id is None else (str(pg_id) if type(pg_id) is int else _s(pg_id, 32))
    frames = _frames(get("frames"), budget) if frames_too else ()
    dtypes = get("input_dtypes")
    if type(dtypes) is list and len(dtypes) <= 64 and set(map(type, dtypes)) <= _STR_ONLY:
        dts = tuple(dtypes)
    else:
        flat = _plain(dtypes or (), budget, 1)
        dts = tuple(str(x) for x in flat) if isinstance(flat, tuple) else (str(flat),)
    op = get("profiling_name", "")
    state = get("state", "")
    created = get("time_created_ns")
    ent = Entry(
        pg_name,
        seq,
        op[:200] if type(op) is str else _s(op, 200),
        state[:32] if type(state) is str else _s(state, 32),
        _sizes(get("input_sizes"), budget),
        dts,
        p2p,
        created if type(created) is int else (_int(created) or 0),
        frames,
        pg_desc,
        gid,
    )
    if canon is not None and not canon.full():
        canon.learn(e, ent)
    return ent


# ---------------------------------------------------------------- tarballs of dumps
MAX_MEMBERS = 100_000  # members of any kind (folders and links count)
MAX_TAR_BYTES = 8 << 30  # the contents passed over, read or not
TAR_BOMB_MIN = 256 << 20
TAR_BOMB_RATIO = 500  # contents that grow more than this from their compressed size: a bomb


def read_tarball(path: str) -> tuple[list[Dump], list[str], list[str]]:
    """The dumps in a tarball (gzip, bz2, xz or plain), read in memory as a stream, never
    extracted: (dumps, problems, members that are not dumps). Ranks from the dumps, else from
    the member's name or folder (a folder per rank). Each member is capped (MAX_BYTES) and so
    is the whole: MAX_MEMBERS members, MAX_TAR_BYTES of contents passed over, and a compressed
    archive growing more than TAR_BOMB_RATIO times is stopped as a bomb; what came before a
    bound is read."""
    import tarfile

    dumps: list[Dump] = []
    problems: list[str] = []
    others: list[str] = []
    try:
        raw = open(path, "rb")
    except OSError as e:
        return [], [f"cannot read {path} as a tarball: {e.strerror or e}"], []
    try:
        tar = tarfile.open(fileobj=raw, mode="r|*")
    except (tarfile.TarError, OSError, EOFError) as e:
        raw.close()
        return [], [f"cannot read {path} as a tarball: {e}"], []
    with raw, tar:
        n = 0
        try:
            for m in tar:
                n += 1
                passed = m.offset_data + max(m.size, 0)
                packed = max(raw.tell(), 1)
                if n > MAX_MEMBERS:
                    problems.append(
                        f"{path}: more than {MAX_MEMBERS:,} members; the rest were not read"
                    )
                    break
                if passed > MAX_TAR_BYTES:
                    problems.append(
                        f"{path}: more than {MAX_TAR_BYTES >> 30} GiB inside; the rest was not read"
                    )
                    break
                if passed > TAR_BOMB_MIN and passed > TAR_BOMB_RATIO * packed:
                    problems.append(
                        f"{path}: its contents grow {passed // packed:,}x from their compressed "
                        f"size, more than dumps or logs do (limit {TAR_BOMB_RATIO}x); the rest "
                        "was not read"
                    )
                    break
                if not m.isfile():
                    continue
                where = f"{path}:{m.name}"
                if m.size > MAX_BYTES:
                    others.append(where)
                    continue
                fh = tar.extractfile(m)
                if fh is None:
                    continue
                raw_member = fh.read(MAX_BYTES + 1)
                try:
                    d = read_bytes(raw_member, where, rank_from_name(m.name))
                except DumpError as e:
                    problems.append(str(e))
                    continue
                if d is None:
                    others.append(where)
                else:
                    dumps.append(d)
        except (tarfile.TarError, OSError, EOFError, ValueError, OverflowError) as e:
            problems.append(
                f"{path}: the tarball ends early or is damaged ({e}); read what it held"
            )
    return dumps, problems, others


def is_tarball(path: str | os.PathLike[str]) -> bool:
    name = os.fspath(path).lower()
    return name.endswith((".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz"))
