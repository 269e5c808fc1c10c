"""How kb's caches pickle the knowledge base (kb.knowledge.pickle_file.dumps): records as their
fields, each entry's details compressed and read when shown, each entry's evidence apart. What
comes back is what went in; and the shipped caches' trust rule (kb.knowledge.shipped)."""

from __future__ import annotations

import os
import pickle
import stat

import pytest

from kb import paths
from kb.knowledge import pickle_file, shipped


def test_a_knowledge_base_comes_back_the_same(kb_bundled):
    back = pickle.loads(pickle_file.dumps(kb_bundled))
    assert [e.id for e in back.entries] == [e.id for e in kb_bundled.entries]
    some = [e.id for e in kb_bundled.entries if kb_bundled.evidence_for(e.id)][:3]
    assert some
    for entry_id in some:  # one entry's records, the others still unread
        assert back.evidence_for(entry_id) == kb_bundled.evidence_for(entry_id)
    assert "evidence" not in back.__dict__
    assert back.evidence == kb_bundled.evidence  # all of them, in their order
    assert list(back.evidence) == list(kb_bundled.evidence)
    for a, b in zip(back.entries[:20], kb_bundled.entries[:20]):
        assert a == b  # every field, details and signatures included
    assert back.signature_tables is not None
    assert [(e.id, s.id) for e, s in back.signature_tables.pairs] == [
        (e.id, s.id) for e, s in kb_bundled.signature_tables.pairs
    ]


def test_an_entry_s_details_are_compressed_and_read_when_shown(kb_bundled):
    entry = next(e for e in kb_bundled.entries if len(e.summary) > 200)
    plain = pickle.dumps(entry, protocol=pickle.HIGHEST_PROTOCOL)
    packed = pickle_file.dumps(entry)
    assert len(packed) < len(plain)
    back = pickle.loads(packed)
    assert "summary" not in back.__dict__  # not read yet
    assert (back.summary, back.causes, back.fixes) == (entry.summary, entry.causes, entry.fixes)
    again = pickle.loads(pickle_file.dumps(pickle.loads(packed)))  # compressed once, not twice
    assert again == entry and len(pickle_file.dumps(pickle.loads(packed))) == len(packed)


def test_a_signature_s_fields_are_read_when_its_literal_is_in_a_line(kb_bundled):
    """The cache's ~1,400 signatures come back as what the index reads of every candidate (id,
    literal, head...); the rest (pattern, level, captures' diagnosis...) is unpickled for the few
    signatures whose literal a line holds."""
    from kb.knowledge.signatures import SignatureIndex

    back = pickle.loads(pickle_file.dumps(kb_bundled))
    sigs = [s for e in back.entries for s in e.signatures]
    assert all("pattern" not in s.__dict__ for s in sigs)  # none read yet
    index = SignatureIndex(back.entries, back.signature_tables)
    hits = index.match_line("CUDA error: an illegal memory access was encountered")
    assert [h.entry.id for h in hits] == ["cuda-illegal-memory-access"]
    read = [s for s in sigs if "pattern" in s.__dict__]
    assert hits[0].signature in read and len(read) < len(sigs) // 20
    by_id = {(e.id, s.id): s for e in kb_bundled.entries for s in e.signatures}
    for e in back.entries[:30]:
        for s in e.signatures:
            assert s == by_id[(e.id, s.id)]  # every field, read on demand
    assert pickle.loads(pickle_file.dumps(back)).entries == back.entries  # written again as read


def _stat(tmp_path, mode: int, kind: str = "file") -> os.stat_result:
    p = tmp_path / "x"
    if kind == "file":
        p.write_bytes(b"")
    else:
        p.mkdir()
    p.chmod(mode)
    return os.stat(p)


@pytest.mark.parametrize(
    "mode,why",
    [
        (0o644, ""),
        (0o600, ""),
        (0o664, "writable by group (mode 0664)"),
        (0o646, "writable by others (mode 0646)"),
        (0o666, "writable by group and others (mode 0666)"),
    ],
)
def test_a_shipped_file_is_trusted_only_when_nobody_else_can_write_it(tmp_path, mode, why):
    assert shipped.untrusted(_stat(tmp_path, mode)) == why


def test_a_shipped_file_of_another_user_is_refused(tmp_path, monkeypatch):
    st = _stat(tmp_path, 0o644)
    assert shipped.untrusted(st) == ""
    monkeypatch.setattr(paths, "_euid", lambda: st.st_uid + 4242)
    if st.st_uid == 0:
        assert shipped.untrusted(st) == ""  # root's: as the package's own code
    else:
        assert "neither root nor this user" in shipped.untrusted(st)


def test_a_shipped_folder_is_held_to_the_same_rule(tmp_path):
    st = _stat(tmp_path, 0o755, kind="folder")
    assert stat.S_ISDIR(st.st_mode)
    assert shipped.untrusted(st, folder=True) == ""
    assert shipped.untrusted(st) == "not a regular file"
    (tmp_path / "x").chmod(0o775)
    assert "writable by group" in shipped.untrusted(os.stat(tmp_path / "x"), folder=True)


def test_a_shipped_file_as_writable_as_kbs_own_code_is_trusted(tmp_path, monkeypatch):
    """pip under umask 002 installs kb's modules and its caches group-writable by the user's
    group: the cache grants nobody more than the code does, and is read (it warned on every
    lookup). Group-writable where the code is not stays refused."""
    st = _stat(tmp_path, 0o664)
    code = tmp_path / "kb" / "__init__.py"
    code.parent.mkdir()
    code.write_text("")
    monkeypatch.setattr(shipped, "_PKG", str(code.parent))
    code.chmod(0o664)
    assert shipped.untrusted(st) == ""
    code.chmod(0o644)
    assert shipped.untrusted(st) == "writable by group (mode 0664)"
    code.chmod(0o666)  # others may write the code: the cache is still refused if others may
    assert "writable by others" in shipped.untrusted(_stat(tmp_path, 0o646))
