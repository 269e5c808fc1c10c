"""The loaded knowledge base: entries, their problems, and their verification evidence.

Loading validates every file against the schema, which is the slow part (jsonschema import and
checks). The result is cached in the state dir under a hash of every entry and evidence file's
content. A lookup after the first one does not even read the files: a small key file, named by
what stat says of every file (size, times, inode), points at the content hash it was last seen
with; only files that changed in the last seconds are read and hashed again (see _stat_key).
"""

from __future__ import annotations

import os

from kb import paths
from kb.knowledge import pickle_file, shipped
from kb.knowledge.pickle_file import gc_paused
from kb.model.entry import Entry, Evidence, Problem
from kb.model.record import field, record
from kb.paths import entry_file_names, evidence_file_names
from kb.version import __version__

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from kb.knowledge.data import KnowledgeData
    from kb.knowledge.signatures import Tables
    from kb.scan.triggers import Triggers

_SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "schema.json")
# What a cache depends on besides the entry and evidence files: the schema and kb/data's files
# (wrapper forms, job-log wordings: kb.knowledge.data), which are cached with the entries.
_DATA_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")
_DEPENDS = (
    _SCHEMA,
    os.path.join(_DATA_DIR, "wrappers.yaml"),
    os.path.join(_DATA_DIR, "job-wordings.yaml"),
    os.path.join(_DATA_DIR, "collectives.yaml"),
    os.path.join(_DATA_DIR, "failure-events.yaml"),
    os.path.join(_DATA_DIR, "cuda_codes.json"),  # its table is pickled with the data
)

# The cache format when the knowledge's identity was first shown (KnowledgeBase.identity): later
# cache formats leave the identity of the same files as it was.
_IDENTITY_FORMAT = 18
_CACHE_FORMAT = 20  # the pickled shapes; 5: typed records; 6: any_of; 7: aliases; 8: explained_by;
# 9: kb.record records, signatures' key words; 10: where they are filed, entries' details
# pickled apart; 11: announces; 12: the trigger set; 13: the skim's own literals; 14: raised_in;
# 15: the parse memo in a file of its own, records without their outputs, the CUDA code table;
# 16: identity; 17: the failure events (KnowledgeData.events); 18: logged_error; 19: evidence
# pickled per entry, records as pickle_file.dumps writes them; 20: entries' details compressed


@record
class ParseMemo:
    """What each entry file parsed to, keyed by its path, local flag and content hash, kept in the
    cache. A file edited since (or being rewritten, which changes the content hash every time
    and makes every lookup miss the cache) is the only one parsed again: the rest, the evidence
    records and the compiled trigger set come from the previous cache of this configuration.
    Only valid for the same kb version, cache format and schema (`tag`)."""

    tag: str
    files: dict[tuple[str, bool], tuple[str, Entry | None, tuple[Problem, ...]]]
    evidence_tag: str = ""
    evidence: dict[str, list[Evidence]] = field(default_factory=dict)
    evidence_problems: tuple[Problem, ...] = ()


@record
class KnowledgeBase:
    entries: list[Entry]
    problems: list[Problem]
    evidence: dict[str, list[Evidence]] = field(default_factory=dict)
    content_hash: str = ""  # the cache's name: contents and where they are
    # What knowledge this is, wherever its files are: contents and names within their folders
    # (the same checkout cloned elsewhere has the same identity, and another cache).
    identity: str = ""
    # Said once on stderr by the CLI, shown by the TUI: an unwritable cache, and the like.
    warnings: list[str] = field(default_factory=list)
    # kb.knowledge.signatures.file_signatures(entries), worked out when the cache is written (None until then,
    # and for a knowledge base made in memory: the engine works them out itself).
    signature_tables: Tables | None = None
    # The scan's trigger set (kb.knowledge.triggers.build(entries)), Hyperscan databases
    # compiled, made when the cache is written (None until then: the engine makes it itself).
    triggers: Triggers | None = None
    # kb/data's wrapper forms and job-log wordings (kb.knowledge.data), read when the cache is
    # made (None until then: readers load them themselves).
    data: KnowledgeData | None = None
    # What each file parsed to, by its content (see ParseMemo): the next cache is made from it
    # with only the changed files parsed again.
    memo: ParseMemo | None = None

    def __post_init__(self) -> None:
        self.by_id = {e.id: e for e in self.entries}
        # An entry's earlier ids answer too (a renamed entry keeps its old id working).
        self.by_alias = {a: e for e in self.entries for a in e.aliases}
        # Tables filed for other entries (a copy made with replace(kb, entries=...)) would
        # answer for entries this knowledge base no longer has: they are dropped, and the engine
        # files these entries itself. (Unpickling does not come here: the cache's tables fit.)
        t = self.signature_tables
        if t is not None:
            have = [(id(e), id(s)) for e in self.entries for s in e.signatures]
            if have != [(id(e), id(s)) for e, s in t.pairs]:
                self.signature_tables = None
                self.triggers = None

    def get(self, entry_id: str) -> Entry | None:
        return self.by_id.get(entry_id) or self.by_alias.get(entry_id)

    # Pickled (kb's caches) with each entry's evidence records as a nested pickle of their own,
    # unpickled when that entry's records are first read: a lookup shows the records of the
    # entries it names, not all 300 of them. `evidence` as a whole loads them all on first read.
    def __reduce__(self) -> tuple[Any, ...]:
        from kb.knowledge.pickle_file import dumps

        d = dict(self.__dict__)
        blobs = d.pop("_evidence", None)
        d.pop("_evidence_read", None)  # read again from the blobs when wanted
        if "evidence" in d:
            blobs = {k: dumps(v) for k, v in d.pop("evidence").items()}
        return (_kb_from_cache, (d, blobs or {}))

    def __getattr__(self, name: str) -> Any:  # only for a name not (yet) in __dict__
        d = self.__dict__
        blobs = d.get("_evidence")
        if name != "evidence" or blobs is None:
            raise AttributeError(f"'KnowledgeBase' object has no attribute {name!r}")
        from kb.knowledge.pickle_file import pickle

        # In the order they were written; records already read are kept as they are.
        seen = d.get("_evidence_read", {})
        d["evidence"] = {k: seen[k] if k in seen else pickle.loads(v) for k, v in blobs.items()}
        d.pop("_evidence", None)
        d.pop("_evidence_read", None)
        return d["evidence"]

    def closest_ids(self, entry_id: str, n: int = 3) -> list[str]:
        import difflib

        return difflib.get_close_matches(entry_id, list(self.by_id), n=n, cutoff=0.4)

    def evidence_for(self, entry_id: str) -> list[Evidence]:
        d = self.__dict__
        blobs = d.get("_evidence")
        if blobs is None or "evidence" in d:
            return self.evidence.get(entry_id, [])
        read = d.setdefault("_evidence_read", {})
        got = read.get(entry_id)
        if got is None:
            blob = blobs.get(entry_id)
            if blob is None:
                return []
            from kb.knowledge.pickle_file import pickle

            got = read[entry_id] = pickle.loads(blob)
        return got


def _kb_from_cache(state: dict[str, Any], evidence: dict[str, bytes]) -> KnowledgeBase:
    kb = object.__new__(KnowledgeBase)
    kb.__dict__.update(state)
    kb.__dict__["_evidence"] = evidence
    return kb


@record
class _Snapshot:
    digest: str  # of everything: the cache's name
    data: dict[Path, bytes | None]  # the bytes hashed (None: unreadable or too large)
    hashes: dict[Path, str]  # each file's own content hash
    tag: str  # kb version, cache format and schema: what a parse depends on besides the file
    evidence_tag: str  # the evidence files, all together
    identity: str = ""  # the contents and the names within their folders (KnowledgeBase.identity)


def _snapshot(groups: list[tuple[str, list[Path]]]) -> _Snapshot:
    """The content hash, and the bytes hashed. The entries are then parsed from these same
    bytes, so a file edited while kb reads it can never leave a cache whose name promises other
    content."""
    import hashlib  # here, not at the top: a settled knowledge base is found without it

    h = hashlib.blake2b(digest_size=16)
    h.update(f"{__version__}/{_CACHE_FORMAT}".encode())
    # The knowledge's own identity, for people and tables (kb triage's `knowledge` column): the
    # same files in another checkout or folder give the same id, unlike the cache's digest; and
    # the same files give the same id whatever shape the cache has (_IDENTITY_FORMAT).
    known = hashlib.blake2b(digest_size=16)
    known.update(f"{__version__}/{_IDENTITY_FORMAT}".encode())
    for dep in _DEPENDS:
        try:
            with open(dep, "rb") as fh:
                content = fh.read()
        except OSError:
            content = b"<unreadable>"
        h.update(content)
        known.update(content)
    tag = h.hexdigest()
    ev = hashlib.blake2b(digest_size=16)
    ident = hashlib.blake2b(known.hexdigest().encode(), digest_size=16)
    data: dict[Path, bytes | None] = {}
    hashes: dict[Path, str] = {}
    for group, files in groups:
        for f in files:
            h.update(f"\0{group}\0{f}\0".encode())
            try:
                raw: bytes | None = f.read_bytes() if f.stat().st_size <= (1 << 20) else None
            except OSError:
                raw = None
            data[f] = raw
            content = raw if raw is not None else b"<unreadable or too large>"
            h.update(content)
            ident.update(f"\0{group}\0{f.parent.name}/{f.name}\0".encode())
            ident.update(content)
            if group == "e":
                # By its name within the evidence folder, as the identity: the same records in
                # another folder (a wheel's, installed) are the same evidence.
                ev.update(f"\0{f.parent.name}/{f.name}\0".encode())
                ev.update(content)
            elif raw is not None:
                hashes[f] = hashlib.blake2b(raw, digest_size=16).hexdigest()
    return _Snapshot(h.hexdigest(), data, hashes, tag, ev.hexdigest(), ident.hexdigest())


SETTLED_S = 2.0  # a file changed more recently than this may change again within one clock tick


def _key_name(groups: list[tuple[str, list[str]]]) -> str:
    """The key file's name: a CRC of the file list (one key file per configuration)."""
    from zlib import crc32

    names = "\n".join([*_DEPENDS, *(f for _, files in groups for f in files)])
    return f"entries-{crc32(names.encode('utf-8', 'surrogateescape')):08x}.key"


def _stat_key(
    groups: list[tuple[str, list[str]]], shipped_line: str = ""
) -> tuple[str, str] | None:
    """(key file name, what stat says of every file), or None when stat cannot stand for the
    files' content: a file that cannot be stat'ed, or one changed in the last SETTLED_S seconds,
    which a write in the same clock tick could change again without any field changing. Every
    write sets a file's ctime to the current time, which users cannot set back, so a settled
    file whose size, times and inode are unchanged has the same bytes (git's index relies on
    the same). The name is a CRC of the file list (one key file per configuration); the key
    file holds the whole description, which must match to the byte, so no hash is needed.

    shipped_line: what one stat says of the cache shipped in the wheel (kb.knowledge.shipped),
    which stands for the bundled entries, their evidence and kb/data's files: an installed
    package's files change only when it is installed again, which replaces that file too.
    `groups` then holds the user's own files only."""
    import time

    lines = [f"{__version__}/{_CACHE_FORMAT}"]
    now = time.time_ns()
    stated = [*groups] if shipped_line else [("s", list(_DEPENDS)), *groups]
    if shipped_line:
        lines.append(shipped_line)
    for tag, files in stated:
        for f in files:
            try:
                st = os.stat(f)
            except OSError:
                return None
            if changed_just_now(st, now):
                return None
            lines.append(f"{tag} {st.st_size} {st.st_mtime_ns} {st.st_ctime_ns} {st.st_ino} {f}")
    return _key_name(groups), "\n".join(lines)


def _read_pointer(path: str, described: str) -> str:
    """The content hash the key file recorded for exactly these files, else ''."""
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as fh:
            digest, _, seen = fh.read().partition("\n")
            if seen == described and len(digest) == 32:
                pickle_file._mark_used(fh.fileno())
                return digest
    except (OSError, ValueError):
        pass
    return ""


def _unpickle(cache: str | Path, digest: str) -> KnowledgeBase | None:
    kb = pickle_file.read(cache, mark_used=True)
    if isinstance(kb, KnowledgeBase) and kb.content_hash == digest:
        kb.warnings = _state_warnings()
        return kb
    return None


def _state_warnings() -> list[str]:
    """What the state folder's checks refused (another user's folder or file, a shipped cache
    that is not trusted), said once."""
    return [*paths.state_warnings(), *pickle_file.REFUSED, *shipped.REFUSED]


def _shipped_tag() -> str:
    return f"entries {_CACHE_FORMAT}"


def shipped_knowledge() -> KnowledgeBase | None:
    """The bundled entries' cache shipped in the wheel (kb.knowledge.shipped), or None: a source
    checkout, or a shipped file that is refused or was written by another kb."""
    kb = shipped.read(shipped.ENTRIES, _shipped_tag(), relocate=_relocate)
    if not isinstance(kb, KnowledgeBase):
        return None
    kb.warnings = _state_warnings()
    return kb


def _shipped_start() -> tuple[ParseMemo, Triggers | None, KnowledgeData | None] | None:
    """What a build with the user's own entries starts from when the state folder holds no
    earlier build: the shipped parse memo (the bundled entries parsed already), data and
    trigger set."""
    memo = shipped.read(shipped.MEMO, _shipped_tag(), relocate=_relocate)
    kb = shipped_knowledge()
    if not isinstance(memo, ParseMemo) or kb is None:
        return None
    return memo, kb.triggers, kb.data


def _relocate(value: object, moves: list[tuple[str, str]]) -> None:
    """Move the build's paths in what a shipped file holds to the installed package's: each
    entry's and problem's file, kb/data's files, a parse memo's keys. Written through __dict__
    (frozen records refuse assignment; nothing else holds them yet)."""
    move = shipped.moved
    if isinstance(value, KnowledgeBase):
        for e in value.entries:
            e.__dict__["path"] = move(e.path, moves)
        problems = list(value.problems)
        data = value.data
        if data is not None:
            for part in (data.wrappers, data.jobs, data.collectives, data.events):
                if part is not None and part.path:
                    part.__dict__["path"] = move(part.path, moves)
            problems += data.problems
        for p in {id(p): p for p in problems}.values():  # each once: one may be in both lists
            p.__dict__["path"] = move(p.path, moves)
    elif isinstance(value, ParseMemo):
        files = {}
        for (path, local), (h, entry, probs) in value.files.items():
            if entry is not None:
                entry.__dict__["path"] = move(entry.path, moves)
            for p in probs:
                p.__dict__["path"] = move(p.path, moves)
            files[(move(path, moves), local)] = (h, entry, probs)
        value.files = files
        for p in value.evidence_problems:
            p.__dict__["path"] = move(p.path, moves)


def load(
    kb_dirs: list[str] | None = None, bundled: list[Path] | None = None, use_cache: bool = True
) -> KnowledgeBase:
    """Load the bundled entries plus the user's folders (--kb-dir, KB_PATH).

    An installed kb reads its bundled entries from the cache shipped in the wheel
    (kb.knowledge.shipped): with no entries of the user's, that is the knowledge base, checked by
    one stat; with some, the per-user cache of the whole is keyed by that stat and the user's
    files, and built from the shipped parse memo (only the user's files are parsed). A source
    checkout has no shipped cache: every file is stat'ed, as its entries can change.

    Until the cache is found, names are plain strings (paths' *_folder and *_names forms): a
    lookup that finds it never imports pathlib."""
    bundled_names = (
        [os.fspath(b) for b in bundled] if bundled is not None else [paths.bundled_entries_folder()]
    )
    local_names = paths.user_entry_folders(kb_dirs)
    ev_name = paths.evidence_folder()
    ship_line = ""
    if use_cache and bundled is None:
        if not (local_names and entry_file_names(local_names)):
            kb = shipped_knowledge()  # one open and fstat; None in a source checkout
            if kb is not None:
                return kb
        else:
            ship_line = shipped.stat_line()
    import time

    previous: ParseMemo | None = None
    old_triggers: Triggers | None = None
    old_data: KnowledgeData | None = None
    looked_back = False
    lock = None
    give_up = time.monotonic() + SETTLED_S
    pause = 0.02
    try:
        while True:
            state = paths.state_folder()
            local_files = entry_file_names(local_names)
            stat_key = None
            if ship_line:
                # Named by the shipped file and the user's: the bundled folders are not walked.
                key_groups = [("s", [shipped.path(shipped.ENTRIES)]), ("l", local_files)]
                stat_key = _stat_key(key_groups, ship_line)
                cached = _by_pointer(state, stat_key)
                if cached is not None:
                    return cached
            names = [
                ("b", entry_file_names(bundled_names)),
                ("l", local_files),
                ("e", evidence_file_names(ev_name)),
            ]
            if not ship_line:
                key_groups = names
                stat_key = _stat_key(names) if use_cache else None
                cached = _by_pointer(state, stat_key)
                if cached is not None:
                    return cached
            from pathlib import Path

            groups = [(tag, [Path(f) for f in files]) for tag, files in names]
            snap = _snapshot(groups)
            digest = snap.digest
            cache = Path(state) / f"entries-{digest}.pickle"
            if use_cache:
                cached = _unpickle(cache, digest)
                if cached is None and lock is None:
                    # Another process may be making this very cache: wait for it (a while)
                    # rather than all making it at once.
                    lock = _BuildLock(os.path.join(state, _key_name(key_groups)[:-4] + ".lock"))
                    if lock.wait_for_others:
                        cached = _unpickle(cache, digest)
                if cached is not None:
                    if stat_key:
                        _write_pointer(cache.with_name(stat_key[0]), f"{digest}\n{stat_key[1]}")
                    return cached
                if not looked_back:
                    found = _previous_memo(state, key_groups, snap.tag)
                    if found is None and ship_line:
                        found = _shipped_start()  # the bundled entries parsed at build time
                        if found is not None and found[0].tag != snap.tag:
                            found = None
                    if found is not None:
                        previous, old_triggers, old_data = found
                    looked_back = True
            # Only on a cache miss: YAML parsing and schema validation cost more than everything
            # else, so a file whose content was parsed before is not parsed again.
            kb, unsettled, stale = _parse(snap, bundled_names, local_names, ev_name, previous)
            if stale:
                return kb  # in part a file's previous version: never cached
            if not unsettled or time.monotonic() >= give_up:
                break
            # A broken file that was modified just now is probably being written (an editor or
            # a script saving in place): read it again in a moment (only it is parsed again),
            # for up to SETTLED_S; never cache what we got.
            time.sleep(pause)
            pause = min(pause * 2, 0.2)
        if unsettled:
            return kb
        if use_cache:
            _complete(kb, old_data, old_triggers)
            problem = _write_cache(cache, kb)
            if not problem:
                if stat_key:
                    _write_pointer(cache.with_name(stat_key[0]), f"{digest}\n{stat_key[1]}")
                _note_last(cache, _key_name(key_groups)[:-4] + ".last", settled=bool(stat_key))
            kb.warnings = _state_warnings()
            if problem:
                kb.warnings.append(
                    f"cannot write kb's cache in {cache.parent} ({problem}); lookups still "
                    f"work, only slower (set KB_HOME to a writable folder)"
                )
        return kb
    finally:
        if lock is not None:
            lock.release()


def _by_pointer(state: str, stat_key: tuple[str, str] | None) -> KnowledgeBase | None:
    """The cache the key file names for exactly what stat says of the files now, else None."""
    if not stat_key:
        return None
    seen = _read_pointer(os.path.join(state, stat_key[0]), stat_key[1])
    if not seen:
        return None
    return _unpickle(os.path.join(state, f"entries-{seen}.pickle"), seen)


def _complete(
    kb: KnowledgeBase, old_data: KnowledgeData | None = None, old_triggers: Triggers | None = None
) -> None:
    """What a cache holds besides the entries: the signature tables, kb/data's files and the
    trigger set with its Hyperscan databases compiled (the previous build's, when its literals
    are the same)."""
    from kb.knowledge.data import load_data
    from kb.knowledge.documents import compute_key
    from kb.knowledge.signatures import file_signatures
    from kb.knowledge.triggers import build as build_triggers

    # The full-text index's name (kb.knowledge.index), worked out here once rather than from
    # every entry's details by each lookup that needs the index. Not a field: a copy made
    # with other entries (record.replace) has none, and works its own out.
    kb.__dict__["fulltext_key"] = compute_key(kb.entries)
    with gc_paused():
        kb.signature_tables = file_signatures(kb.entries)
        # The same tag: kb/data's files are those the previous cache read.
        kb.data = old_data if old_data is not None else load_data()
        triggers = build_triggers(kb.entries, kb.data.literals())
        old = old_triggers
        if (
            old is not None
            and old.hs
            and "failure" in old.hs  # a set kept before the failure search was serialised
            and (old.literals, old.errorish) == (triggers.literals, triggers.errorish)
        ):
            triggers = old  # the same set: its databases are compiled already
        else:
            triggers.prepare()
        kb.triggers = triggers


def build_bundled(entries: str, evidence: str) -> tuple[KnowledgeBase, ParseMemo]:
    """The knowledge base of these entry and evidence folders alone (no user's folders, no
    state folder read or written), complete as a cache holds it, with its parse memo: what
    the wheel ships (hatch_build.py, kb.knowledge.shipped)."""
    from pathlib import Path

    names = [("b", entry_file_names([entries])), ("l", []), ("e", evidence_file_names(evidence))]
    snap = _snapshot([(tag, [Path(f) for f in files]) for tag, files in names])
    kb, _unsettled, _stale = _parse(snap, [entries], [], evidence, None)
    _complete(kb)
    memo = kb.memo
    assert memo is not None
    kb.memo = None
    kb.warnings = []
    return kb, memo


# Whether this process read entry files (a cache was built): what it compiled and imported
# then is not what a lookup needs (kb.cli.lookup keeps the regex table of a lookup that read
# the cache).
PARSED_HERE = False


def _parse(
    snap: _Snapshot,
    bundled_names: list[str],
    local_names: list[str],
    ev_name: str,
    previous: ParseMemo | None,
) -> tuple[KnowledgeBase, bool, bool]:
    """(the knowledge base of these bytes, whether a broken file in it was changed just now,
    whether a file being written was read as its last good version), parsing only what the
    previous memo does not hold."""
    global PARSED_HERE
    PARSED_HERE = True
    from pathlib import Path

    from kb.knowledge.load import load_dirs, load_file

    old = previous.files if previous is not None else {}
    files: dict[tuple[str, bool], tuple[str, Entry | None, tuple[Problem, ...]]] = {}
    stale: list[str] = []

    def load_one(f: Path, local: bool = False, raw: bytes | None = None):
        key = (str(f), local)
        h = snap.hashes.get(f)
        hit = old.get(key)
        if hit is not None and h is not None and hit[0] == h:
            entry, probs = hit[1], list(hit[2])
        else:
            entry, probs = load_file(f, local=local, raw=raw)
            if entry is None and _changed_now(f):
                # Broken, and written just now: an editor or a script saving it in place, caught
                # between truncating and writing. Its last good version stands in until it
                # settles (this knowledge base is not cached, so nothing keeps it longer); with
                # none (its first read caught the write), it is read again once the writer has
                # had a moment, rather than called broken for one lookup.
                good = hit[1:] if hit is not None and hit[1] is not None else _reread(f, local)
                if good is not None:
                    stale.append(str(f))
                    return good[0], list(good[1])
        if h is not None:
            files[key] = (h, entry, tuple(probs))
        return entry, probs

    result = load_dirs(
        [Path(b) for b in bundled_names],
        [Path(d) for d in local_names],
        snap.data,
        load_one,
        lambda st: changed_just_now(st, _now_ns(), ctime=False),
    )
    if previous is not None and previous.evidence_tag == snap.evidence_tag:
        records, damaged = previous.evidence, list(previous.evidence_problems)
    else:
        from kb.knowledge.evidence import read_evidence

        records, damaged = read_evidence(Path(ev_name), with_output=False)
    kb = KnowledgeBase(result.entries, [*result.problems, *damaged], records, snap.digest)
    kb.identity = snap.identity
    kb.memo = ParseMemo(snap.tag, files, snap.evidence_tag, records, tuple(damaged))
    return kb, result.unsettled, bool(stale)


REREADS = 5  # a broken file written just now is read again this many times, REREAD_S apart
REREAD_S = 0.02


def _reread(f: Path, local: bool) -> tuple[Entry, tuple[Problem, ...]] | None:
    """The file's entry when a read a moment later finds it whole, else None (broken it is)."""
    import time

    from kb.knowledge.load import load_file

    for _ in range(REREADS):
        time.sleep(REREAD_S)
        entry, probs = load_file(f, local=local)
        if entry is not None:
            return entry, tuple(probs)
    return None


def _changed_now(f: Path) -> bool:
    import time

    try:
        return changed_just_now(f.stat(), time.time_ns(), ctime=False)
    except OSError:
        return True


def _now_ns() -> int:
    import time

    return time.time_ns()


def changed_just_now(st: os.stat_result, now_ns: int, ctime: bool = True) -> bool:
    """Whether a file was written in the last SETTLED_S seconds, by its mtime (and its ctime,
    unless `ctime` is False: a file whose contents are being saved is told by its mtime). A time
    further ahead of now than that is no sign of a write now: a file copied with its times from
    a machine whose clock runs ahead, or `touch -d 2030-01-01`, would otherwise be "being
    written" for years (never cached, every lookup waiting for it to settle). Its ctime, which
    any write sets to now, still tells a write apart (git's index relies on the same)."""
    window = int(SETTLED_S * 1e9)
    times = (st.st_mtime_ns, st.st_ctime_ns) if ctime else (st.st_mtime_ns,)
    return any(now_ns - window < t <= now_ns + window for t in times)


def _previous_memo(
    state: str, names: list[tuple[str, list[str]]], tag: str
) -> tuple[ParseMemo, Triggers | None, KnowledgeData | None] | None:
    """The memo of the cache this configuration used last (its key file names it, whatever the
    files' state now), when made by this kb version, cache format, schema and data files; with
    its trigger set (reused when the literals are the same) and data."""
    stem = os.path.join(state, _key_name(names)[:-4])
    digest = ""
    # This configuration's last cache, else the last one any configuration wrote here: a memo is
    # keyed by each file's path and content, so another configuration's parses are as good.
    for name in (stem + ".last", stem + ".key", os.path.join(state, LATEST)):
        try:
            with open(name, encoding="utf-8") as fh:
                digest = fh.readline().strip()
            if digest:
                break
        except (OSError, ValueError):
            continue
    if len(digest) != 32 or not digest.isalnum():
        return None
    kb = _unpickle(os.path.join(state, f"entries-{digest}.pickle"), digest)
    memo = pickle_file.read(os.path.join(state, f"entries-{digest}.memo"))
    # A cache written by an older kb may lack any of these: it is then no starting point.
    if kb is None or not isinstance(memo, ParseMemo) or memo.tag != tag:
        return None
    return memo, getattr(kb, "triggers", None), getattr(kb, "data", None)


LATEST = "entries-latest.last"


def _memo_path(cache: Path) -> Path:
    return cache.with_name(cache.name[: -len(".pickle")] + ".memo")


def _note_last(cache: Path, last_name: str, settled: bool) -> None:
    """Name the cache just written as this configuration's last (and the state folder's), for
    the next build to start from. A cache made of files that were still changing is likely to be
    superseded at once (a file rewritten in a loop makes a new one each time): the previous such
    cache of this configuration is removed when a newer one replaces it, so rewrites leave one
    behind, not one per write. Settled caches are left to the clean-up by age."""
    digest = cache.name[len("entries-") : -len(".pickle")]
    last = cache.with_name(last_name)
    try:
        before, _, how = last.read_text(encoding="utf-8").partition("\n")
    except (OSError, ValueError):
        before, how = "", ""
    _write_pointer(last, f"{digest}\n{'settled' if settled else 'unsettled'}")
    _write_pointer(cache.with_name(LATEST), digest)
    if how.strip() == "unsettled" and before.strip() not in ("", digest):
        for ext in ("pickle", "memo"):
            try:
                cache.with_name(f"entries-{before.strip()}.{ext}").unlink()
            except OSError:
                pass


class _BuildLock:
    """An advisory lock per configuration in the state folder, held while one process makes the
    cache: the others wait for it (at most BUILD_WAIT_S) and read what it wrote, instead of 200
    processes started together each parsing every entry. Best effort: no lock where the folder
    cannot be written or flock is not to be had; then each process builds, as before."""

    def __init__(self, path: str):
        import time

        self.fd: int | None = None
        self.wait_for_others = False
        try:
            import fcntl

            paths.make_private_folder(os.path.dirname(path))
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except (OSError, ImportError):
            return
        deadline = time.monotonic() + BUILD_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self.fd = fd
                return
            except BlockingIOError:
                self.wait_for_others = True
                if time.monotonic() >= deadline:
                    os.close(fd)  # waited long enough: build without it
                    return
                time.sleep(0.02)
            except OSError:
                os.close(fd)
                return

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing drops the flock
            self.fd = None


BUILD_WAIT_S = 10.0


STALE_DAYS = 14  # caches of other configurations are left alone until unused this long


def _write_pointer(path: Path, text: str) -> None:
    """Best effort: without it the next lookup only reads and hashes the files again."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(tmp, flags, 0o600)
        with open(fd, "w", encoding="utf-8", errors="surrogateescape") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)


def _write_cache(cache: Path, kb: KnowledgeBase) -> str | None:
    """Write the cache atomically; the reason when it cannot be written. The parse memo goes to
    a file of its own beside it: only the next cache build reads it, never a lookup."""
    import time

    memo, kb.memo = kb.memo, None
    try:
        problem = pickle_file.write(cache, kb)
    finally:
        kb.memo = memo
    if problem:
        return problem
    if memo is not None:
        pickle_file.write(_memo_path(cache), memo)  # a memo lost is only a slower next build
    # Another configuration (other KB_PATH, other checkout) may share this folder: only caches
    # nobody has used for a long time are removed.
    cutoff = time.time() - STALE_DAYS * 86400
    keep = (cache, _memo_path(cache))
    exts = ("pickle", "memo", "key", "last", "lock")
    olds = [cache.parent.glob(f"entries-*.{ext}") for ext in exts]
    for old in [f for found in olds for f in found]:
        try:
            if old not in keep and old.stat().st_mtime < cutoff:
                old.unlink()
        except OSError:
            pass
    return None
