"""Which of an entry's causes the log itself points to.

An entry lists its causes most likely first, each with the evidence that tells it apart; that
evidence quotes what the log shows for it ("'cannot find -lcuda' just above ..."). When the
log holds such a quoted wording, that cause is no longer a guess from the entry's order: it
leads, marked as seen. Only quoted wordings count (a quote is what the log prints, the rest of
an evidence text is prose or a command to run), and a quote's placeholders ("<pid>", "N",
"...") split it into fragments that must all be in the log. A wording most of the entry's own
examples show is the class's message, in every log it matches ("Tried to allocate" for any OOM):
it tells no cause apart, so it does not count.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False  # typing stays unimported at run time (kb lookup's cold start)
if TYPE_CHECKING:
    from collections.abc import Collection, Iterable

    from kb.model.entry import Entry

_SOURCES = {
    # '...', "..." or `...` spans: a quote opens after a non-word character (an apostrophe
    # inside a word, "the model's output", opens nothing)
    "quoted": r"(?<![\w])(?:'([^']{4,200})'|\"([^\"]{4,200})\"|`([^`]{4,200})`)",
    # placeholders inside a quote: <pid>, {name}, ..., a lone capital or N standing for a number
    "hole": r"<[^>]*>|\{[^}]*\}|\.\.\.|…|(?<![\w.])[A-Z](?![\w])",
    # a line of code: a statement's keyword first, or an assignment
    "code": r"\s*(?:import|from|def|class|with|for|if|return)\s|.*\s=\s",
}
_RX: dict[str, re.Pattern[str]] = {}


def _rx(name: str) -> re.Pattern[str]:
    # Compiled on first use: a lookup that matches nothing, or only entries already read in
    # this process, compiles none of them (kb lookup's cold start).
    rx = _RX.get(name)
    if rx is None:
        rx = _RX[name] = re.compile(_SOURCES[name])
    return rx


MIN_FRAGMENT = 6  # shorter pieces say too little to count as the log showing the wording
MIN_WORDING = 16  # nor does a wording this short ("Last error", "caused by", "state_dict")


def _phrases(evidence: str) -> list[list[str]]:
    """The quoted wordings of an evidence text, each as the fragments it must show."""
    out: list[list[str]] = []
    for m in _rx("quoted").finditer(evidence):
        quote = next(g for g in m.groups() if g is not None)
        if _rx("code").match(quote):
            continue  # a line of the user's code, which a traceback echoes whatever the cause
        pieces = [p.strip(" .,;:()'\"").lower() for p in _rx("hole").split(quote)]
        pieces = [p for p in pieces if len(p) >= MIN_FRAGMENT]
        if sum(map(len, pieces)) >= MIN_WORDING:
            out.append(pieces)
    return out


# Per entry object (an engine keeps its entries; a rebuilt one holds new objects): each cause's
# telling wordings, the class's own left out.
_TELLING: dict[int, tuple[Entry, tuple[tuple[int, list[list[str]]], ...]]] = {}


def _shows(example: str, phrase: list[str]) -> bool:
    low = example.lower()
    return all(f in low for f in phrase)


def _telling(entry: Entry) -> tuple[tuple[int, list[list[str]]], ...]:
    """The causes' quoted wordings, less the class's own message, which is no one cause's
    ("Tried to allocate" in an OOM): what the entry's signatures spell out, or most of its
    examples show."""
    got = _TELLING.get(id(entry))
    if got is not None and got[0] is entry:
        return got[1]
    out: list[tuple[int, list[list[str]]]] = []
    if len(entry.causes) >= 2:
        examples = entry.examples_match
        # the class's own wording: what its signatures spell out (escapes dropped)
        spelled = "\n".join(re.sub(r"\\(.)", r"\1", sig.pattern) for sig in entry.signatures)
        for i, c in enumerate(entry.causes):
            keep = [
                p
                for p in (_phrases(c.evidence) if c.evidence else [])
                if not _shows(spelled, p)
                and 2 * sum(_shows(x, p) for x in examples) <= len(examples)
            ]
            if keep:
                out.append((i, keep))
    if len(_TELLING) > 4096:
        _TELLING.clear()
    _TELLING[id(entry)] = (entry, tuple(out))
    return tuple(out)


def seen(entry: Entry, lines: Iterable[str], own: Collection[str] = ()) -> tuple[int, ...]:
    """Indices of the entry's causes whose evidence quotes a wording the lines show, most
    wordings first (the entry's order among equals). `own`: the lines the entry's signatures
    matched, left out: what tells a cause apart is what else the log shows (the line above
    the linker's summary), not the class's own message."""
    telling = _telling(entry)
    if not telling:
        return ()
    text = "\n".join(ln for ln in lines if ln not in own).lower()
    scored = [
        (-n, i) for i, phrases in telling if (n := sum(all(f in text for f in p) for p in phrases))
    ]
    return tuple(i for _, i in sorted(scored))
