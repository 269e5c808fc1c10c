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

from kb.diagnosis.diagnose import Finding, diagnose
from kb.diagnosis.facts import Facts, extract_facts
from kb.knowledge.base import KnowledgeBase, gc_paused, load
from kb.knowledge.signatures import Hit, SignatureIndex, scan_hits
from kb.model.entry import Entry, HitRef, Match, Signature
from kb.model.record import field, record, replace
from kb.scan.extract import TAIL_BYTES, Scan, iter_chunks, scan, scan_text

TYPE_CHECKING = False  # typing stays unimported at run time (kb lookup's cold start)
if TYPE_CHECKING:
    from typing import IO, BinaryIO

# Full-text hits are suggestions: listed, ranked, never an answer (exit 1). They are shown only
# when they cover nearly all of the message's terms: scripts/eval_lookup.py measured them on the
# labelled real-log sets, and at coverage 0.5-0.89 they were right 2 times in 37.
FULLTEXT_MEDIUM = 0.9
FULLTEXT_MIN_TERMS = 5
FULLTEXT_MIN_COVERAGE = 0.9
# Scores, so that every source ranks on one scale: a strong signature beats a bare code, which
# beats full text; the earliest strong line (the root error) gets a bonus.
ROOT_BONUS = 5.0

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

    @property
    def best(self) -> Match | None:
        return self.matches[0] if self.matches else None


def open_log(path: str | os.PathLike[str]) -> BinaryIO:
    """A log file as bytes, gunzipped when it is gzip (whatever its name)."""
    fh = open(path, "rb")
    if fh.read(2) == b"\x1f\x8b":
        fh.seek(0)
        # GzipFile has every method of BinaryIO; typeshed just does not declare it one.
        import gzip  # only for gzip input

        return gzip.open(fh)  # type: ignore[return-value]
    fh.seek(0)
    return fh


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

    # ------------------------------------------------------------ lazily built parts
    @property
    def knowledge(self) -> KnowledgeBase:
        if self._kb is None:
            with self._lock:
                if self._kb is None:
                    self._kb = load(self.kb_dirs)
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
            s = scan_text(source)
        elif isinstance(source, os.PathLike):
            with open_log(source) as fh:
                s = scan(iter_chunks(fh))
        else:
            s = scan(iter_chunks(source))
        return self.lookup_scan(s, top=top, fulltext=fulltext)

    def hits(self, s: Scan) -> list[Hit]:
        """Every signature hit and every CUDA code sighting in a scan, in a stable order."""
        return scan_hits(self.signatures, s)

    def lookup_scan(self, s: Scan, *, top: int = 3, fulltext: bool = True) -> LookupResult:
        kb = self.knowledge
        hits = self.hits(s)
        facts = extract_facts(s.lines)
        owners = self.owners
        hits += _code_hits(kb, facts, owners)
        matches = _rank(hits, self.signatures.order)
        have = {m.id for m in matches}
        matches += _number_matches(kb, facts, have, owners)
        suggestions: list[Match] = []
        # A CUDA code the log states exactly that no entry owns: the code table explains it in
        # the diagnosis, and a full-text guess would only name a neighbour.
        unowned = [
            c for c in facts.cuda_codes if c.api != "unknown" and (c.api, c.value) not in owners
        ]
        if not matches and not unowned and fulltext and s.lines and not s.binary:
            suggestions = self._suggest(s, top)
        matches.sort(key=lambda m: -m.score)
        # A finding about an entry speaks only when that entry matched, or (the OOM figures) when
        # some entry matched the line they were read from: "out of memory" in a line no
        # signature claims (a retyped or garbled line, another framework) is no proof of a CUDA
        # OOM. Findings tied to no entry (a CUDA code no entry owns) always speak.
        named = {m.id for m in matches}
        oom_line = facts.oom.line_number if facts.oom else None
        claimed = oom_line is not None and any(
            h.line_number == oom_line for m in matches for h in m.hits
        )
        findings = [
            f
            for f in diagnose(facts, owners)
            if not f.entries or named.intersection(f.entries) or (f.topic == "oom" and claimed)
        ]
        warnings = self.warnings
        if s.dropped:
            warnings.append(
                f"{s.dropped} candidate line(s) between the first and last part of the "
                f"log were not examined"
            )
        if s.skimmed:
            warnings.append(
                f"{s.skimmed} line(s) in the middle of this long log were searched only for "
                f"error lines (Error:, Exception:, FAILED, Killed, NCCL WARN...); its start and its last "
                f"{TAIL_BYTES >> 20} MiB were read in full"
            )
        return LookupResult(
            matches[:top],
            facts,
            findings,
            suggestions[:top],
            s.total_lines,
            s.total_bytes,
            s.binary,
            s.dropped,
            warnings,
            s.skimmed,
        )

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


# ---------------------------------------------------------------- ranking
def _rank(hits: list[Hit], order: dict[tuple[str, str], int]) -> list[Match]:
    """Hits -> one Match per entry. Deterministic: ties go to the earlier line, then to the
    signature that comes first in its entry (and the entry that comes first in the KB)."""
    if not hits:
        return []
    hits = sorted(
        hits, key=lambda h: (h.line_number, order.get((h.entry.id, h.signature.id), 1 << 30))
    )
    by_entry: dict[str, list[Hit]] = {}
    for h in hits:
        by_entry.setdefault(h.entry.id, []).append(h)
    strong = [hs for hs in by_entry.values() if max(map(_weight, hs)) >= 1.0]
    root_line = min(
        (next(h.line_number for h in hs if _weight(h) >= 1.0) for hs in strong), default=None
    )
    out = []
    for hs in by_entry.values():
        weight = max(map(_weight, hs))
        top = [h for h in hs if _weight(h) == weight]
        best_literal = max(len(h.signature.literal) for h in top)
        lines = len({h.line_number for h in hs})
        score = 10.0 * weight + 0.3 * min(lines, 5) + min(best_literal, 80) / 100.0
        if any(not h.signature.id.startswith("cuda-code") for h in top):
            score += 0.5  # an entry's own wording says more than the bare CUDA code it shares
        # The evidence shown: the earliest line of the strongest wording that fired.
        shown = top[0]
        if root_line is not None and weight >= 1.0 and shown.line_number == root_line:
            score += ROOT_BONUS
        conf = "high" if weight >= 1.0 else "medium"
        source = "code" if shown.signature.id.startswith("cuda-code") else "signature"
        out.append(
            Match(
                entry=shown.entry,
                score=score,
                confidence=conf,
                source=source,
                signature=shown.signature.id,
                line=shown.line,
                line_number=shown.line_number,
                captures=_captures(shown, hs),
                hits=tuple(HitRef(h.signature.id, h.line_number, h.line) for h in hs),
            )
        )
    return _explained(out)


def _explained(out: list[Match]) -> list[Match]:
    """A match whose wording is explained by another entry that matched in the same log (a
    'not implemented for Half' on the CPU after 'CUDA initialization: the driver is too old')
    follows that entry: the explanation is the answer."""
    scores = {m.id: m.score for m in out}
    done = []
    for m in out:
        sig = m.entry.signature(m.signature or "")  # None for a bare CUDA code's hit
        causes = [scores[i] for i in (sig.explained_by if sig else ()) if i in scores]
        if causes:
            m = replace(m, score=min(m.score, max(causes) - 0.01))
        done.append(m)
    return done


def _captures(shown: Hit, hs: list[Hit]) -> dict[str, str]:
    """The shown line's captures, then what the entry's other lines add (the reasons SDPA or
    xformers print on warning lines above the error, a rank, a return code)."""
    caps = dict(shown.captures)
    for h in hs:
        for k, v in h.captures.items():
            caps.setdefault(k, v)
    return caps


PARTIAL = 0.75  # a cut-off or retyped line: an answer, but below any whole wording


def _weight(h: Hit) -> float:
    return h.signature.weight * (PARTIAL if h.partial else 1.0)


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
        out.append(Hit(entry, sig, code.line_number, code.line, caps, partial=code.partial))
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
                    score=6.0 - rank,
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
