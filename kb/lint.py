"""Checks across an entry's parts, run through the same matcher a lookup uses, and across
entries: two that claim one example at the same level (KB020, see kb.diagnosis.rank)."""

from __future__ import annotations

from kb.knowledge.base import KnowledgeBase
from kb.knowledge.signatures import SignatureIndex, text_hits
from kb.model.entry import Entry, Problem
from kb.scan.extract import has_trigger

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from kb.scan.triggers import Triggers


def _problem(entry: Entry, code: str, msg: str, hint: str = "") -> Problem:
    line, col = _find_line(entry.path, msg)
    return Problem(entry.path, line, col, code, msg, hint)


def _file_problem(path: str, code: str, msg: str, hint: str = "") -> Problem:
    line, col = _find_line(path, msg)
    return Problem(path, line, col, code, msg, hint)


def _find_line(path: str, msg: str) -> tuple[int, int]:
    # The example text is quoted in the message; point at the line of the file that holds it.
    try:
        lines = open(path, encoding="utf-8").read().splitlines()
    except OSError:
        return 1, 1
    # The quoted text ends at a quote before a space (the message goes on) or at the end.
    needle = msg.split("'", 1)[1].split("' ", 1)[0][:40] if "'" in msg else ""
    needle = needle.split("\\n")[0].strip()
    if needle:
        for i, line in enumerate(lines, 1):
            col = line.find(needle)
            if col >= 0:
                return i, col + 1
    return 1, 1


def _short(text: str) -> str:
    first = next((ln for ln in text.splitlines() if ln.strip()), text).strip()
    return first[:100]


def _states_own_code(entry: Entry, text: str) -> bool:
    """The example names a CUDA code this entry owns (in any wrapper): the lookup's code path
    finds it, as it finds the entry's own wordings."""
    if not entry.codes:
        return False
    from kb.diagnosis.facts import extract_facts
    from kb.scan.extract import scan_text

    owned = {(c.api, c.value) for c in entry.codes}
    return any((c.api, c.value) in owned for c in extract_facts(scan_text(text).lines).cuda_codes)


def check_entry(entry: Entry, codes_known=None, triggers: Triggers | None = None) -> list[Problem]:
    """`triggers`: the knowledge base's trigger set (the entry's own without one)."""
    if triggers is None:
        from kb.knowledge.triggers import build

        triggers = build([entry])
    index = SignatureIndex([entry])
    problems: list[Problem] = []
    exercised: set[str] = set()
    for ex in entry.examples_match:
        hits = text_hits(index, ex)
        exercised.update(h.signature.id for h in hits)
        if not hits and not _states_own_code(entry, ex):
            unseen = [
                ln
                for ln in ex.splitlines()
                if ln.strip() and not has_trigger(ln, triggers) and any(index.match_line(ln))
            ]
            hint = (
                "its matching line holds no trigger (no word of kb.scan.triggers.CORE, and the "
                "signature's literal is too short to search for), so a log scan never looks at "
                "it; make the signature require a longer literal"
                if unseen
                else "widen a signature, or remove the example if it belongs to another entry"
            )
            problems.append(
                _problem(entry, "KB009", f"example '{_short(ex)}' matches no signature", hint)
            )
    for near in entry.examples_no_match:
        # A signature that needs a library boundary in the traceback (raised_in) may match a
        # near-miss's words and still not count; the lookup itself is tested on it
        # (tests/test_entries.py), with the frames.
        hits = [h for h in text_hits(index, near.text) if not h.signature.raised_in]
        if hits:
            problems.append(
                _problem(
                    entry,
                    "KB010",
                    f"no_match example '{_short(near.text)}' matches "
                    f"signature '{hits[0].signature.id}'",
                    "tighten that signature",
                )
            )
    for s in entry.signatures:
        if s.id not in exercised:
            problems.append(
                _problem(
                    entry,
                    "KB016",
                    f"signature '{s.id}' is matched by no example",
                    "add a match example in that wording",
                )
            )
    if codes_known is not None:
        for c in entry.codes:
            if codes_known(c.api, c.value) is None:
                problems.append(
                    _problem(
                        entry,
                        "KB014",
                        f"code {c.api} {c.value} is not in the CUDA code table",
                        "check the number against kb code",
                    )
                )
    return problems


def lint(kb: KnowledgeBase, progress: Callable[..., None] | None = None) -> list[Problem]:
    """Every problem of the knowledge base's files. progress(done, total, what) is told of each
    entry checked (the command line shows it on a terminal)."""
    try:
        import kb.knowledge.cuda_codes as cuda_codes

        known = cuda_codes.get
    except ImportError:  # the table ships with kb; absent only in a broken install
        known = None
    from kb.knowledge.triggers import build

    triggers = kb.triggers if kb.triggers is not None else build(kb.entries)
    problems = list(kb.problems)
    total = len(kb.entries)
    for i, e in enumerate(kb.entries):
        if progress is not None:
            progress(i, total)
        problems.extend(check_entry(e, known, triggers))
        for near in e.examples_no_match:
            if near.belongs != "none" and kb.get(near.belongs) is None:
                problems.append(
                    _problem(
                        e,
                        "KB017",
                        f"no_match example '{_short(near.text)}' belongs to "
                        f"'{near.belongs}', which is no entry",
                        "name an entry id, or none",
                    )
                )
        for sig in e.signatures:
            for other in sig.explained_by:
                if kb.get(other) is None or other == e.id:
                    problems.append(
                        _problem(
                            e,
                            "KB017",
                            f"signature '{sig.id}' is explained_by '{other}', which is no "
                            f"other entry",
                            "name the ids of other entries",
                        )
                    )
    problems += same_level_claims(kb, progress)
    problems += check_data()
    return sorted(problems, key=lambda p: (p.path, p.line, p.code))


def check_data(folder: str | None = None) -> list[Problem]:
    """kb/data's files (or those in `folder`): what loading them found (schema, regexes), and
    every example read the way kb reads lines: a wrapper frame's through the frames in their
    order, a job wording's through the wordings in theirs."""
    from kb.knowledge.data import load_data

    data = load_data(folder)
    out = list(data.problems)
    forms = data.wrappers
    if forms is not None:
        from kb.knowledge.wrappers import sightings

        for f in forms.frames:
            for ex in f.examples:
                got = [s.wrapper for s in sightings(ex, forms)]
                if f.wrapper not in got:
                    out.append(
                        _file_problem(
                            forms.path,
                            "KB009",
                            f"example '{_short(ex)}' of frame '{f.wrapper}' is read as "
                            f"{got or 'no CUDA error'}",
                            "the frame must read a known CUDA error text, name or number in it",
                        )
                    )
        for ex in forms.name_examples:
            if not sightings(ex, forms):
                out.append(
                    _file_problem(
                        forms.path, "KB009", f"example '{_short(ex)}' names no known CUDA error"
                    )
                )
    jobs = data.jobs
    if jobs is not None:
        import re

        compiled = [(w, re.compile(w.pattern)) for w in jobs.consequences]
        for w in jobs.consequences:
            for ex in w.examples:
                first = next((v for v, r in compiled if r.search(ex)), None)
                if first is None or first.role != w.role:
                    said = f"read as '{first.role}'" if first else "matched by no wording"
                    out.append(
                        _file_problem(
                            jobs.path,
                            "KB009",
                            f"example '{_short(ex)}' of a '{w.role}' wording is {said}",
                            "widen the wording, or move it above the one that reads it first",
                        )
                    )
        for w in jobs.neutral:
            for ex in w.examples:
                if not re.search(w.pattern, ex):
                    out.append(
                        _file_problem(jobs.path, "KB009", f"example '{_short(ex)}' is not matched")
                    )
    out += _check_collectives(data.collectives)
    out += _check_failure_events(data.events)
    return out


def _check_failure_events(events) -> list[Problem]:
    """failure-events.yaml: every example of a line rule is read by that very rule (the first
    that matches decides), and every form's example by its form."""
    if events is None:
        return []
    import re

    from kb.diagnosis.root import rule_of

    out: list[Problem] = []
    for r in events.lines:
        for ex in r.examples:
            got = rule_of(ex, events)
            if got != r.id:
                said = f"read by '{got}'" if got else "read by no rule"
                out.append(
                    _file_problem(
                        events.path,
                        "KB009",
                        f"example '{_short(ex)}' of line rule '{r.id}' is {said}",
                        "widen the rule, or move it above the one that reads it first",
                    )
                )
    for name, pattern, examples in events.forms:
        for ex in examples:
            if not re.search(pattern, ex):
                out.append(
                    _file_problem(
                        events.path, "KB009", f"example '{_short(ex)}' of {name} is not matched"
                    )
                )
    return out


def _check_collectives(rules) -> list[Problem]:
    """collectives.yaml: every op name belongs to one op, and every example (a profiling name as
    torch writes it) is read as its own op by the job view's reader."""
    if rules is None:
        return []
    out: list[Problem] = []
    owner: dict[str, str] = {}
    for o in rules.ops:
        for n in o.names:
            if owner.setdefault(n, o.op) != o.op:
                out.append(
                    _file_problem(
                        rules.path, "KB009", f"name '{n}' is given to '{owner[n]}' and '{o.op}'"
                    )
                )
    from kb.job.collectives import semantics

    for o in rules.ops:
        for ex in o.examples:
            got = semantics(ex, rules)
            if got is None or got.op != o.op:
                said = (
                    f"read as '{got.op}'" if got else "read as no op (an unknown name or backend)"
                )
                out.append(
                    _file_problem(rules.path, "KB009", f"example '{ex}' of '{o.op}' is {said}")
                )
    return out


def same_level_claims(
    kb: KnowledgeBase, progress: Callable[..., None] | None = None
) -> list[Problem]:
    """KB020: an example another entry matches too, at the same level and on the same line, with
    nothing else between them (both specific or both generic, neither explained by the other
    nor a consequence): only the entries' order puts the right one first."""
    from kb.diagnosis.engine import Engine

    engine = Engine(knowledge=kb)
    out: list[Problem] = []
    for i, e in enumerate(kb.entries):
        if progress is not None:
            progress(i, len(kb.entries), "checking that no two entries claim one example")
        seen: set[str] = set()
        for ex in e.examples_match:
            order = engine.ranked(ex)
            # Signature matches only: a code sighting comes after them by the stated rule.
            order = [(m, key) for m, key in order if m.source == "signature"]
            mine = next((key for m, key in order if m.id == e.id), None)
            if mine is None:
                continue
            for m, key in order:
                if m.id == e.id or m.id in seen or key[:-1] != mine[:-1]:
                    continue
                seen.add(m.id)
                out.append(
                    _problem(
                        e,
                        "KB020",
                        f"example '{_short(ex)}' is matched by '{m.id}' too, at the same level "
                        f"({m.confidence}) on the same line: only the entries' order decides",
                        "lower the level of the wording the two share in one of them, or name "
                        "the other in explained_by",
                    )
                )
    return out
