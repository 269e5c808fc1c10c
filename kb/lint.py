"""Checks across an entry's parts, run through the same matcher a lookup uses."""

from __future__ import annotations

from kb.knowledge.base import KnowledgeBase
from kb.knowledge.signatures import SignatureIndex, text_hits
from kb.model.entry import Entry, Problem
from kb.scan.extract import has_trigger


def _problem(entry: Entry, code: str, msg: str, hint: str = "") -> Problem:
    line, col = _find_line(entry.path, msg)
    return Problem(entry.path, line, col, code, msg, hint)


def _find_line(path: str, msg: str) -> tuple[int, int]:
    # The example text is quoted in the message; point at the line of the file that holds it.
    try:
        lines = open(path, encoding="utf-8").read().splitlines()
    except OSError:
        return 1, 1
    needle = msg.split("'", 1)[1][:40] if "'" in msg else ""
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


def check_entry(entry: Entry, codes_known=None) -> list[Problem]:
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
                if ln.strip() and not has_trigger(ln) and any(index.match_line(ln))
            ]
            hint = (
                "its matching line holds no trigger word, so a log scan never looks at it; "
                "see kb.scan.extract.TRIGGERS and EXACT_TRIGGERS"
                if unseen
                else "widen a signature, or remove the example if it belongs to another entry"
            )
            problems.append(
                _problem(entry, "KB009", f"example '{_short(ex)}' matches no signature", hint)
            )
    for near in entry.examples_no_match:
        hits = text_hits(index, near.text)
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


def lint(kb: KnowledgeBase) -> list[Problem]:
    try:
        import kb.knowledge.cuda_codes as cuda_codes

        known = cuda_codes.get
    except ImportError:  # the table ships with kb; absent only in a broken install
        known = None
    problems = list(kb.problems)
    for e in kb.entries:
        problems.extend(check_entry(e, known))
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
    return sorted(problems, key=lambda p: (p.path, p.line, p.code))
