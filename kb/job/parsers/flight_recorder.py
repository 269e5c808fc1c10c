"""Flight Recorder dumps, read without torch: the last collectives of each rank, and the first
one that the ranks did not all reach (or reached with different ops or sizes).

ProcessGroupNCCL keeps a ring buffer of its collectives when TORCH_NCCL_TRACE_BUFFER_SIZE (or
TORCH_FR_BUFFER_SIZE) is > 0 and writes it on a timeout or error (TORCH_NCCL_DUMP_ON_TIMEOUT) to
<prefix><global rank>, prefix from TORCH_FR_DUMP_TEMP_FILE / TORCH_NCCL_DEBUG_INFO_TEMP_FILE
(default /tmp/nccl_trace_rank_, ~/.cache/torch/nccl_trace_rank_ in newer releases). The file is
a pickle written by torch::jit::Pickler of plain dicts, lists, strings and numbers (no classes);
torch._C._distributed_c10d._dump_nccl_trace_json() / _dump_fr_trace_json() (and the control
plane's "fr_trace_json" handler) give the same as JSON; no setting makes the on-timeout writer
write JSON (torch/csrc/distributed/c10d/FlightRecorder.hpp: "in the same pickled format as
dump_fr_trace"), so a JSON dump is one a program or a person saved. Keys (torch/distributed/flight_recorder/components/loader.py and types.py):
    {"version": "2.10", "pg_config": {...}, "pg_status": {"0": {"last_enqueued_collective": 2,
     "last_started_collective": -1, "last_completed_collective": 1}},
     "entries": [{"collective_seq_id": 2, "profiling_name": "nccl:all_reduce", "state":
     "scheduled" | "started" | "completed", "input_sizes": [[4]], "process_group": ["0",
     "default_pg"], "is_p2p": false, "frames": [{"name", "filename", "line"}], ...}]}

A dump comes from a crashed job and may come from anywhere: it is never unpickled blindly.
The unpickler below refuses every global (no class, no function can be named, so nothing can
be called) but the three list builders torch's own pickler may name, which it replaces with a
plain list(); and every persistent id. What remains can only build containers and scalars.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import re

from kb.job.parsers.watchdog import Desync
from kb.model.record import field, record

MAX_BYTES = 256 << 20
_RANK_SUFFIX = re.compile(r"(\d+)(?:\.json|\.pkl|\.pickle)?$")


def _as_list(items):
    return list(items)


# torch::jit::Pickler writes a list of ints, floats or bools that it knows the type of as a call
# to one of these (torch/csrc/jit/serialization/pickler.cpp, pushSpecializedList); each only
# rebuilds the list it is given, so a local stand-in that does the same is safe to call. Every
# other global is refused.
_LIST_BUILDERS = {
    ("torch.jit._pickle", n) for n in ("build_intlist", "build_doublelist", "build_boollist")
}


class _Refusing(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) in _LIST_BUILDERS:
            return _as_list
        raise pickle.UnpicklingError(f"refused to load global {module}.{name}")

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("refused a persistent id")


@record
class Entry:
    pg: str
    seq: int
    op: str
    state: str
    sizes: list
    frames: list = field(default_factory=list)


@record
class Dump:
    path: str
    rank: int | None
    version: str
    entries: list[Entry]
    status: dict[str, dict[str, int]]  # pg -> last_enqueued / last_started / last_completed

    def last_enqueued(self, pg: str) -> int | None:
        st = self.status.get(pg, {})
        if "last_enqueued_collective" in st:
            return st["last_enqueued_collective"]
        seqs = [e.seq for e in self.entries if e.pg == pg]
        return max(seqs) if seqs else None

    def to_dict(self) -> dict:
        return {
            "path": self.path,
            "rank": self.rank,
            "version": self.version,
            "entries": len(self.entries),
            "pg_status": self.status,
        }


def looks_like_dump(path: str | os.PathLike[str]) -> bool:
    """A pickle (protocol 2+) or a JSON object with "entries"; read only the first bytes."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
    except OSError:
        return False
    return head[:1] == b"\x80" or (head.lstrip()[:1] == b"{" and b'"entries"' in head)


def load(path: str | os.PathLike[str], rank: int | None = None) -> Dump | None:
    """The dump at path, or None when it is not one (or refused, or too large)."""
    try:
        if os.path.getsize(path) > MAX_BYTES:
            return None
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    try:
        if raw[:1] == b"\x80":
            data = _Refusing(io.BytesIO(raw)).load()
        else:
            data = json.loads(raw)
    except Exception:  # a refused global, a truncated file, bad JSON: not a dump we can read
        return None
    if not isinstance(data, dict) or not isinstance(data.get("entries"), list):
        return None
    if rank is None:
        m = _RANK_SUFFIX.search(os.path.basename(str(path)))
        rank = int(m.group(1)) if m else None
    entries = []
    for e in data["entries"]:
        if not isinstance(e, dict) or e.get("is_p2p"):
            continue
        pg = e.get("process_group")
        pg_name = str(pg[0]) if isinstance(pg, (list, tuple)) and pg else str(e.get("pg_id", ""))
        seq = _int(e.get("collective_seq_id"))
        if seq is None:
            continue
        entries.append(
            Entry(
                pg_name,
                seq,
                str(e.get("profiling_name", "")),
                str(e.get("state", "")),
                e.get("input_sizes") or [],
                e.get("frames") or [],
            )
        )
    status = {}
    for pg, st in (data.get("pg_status") or {}).items():
        if isinstance(st, dict):
            status[str(pg)] = {
                k: v for k, v in ((k, _int(v)) for k, v in st.items()) if v is not None
            }
    return Dump(str(path), rank, str(data.get("version", "")), entries, status)


def _int(v) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def desync(dumps: list[Dump]) -> Desync | None:
    """The first collective (per process group, the default group first) that some ranks did not
    reach, or reached with another op or other sizes."""
    ranked = [d for d in dumps if d.rank is not None]
    if len(ranked) < 2:
        return None
    pgs = sorted({e.pg for d in ranked for e in d.entries}, key=lambda p: (p != "0", p))
    for pg in pgs:
        found = _pg_desync(pg, ranked)
        if found:
            return found
    return None


def _pg_desync(pg: str, dumps: list[Dump]) -> Desync | None:
    # rank -> the last collective it enqueued in this group (dumps without either are not
    # evidence: the caller passes only dumps that name their rank)
    last: dict[int, int] = {}
    for d in dumps:
        v = d.last_enqueued(pg)
        if d.rank is not None and v is not None:
            last[d.rank] = v
    if len(last) < 2:
        return None
    top = max(last.values())
    behind = sorted(r for r, v in last.items() if v < top)
    if behind:
        seq = min(last[r] for r in behind) + 1
        op = next((e.op for d in dumps for e in d.entries if e.pg == pg and e.seq == seq), None)
        waiting = sorted(r for r, v in last.items() if v >= seq)
        missing = sorted(r for r, v in last.items() if v < seq)
        return Desync(seq, op, missing, waiting, "flight-recorder", pg)
    by_seq: dict[int, dict[int, Entry]] = {}
    for d in dumps:
        for e in d.entries:
            if e.pg == pg and d.rank is not None:
                by_seq.setdefault(e.seq, {})[d.rank] = e
    for seq in sorted(by_seq):
        seen = by_seq[seq]
        if len(seen) < len(last):
            continue  # evicted from some rank's ring buffer: nothing to compare
        ops = {e.op for e in seen.values()}
        sizes = {json.dumps(e.sizes) for e in seen.values()}
        if len(ops) > 1 or len(sizes) > 1:
            detail = "; ".join(f"rank {r}: {e.op} {e.sizes}" for r, e in sorted(seen.items()))
            return Desync(
                seq,
                "/".join(sorted(ops)),
                [],
                sorted(seen),
                "flight-recorder",
                pg,
                detail=("different ops" if len(ops) > 1 else "different sizes") + f" ({detail})",
            )
    return None
