"""families.yaml read and applied: which kb entry a template belongs to, and how sure that is."""

from __future__ import annotations

import os
import re

from kb.model.record import record

from .template import Template

FAMILIES_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "families.yaml")
CONFIDENCES = ("high", "medium", "low")
# the short anchored fields first: most rules are ruled out before their text regex runs
_FIELDS = ("source", "kind", "exc", "file", "func", "op", "text")


@record(frozen=True)
class Mapping:
    """What a template answers: its entry (None for a family kb has no entry for), the family
    or single mapping that said so, at what confidence, and whether it may claim a failure."""

    entry: str | None
    family: str
    confidence: str
    claims: bool = True


@record(frozen=True)
class _Rule:
    family: str
    entry: str | None
    confidence: str
    claims: bool
    codes: bool
    conds: tuple[tuple[str, re.Pattern[str]], ...]

    def fits(self, t: Template) -> bool:
        return all(rx.search(str(getattr(t, name))) for name, rx in self.conds)


def hole_blind(text: str) -> str:
    """The text with every hole written `{}`: a single mapping names a template by its words,
    whatever its holes were called in the source."""
    return re.sub(r"(?<!\{)\{[^{}]*\}(?!\})", "{}", text)


class FamiliesError(Exception):
    """families.yaml is malformed: the message names the rule and the problem."""


class Families:
    def __init__(
        self,
        rules: list[_Rule],
        singles: dict[tuple[str, str], Mapping],
        entry_codes: dict[tuple[str, int], str],
    ) -> None:
        self.rules = rules
        self.singles = singles
        self.entry_codes = entry_codes

    def map(self, t: Template) -> Mapping | None:
        single = self.singles.get((t.source, hole_blind(t.text)))
        if single is not None:
            return single
        for rule in self.rules:
            if rule.codes:
                if t.code is None:
                    continue
                entry = self.entry_codes.get((t.api, t.code))
                if entry is None:
                    continue
                if rule.fits(t):
                    return Mapping(entry, rule.family, rule.confidence, rule.claims)
                continue
            if rule.fits(t):
                return Mapping(rule.entry, rule.family, rule.confidence, rule.claims)
        return None

    def entries(self) -> set[str]:
        out = {r.entry for r in self.rules if r.entry}
        out.update(m.entry for m in self.singles.values() if m.entry)
        out.update(self.entry_codes.values())
        return out


def _compile(rule: dict[str, object], where: str) -> tuple[tuple[str, re.Pattern[str]], ...]:
    conds = []
    for name in _FIELDS:
        if name in rule and rule[name] is not None:
            try:
                conds.append((name, re.compile(str(rule[name]), re.IGNORECASE)))
            except re.error as exc:
                raise FamiliesError(f"{where}: {name}: bad regex: {exc}") from None
    return tuple(conds)


def entry_codes(entries_dir: str | None = None) -> dict[tuple[str, int], str]:
    """(api, code) -> the entry whose `codes:` names it, read from the entry files."""
    import yaml

    from kb.paths import bundled_entries_folder

    folder = entries_dir or bundled_entries_folder()
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    out: dict[tuple[str, int], str] = {}
    for root, _dirs, files in os.walk(folder):
        for name in sorted(files):
            if not name.endswith(".yaml"):
                continue
            try:
                with open(os.path.join(root, name), encoding="utf-8") as fh:
                    data = yaml.load(fh, Loader=loader) or {}
            except (OSError, yaml.YAMLError):
                continue  # kb's own lint reports a broken entry; its codes are not counted here
            if not isinstance(data, dict) or "id" not in data:
                continue
            for code in data.get("codes") or []:
                if isinstance(code, dict) and "api" in code and "value" in code:
                    out.setdefault((str(code["api"]), int(code["value"])), str(data["id"]))
    return out


def load(
    path: str | None = None,
    entries_dir: str | None = None,
    codes: dict[tuple[str, int], str] | None = None,
) -> Families:
    """families.yaml read. `codes`: (api, value) -> entry, when the caller has the entries
    loaded already; else they are read from the entry files in `entries_dir` (or kb's own)."""
    import yaml

    with open(path or FAMILIES_FILE, encoding="utf-8") as fh:
        data = yaml.safe_load(fh) or {}
    rules: list[_Rule] = []
    for n, r in enumerate(data.get("families") or []):
        where = f"families[{n}] ({r.get('id', '?')})"
        conf = str(r.get("confidence", "medium"))
        if conf not in CONFIDENCES:
            raise FamiliesError(f"{where}: confidence must be one of {CONFIDENCES}, not {conf!r}")
        if "id" not in r:
            raise FamiliesError(f"{where}: a family needs an id")
        by_code = bool(r.get("codes", False))
        if "entry" not in r and not by_code:
            raise FamiliesError(f"{where}: say `entry:` (an id, or null for a family without one)")
        rules.append(
            _Rule(
                family=str(r["id"]),
                entry=r.get("entry"),
                confidence=conf,
                claims=bool(r.get("claims", True)),
                codes=by_code,
                conds=_compile(r, where),
            )
        )
    singles: dict[tuple[str, str], Mapping] = {}
    for n, s in enumerate(data.get("templates") or []):
        where = f"templates[{n}]"
        if not {"source", "text", "entry"} <= set(s):
            raise FamiliesError(f"{where}: needs source, text and entry")
        conf = str(s.get("confidence", "high"))
        if conf not in CONFIDENCES:
            raise FamiliesError(f"{where}: confidence must be one of {CONFIDENCES}")
        singles[(str(s["source"]), hole_blind(str(s["text"])))] = Mapping(
            s["entry"], "template", conf, bool(s.get("claims", True))
        )
    return Families(rules, singles, codes if codes is not None else entry_codes(entries_dir))
