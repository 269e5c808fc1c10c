"""What the evidence records say, per GPU kind: "H100: reproduced 3/3, fix-verified, 2026-11-23".

A record is one entry on one GPU model with one torch (kb.evidence). People ask "was this seen on
an H100?", so records are grouped by the GPU's kind (its model, without the vendor, memory size
or form factor) and the newest record of each kind speaks for it. Nothing here is inferred
beyond the records: run counts come from the record's own fields or, in records written before
kb stored them, from the words `kb verify --repeat` put in the detail.

No YAML here: lookups show evidence lines and must not pay for the parser.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from kb.model.entry import Evidence
from kb.model.record import record

NOT_YET = "not yet verified"

# Words in a GPU's name that say who sold it or how it is built, not which GPU it is.
_BRAND = re.compile(r"^(?:NVIDIA\s+)?(?:Tesla\s+|GeForce\s+|Quadro\s+)?", re.IGNORECASE)
_BUILD = re.compile(r"^(?:\d+\s*[GM]B|HBM\w*|PCIe\w*|SXM\w*|NVL\w*|MIG\b.*)$", re.IGNORECASE)
_ALL_AGREE = re.compile(r"\(all (\d+) runs agree")
_DISAGREE = re.compile(r"(?<![\w-])reproduced (\d+)/(\d+)")
_OF_N = re.compile(r"runs disagree: \S+ \d+/(\d+)")


def gpu_kind(name: str) -> str:
    """ "NVIDIA H100 80GB HBM3" -> "H100", "NVIDIA A100-SXM4-80GB" -> "A100",
    "NVIDIA GeForce RTX 4090" -> "RTX 4090"; "no GPU" stays itself."""
    rest = _BRAND.sub("", name.strip())
    words: list[str] = []
    for word in rest.split():
        parts = word.split("-")
        if _BUILD.match(parts[0]):
            break
        kept = [parts[0]] + [p for p in parts[1:] if not _BUILD.match(p)]
        words.append("-".join(kept))
        if len(kept) < len(parts):  # "A100-SXM4-80GB": the build starts inside the word
            break
    return " ".join(words) or name.strip()


def run_counts(ev: Evidence) -> tuple[int, int]:
    """(runs that reproduced, runs) of a record; (0, 0) when the record does not say."""
    if ev.runs:
        return ev.reproduced_runs, ev.runs
    m = _ALL_AGREE.search(ev.detail)
    if m:
        n = int(m.group(1))
        return (n if ev.status == "reproduced" else 0), n
    m = _DISAGREE.search(ev.detail)
    if m:
        return int(m.group(1)), int(m.group(2))
    m = _OF_N.search(ev.detail)  # disagreeing runs none of which reproduced
    if m:
        return 0, int(m.group(1))
    return 0, 0


@record(frozen=True)
class GpuVerdict:
    """The newest record for one entry on one GPU kind."""

    kind: str
    record: Evidence

    @property
    def word(self) -> str:
        """One word for tables: fix-verified, reproduced, fix-failed, not-reproduced, flaky..."""
        e = self.record
        if e.status == "reproduced" and e.fix_status in ("fix-verified", "fix-failed", "flaky"):
            return "fix-flaky" if e.fix_status == "flaky" else e.fix_status
        return e.status

    @property
    def counts(self) -> str:
        """ "3/3": runs with the record's verdict (for a flaky one: runs that reproduced), of
        all runs; "" when the record does not say."""
        reproduced, runs = run_counts(self.record)
        if not runs:
            return ""
        return f"{reproduced if self.record.status in ('reproduced', 'flaky') else runs}/{runs}"

    def text(self) -> str:
        """ "reproduced 3/3, fix-verified, 2026-11-23"."""
        e = self.record
        status = e.status
        if self.counts:
            status = (
                f"flaky, reproduced {self.counts}"
                if e.status == "flaky"
                else f"{e.status} {self.counts}"
            )
        parts = [status]
        if e.fix_status:
            parts.append("fix flaky" if e.fix_status == "flaky" else e.fix_status)
        parts.append(e.date)
        return ", ".join(p for p in parts if p)

    def environment(self) -> str:
        e = self.record
        return f"{e.gpu}, driver {e.driver}, torch {e.torch}, CUDA {e.cuda}"


def by_gpu(evs: Iterable[Evidence]) -> dict[str, GpuVerdict]:
    """The newest record per GPU kind, kinds in name order."""
    newest: dict[str, Evidence] = {}
    for e in evs:
        kind = gpu_kind(e.gpu)
        if kind not in newest or e.date > newest[kind].date:
            newest[kind] = e
    return {k: GpuVerdict(k, newest[k]) for k in sorted(newest)}


def gpu_kinds(evidence: Mapping[str, Iterable[Evidence]]) -> list[str]:
    """Every GPU kind any record in the knowledge base names."""
    return sorted({gpu_kind(e.gpu) for evs in evidence.values() for e in evs})


def per_gpu_line(evs: Iterable[Evidence], kinds: Iterable[str] = ()) -> str:
    """ "H100: reproduced 3/3, fix-verified, 2026-11-23 · H200: not yet verified": every kind
    in `kinds` (the ones the knowledge base has records for) and every kind of `evs`."""
    seen = by_gpu(evs)
    every = sorted(set(kinds) | set(seen))
    if not every:
        return NOT_YET + " on a GPU"
    return " · ".join(f"{k}: {seen[k].text() if k in seen else NOT_YET}" for k in every)
