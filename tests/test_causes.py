"""The causes a log itself points to lead the match's list (kb.diagnosis.causes)."""

from __future__ import annotations

from kb.diagnosis.causes import _phrases, seen
from kb.diagnosis.engine import Engine
from kb.render.report import result_dict, result_text
from kb.render.style import Style

LINKER = (
    "/usr/bin/ld: cannot find -lcuda: No such file or directory\n"
    "collect2: error: ld returned 1 exit status\n"
)


def test_a_quoted_wording_in_the_log_moves_its_cause_first():
    r = Engine().lookup(LINKER)
    best = r.best
    assert best is not None and best.id == "jit-extension-build-failed"
    first = best.entry.causes[best.causes_seen[0]]
    assert "libcuda" in first.title
    causes = best.causes_in_order()
    assert causes[0] == (first, True) and not any(shown for _, shown in causes[1:])
    # every cause is still listed, once
    assert sorted(c.title for c, _ in causes) == sorted(c.title for c in best.entry.causes)


def test_the_text_report_marks_the_cause_the_log_shows():
    eng = Engine()
    r = eng.lookup(LINKER)
    text = result_text(r, eng.knowledge, Style(False))
    part = text.split("Likely causes", 1)[1]
    assert part.lstrip().startswith("1. The linker cannot find the driver's libcuda")
    assert "(this log shows it)" in part.split("\n  2.", 1)[0]


def test_json_names_the_causes_seen():
    eng = Engine()
    m = result_dict(eng.lookup(LINKER), eng.knowledge)["matches"][0]
    assert m["causes_seen"] and "libcuda" in m["causes_seen"][0]
    r = eng.lookup("CUDA error: an illegal memory access was encountered")
    assert result_dict(r, eng.knowledge)["matches"][0]["causes_seen"] == []


def test_the_class_own_wording_tells_no_cause_apart():
    # every CUDA OOM says "Tried to allocate": a cause quoting it is not the one this log shows
    msg = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
        "total capacity of 79.10 GiB of which 1.02 GiB is free."
    )
    r = Engine().lookup(msg)
    assert r.best is not None and r.best.id == "cuda-oom"
    assert r.best.causes_seen == ()


def test_quotes_of_code_and_placeholders():
    got = _phrases(
        "set before 'import torch' or 'x = 1'; the log says 'Process <pid> has N GiB memory in use'"
        " and `ab` and 'Last error'"
    )
    # code is what a traceback echoes whatever the cause; placeholders split a quote, and
    # fragments or wordings too short to say anything are dropped
    assert got == [["process", "gib memory in use"]]


def test_an_entry_with_one_cause_or_no_quotes_is_left_as_it_is():
    eng = Engine()
    for e in eng.knowledge.entries:
        if len(e.causes) < 2:
            assert seen(e, ["anything at all"]) == ()
            break
