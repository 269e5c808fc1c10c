"""The engine: one object owns the knowledge base, its compiled signatures, the code owners and
the full-text index, and turns any input into one typed LookupResult.

The pipeline: scan -> facts -> signature and code hits -> ranked matches -> (full text).
Signatures decide first. A CUDA error the log names in any wrapper (Triton, HIP, CuPy, NCCL,
extensions...) is a hit on the entry that owns its code. A bare number with no wording points at
its owners with lower confidence. Full text is consulted only when nothing else fired, and its
answers are suggestions, never an answer.

Every surface (CLI, `kb verify`, the TUI, the Python API) calls `Engine.lookup`; the parts are
built lazily under the engine's own lock, so one engine can serve many threads.
"""

from __future__ import annotations

import os
from _thread import RLock, allocate_lock  # threading's own locks, without importing threading
from collections.abc import Iterable

from kb.diagnosis.catalog_match import read as read_catalog
from kb.diagnosis.causes import seen as seen_causes
from kb.diagnosis.diagnose import (
    Finding,
    Reading,
    diagnose_codes,
    diagnose_location,
    read_captures,
)
from kb.diagnosis.facts import Facts, extract_facts
from kb.diagnosis.rank import Key, ranked
from kb.diagnosis.root import find_root
from kb.knowledge.base import KnowledgeBase, load
from kb.knowledge.data import KnowledgeData
from kb.knowledge.data import bundled as bundled_data
from kb.knowledge.data import register as register_data
from kb.knowledge.pickle_file import gc_paused
from kb.knowledge.signatures import Hit, SignatureIndex, scan_hits
from kb.model.entry import Entry, Match, Signature
from kb.model.record import field, record, replace
from kb.model.root import RootFailure
from kb.scan.extract import TAIL_BYTES, Scan, scan_text
from kb.scan.reader import open_log, read_scan
from kb.scan.triggers import Triggers
from kb.scan.triggers import register as register_triggers

TYPE_CHECKING = False  # typing stays unimported at run time (kb lookup's cold start)
if TYPE_CHECKING:
    from typing import IO, BinaryIO

# Full-text hits are suggestions: listed, ranked, never an answer (exit 1). They are shown only
# when they cover nearly all of the message's terms: scripts/eval_lookup.py measured them on the
# labelled real-log sets, and at coverage 0.5-0.89 they were right 2 times in 37.
FULLTEXT_MEDIUM = 0.9
FULLTEXT_MIN_TERMS = 5
FULLTEXT_MIN_COVERAGE = 0.9

if TYPE_CHECKING:
    Source = str | bytes | os.PathLike[str] | BinaryIO | IO[bytes]


@record
class LookupResult:
    matches: list[Match]
    facts: Facts
    diagnosis: list[Finding]
    suggestions: list[Match] = field(default_factory=list)
    lines_scanned: int = 0
    bytes_scanned: int = 0
    binary: bool = False
    dropped: int = 0  # candidate lines the bounded window did not keep (said, never silent)
    warnings: list[str] = field(default_factory=list)
    skimmed: int = 0  # lines of a long log's middle searched only for error lines (said too)
    # The log's first failure, whether or not an entry knows it (kb.diagnosis.root); None when
    # the input shows no failure.
    root: RootFailure | None = None
    # Matches that stand only on what followed from an initiating root failure no entry knows
    # (a peer's timeout, the shell's `Killed`): never the answer, said beside the root.
    followers: list[Match] = field(default_factory=list)

    @property
    def best(self) -> Match | None:
        return self.matches[0] if self.matches else None


class Engine:
    """Lookups over one knowledge base: the bundled entries plus the given folders (and KB_PATH).

    Thread-safe: the knowledge base, the signature index, the code owners and the full-text
    index are each built once, on first use, under the engine's lock.
    """

    def __init__(
        self, kb_dirs: Iterable[str] | None = None, *, knowledge: KnowledgeBase | None = None
    ):
        self.kb_dirs = list(kb_dirs or [])
        self._kb = knowledge
        self._lock = RLock()
        self._signatures: SignatureIndex | None = None
        self._owners: dict[tuple[str, int], str] | None = None
        self._fulltext: object | None = None
        self._fulltext_error: str | None = None
        self._triggers: Triggers | None = None
        self._data: KnowledgeData | None = None

    # ------------------------------------------------------------ lazily built parts
    @property
    def knowledge(self) -> KnowledgeBase:
        if self._kb is None:
            with self._lock:
                if self._kb is None:
                    kb = load(self.kb_dirs)
                    if kb.data is not None:
                        # what readers given no data use (the launcher parsers of a job):
                        # never kb/data's YAML parsed and schema-checked again
                        register_data(kb.data)
                    self._kb = kb
        return self._kb

    @property
    def signatures(self) -> SignatureIndex:
        if self._signatures is None:
            with self._lock:
                if self._signatures is None:
                    kb = self.knowledge
                    with gc_paused():
                        self._signatures = SignatureIndex(kb.entries, kb.signature_tables)
        return self._signatures

    @property
    def triggers(self) -> Triggers:
        """What the scan of a log looks for: the knowledge base's literals and the generic core
        (kb.scan.triggers), from the cache when it has them."""
        if self._triggers is None:
            with self._lock:
                if self._triggers is None:
                    kb = self.knowledge
                    t = kb.triggers
                    if t is None:
                        from kb.knowledge.triggers import build

                        t = build(kb.entries, self.data.literals())
                    register_triggers(t)
                    self._triggers = t
        return self._triggers

    @property
    def data(self) -> KnowledgeData:
        """kb/data's wrapper forms and job-log wordings: from the cache with the entries, else
        read now (kb.knowledge.data)."""
        if self._data is None:
            with self._lock:
                if self._data is None:
                    kb = self.knowledge  # registers its data (see `knowledge`)
                    self._data = kb.data if kb.data is not None else bundled_data()
        return self._data

    @property
    def owners(self) -> dict[tuple[str, int], str]:
        """(api, value) -> id of the entry that owns that CUDA code."""
        if self._owners is None:
            with self._lock:
                if self._owners is None:
                    owners: dict[tuple[str, int], str] = {}
                    for e in self.knowledge.entries:
                        for c in e.codes:
                            owners.setdefault((c.api, c.value), e.id)
                    self._owners = owners
        return self._owners

    def fulltext(self):
        """The full-text index, or None when it cannot be had (the reason is in warnings)."""
        if self._fulltext is None and self._fulltext_error is None:
            with self._lock:
                if self._fulltext is None and self._fulltext_error is None:
                    from kb.knowledge.index import FullText

                    try:
                        self._fulltext = FullText(self.knowledge)
                    except Exception as e:  # whoosh raises its own types; suggestions are optional
                        self._fulltext_error = f"full-text index unavailable: {e}"
        return self._fulltext

    @property
    def warnings(self) -> list[str]:
        out = list(self.knowledge.warnings)
        if self._fulltext_error:
            out.append(self._fulltext_error)
        if self._signatures is not None:
            out += self._signatures.warnings
        return out

    def get(self, entry_id: str) -> Entry | None:
        return self.knowledge.get(entry_id)

    # ------------------------------------------------------------ lookups
    def lookup(self, source: Source, *, top: int = 3, fulltext: bool = True) -> LookupResult:
        """A message (str or bytes), a path (a log file, .gz too) or a binary stream."""
        if isinstance(source, (str, bytes)):
            s = scan_text(source, triggers=self.triggers)
        elif isinstance(source, os.PathLike):
            with open_log(source) as fh:
                s = read_scan(fh, os.fspath(source), triggers=self.triggers)
        else:
            s = read_scan(source, triggers=self.triggers)
        return self.lookup_scan(s, top=top, fulltext=fulltext)

    def ranked(self, text: str) -> list[tuple[Match, Key]]:
        """A message's matches with the keys kb.diagnosis.rank ordered them by (lint's KB020
        reads them)."""
        s = scan_text(text, triggers=self.triggers)
        kb = self.knowledge
        facts = extract_facts(s.lines, self.data.wrappers)
        hits = self.hits(s) + _code_hits(kb, facts, self.owners)
        return ranked(hits, self.signatures.order)

    def hits(self, s: Scan) -> list[Hit]:
        """Every signature hit and every CUDA code sighting in a scan, in a stable order."""
        return scan_hits(self.signatures, s)

    def lookup_scan(
        self, s: Scan, *, top: int = 3, fulltext: bool = True, root: bool = True
    ) -> LookupResult:
        """root=False skips reading the root failure (a caller that only wants the matches)."""
        kb = self.knowledge
        hits = self.hits(s)
        facts = extract_facts(s.lines, self.data.wrappers)
        owners = self.owners
        hits += _code_hits(kb, facts, owners)
        root_failure = (
            find_root(s, consequence=_consequences(hits), rules=getattr(self.data, "events", None))
            if root
            else None
        )
        # The message catalog reads what no specific entry claimed (kb.diagnosis.catalog_match).
        catalog = read_catalog(kb, self.signatures, s, hits, root_failure)
        hits = catalog.hits
        have = {h.entry.id for h in hits}
        numbers = _number_matches(kb, facts, have, owners)
        # The root's answer leads (docs/ordering.md, key 0): with an initiating failure in the
        # log, a match that stands only on what followed from it comes after the rest, and is no
        # answer at all when nothing else matched (a `Killed` after an exception no entry knows
        # is not the OOM killer: the root line is all kb can say).
        after = _followers(catalog.root)
        keyed = ranked(hits, self.signatures.order, numbers, after)
        # Key 0 is 1 for a match that only followed from the root: after the rest, and no
        # answer at all when nothing else matched.
        matches = [m for m, key in keyed]
        followers: list[Match] = []
        if keyed and all(key[0] for _, key in keyed):
            matches, followers = [], matches
        suggestions: list[Match] = []
        # A CUDA code the log states exactly that no entry owns: the code table explains it in
        # the diagnosis, and a full-text guess would only name a neighbour.
        unowned = [
            c for c in facts.cuda_codes if c.api != "unknown" and (c.api, c.value) not in owners
        ]
        if not matches and not unowned and fulltext and s.lines and not s.binary:
            suggestions = self._suggest(s, top)
        # A finding about an entry speaks only when that entry matched; findings tied to no entry
        # (a CUDA code no entry owns) always speak. The diagnoses that read captures (the memory
        # figures, a kernel's assertion) read those of the matched entries' signatures only:
        # "out of memory" in a line no signature claims is no proof of a CUDA OOM.
        named = {m.id for m in matches}
        read = read_captures(self._readings(hits, named, s), facts)
        codes = [
            f for f in diagnose_codes(facts, owners) if not f.entries or named & set(f.entries)
        ]
        findings = [
            *(f for d, f in read.items() if d == "gpu-memory"),
            *codes,
            *(f for d, f in read.items() if d != "gpu-memory"),
            *diagnose_location(facts),
            *catalog.findings,
        ]
        warnings = self.warnings + s.warnings
        if s.dropped or s.dropped_kinds.get("failure"):
            warnings.append(
                f"{s.dropped} candidate line(s) between the first and last part of the "
                f"log were not examined ({_dropped_kinds(s.dropped_kinds)})"
            )
        if s.skimmed:
            warnings.append(
                f"{s.skimmed} line(s) in the middle of this long log were searched only for "
                f"error lines (Error:, Exception:, FAILED, Killed, NCCL WARN...); its start and its last "
                f"{TAIL_BYTES >> 20} MiB were read in full"
            )
        # The causes the log itself points to lead each shown match's list (kb.diagnosis.causes).
        texts = [ln.text for ln in s.lines] if matches else []
        shown = [
            replace(m, causes_seen=seen_causes(m.entry, texts, {m.line, *(h.line for h in m.hits)}))
            for m in matches[:top]
        ]
        return LookupResult(
            shown,
            facts,
            findings,
            suggestions[:top],
            s.total_lines,
            s.total_bytes,
            s.binary,
            s.dropped,
            warnings,
            s.skimmed,
            catalog.root,
            followers[:top],
        )

    def _readings(self, hits: list[Hit], named: set[str], s: Scan) -> list[Reading]:
        """What the signatures that name a diagnosis captured, per matched entry and line: every
        match of each such signature on the line, and on the lines after it where a wrapped OOM
        message put its figures (Line.after)."""
        after = {ln.number: ln.after for ln in s.lines if ln.after}
        groups: dict[tuple[str, str, int], list[Hit]] = {}
        for h in hits:
            if h.signature.diagnosis and h.source == "signature" and h.entry.id in named:
                groups.setdefault((h.signature.diagnosis, h.entry.id, h.line_number), []).append(h)
        out = []
        for (diagnosis, entry, line_number), hs in groups.items():
            # In the entry's own order, so that a finding names them the same way every time.
            sigs = [s for s in hs[0].entry.signatures if any(h.signature is s for h in hs)]
            by_sig: list[tuple[Signature, list[dict[str, str]]]]
            if hs[0].entry.local:
                # A user's pattern runs only under its time limit (SignatureIndex): its hits'
                # own captures, not a second search.
                by_sig = [(s, [h.captures for h in hs if h.signature is s]) for s in sigs]
            else:
                text = hs[0].line + (" " + after[line_number] if line_number in after else "")
                by_sig = [
                    (
                        s,
                        [
                            {k: v for k, v in m.groupdict().items() if v is not None}
                            for m in self.signatures.regex(s).finditer(text)
                        ],
                    )
                    for s in sigs
                ]
            caps = tuple(c for _, cs in by_sig for c in cs)
            # The finding names the signatures that read something, else all that matched.
            read = tuple(s for s, cs in by_sig if any(cs))
            out.append(Reading(diagnosis, entry, line_number, caps, read or tuple(sigs)))
        return out

    def _suggest(self, s: Scan, top: int) -> list[Match]:
        ft = self.fulltext()
        if ft is None:
            return []
        kb = self.knowledge
        found = ft.search(_query_text(s), limit=max(top, 3))
        out = []
        for rank, th in enumerate(found):
            e = kb.get(th.id)
            cov = th.coverage
            if e is None or th.matched < FULLTEXT_MIN_TERMS or cov < FULLTEXT_MIN_COVERAGE:
                continue
            clear = rank == 0 and (len(found) == 1 or th.score >= 1.25 * found[1].score)
            conf = "medium" if clear and cov >= FULLTEXT_MEDIUM else "low"
            out.append(
                Match(
                    entry=e,
                    score=min(th.score, 4.0) * cov,
                    confidence=conf,
                    source="fulltext",
                    captures={"coverage": f"{cov:.2f}", "terms": f"{th.matched}/{th.asked}"},
                )
            )
        return out


def _followers(root: RootFailure | None) -> frozenset[int] | None:
    """The line numbers of what followed from an initiating root failure, or None when the log
    shows none (kb.diagnosis.rank, key 0)."""
    if root is None or root.role != "initiating":
        return None
    return frozenset(n for _, n in root.followers)


def _consequences(hits: list[Hit]):
    """Lines whose wording is a consequence of another failure (a signature's or its entry's
    `consequence`: a timeout waiting for a peer, the launcher's SIGTERM...), for the root
    failure to pass over; None when there are none."""
    found = {h.line: c for h in hits if (c := h.signature.consequence or h.entry.consequence)}
    return found.get if found else None


# ---------------------------------------------------------------- code hits
def _code_hits(kb: KnowledgeBase, facts: Facts, owners: dict[tuple[str, int], str]) -> list[Hit]:
    """A CUDA code stated exactly (its name, its text in a known wrapper, a driver number with
    its text) is a strong hit on the entry that owns it; the wrapper is a captured fact."""
    out: list[Hit] = []
    for code in facts.cuda_codes:
        if code.api == "unknown" or not code.line:
            continue
        owner = owners.get((code.api, code.value))
        entry = kb.get(owner) if owner else None
        if entry is None:
            continue
        caps = {"code": str(code.value), "api": code.api}
        if code.name:
            caps["name"] = code.name
        if code.wrapper:
            caps["wrapper"] = code.wrapper
        sig = Signature(id=f"cuda-code-{code.wrapper or 'name'}", pattern="", literal=code.text)
        out.append(
            Hit(entry, sig, code.line_number, code.line, caps, partial=code.partial, source="code")
        )
    return out


def _number_matches(
    kb: KnowledgeBase, facts: Facts, have: set[str], owners: dict[tuple[str, int], str]
) -> list[Match]:
    """A bare number: every era's reading, the likelier first (legacy wording in the log puts
    the pre-CUDA-10.1 numbering first)."""
    out: list[Match] = []
    for code in facts.cuda_codes:
        if code.api != "unknown":
            continue
        readings = [(i["api"], i["value"]) for i in code.interpretations]
        if facts.legacy_hints:
            readings.sort(key=lambda r: r[0] != "runtime-legacy")
        ambiguous = len({owners.get(r) for r in readings if owners.get(r)}) > 1
        for rank, key in enumerate(readings):
            owner = owners.get(key)
            entry = kb.get(owner) if owner else None
            if entry is None or owner in have:
                continue
            have.add(entry.id)
            conf = "medium" if not ambiguous or rank == 0 else "low"
            out.append(
                Match(
                    entry=entry,
                    score=0.0,  # kb.diagnosis.rank gives it its place and score
                    confidence=conf,
                    source="code",
                    signature=None,
                    line="",
                    line_number=code.line_number,
                    captures={"code": str(code.value), "api": key[0]},
                )
            )
    return out


def _query_text(s: Scan) -> str:
    # The lines most like an error message: the fullest match for what a person would paste.
    keys = ("error", "Error", "ERROR", "failed", "Exception", "exception")
    picked = [ln.text for ln in s.lines if any(k in ln.text for k in keys)]
    if not picked:
        picked = [ln.text for ln in s.lines]
    return "\n".join(picked[:3] + picked[-5:])[:4000]


# ---------------------------------------------------------------- shared engines
_ENGINES: dict[tuple, Engine] = {}
_ENGINES_LOCK = allocate_lock()


def _dropped_kinds(kinds: dict[str, int]) -> str:
    """What the window's cap dropped, in words (kb.scan.extract keeps the failure lines past
    its cap, the earliest KEEP_FAILURES of them, and counts the rest)."""
    from kb.scan.extract import KEEP_FAILURES

    parts = []
    if kinds.get("failure"):
        parts.append(f"{kinds['failure']} failure line(s) past the first {KEEP_FAILURES} kept")
    else:
        parts.append("none of them reads as a failure")
    if kinds.get("other"):
        parts.append(
            f"{kinds['other']} warning(s), other ranks' waits and other lines holding a "
            "trigger word"
        )
    return "; ".join(parts)


def default_engine(kb_dirs: Iterable[str] | None = None) -> Engine:
    """One engine per configuration (folders and KB_PATH) for the life of the process."""
    key = (tuple(kb_dirs or ()), os.environ.get("KB_PATH", ""))
    with _ENGINES_LOCK:
        eng = _ENGINES.get(key)
        if eng is None:
            eng = _ENGINES[key] = Engine(key[0])
    return eng


def engine_for(kb: KnowledgeBase) -> Engine:
    """An engine over an already loaded knowledge base (tests, lint, eval scripts)."""
    key = ("kb", id(kb), kb.content_hash)
    with _ENGINES_LOCK:
        eng = _ENGINES.get(key)
        if eng is None or eng.knowledge is not kb:
            eng = _ENGINES[key] = Engine(knowledge=kb)
    return eng


def lookup_text(
    text: str | bytes,
    top: int = 3,
    kb_dirs: Iterable[str] | None = None,
    kb: KnowledgeBase | None = None,
    fulltext: bool = True,
) -> LookupResult:
    eng = engine_for(kb) if kb is not None else default_engine(kb_dirs)
    return eng.lookup(text, top=top, fulltext=fulltext)


def lookup_stream(
    stream: BinaryIO,
    top: int = 3,
    kb_dirs: Iterable[str] | None = None,
    kb: KnowledgeBase | None = None,
) -> LookupResult:
    eng = engine_for(kb) if kb is not None else default_engine(kb_dirs)
    return eng.lookup(stream, top=top)
