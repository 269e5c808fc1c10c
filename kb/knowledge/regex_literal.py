"""Literal text that every match of a regex must contain, read from the regex's parse tree.

The matcher hands a line to a signature's regex only when the line holds this literal (and the
word index finds it by one of its words), so most lines of a log cost a set look-up, not a
regex search.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False  # typing stays unimported at run time (kb lookup's cold start)
if TYPE_CHECKING:
    from typing import Any


try:  # Python >= 3.11
    from re import _parser as sre_parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python 3.10
    import sre_parse

_BREAK = None
_WORD = re.compile(r"\w+")


def _flatten(seq: Any, out: list[str | None]) -> None:
    for op, arg in seq:
        name = str(op)
        if name == "LITERAL":
            out.append(chr(arg))
        elif name == "SUBPATTERN":
            _flatten(arg[-1], out)
        elif name == "AT":
            continue  # anchors are zero-width: the literal runs on across them
        else:
            out.append(_BREAK)


def required_literal(pattern: str, ignore_case: bool = False) -> str:
    """The longest run of literal characters that every match contains ('' when none)."""
    parsed = sre_parse.parse(pattern, re.IGNORECASE if ignore_case else 0)
    flags = parsed.state.flags
    tokens: list[str | None] = []
    _flatten(parsed, tokens)
    best = ""
    run: list[str] = []
    for t in tokens + [_BREAK]:
        if t is None:  # _BREAK: something that is not a literal ends the run
            if len(run) > len(best):
                best = "".join(run)
            run = []
        else:
            run.append(t)
    if ignore_case or flags & re.IGNORECASE:
        best = best.lower()
    return best


ANY_OF_MAX = 16  # more alternatives than this and a prefilter costs more than it saves


def required_any(pattern: str, ignore_case: bool = False) -> tuple[str, ...]:
    """Literals of which every match contains at least one: the prefilter of a pattern that has
    no single required literal, like `Segmentation fault|SIGSEGV` (() when there is none)."""
    try:
        parsed = sre_parse.parse(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error:
        return ()
    got = _any_of(parsed) or ()
    if ignore_case or parsed.state.flags & re.IGNORECASE:
        got = [a.lower() for a in got]
    return tuple(dict.fromkeys(got))


def _runs(seq: Any) -> list[str]:
    tokens: list[str | None] = []
    _flatten(seq, tokens)
    out: list[str] = []
    run: list[str] = []
    for t in tokens + [_BREAK]:
        if t is None:
            if run:
                out.append("".join(run))
            run = []
        else:
            run.append(t)
    return out


def _any_of(seq: Any) -> list[str] | None:
    """The best any-of set for a sequence: every element of a sequence is required, so any one
    element's set will do; a branch needs a set from each of its alternatives."""
    options: list[list[str]] = [[r] for r in _runs(seq)]
    for op, arg in seq:
        name = str(op)
        got: list[str] | None = None
        if name == "BRANCH":
            alts = [_any_of(alt) for alt in arg[1]]
            if all(alts):
                got = [a for alt in alts for a in alt or ()]
        elif name == "SUBPATTERN":
            got = _any_of(arg[-1])
        elif name in _REPEATS and arg[0] >= 1:
            got = _any_of(arg[2])
        if got and len(got) <= ANY_OF_MAX:
            options.append(got)
    if not options:
        return None
    # A set whose shortest literal says something (4+ characters) first, then fewer alternatives,
    # then longer literals.
    return max(options, key=lambda o: (min(map(len, o)) >= 4, -len(o), min(map(len, o))))


def leading_literal(pattern: str) -> str:
    """The literal characters the pattern starts with, lowercased ('' when it starts with a
    class, a group of alternatives or a repeat). A message cut off inside this head is still
    recognisable; one cut inside a later literal ("' is not defined") is not."""
    try:
        parsed = sre_parse.parse(pattern, re.IGNORECASE)
    except re.error:
        return ""
    tokens: list = []
    _flatten(parsed, tokens)
    head = []
    for t in tokens:
        if t is _BREAK:
            break
        head.append(t)
    return "".join(head).lower()


def key_words(literal: str) -> list[str]:
    """Words of the literal that are whole words in any line holding it: not cut at either end
    of the literal (a literal 'rror: an' holds the word 'an' but only part of 'Error')."""
    words = []
    for m in _WORD.finditer(literal):
        if (m.start() == 0 and literal[:1].isalnum()) or (m.start() == 0 and literal[:1] == "_"):
            continue
        if m.end() == len(literal) and (literal[-1:].isalnum() or literal[-1:] == "_"):
            continue
        words.append(m.group())
    return words


def backtracking_risk(pattern: str) -> str:
    """Why a pattern can take exponential time, or '' when it cannot in the way checked here: a
    repeat whose body is nothing but repeats and optional parts ((a+)+, (\\s*\\w+)*): the
    engine can split the same text between them in exponentially many ways before failing."""
    try:
        parsed = sre_parse.parse(pattern)
    except re.error:
        return ""
    return _risky(parsed)


_REPEATS = ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")


def _risky(seq) -> str:
    for op, arg in seq:
        name = str(op)
        if name in _REPEATS:
            _lo, hi, body = arg
            if (
                (hi is sre_parse.MAXREPEAT or hi > 1)
                and name != "POSSESSIVE_REPEAT"
                and _only_repeats(body)
            ):
                return "a repeated group whose body is itself only repeats (like (a+)+)"
            inner = _risky(body)
            if inner:
                return inner
        elif name == "SUBPATTERN":
            inner = _risky(arg[-1])
            if inner:
                return inner
        elif name == "BRANCH":
            for alt in arg[1]:
                inner = _risky(alt)
                if inner:
                    return inner
    return ""


def _only_repeats(seq) -> bool:
    """Every element of seq is a repeat that can take more than one character, or optional."""
    has_repeat = False
    for op, arg in seq:
        name = str(op)
        if name in ("AT",):
            continue
        if name == "SUBPATTERN":
            if not _only_repeats(arg[-1]):
                return False
            has_repeat = True
            continue
        if name in _REPEATS:
            lo, hi, _body = arg
            if hi is sre_parse.MAXREPEAT or hi > 1:
                has_repeat = True
                continue
            if lo == 0:
                continue
        return False
    return has_repeat
