"""What the catalog holds and how much of it kb can name: per source and version, templates held,
how many map to an entry, how many to a known family without an entry, and the largest groups
of unmapped templates (by source folder and by first words) as a guide to what to write next."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

from kb.model.record import field, record

from .families import Families
from .store import Catalog, SourceInfo
from .template import Template

TOP = 8


@record(frozen=True)
class Group:
    key: str
    count: int
    example: str

    def to_json(self) -> dict[str, object]:
        return {"key": self.key, "count": self.count, "example": self.example}


@record(frozen=True)
class SourceCoverage:
    source: str
    version: str
    origin: str
    commit: str
    note: str
    templates: int
    to_entry: int  # mapped to a kb entry
    to_family: int  # mapped to a named family that has no entry yet
    no_claim: int  # hints and fallbacks (mapped, never claim)
    by_entry: dict[str, int] = field(default_factory=dict)
    entry_by_confidence: dict[str, int] = field(default_factory=dict)
    unmapped_by_folder: tuple[Group, ...] = ()
    unmapped_by_words: tuple[Group, ...] = ()

    @property
    def unmapped(self) -> int:
        return self.templates - self.to_entry - self.to_family - self.no_claim

    @property
    def known_share(self) -> float:
        """Share of templates mapped to an entry or a named family (hints included)."""
        return (self.templates - self.unmapped) / self.templates if self.templates else 0.0

    @property
    def entry_share(self) -> float:
        return self.to_entry / self.templates if self.templates else 0.0

    def to_json(self) -> dict[str, object]:
        return {
            "source": self.source,
            "version": self.version,
            "origin": self.origin,
            "commit": self.commit,
            "note": self.note,
            "templates": self.templates,
            "to_entry": self.to_entry,
            "to_family_without_entry": self.to_family,
            "hints_no_claim": self.no_claim,
            "unmapped": self.unmapped,
            "entry_share": round(self.entry_share, 4),
            "known_share": round(self.known_share, 4),
            "entry_by_confidence": dict(self.entry_by_confidence),
            "by_entry": dict(sorted(self.by_entry.items(), key=lambda kv: (-kv[1], kv[0]))),
            "unmapped_by_folder": [g.to_json() for g in self.unmapped_by_folder],
            "unmapped_by_words": [g.to_json() for g in self.unmapped_by_words],
        }


@record(frozen=True)
class Coverage:
    sources: tuple[SourceCoverage, ...]

    def total(self, source: str | None = None) -> tuple[int, int, int, int]:
        """(templates, to an entry, to a family without entry, hints) over the sources, or one
        project's versions."""
        rows = [s for s in self.sources if source is None or s.source == source]
        return (
            sum(s.templates for s in rows),
            sum(s.to_entry for s in rows),
            sum(s.to_family for s in rows),
            sum(s.no_claim for s in rows),
        )

    def to_json(self) -> dict[str, object]:
        t, e, f, h = self.total()
        return {
            "sources": [s.to_json() for s in self.sources],
            "total": {
                "templates": t,
                "to_entry": e,
                "to_family_without_entry": f,
                "hints_no_claim": h,
                "unmapped": t - e - f - h,
            },
        }


def _folder(path: str) -> str:
    parts = path.split("/")[:-1]
    return "/".join(parts[:4]) or "(top)"


_WORDS = re.compile(r"[A-Za-z][A-Za-z_']+")


def _first_words(text: str) -> str:
    lit = re.sub(r"\{[^{}]*\}", " ", text)
    words = _WORDS.findall(lit)
    return " ".join(w.lower() for w in words[:3]) if words else "(no words)"


def _groups(templates: Iterable[Template], key: str) -> tuple[Group, ...]:
    counter: Counter[str] = Counter()
    example: dict[str, str] = {}
    for t in templates:
        k = _folder(t.file) if key == "folder" else _first_words(t.text)
        counter[k] += 1
        example.setdefault(k, t.text[:100])
    top = sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP]
    return tuple(Group(k, n, example[k]) for k, n in top)


def source_coverage(
    info: SourceInfo, templates: list[Template], families: Families
) -> SourceCoverage:
    to_entry = to_family = no_claim = 0
    by_entry: Counter[str] = Counter()
    by_conf: Counter[str] = Counter()
    unmapped: list[Template] = []
    for t in templates:
        m = families.map(t)
        if m is None:
            unmapped.append(t)
        elif not m.claims:
            no_claim += 1
        elif m.entry:
            to_entry += 1
            by_entry[m.entry] += 1
            by_conf[m.confidence] += 1
        else:
            to_family += 1
    return SourceCoverage(
        source=info.source,
        version=info.version,
        origin=info.origin,
        commit=info.commit,
        note=info.note,
        templates=len(templates),
        to_entry=to_entry,
        to_family=to_family,
        no_claim=no_claim,
        by_entry=dict(by_entry),
        entry_by_confidence={c: by_conf[c] for c in ("high", "medium", "low")},
        unmapped_by_folder=_groups(unmapped, "folder"),
        unmapped_by_words=_groups(unmapped, "words"),
    )


def compute(catalog: Catalog, families: Families) -> Coverage:
    rows = [
        source_coverage(info, catalog.of(info.source, info.version), families)
        for info in sorted(
            catalog.sources, key=lambda i: (i.source != "pytorch", i.source, i.version)
        )
    ]
    return Coverage(tuple(rows))


def render_text(cov: Coverage, detail: bool = True) -> str:
    """A terminal table: one row per source and version, then the largest unmapped groups."""
    head = f"{'source':<16} {'version':<14} {'templates':>9} {'entry':>7} {'hi/med':>6} {'family':>7} {'hints':>6} {'unmapped':>8} {'entry%':>7} {'known%':>7}"
    lines = [head, "-" * len(head)]
    for s in cov.sources:
        lines.append(
            f"{s.source:<16} {s.version[:14]:<14} {s.templates:>9} {s.to_entry:>7} "
            f"{s.entry_by_confidence.get('high', 0) + s.entry_by_confidence.get('medium', 0):>6} {s.to_family:>7} "
            f"{s.no_claim:>6} {s.unmapped:>8} {100 * s.entry_share:>6.1f}% {100 * s.known_share:>6.1f}%"
        )
    t, e, f, h = cov.total()
    lines.append("-" * len(head))
    hm = sum(
        s.entry_by_confidence.get("high", 0) + s.entry_by_confidence.get("medium", 0)
        for s in cov.sources
    )
    lines.append(
        f"{'all':<16} {'':<14} {t:>9} {e:>7} {hm:>6} {f:>7} {h:>6} {t - e - f - h:>8} "
        f"{100 * e / max(t, 1):>6.1f}% {100 * (e + f + h) / max(t, 1):>6.1f}%"
    )
    lines.append("")
    lines.append(
        "entry: mapped to a kb entry (hi/med: of those, at high or medium confidence); family: a named family kb has no entry for yet; "
        "hints: advice, fallbacks and Python's own wordings, which never claim"
    )
    if detail:
        for s in cov.sources:
            if not s.unmapped:
                continue
            lines.append("")
            lines.append(f"{s.source} {s.version}: largest unmapped groups")
            for g in s.unmapped_by_folder[:5]:
                lines.append(f"  {g.count:>6}  {g.key}")
            for g in s.unmapped_by_words[:5]:
                lines.append(f'  {g.count:>6}  "{g.key} ..."  e.g. {g.example[:70]}')
    return "\n".join(lines)
