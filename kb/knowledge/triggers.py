"""The knowledge base's trigger set (kb.scan.triggers): the literals its signatures require, so
that the scan of a log looks at every line any entry can match, bundled or local, with no list
kept by hand. Worked out when the entries are loaded and cached with them."""

from __future__ import annotations

from collections.abc import Iterable

from kb.model.entry import Entry, Signature
from kb.scan.triggers import Triggers


def signature_literals(s: Signature) -> tuple[str, ...]:
    """What every line the signature matches holds: its required literal, or when that has no
    whole word, one of its alternatives' literals (each of them is then a trigger)."""
    if s.literal and (s.words or not s.any_of):
        return (s.literal,)
    return s.any_of


def build(entries: Iterable[Entry], extra: Iterable[str] = ()) -> Triggers:
    """The trigger set of these entries, with the literals of the data files' wordings
    (`extra`: wrapper frames, job-log wordings)."""
    entries = list(entries)
    literals = [lit for e in entries for s in e.signatures for lit in signature_literals(s)]
    skim = [lit for e in entries for s in e.signatures for lit in skim_literals(e, s)]
    return Triggers([*literals, *extra], skim=[*skim, *extra])


def skim_literals(e: Entry, s: Signature) -> tuple[str, ...]:
    """The literals the skim of a long log's middle looks for, for one signature. The skim
    finds error-looking lines by their error word (kb.scan.triggers.ERRORISH) and each literal
    costs speed over the whole middle, so: all of them for an entry of the user's own folders;
    for a bundled entry, those of a signature that an example shows on a line with no error
    word (a warning, NCCL's INFO, a launcher's report), which the error words would miss."""
    lits = signature_literals(s)
    if e.local or not lits:
        return lits
    key = (lits, e.examples_match)
    got = _SKIM.get(key)
    if got is None:
        got = _SKIM[key] = _shown_without_error_word(lits, e.examples_match)
    return got


# What _shown_without_error_word answered, by (literals, examples): a process that loads the
# knowledge base again (a TUI or a service while entries are edited, every rebuild) reads the
# same bundled examples only once (~150 ms a rebuild).
_SKIM: dict[tuple[tuple[str, ...], tuple[str, ...]], tuple[str, ...]] = {}


def _shown_without_error_word(lits: tuple[str, ...], examples: tuple[str, ...]) -> tuple[str, ...]:
    from kb.scan.extract import clean_line
    from kb.scan.triggers import ERRORISH_TEXT

    wanted = [lit.lower() for lit in lits]
    for ex in examples:
        for raw in ex.splitlines():
            line = clean_line(raw)
            low = line.lower()
            if any(w in low for w in wanted) and not ERRORISH_TEXT.search(line):
                return lits
    return ()
