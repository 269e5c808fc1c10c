"""What the catalog holds and how much of it kb can name: per source and version, templates held,
how many map to an entry, how many to a known family without an entry, and the largest groups
of unmapped templates (by source folder and by first words) as a guide to what to write next."""

from __future__ import annotations

import os
import re
import textwrap
from collections import Counter
from collections.abc import Iterable

from kb.model.record import field, record

from .families import Families
from .store import Catalog, SourceInfo
from .template import Template

TOP = 8
# error lines of public issue threads attributed to templates (scripts/catalog_frequency.py)
FREQUENCY_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "frequency.json")


@record(frozen=True)
class Frequency:
    """How often users meet the templates: a sample of public issue threads whose error lines
    were attributed to templates. `fits`: (thread, source, version, text), a thread once per
    template."""

    date: str
    queries: int
    results: int  # search results read
    threads: int  # of those, threads that showed an error line
    lines: int
    fitted: int
    fits: tuple[tuple[str, str, str, str], ...] = ()

    def to_json(self) -> dict[str, object]:
        return {
            "date": self.date,
            "queries": self.queries,
            "results_read": self.results,
            "threads_with_error_lines": self.threads,
            "error_lines": self.lines,
            "lines_fitting_a_template": self.fitted,
            "thread_template_pairs": len(self.fits),
        }


def load_frequency(path: str | None = None) -> Frequency | None:
    """kb/catalog/frequency.json read; None when there is none or it cannot be read."""
    import json

    try:
        with open(path or FREQUENCY_FILE, encoding="utf-8") as fh:
            doc = json.load(fh)
        return Frequency(
            date=str(doc.get("date", "")),
            queries=len(doc.get("queries") or []),
            results=int(doc.get("results_read", 0)),
            threads=int(doc["threads"]),
            lines=int(doc["lines"]),
            fitted=int(doc["lines_fitting_a_template"]),
            fits=tuple(
                (str(f["thread"]), str(f["source"]), str(f["version"]), str(f["text"]))
                for f in doc.get("fits") or []
            ),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


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
    # how often users meet them (Frequency): thread-template pairs on this source's templates,
    # and of those, on templates mapped to an entry / on hints that never claim
    met: int = 0
    met_entry: int = 0
    met_hint: int = 0

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
            "met_in_threads": {
                "to_any_template": self.met,
                "to_entry": self.met_entry,
                "hints_no_claim": self.met_hint,
            },
        }


@record(frozen=True)
class LibraryShare:
    """One project's templates over all its versions, by count and by how often users meet
    them."""

    source: str
    templates: int
    to_entry: int
    met: int
    met_entry: int
    met_hint: int

    @property
    def entry_share(self) -> float:
        return self.to_entry / self.templates if self.templates else 0.0

    @property
    def met_entry_share(self) -> float | None:
        return self.met_entry / self.met if self.met else None

    @property
    def met_own_entry_share(self) -> float | None:
        """The same, Python's own wordings and other hints left out (they never claim)."""
        own = self.met - self.met_hint
        return self.met_entry / own if own else None

    def to_json(self) -> dict[str, object]:
        share = self.met_entry_share
        own = self.met_own_entry_share
        return {
            "source": self.source,
            "templates": self.templates,
            "to_entry": self.to_entry,
            "entry_share": round(self.entry_share, 4),
            "met_in_threads": self.met,
            "met_to_entry": self.met_entry,
            "met_hints_no_claim": self.met_hint,
            "met_entry_share": None if share is None else round(share, 4),
            "met_entry_share_without_hints": None if own is None else round(own, 4),
        }


@record(frozen=True)
class Coverage:
    sources: tuple[SourceCoverage, ...]
    frequency: Frequency | None = None
    unplaced: int = 0  # frequency fits whose template the catalog no longer holds

    def libraries(self) -> tuple[LibraryShare, ...]:
        """Per project (all versions together), PyTorch first."""
        out: dict[str, list[int]] = {}
        for s in self.sources:
            row = out.setdefault(s.source, [0, 0, 0, 0, 0])
            row[0] += s.templates
            row[1] += s.to_entry
            row[2] += s.met
            row[3] += s.met_entry
            row[4] += s.met_hint
        return tuple(
            LibraryShare(name, *row)
            for name, row in sorted(out.items(), key=lambda kv: (kv[0] != "pytorch", kv[0]))
        )

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
            "libraries": [lib.to_json() for lib in self.libraries()],
            "frequency": (
                dict(self.frequency.to_json(), unplaced=self.unplaced)
                if self.frequency is not None
                else None
            ),
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
    info: SourceInfo,
    templates: list[Template],
    families: Families,
    met: Counter[int] | None = None,
) -> SourceCoverage:
    """One source and version's figures; `met`: id(template) -> threads that showed it."""
    met = met or Counter()
    n_met = n_met_entry = n_met_hint = 0
    to_entry = to_family = no_claim = 0
    by_entry: Counter[str] = Counter()
    by_conf: Counter[str] = Counter()
    unmapped: list[Template] = []
    for t in templates:
        m = families.map(t)
        k = met.get(id(t), 0)
        if k:
            n_met += k
            if m is not None and not m.claims:
                n_met_hint += k
            elif m is not None and m.entry:
                n_met_entry += k
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
        met=n_met,
        met_entry=n_met_entry,
        met_hint=n_met_hint,
    )


def _met(catalog: Catalog, freq: Frequency | None) -> tuple[Counter[int], int]:
    """id(template) -> how many sampled threads showed it, and how many fits name a template
    the catalog no longer holds (matched by source and text when the version moved)."""
    met: Counter[int] = Counter()
    if freq is None:
        return met, 0
    exact = {(t.source, t.version, t.text): t for t in catalog.templates}
    by_text = {(t.source, t.text): t for t in catalog.templates}
    unplaced = 0
    for _thread, source, version, text in freq.fits:
        t = exact.get((source, version, text)) or by_text.get((source, text))
        if t is None:
            unplaced += 1
        else:
            met[id(t)] += 1
    return met, unplaced


def compute(catalog: Catalog, families: Families, frequency: Frequency | None = None) -> Coverage:
    met, unplaced = _met(catalog, frequency)
    rows = [
        source_coverage(info, catalog.of(info.source, info.version), families, met)
        for info in sorted(
            catalog.sources, key=lambda i: (i.source != "pytorch", i.source, i.version)
        )
    ]
    return Coverage(tuple(rows), frequency, unplaced)


def _render_met(cov: Coverage) -> list[str]:
    """Per library: templates mapped to an entry by count, and weighted by how often users
    meet them (threads of the frequency sample that showed one of its templates)."""
    libs = cov.libraries()
    if not any(lib.met for lib in libs):
        return []
    f = cov.frequency
    where = (
        f"{f.queries} searches of public issue threads, {f.date}: {f.results} results, "
        f"{f.threads} with error lines, {f.lines} lines, {f.fitted} fit a template"
        if f is not None
        else "the frequency sample"
    )
    head = (
        f"{'library':<16} {'templates':>9} {'entry%':>7} {'met':>5} {'met:entry':>10} "
        f"{'hints':>6} {'w/o hints':>9}"
    )
    out = [
        "",
        *_legend(f"weighted by how often users meet them ({where}; kb/catalog/frequency.json):"),
        head,
        "-" * len(head),
    ]
    for lib in libs:
        if not lib.met:
            continue
        share = lib.met_entry_share
        own = lib.met_own_entry_share
        out.append(
            f"{lib.source:<16} {lib.templates:>9} {100 * lib.entry_share:>6.1f}% {lib.met:>5} "
            f"{f'{lib.met_entry} {100 * share:.0f}%' if share is not None else '-':>10} "
            f"{lib.met_hint:>6} {f'{100 * own:.0f}%' if own is not None else '-':>9}"
        )
    out.extend(
        _legend(
            "met: thread-template pairs in the sample; met:entry: of those, on templates mapped "
            "to an entry; hints: on templates that never claim (Python's own wordings, advice); "
            "w/o hints: met:entry with those left out"
        )
    )
    return out


LEGEND_WIDTH = 96  # the width of the table above it: prose wraps there, never one long line


def _legend(text: str) -> list[str]:
    return textwrap.wrap(text, LEGEND_WIDTH, break_on_hyphens=False)


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
    lines.extend(
        _legend(
            "entry: mapped to a kb entry (hi/med: of those, at high or medium confidence); "
            "family: a named family kb has no entry for yet; hints: advice, fallbacks and "
            "Python's own wordings, which never claim"
        )
    )
    lines.extend(_render_met(cov))
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
