"""What the matcher may skip: the literals every match of a pattern must contain."""

import re

import pytest

from kb.knowledge.regex_literal import key_words, required_any, required_literal

PATTERNS = [
    r"Segmentation fault|SIGSEGV",
    r"(?:terminated|killed) by signal (?:SIGBUS|7)",
    r"(?i)double free|free\(\): invalid",
    r"exit(?:ed)? (?:code|status) 135",
    r"CUDA error: an illegal memory access",
    r"No module named '(?P<m>simple_knn|tinycudann)'",
]
LINES = [
    "Segmentation fault (core dumped)",
    "Fatal Python error: SIGSEGV",
    "worker killed by signal 7",
    "process terminated by signal SIGBUS",
    "DOUBLE FREE or corruption (out)",
    "free(): invalid pointer",
    "exited with exit status 135",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "ModuleNotFoundError: No module named 'tinycudann'",
    "nothing to see here",
]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_every_matching_line_holds_one_of_the_prefilter_literals(pattern):
    """The prefilter may only skip lines the regex could not match: never a false negative."""
    alts = required_any(pattern)
    assert alts, pattern
    caseless = "(?i)" in pattern
    rx = re.compile(pattern)
    for line in LINES:
        hay = line.lower() if caseless else line
        if rx.search(line):
            assert any(a in hay for a in alts), (pattern, line, alts)


def test_alternatives_give_a_set_where_no_single_literal_exists():
    assert not key_words(required_literal(r"Segmentation fault|SIGSEGV"))  # only "S"
    alts = required_any(r"Segmentation fault|SIGSEGV")
    assert len(alts) == 2 and all(re.search(a, "Segmentation fault SIGSEGV") for a in alts)
    # A required literal beats a set of alternatives.
    assert required_any(r"CUDA error: (?:an illegal|a misaligned) address") == ("CUDA error: a",)


def test_no_prefilter_for_a_pattern_any_line_can_match():
    assert required_any(r"\w+") == ()
    assert required_any(r"(?:foo)?bar|\d+") == ()
