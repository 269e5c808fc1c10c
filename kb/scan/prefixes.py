"""Which rank (or host) printed a line, and when: read from the prefixes that launchers stamp on
each line before kb.extract peels them off.

The prefixes, as the tools print them:
  [rank3]:             PyTorch >= 2.2 on every line a rank writes under torchrun
  [default3]:          torchrun --tee / --redirects (role "default", local rank 3), torch 1.x-2.1
  3:                   srun --label (the Slurm task id)
  rank3:               hand-rolled loggers
  [1,3]<stderr>:       mpirun --tag-output ([job,rank])
  node-7:              pdsh / clush / Ansible style "host: line" (no rank, only a host)
and the times a line can carry: an ISO timestamp, Python logging's "2024-05-01 10:00:00,123",
glog's "[E1218 20:27:21.426415540 ProcessGroupNCCL.cpp:629]" (no year), torchrun's
"W1123 03:01:47.865000 4238 torch/distributed/run.py:874]".
"""

from __future__ import annotations

import re

_RANK_SRC = (
    r"\[(?:rank|default|local_rank)(\d+)\]|\[(\d+)\]:|\brank(\d+)\s*:|\[\d+,(\d+)\]<std"
    r"|(?:^|\s)(\d{1,5}):(?:\s|$)"
)
# "[Rank 3]" and "[PG ID 0 PG GUID 0(default_pg) Rank 3]" inside ProcessGroupNCCL's own messages
# (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp logPrefix()), for lines with no launcher prefix.
_TEXT_RANK_SRC = r"\[(?:PG[^\]]*?)?Rank (\d+)\]"
_BARRIER_RANK_SRC = r"store based barrier (?:to initialize process group for rank|on rank):? (\d+)"
# A "host: " prefix (pdsh, clush): a lowercase name holding a digit, never a file name or a word
# an error message starts with.
_HOST_SRC = r"([a-z][a-z0-9-]*\d[a-z0-9.-]*):\s+(?=\S)"
_NOT_HOST_SRC = (
    r"\.(?:so|py|cu|cpp|h|c|cc|log|json|txt)\b|^(?:step|epoch|iter|batch|layer|line|cuda|sm)\d"
)
_RX: dict[str, re.Pattern] = {}


def _rx(name: str) -> re.Pattern:
    # Compiled on first use: a lookup of one message needs none of these.
    rx = _RX.get(name)
    if rx is None:
        rx = _RX[name] = re.compile(
            {
                "rank": _RANK_SRC,
                "text_rank": _TEXT_RANK_SRC,
                "barrier_rank": _BARRIER_RANK_SRC,
                "host": _HOST_SRC,
                "not_host": _NOT_HOST_SRC,
                "iso": _ISO_SRC,
                "glog": _GLOG_SRC,
            }[name]
        )
    return rx


def rank_of(prefix: str) -> int | None:
    """The rank a launcher prefix names (the outermost one), or None."""
    if not prefix:
        return None
    m = _rx("rank").search(prefix)
    if not m:
        return None
    return int(next(g for g in m.groups() if g is not None))


def rank_in_text(text: str) -> int | None:
    """The rank a message names about itself: ProcessGroupNCCL's "[Rank 3] Watchdog caught...",
    or the store-based barrier's "Waiting in store based barrier to initialize process group for
    rank: 3, key: ..." / "Timed out initializing process group in store based barrier on rank:
    3, ..." (distributed_c10d.py, torch 1.x-2.x)."""
    if "store based barrier" in text:
        m = _rx("barrier_rank").search(text)
        return int(m.group(1)) if m else None
    if "Rank " not in text:
        return None
    m = _rx("text_rank").search(text)
    return int(m.group(1)) if m else None


def host_of(text: str) -> tuple[str, str] | None:
    """(host, rest) for a "node-7: message" line, else None."""
    if ": " not in text[:80]:
        return None
    m = _rx("host").match(text)
    if not m or _rx("not_host").search(m.group(1)):
        return None
    return m.group(1), text[m.end() :]


# ---------------------------------------------------------------- times
_ISO_SRC = r"(\d{4})-(\d\d)-(\d\d)[T _](\d\d):(\d\d):(\d\d)(?:[.,](\d+))?"
_GLOG_SRC = r"(?:^|[\[\s])[EWIF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d+))?\b"


def time_of(prefix: str, text: str) -> tuple[float, str] | None:
    """(seconds, kind) for the time a line was written, or None. kind says which clock it is on
    ("iso" is wall time; "glog" has no year, so it only orders lines among glog lines)."""
    for s in (prefix, text[:64]):
        if not s:
            continue
        m = _rx("iso").search(s)
        if m:
            y, mo, d, h, mi, sec = (int(g) for g in m.groups()[:6])
            return _seconds(y, mo, d, h, mi, sec, m.group(7)), "iso"
        m = _rx("glog").search(s)
        if m:
            # No year in glog's header: every glog time is put in one year, which orders lines
            # from one job correctly (a job that runs across New Year excepted).
            mo, d, h, mi, sec = (int(g) for g in m.groups()[:5])
            return _seconds(2000, mo, d, h, mi, sec, m.group(6)), "glog"
    return None


def _seconds(y: int, mo: int, d: int, h: int, mi: int, s: int, frac: str | None) -> float:
    from datetime import datetime, timezone  # only when a job view needs times

    try:
        t = datetime(y, mo, d, h, mi, s, tzinfo=timezone.utc).timestamp()
    except ValueError:
        return 0.0
    return t + (float("0." + frac) if frac else 0.0)
