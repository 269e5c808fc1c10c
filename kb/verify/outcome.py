"""What `kb verify` says about one entry: the verdict words and the Outcome record.

Kept apart from the code that produces outcomes so the CLI, the TUI and the judge can share the
shape without importing the sandbox or the scheduler.
"""

from __future__ import annotations

from kb.model.record import asdict, record

TYPE_CHECKING = False  # typing stays unimported at run time (kb lookup's cold start)
if TYPE_CHECKING:
    from typing import Any


# Verdicts.
REPRODUCED, NOT_REPRODUCED, TIMEOUT, ERROR, SKIPPED, CANCELLED = (
    "reproduced",
    "not-reproduced",
    "timeout",
    "error",
    "skipped",
    "cancelled",
)
FIX_VERIFIED, FIX_FAILED = "fix-verified", "fix-failed"
FLAKY = "flaky"  # --repeat: the runs did not agree
# Outcomes that mean "the hardware said something": the only ones --record writes.
RECORDED = (REPRODUCED, NOT_REPRODUCED, TIMEOUT, FLAKY)


@record
class Outcome:
    entry_id: str
    status: str
    fix_status: str = ""
    duration_s: float = 0.0
    output: str = ""  # what the repro printed (capped: head and tail)
    matched: tuple[str, ...] = ()  # this entry's signature ids found in the output
    matched_instead: tuple[str, ...] = ()  # other entries the lookup ranked, best first
    detail: str = ""
    lines: tuple[str, ...] = ()  # the output lines the signatures matched, short
    exit_code: int | None = None
    fix_output: str = ""
    fix_exit_code: int | None = None
    fix_detail: str = ""  # why the fix_check passed or failed (also the end of detail)
    started: float = 0.0  # time.time() when the repro started; 0 when it never ran
    finished: float = 0.0
    runs: int = 1  # how many runs this verdict combines (kb verify --repeat N)
    reproduced_runs: int = 0  # how many of them reproduced the error

    def __post_init__(self) -> None:
        if self.runs == 1:  # one run: its own verdict is the count
            self.reproduced_runs = int(self.status == REPRODUCED)

    @property
    def failed(self) -> bool:
        """Something that should reproduce did not (skipped and cancelled are not failures)."""
        return self.status in (NOT_REPRODUCED, TIMEOUT, ERROR, FLAKY) or self.fix_status in (
            FIX_FAILED,
            FLAKY,
        )

    def to_dict(self, output_limit: int = 8192) -> dict[str, Any]:
        d = asdict(self)
        for k in ("matched", "matched_instead", "lines"):
            d[k] = list(d[k])
        for k in ("output", "fix_output"):
            if output_limit and len(d[k]) > output_limit:
                d[k] = d[k][-output_limit:]
        d["duration_s"] = round(self.duration_s, 3)
        return d
