"""The lookup pipeline: scan -> facts -> signatures -> codes -> (full text) -> ranked matches.

Signatures decide first. A CUDA code the log names (with no wording any signature knows) points at
the entry that owns it. The full-text index is consulted only when neither fired, and its answers
are only called matches when they cover most of the message; weaker ones are returned as
suggestions, never as an answer.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Iterable

from .diagnose import Finding, diagnose
from .extract import Scan, iter_chunks, scan, scan_text
from .facts import Facts, extract_facts
from .knowledge import KnowledgeBase, load
from .match import Hit, SignatureIndex
from .model import Match

# Full text answers only where no signature and no stated CUDA code did. A message that merely
# shares words with an entry is not that error (near-misses share the most), so full-text hits
# are suggestions: listed, ranked, marked low or medium, but never an answer (exit 1).
FULLTEXT_MEDIUM = 0.9
FULLTEXT_MIN_TERMS = 3
# Scores, so that every source ranks on one scale: a strong signature beats a bare code, which
# beats full text.
ROOT_BONUS = 5.0


@dataclass
class LookupResult:
    matches: list[Match]
    facts: Facts
    diagnosis: list[Finding]
    suggestions: list[Match] = field(default_factory=list)
    lines_scanned: int = 0
    bytes_scanned: int = 0
    binary: bool = False


_INDEX_CACHE: dict[str, SignatureIndex] = {}
_KB_CACHE: dict[tuple, KnowledgeBase] = {}
_FT_CACHE: dict[str, object] = {}


def get_kb(kb_dirs=None) -> KnowledgeBase:
    key = tuple(kb_dirs or ())
    kb = _KB_CACHE.get(key)
    if kb is None:
        kb = _KB_CACHE[key] = load(list(key))
    return kb


def signature_index(kb: KnowledgeBase) -> SignatureIndex:
    idx = _INDEX_CACHE.get(kb.content_hash)
    if idx is None:
        idx = _INDEX_CACHE[kb.content_hash] = SignatureIndex(kb.entries)
    return idx


def _fulltext(kb: KnowledgeBase):
    ft = _FT_CACHE.get(kb.content_hash)
    if ft is None:
        from .index import FullText

        ft = _FT_CACHE[kb.content_hash] = FullText(kb)
    return ft


def lookup_text(text: str | bytes, top: int = 3, kb_dirs=None, kb: KnowledgeBase | None = None,
                fulltext: bool = True) -> LookupResult:
    return lookup_scan(scan_text(text), top=top, kb=kb or get_kb(kb_dirs), fulltext=fulltext)


def lookup_stream(stream: BinaryIO, top: int = 3, kb_dirs=None, kb: KnowledgeBase | None = None) -> LookupResult:
    return lookup_scan(scan(iter_chunks(stream)), top=top, kb=kb or get_kb(kb_dirs))


def open_log(path: str | Path) -> BinaryIO:
    p = Path(path)
    fh = open(p, "rb")
    if fh.read(2) == b"\x1f\x8b":
        fh.seek(0)
        return gzip.open(fh)  # type: ignore[return-value]
    fh.seek(0)
    return fh


def _signature_matches(hits: Iterable[Hit]) -> list[Match]:
    by_entry: dict[str, list[Hit]] = {}
    for h in hits:
        by_entry.setdefault(h.entry.id, []).append(h)
    if not by_entry:
        return []
    strong = [hs for hs in by_entry.values() if max(h.signature.weight for h in hs) >= 1.0]
    root_line = min((min(h.line_number for h in hs) for hs in strong), default=None)
    out = []
    for hs in by_entry.values():
        first = min(hs, key=lambda h: h.line_number)
        best = max(hs, key=lambda h: (h.signature.weight, len(h.signature.literal), -h.line_number))
        weight = best.signature.weight
        lines = len({h.line_number for h in hs})
        score = 10.0 * weight + 0.3 * min(lines, 5) + min(len(best.signature.literal), 80) / 100.0
        is_root = root_line is not None and weight >= 1.0 and first.line_number == root_line
        if is_root:
            score += ROOT_BONUS
        # The evidence shown: the earliest line of the strongest wording that fired.
        shown = min((h for h in hs if h.signature.weight == weight), key=lambda h: h.line_number)
        out.append(Match(entry=best.entry, score=score, confidence="high" if weight >= 1.0 else "medium",
                         source="signature", signature=shown.signature.id, line=shown.line,
                         line_number=shown.line_number, captures=dict(shown.captures)))
    return out


def _code_matches(kb: KnowledgeBase, facts: Facts, have: set[str],
                  owners: dict[tuple[str, int], str]) -> list[Match]:
    out: list[Match] = []
    for code in facts.cuda_codes:
        readings = [(code.api, code.value)] if code.api != "unknown" else \
            [(i["api"], i["value"]) for i in code.interpretations]
        if facts.legacy_hints:
            readings.sort(key=lambda r: r[0] != "runtime-legacy")
        for rank, key in enumerate(readings):
            owner = owners.get(key)
            if owner is None or owner in have:
                continue
            have.add(owner)
            ambiguous = len({owners.get(r) for r in readings if owners.get(r)}) > 1
            conf = "medium" if not ambiguous or rank == 0 else "low"
            out.append(Match(entry=kb.get(owner), score=6.0 - rank, confidence=conf, source="code",
                             signature=None, line="", line_number=code.line_number,
                             captures={"code": str(code.value), "api": key[0]}))
    return out


def code_owners(kb: KnowledgeBase) -> dict[tuple[str, int], str]:
    owners: dict[tuple[str, int], str] = {}
    for e in kb.entries:
        for c in e.codes:
            owners.setdefault((c.api, c.value), e.id)
    return owners


def _query_text(s: Scan) -> str:
    # The lines most like an error message: the fullest match for what a person would paste.
    keys = ("error", "Error", "ERROR", "failed", "Exception", "exception")
    picked = [ln.text for ln in s.lines if any(k in ln.text for k in keys)]
    if not picked:
        picked = [ln.text for ln in s.lines]
    return "\n".join(picked[:3] + picked[-5:])[:4000]


def lookup_scan(s: Scan, top: int = 3, kb: KnowledgeBase | None = None, fulltext: bool = True) -> LookupResult:
    kb = kb or get_kb()
    index = signature_index(kb)
    hits: list[Hit] = []
    for ln in s.lines:
        hits.extend(index.match_line(ln.text, ln.number, ln.count))
    facts = extract_facts(s.lines)
    matches = _signature_matches(hits)
    owners = code_owners(kb)
    matches += _code_matches(kb, facts, {m.id for m in matches}, owners)
    suggestions: list[Match] = []
    # A CUDA code the log states exactly (by its text or its name) that no entry owns: the code
    # table explains it in the diagnosis, and a full-text guess would only name a neighbour.
    unowned = [c for c in facts.cuda_codes if c.api != "unknown" and (c.api, c.value) not in owners]
    if not matches and not unowned and fulltext and s.lines and not s.binary:
        hits = _fulltext(kb).search(_query_text(s), limit=max(top, 3))
        for rank, th in enumerate(hits):
            e = kb.get(th.id)
            if e is None or th.matched < FULLTEXT_MIN_TERMS:
                continue
            cov = th.coverage
            clear = rank == 0 and (len(hits) == 1 or th.score >= 1.25 * hits[1].score)
            conf = "medium" if clear and cov >= FULLTEXT_MEDIUM else "low"
            suggestions.append(Match(entry=e, score=min(th.score, 4.0) * cov, confidence=conf,
                                     source="fulltext",
                                     captures={"coverage": f"{cov:.2f}", "terms": f"{th.matched}/{th.asked}"}))
    matches.sort(key=lambda m: -m.score)
    findings = diagnose(facts, owners)
    return LookupResult(matches[:top], facts, findings, suggestions[:top], s.total_lines, s.total_bytes, s.binary)
