"""Judging a program's output with the very lookup a user runs (`Engine.lookup`), and one
verdict from several runs of the same entry (`kb verify --repeat N`)."""

from __future__ import annotations

from collections import Counter

from kb.model.record import record, replace
from kb.verify.outcome import CANCELLED, FLAKY, REPRODUCED, Outcome

TYPE_CHECKING = False  # typing stays unimported at run time (kb lookup's cold start)

if TYPE_CHECKING:
    from kb.knowledge.base import KnowledgeBase
    from kb.model.entry import Entry

SHOWN_LINE = 200  # matched lines are kept this short in outcomes and evidence


@record(frozen=True)
class Judgement:
    ranked: tuple[str, ...]  # entry ids, as the lookup ranked them
    matched: tuple[str, ...]  # this entry's signature ids that matched, in order of appearance
    lines: tuple[str, ...]  # the lines they matched
    missing: tuple[str, ...]  # expected signature ids that did not match

    @property
    def first(self) -> str | None:
        return self.ranked[0] if self.ranked else None


def judge(entry: Entry, kb: KnowledgeBase, output: str) -> Judgement:
    """What the user's lookup makes of a program's output: one scan, whose match for this entry
    carries every signature and line that fired."""
    # The engine (and the signature compiler behind it) loads only when something is judged.
    from kb.diagnosis.engine import engine_for

    result = engine_for(kb).lookup(output, top=len(kb.entries) or 1)
    mine = next((m for m in result.matches if m.id == entry.id), None)
    matched: list[str] = []
    lines: list[str] = []
    own = {s.id for s in entry.signatures}  # not the code sightings: a repro proves wordings
    for h in mine.hits if mine else ():
        if h.signature not in own:
            continue
        if h.signature not in matched:
            matched.append(h.signature)
        short = h.line.strip()
        short = short if len(short) <= SHOWN_LINE else short[: SHOWN_LINE - 3] + "..."
        if short not in lines and len(lines) < 5:
            lines.append(short)
    expect = entry.repro.expect if entry.repro else ()
    return Judgement(
        tuple(m.id for m in result.matches[:5]),
        tuple(matched),
        tuple(lines),
        tuple(s for s in expect if s not in matched),
    )


def why_not(entry: Entry, j: Judgement, rc: int | None) -> str:
    """Why a repro's output does not prove its entry, in words."""
    parts = []
    if j.first is None:
        parts.append("the lookup matched no entry")
    elif j.first != entry.id:
        parts.append(f"the lookup ranked {j.first} first")
    if j.missing:
        parts.append("expected signature(s) not in the output: " + ", ".join(j.missing))
    parts.append(f"exit code {rc}")
    return "; ".join(parts)


def combine_runs(runs: list[Outcome]) -> Outcome:
    """One verdict from the same entry run N times (`kb verify --repeat N`): the common verdict
    when every run agrees, else FLAKY with the counts and each run's exit codes, so a proof that
    holds only sometimes says so. A run cut short by a cancel (Ctrl-C, a time limit on the
    whole command) is no verdict: it is left out, and the detail says how many were."""
    done = [o for o in runs if CANCELLED not in (o.status, o.fix_status)]
    if done and len(done) < len(runs):
        got = combine_runs(done)
        if len(done) == 1:
            got = replace(got, runs=1, reproduced_runs=int(got.status == REPRODUCED))
        note = f"{len(runs) - len(done)} of {len(runs)} runs cancelled, not counted"
        return replace(got, detail=f"{got.detail} ({note})" if got.detail else f"({note})")
    first = runs[0]
    if len(runs) == 1:
        return first
    statuses = Counter(o.status for o in runs)
    fixes = Counter(o.fix_status for o in runs)
    codes = ", ".join(
        f"{o.exit_code}" + (f"/{o.fix_exit_code}" if o.fix_exit_code is not None else "")
        for o in runs
    )
    counts = "; ".join(f"{s} {n}/{len(runs)}" for s, n in statuses.items())
    if len(fixes) > 1:
        counts += "; fix: " + ", ".join(
            f"{s or 'not run'} {n}/{len(runs)}" for s, n in fixes.items()
        )
    took = sum(o.duration_s for o in runs) / len(runs)
    total, reproduced = len(runs), statuses[REPRODUCED]
    if len(statuses) == 1 and len(fixes) == 1:
        return replace(
            first,
            runs=total,
            reproduced_runs=reproduced,
            duration_s=took,
            detail=(first.detail + " " if first.detail else "")
            + f"(all {len(runs)} runs agree; exit codes {codes})",
        )
    odd = next(o for o in runs if (o.status, o.fix_status) != (first.status, first.fix_status))
    return replace(
        first,
        runs=total,
        reproduced_runs=reproduced,
        status=FLAKY,
        fix_status=FLAKY if len(fixes) > 1 else first.fix_status,
        duration_s=took,
        detail=f"runs disagree: {counts}; exit codes (repro/fix) {codes}; "
        f"one run: {odd.detail or first.detail}",
    )
