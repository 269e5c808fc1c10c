"""Entry sections are typed records read from the YAML in one place (kb.entries), and kb's own
renderers use their attributes, not the dict-style compatibility reads."""

from __future__ import annotations

import io

import pytest
import yaml

import kb.model.record as records
from kb.diagnosis.engine import Engine
from kb.model.entry import Cause, Diagnostic, Fix, NotReproducible, Reference, _ReadLikeADict
from kb.render.report import result_markdown, result_text
from kb.render.style import Style, entry_dict, entry_markdown, print_entry

SECTIONS = {
    "causes": Cause,
    "diagnostics": Diagnostic,
    "fixes": Fix,
    "references": Reference,
    "not_reproducible": NotReproducible,
}


def _as_yaml(record) -> dict:
    """The record as the YAML wrote it: fields left out of the YAML are empty (or lang's default)."""
    d = records.asdict(record)
    return {k: v for k, v in d.items() if v != "" and not (k == "lang" and v == "python")}


def test_every_section_is_a_record_equal_to_its_yaml(kb_bundled):
    assert kb_bundled.entries
    for e in kb_bundled.entries:
        raw = yaml.safe_load(open(e.path, encoding="utf-8"))
        for name, cls in SECTIONS.items():
            got = getattr(e, name)
            assert isinstance(got, tuple) and all(type(r) is cls for r in got), (e.id, name)
            want = [
                {k: v for k, v in d.items() if not (k == "lang" and v == "python")}
                for d in raw.get(name, [])
            ]
            assert [_as_yaml(r) for r in got] == want, (e.id, name)


def test_records_are_frozen():
    with pytest.raises(records.FrozenInstanceError):
        Fix("t").title = "other"  # type: ignore[misc]


def test_dict_style_reads_still_work_for_older_callers():
    fix = Fix("Restart", code="torch.cuda.empty_cache()")
    assert fix["title"] == "Restart" and fix.get("code") == "torch.cuda.empty_cache()"
    assert fix.get("detail") is None and fix.get("detail", "-") == "-"  # left out of the YAML
    assert fix.get("lang", "bash") == "python"  # the schema's default is a value
    ref = Reference("https://example.org/x")
    assert ref.get("title", ref["url"]) == "https://example.org/x"
    assert Cause("a", "b").get("nope") is None
    with pytest.raises(KeyError):
        Cause("a", "b")["nope"]


def test_json_lists_every_field(kb_bundled):
    e = next(e for e in kb_bundled.entries if e.fixes and not e.fixes[0].code)
    d = entry_dict(e)
    assert set(d["fixes"][0]) == {"title", "detail", "code", "lang"}
    assert set(d["causes"][0]) == {"title", "detail", "evidence"}
    assert d["fixes"][0]["lang"] == "python" and d["fixes"][0]["code"] == ""


@pytest.fixture
def no_dict_reads(monkeypatch):
    def refuse(self, *a, **k):
        raise AssertionError(f"dict-style read of {type(self).__name__} in kb's own code")

    monkeypatch.setattr(_ReadLikeADict, "get", refuse)
    monkeypatch.setattr(_ReadLikeADict, "__getitem__", refuse)


def test_renderers_use_attributes(kb_bundled, no_dict_reads):
    eng = Engine(knowledge=kb_bundled)
    for e in kb_bundled.entries:
        entry_markdown(e, kb_bundled.evidence_for(e.id))
        print_entry(e, kb_bundled.evidence_for(e.id), stream=io.StringIO())
        entry_dict(e)
        r = eng.lookup(e.examples_match[0], fulltext=False)
        if r.matches:
            result_text(r, kb_bundled, Style(False))
            result_markdown(r, kb_bundled)


def test_kb_show_prints_entry_text_verbatim_not_as_markup(kb_bundled):
    """rich markup in entry text once crashed `kb show` ("[/\\]" in a diagnostic) and would drop
    "[rank0]" from a pattern."""
    e = kb_bundled.get("cuda-home-not-set")
    odd = "grep -E '[/\\]bin' and [rank0]: [bold]x"
    e = records.replace(
        e,
        causes=(Cause("[red]title[/red]", odd),),
        diagnostics=(Diagnostic("check", odd, tells=odd),),
    )
    buf = io.StringIO()
    print_entry(e, [], stream=buf)
    text = " ".join(buf.getvalue().split())
    assert text.count(odd) == 3 and "[red]title[/red]" in text
