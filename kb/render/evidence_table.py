"""The README's verification table, written from the evidence records and nothing else.

One row per environment the records name (GPU model, driver, torch, CUDA): how many entries it
recorded and what they did, then the entries that did not pass, by name. The table sits between
two marker comments in README.md; `scripts/evidence_table.py` rewrites it and
tests/test_evidence_table.py fails when it differs from what the records produce.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kb.knowledge.evidence_summary import run_counts
from kb.model.entry import Evidence
from kb.model.record import field, record

START = "<!-- verification-table:start -->"
END = "<!-- verification-table:end -->"


@record
class _Row:
    gpu: str
    driver: str
    torch: str
    cuda: str
    records: list[Evidence] = field(default_factory=list)

    def count(self, status: str = "", fix: str = "") -> int:
        return sum(
            (not status or e.status == status) and (not fix or e.fix_status == fix)
            for e in self.records
        )

    def dates(self) -> str:
        ds = sorted({e.date for e in self.records})
        return ds[0] if len(ds) == 1 else f"{ds[0]} to {ds[-1]}"

    def runs(self) -> str:
        """Runs per entry, as the records state them ("3"); "-" where they do not say."""
        ns = sorted({run_counts(e)[1] for e in self.records})
        return ", ".join(str(n) if n else "-" for n in ns)


def _rows(evidence: Mapping[str, Iterable[Evidence]]) -> list[_Row]:
    rows: dict[tuple[str, str, str, str], _Row] = {}
    for evs in evidence.values():
        for e in evs:
            key = (e.gpu, e.driver, e.torch, e.cuda)
            rows.setdefault(key, _Row(*key)).records.append(e)
    # Newest first; then by GPU name, so the order never depends on the files' order.
    out = sorted(rows.values(), key=lambda r: r.gpu)
    return sorted(out, key=lambda r: max(e.date for e in r.records), reverse=True)


def render_table(evidence: Mapping[str, Iterable[Evidence]]) -> str:
    """Markdown for the README: the table, then the entries that did not pass per environment."""
    rows = _rows(evidence)
    if not rows:
        return "No verification records yet.\n"
    out = [
        "| GPU | driver | torch | CUDA | date | runs per entry | entries | reproduced "
        "| fix verified | fix failed | not reproduced | flaky | timeout |",
        "| --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        cells = [
            r.gpu,
            r.driver or "-",
            r.torch,
            r.cuda or "-",
            r.dates(),
            r.runs(),
            str(len(r.records)),
            str(r.count("reproduced")),
            str(r.count("reproduced", "fix-verified")),
            str(r.count("reproduced", "fix-failed")),
            str(r.count("not-reproduced")),
            str(r.count("flaky")),
            str(r.count("timeout")),
        ]
        out.append("| " + " | ".join(cells) + " |")
    notes = []
    for r in rows:
        failing = {
            "not reproduced": [e.entry for e in r.records if e.status == "not-reproduced"],
            "fix failed": [e.entry for e in r.records if e.fix_status == "fix-failed"],
            "fix flaky": [e.entry for e in r.records if e.fix_status == "flaky"],
            "flaky": [e.entry for e in r.records if e.status == "flaky"],
            "timeout": [e.entry for e in r.records if e.status == "timeout"],
        }
        said = [
            f"{what}: " + ", ".join(f"`{i}`" for i in sorted(ids))
            for what, ids in failing.items()
            if ids
        ]
        if said:
            notes.append(f"- {r.gpu}, torch {r.torch} ({r.dates()}): " + "; ".join(said))
    if notes:
        out += ["", *notes]
    return "\n".join(out) + "\n"


def replace_block(text: str, table: str) -> str:
    """`text` with what lies between the markers replaced by `table`. ValueError when the
    markers are missing or out of order."""
    start, end = text.find(START), text.find(END)
    if start < 0 or end < 0 or end < start:
        raise ValueError(f"no {START} ... {END} block")
    head = text[: start + len(START)]
    return head + "\n" + table + text[end:]


def current_block(text: str) -> str:
    """What lies between the markers now (without the newline after the start marker)."""
    start, end = text.find(START), text.find(END)
    if start < 0 or end < 0 or end < start:
        raise ValueError(f"no {START} ... {END} block")
    return text[start + len(START) : end].removeprefix("\n")
