"""The entry cache's freshness: a settled knowledge base is found by what stat says of its files
(no file read, nothing hashed), and any change to a file, even one that keeps its size and its
modification time, is seen on the next load."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

import kb.knowledge.base as knowledge
from kb import paths
from kb.knowledge.base import load

REPO = Path(__file__).resolve().parents[1]
GOOD = (REPO / "tests" / "fixtures" / "good_entry.yaml").read_text()
SETTLE = 0.05  # the test's stand-in for SETTLED_S: long enough for any clock tick, short to wait


@pytest.fixture
def local(tmp_path, monkeypatch):
    d = tmp_path / "mine" / "local"
    d.mkdir(parents=True)
    f = d / "good-entry.yaml"
    f.write_text(GOOD)
    monkeypatch.setattr(knowledge, "SETTLED_S", SETTLE)
    return f


def _settle() -> None:
    time.sleep(SETTLE * 3)


def _keys() -> list[Path]:
    return sorted(paths.state_dir().glob("entries-*.key"))


def _title(kb) -> str:
    return kb.get("good-entry").title


def test_a_settled_knowledge_base_loads_without_reading_its_files(local, monkeypatch):
    _settle()
    first = load([str(local.parent.parent)])
    assert len(_keys()) == 1
    monkeypatch.setattr(knowledge, "_snapshot", lambda groups: pytest.fail("files re-read"))
    again = load([str(local.parent.parent)])
    assert _title(again) == _title(first) and again.content_hash == first.content_hash


def test_an_edit_that_keeps_size_and_mtime_is_still_seen(local, monkeypatch):
    _settle()
    before = load([str(local.parent.parent)])
    st = local.stat()
    title = _title(before)
    changed = title[:-1] + ("X" if title[-1] != "X" else "Y")  # same length
    local.write_text(GOOD.replace(title, changed))
    os.utime(local, ns=(st.st_atime_ns, st.st_mtime_ns))  # as `touch -r` or a copy tool would
    assert local.stat().st_size == st.st_size and local.stat().st_mtime_ns == st.st_mtime_ns
    assert _title(load([str(local.parent.parent)])) == changed  # unsettled: read and hashed
    _settle()
    assert _title(load([str(local.parent.parent)])) == changed  # settled: a new stat key


def test_files_changed_just_now_are_read_and_no_key_is_written(local, monkeypatch):
    monkeypatch.setattr(knowledge, "SETTLED_S", 3600.0)  # everything counts as just changed
    kb = load([str(local.parent.parent)])
    assert _title(kb) and _keys() == []


def test_a_key_pointing_at_a_missing_or_foreign_cache_falls_back(local):
    _settle()
    kb = load([str(local.parent.parent)])
    (key,) = _keys()
    cache = paths.state_dir() / f"entries-{kb.content_hash}.pickle"
    cache.unlink()
    assert _title(load([str(local.parent.parent)])) == _title(kb)  # rebuilt from the files
    described = key.read_text().partition("\n")[2]
    key.write_text("0" * 32 + "\n" + described)  # names a cache that is not there
    assert _title(load([str(local.parent.parent)])) == _title(kb)
    assert key.read_text() == f"{kb.content_hash}\n{described}"  # and the key is put right


def test_a_key_describing_other_files_is_not_trusted(local, monkeypatch):
    _settle()
    kb = load([str(local.parent.parent)])
    (key,) = _keys()
    digest, _, described = key.read_text().partition("\n")
    key.write_text(digest + "\n" + described.replace(" ", "  ", 1))  # one field off
    hashed = []
    real = knowledge._snapshot
    monkeypatch.setattr(knowledge, "_snapshot", lambda groups: hashed.append(1) or real(groups))
    assert _title(load([str(local.parent.parent)])) == _title(kb)
    assert hashed  # the files were read and hashed: the key was not trusted


def test_a_cache_in_use_never_looks_unused_to_another_configurations_clean_up(local):
    """Clean-up (on any configuration's cache miss) removes caches not used for STALE_DAYS, by
    mtime; reading a cache marks it used, so a long-lived cache that is read every day stays."""
    _settle()
    kb = load([str(local.parent.parent)])
    (key,) = _keys()
    cache = paths.state_dir() / f"entries-{kb.content_hash}.pickle"
    month_ago = time.time() - 30 * 86400
    for f in (key, cache):
        os.utime(f, (month_ago, month_ago))
    load([str(local.parent.parent)])  # a hit through the key file
    assert key.stat().st_mtime > month_ago + 86400 and cache.stat().st_mtime > month_ago + 86400
    other = local.parent.parent.parent / "other" / "local"
    other.mkdir(parents=True)
    (other / "other-entry.yaml").write_text(GOOD.replace("good-entry", "other-entry"))
    load([str(other.parent)])  # another configuration's miss runs the clean-up
    assert key.exists() and cache.exists()


def test_a_copy_with_other_entries_does_not_keep_the_cached_filing(local):
    from kb import Engine, replace

    _settle()
    kb = load([str(local.parent.parent)])
    assert kb.signature_tables is not None  # from the cache
    same = replace(kb, warnings=["x"])
    assert same.signature_tables is kb.signature_tables  # same entries: still fits
    fewer = replace(kb, entries=[e for e in kb.entries if e.id != "good-entry"])
    assert fewer.signature_tables is None
    r = Engine(knowledge=fewer).lookup("Widget error: the widget exploded")
    assert r.best is None or r.best.id != "good-entry"


def test_a_cache_from_an_older_kb_without_a_parse_memo_is_no_starting_point(tmp_path, monkeypatch):
    """An upgrade: the state folder's last cache was written by a kb whose KnowledgeBase had no
    `memo` (nor triggers or data). It must be passed over, never raise AttributeError."""
    import types

    import kb.knowledge.base as base

    state = tmp_path / "state"
    state.mkdir()
    digest = "a" * 32
    (state / base.LATEST).write_text(digest + "\n")  # the last cache any configuration wrote
    monkeypatch.setattr(base, "_unpickle", lambda path, d: types.SimpleNamespace(entries=[]))
    assert base._previous_memo(str(state), [], "tag") is None


def test_the_same_knowledge_elsewhere_has_the_same_identity_and_its_own_cache(tmp_path):
    """kb triage's `knowledge` column is the identity: one set of files cloned to two folders
    is the same knowledge (and two caches, whose names say where); an edit is other knowledge."""
    a, b = tmp_path / "a" / "local", tmp_path / "b" / "local"
    for d in (a, b):
        d.mkdir(parents=True)
        (d / "good-entry.yaml").write_text(GOOD)
    ka, kb_ = load(bundled=[a]), load(bundled=[b])
    assert ka.identity and ka.identity == kb_.identity
    assert ka.content_hash != kb_.content_hash
    (b / "good-entry.yaml").write_text(GOOD.replace(_title(kb_), _title(kb_) + " (edited)"))
    assert load(bundled=[b], use_cache=False).identity != ka.identity


def test_the_parse_memo_is_kept_apart_from_what_a_lookup_reads(local):
    """The cache a lookup unpickles holds no parse memo (only a rebuild reads it, from its own
    file beside the cache), and the knowledge base's evidence records carry no repro output."""
    kb = load(bundled=[local.parent])
    caches = sorted(paths.state_dir().glob("entries-*.pickle"))
    assert caches and all(c.with_suffix(".memo").is_file() for c in caches)
    import pickle

    cached = pickle.loads(caches[0].read_bytes())
    assert cached.memo is None
    assert kb.evidence and all(not ev.output for evs in kb.evidence.values() for ev in evs)
