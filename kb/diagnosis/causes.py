"""Which of an entry's causes the log itself points to.

An entry lists its causes most likely first, each with the evidence that tells it apart; that
evidence quotes what the log shows for it ("'cannot find -lcuda' just above ..."). When the
log holds such a quoted wording, that cause is no longer a guess from the entry's order: it
leads, marked as seen. Only quoted wordings count (a quote is what the log prints, the rest of
an evidence text is prose or a command to run), and a quote's placeholders ("<pid>", "N",
"...") split it into fragments that must all be in the log. A wording the entry's own examples
show is the class's message, in every log it matches ("Tried to allocate" for any OOM): it tells
no cause apart, so it does not count.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False  # typing stays unimported at run time (kb lookup's cold start)
if TYPE_CHECKING:
    from collections.abc import Iterable

    from kb.model.entry import Cause, Entry

# '...', "..." or `...` spans: a quote opens after a non-word character (an apostrophe inside a
# word, "the model's output", opens nothing)
_QUOTED = re.compile(r"(?<![\w])(?:'([^']{4,200})'|\"([^\"]{4,200})\"|`([^`]{4,200})`)")
# placeholders inside a quote: <pid>, {name}, ..., a lone capital or N standing for a number
_HOLE = re.compile(r"<[^>]*>|\{[^}]*\}|\.\.\.|…|(?<![\w.])[A-Z](?![\w])")
_CODE = re.compile(r"\s*(?:import|from|def|class|with|for|if|return)\s|.*\s=\s")
MIN_FRAGMENT = 6  # shorter pieces say too little to count as the log showing the wording


def _phrases(evidence: str) -> list[list[str]]:
    """The quoted wordings of an evidence text, each as the fragments it must show."""
    out: list[list[str]] = []
    for m in _QUOTED.finditer(evidence):
        quote = next(g for g in m.groups() if g is not None)
        if _CODE.match(quote):
            continue  # a line of the user's code, which a traceback echoes whatever the cause
        pieces = [p.strip(" .,;:()'\"").lower() for p in _HOLE.split(quote)]
        pieces = [p for p in pieces if len(p) >= MIN_FRAGMENT]
        if pieces:
            out.append(pieces)
    return out


def seen(entry: Entry, lines: Iterable[str]) -> tuple[int, ...]:
    """Indices of the entry's causes whose evidence quotes a wording the lines show, most
    wordings first (the entry's order among equals)."""
    if len(entry.causes) < 2:
        return ()
    text = ""
    common = ""
    scored: list[tuple[int, int]] = []
    for i, c in enumerate(entry.causes):
        phrases = _phrases(c.evidence) if c.evidence else []
        if not phrases:
            continue
        if not text:
            text = "\n".join(lines).lower()
            common = "\n".join(entry.examples_match).lower()
        n = sum(1 for p in phrases if all(f in text for f in p) and not all(f in common for f in p))
        if n:
            scored.append((-n, i))
    return tuple(i for _, i in sorted(scored))


def ordered(entry: Entry, first: tuple[int, ...]) -> list[tuple[Cause, bool]]:
    """The entry's causes with those the log points to first: (cause, seen) pairs."""
    lead = [(entry.causes[i], True) for i in first]
    rest = [(c, False) for i, c in enumerate(entry.causes) if i not in first]
    return lead + rest
