"""A log's unclaimed error lines read against kb's message catalog (kb.catalog): what the engine
asks when no specific entry's signature claimed the failure. Also where a signature's hit needs
the frames (`raised_in: package`): it holds on the root failure's line only when the traceback
shows the exception raised inside an installed package (a library boundary).

Which lines: the root failure's (kb.diagnosis.root), with the lines its message goes on over,
when no specific entry claimed it; in a log with no root failure, up to MAX_LINES error-looking
lines before the first one a specific entry claimed (the rest is its cascade), until one of
them answers. A line claimed by a specific entry is that entry's, and a log whose root a
specific entry claimed needs nothing more: the catalog is not even loaded. It is loaded only
when some line needs it, from the cache kb.catalog.cache keeps in KB_HOME (milliseconds once
built).

What a line that fits a template answers, in this order:
1. The message as the template prints it: a line cut short, lower-cased, hard-wrapped over two
   lines or printed without its exception prefix is read as the template with the holes the
   line shows. The entries' own signatures then run on that message: a hit there is the entry's
   (the signature's level, one lower for a cut or retyped line, as for any partial hit).
2. Else families.yaml's mapping: a template mapped to an entry answers with that entry at the
   confidence the mapping states (one lower for a cut line). A mapping that is only a lead
   (low: the template is named by the part of its project it comes from) does not answer on a
   line a generic entry claimed (a KeyError, an ImportError): the generic class stands.
3. Else, on the root failure's line, where the message comes from ("PyTorch's argument check in
   index_add_ (aten/src/ATen/native/...)"), attached to the root (RootFailure.printed_by); on
   another line, a finding. Never an entry claim.

Every answer is a Hit with source "catalog", so kb.diagnosis.rank orders it with the others by
the same rule. Templates that mapping says never claim (hints, advice, fallbacks, Python's own
wordings) answer nothing, and neither does a template that cannot have printed the line: one
with too little literal text to tell, or one whose exception type the line contradicts (a
ValueError line is no TORCH_CHECK's RuntimeError). When the best fits of a line name different
entries, the line answers nothing.
"""

from __future__ import annotations

import re
from _thread import allocate_lock

from kb.diagnosis.diagnose import Finding
from kb.knowledge.signatures import Hit
from kb.model.entry import Signature
from kb.model.origin import MessageOrigin
from kb.model.record import field, record, replace

TYPE_CHECKING = False  # typing stays unimported at run time (kb lookup's cold start)
if TYPE_CHECKING:
    from kb.catalog.cache import CatalogReader
    from kb.catalog.families import Mapping
    from kb.catalog.matcher import CatalogMatch
    from kb.knowledge.base import KnowledgeBase
    from kb.knowledge.signatures import SignatureIndex
    from kb.model.root import RootFailure
    from kb.scan.extract import Scan

MAX_LINES = 8  # error-looking lines read in a log with no root failure (root before cascade)
MAX_FOLLOW = 2  # lines after the root's that its message may have wrapped onto
MIN_LITERAL = 16  # literal characters a template needs before a line is read as it
TIE = 1.0  # fits within this much of the best one's score are as good as it

# A line that reads like an error (a log with no root failure): the catalog holds warnings and
# info messages too, and those lines are no failure to explain. A message pasted without its
# exception type still says what went wrong ("Expected ... but got ...", "must be ...").
# Compiled on first use (re caches it), not on every start of `kb lookup`.
_ERRORISH = (
    r"Error\b|Exception\b|\berror\b|\bERROR\b|\bfail|FAIL|[Ff]atal|FATAL|Assertion|\bassert"
    r"|\bWARN\b|[Aa]bort|\b[Cc]annot\b|\bcan't\b|\b[Uu]nable\b|\b[Ii]nvalid\b|not supported"
    r"|not implemented|out of (?:memory|range|bounds)|\b[Ee]xpected\b|\bmust\b|\bshould be\b"
    r"|\bbut (?:got|found)\b|\bmismatch|\bincompatible\b|\bunsupported\b|\billegal\b|\bmissing\b"
    r"|\bno such\b|\bdenied\b|\brefused\b|\bexceeded\b|\btimed out\b"
)
_LEAD_OP = r"\{[^{}]*\}(\w*)\("


@record
class Reading:
    """What the lookup ranks: the signatures' hits that hold and the catalog's, the root failure
    (with `printed_by` when the catalog knows where its message comes from), findings."""

    hits: list[Hit] = field(default_factory=list)
    root: RootFailure | None = None
    findings: list[Finding] = field(default_factory=list)


def read(
    kb: KnowledgeBase,
    signatures: SignatureIndex,
    s: Scan,
    hits: list[Hit],
    root: RootFailure | None,
) -> Reading:
    """The engine's hook: the hits to rank (the signatures' that hold, and what the catalog says
    of the lines no specific entry claimed), the root failure, findings."""
    hits = [h for h in hits if _frames_hold(h, root)]
    claimed = {h.line_number for h in hits if not h.entry.generic}
    generic = {h.line_number for h in hits if h.entry.generic}
    todo = _lines(s, root, claimed)
    if not todo:
        return Reading(hits=hits, root=root)
    reader = _reader(kb)
    if reader is None:
        return Reading(hits=hits, root=root)
    out = Reading(hits=hits, root=root)
    for number, lines, count, on_root in todo:
        fits = _fits(reader, lines, root if on_root else None)
        answer = _answer(kb, signatures, reader, fits, number, lines[0], count, number in generic)
        if isinstance(answer, list):
            out.hits += answer
            break  # root before cascade: the earliest line the catalog answers is the answer
        elif answer is not None and on_root and out.root is not None:
            out.root = replace(out.root, printed_by=answer)
            break
        elif answer is not None and not out.findings:
            out.findings.append(
                Finding(
                    "origin",
                    f"Line {number} is {answer.describe()}; no entry knows this message.",
                    lines=[answer.template],
                )
            )
    return out


def _frames_hold(h: Hit, root: RootFailure | None) -> bool:
    """A signature that needs a library boundary (`raised_in: package`) holds on the root
    failure's line when its traceback shows it raised inside an installed package."""
    if h.signature.raised_in != "package":
        return True
    if root is None or root.line_number != h.line_number or root.raised_in is None:
        return False
    return root.raised_in.value == h.signature.raised_in


# ---------------------------------------------------------------- which lines
def _lines(
    s: Scan, root: RootFailure | None, claimed: set[int]
) -> list[tuple[int, list[str], int, bool]]:
    """(line number, the line and the lines it may go on over, its count, whether it is the
    root's), the root's first."""
    if root is not None:
        if root.line_number in claimed or not root.line.strip():
            return []
        more = [ln for ln in root.message.split("\n")[1 : 1 + MAX_FOLLOW] if ln.strip()]
        return [(root.line_number, [root.line, *more], 1, True)]
    out: list[tuple[int, list[str], int, bool]] = []
    # Root before cascade: lines after the first one a specific entry claimed are its cascade.
    first = min(claimed, default=1 << 62)
    for ln in s.lines:
        if ln.number >= first:
            break
        if not re.search(_ERRORISH, ln.text):
            continue
        out.append((ln.number, [ln.text], ln.count, False))
        if len(out) >= MAX_LINES:
            break
    return out


# ---------------------------------------------------------------- which templates
def _reader(kb: KnowledgeBase) -> CatalogReader | None:
    key = kb.content_hash or str(id(kb))
    got = _READERS.get(key, _MISSING)
    if got is not _MISSING:
        return got  # type: ignore[return-value]
    with _LOCK:
        got = _READERS.get(key, _MISSING)
        if got is _MISSING:
            got = _READERS[key] = _load_reader(kb)
    return got  # type: ignore[return-value]


def _load_reader(kb: KnowledgeBase) -> CatalogReader | None:
    from kb import paths
    from kb.catalog import cache
    from kb.catalog.families import FamiliesError
    from kb.catalog.store import CatalogError

    try:
        ix = cache.index(paths.state_folder(), cache.codes_of(kb.entries))
    except (CatalogError, FamiliesError, OSError):
        # No catalog (data files missing or unreadable, families.yaml broken): lookups go on
        # without it; kb's own tests and `kb coverage` report the broken file.
        return None
    if not len(ix):
        return None
    return cache.CatalogReader(ix)


_READERS: dict[str, object] = {}
_MISSING = object()
_LOCK = allocate_lock()


def _literal_size(m: CatalogMatch) -> int:
    return sum(len("".join(p.split())) for p in m.template.parts if isinstance(p, str))


def _fits(reader: CatalogReader, lines: list[str], root: RootFailure | None) -> list[CatalogMatch]:
    """The best fits of the first line (alone, or wrapped onto the next), best first, less the
    templates that cannot have printed it."""
    got = reader.match(lines[0], limit=6)
    if (not got or got[0].cut) and len(lines) > 1:
        pair = reader.match_pair(lines[0], lines[1], limit=6)
        if pair:
            got = pair
    printed = ""
    if root is not None and root.exception and lines[0].startswith(root.exception):
        printed = root.exception
    ok = [
        m
        for m in got
        if _literal_size(m) >= MIN_LITERAL
        and _whole(m, lines[0] if not m.wrapped else "")
        and _compatible(m.prefix or printed, m.template.exc)
    ]
    if not ok:
        return []
    best = ok[0]
    return [m for m in ok if m.cut == best.cut and m.score >= best.score - TIE]


def _whole(m: CatalogMatch, line: str) -> bool:
    """Whether the fit is the line's message, not a phrase inside another one: before it only
    a prefix (an exception type, a logger's or launcher's tag, ending in ':', ']' or '>'), and
    after it less text than it spans. A pair of wrapped lines ("") is judged by the matcher."""
    if not line:
        return True
    before = line[: m.start].rstrip()
    if before and before[-1] not in ":]>|-" and not before.endswith(("Error", "Exception")):
        return False
    after = line[m.end :].strip().strip(".\"'`)")
    return len(after) <= m.end - m.start


def _compatible(printed: str, raised: str) -> bool:
    """Whether a line that says `printed` (an exception type, as printed) can come from source
    that raises `raised`: the same type, or Python built-ins one of which derives from the
    other. A library's own type is not known here, so it contradicts nothing."""
    if not printed or not raised:
        return True
    p = printed.rsplit(".", 1)[-1]
    r = raised.rsplit(".", 1)[-1]
    if p == r:
        return True
    import builtins

    pc = getattr(builtins, p, None)
    rc = getattr(builtins, r, None)
    if not (isinstance(pc, type) and isinstance(rc, type)):
        return True
    if not (issubclass(pc, BaseException) and issubclass(rc, BaseException)):
        return True
    return issubclass(pc, rc) or issubclass(rc, pc)


# ---------------------------------------------------------------- what a fit answers
def _answer(
    kb: KnowledgeBase,
    signatures: SignatureIndex,
    reader: CatalogReader,
    fits: list[CatalogMatch],
    number: int,
    line: str,
    count: int,
    generic: bool = False,
) -> list[Hit] | MessageOrigin | None:
    """Hits on one entry, where the fits agree on it; else where the message comes from.
    `generic`: a generic entry claimed the line, so a mapping that is only a lead (low: a
    template named by the part of its project it comes from) does not outrank it."""
    claims: dict[str, list[Hit]] = {}
    origin: MessageOrigin | None = None
    for m in fits:
        mapping = reader.mapping(m.template)
        if mapping is not None and not mapping.claims:
            continue
        hs = _signature_hits(signatures, m, number, line, count)
        lead = mapping is not None and generic and mapping.confidence == "low"
        if not hs and mapping is not None and mapping.entry and not lead:
            entry = kb.get(mapping.entry)
            if entry is not None:
                hs = [_mapped_hit(entry, m, mapping, number, line, count)]
        if hs:
            claims.setdefault(hs[0].entry.id, hs)
        elif origin is None and (mapping is None or not mapping.entry):
            origin = _origin(m, mapping, number)
    if len(claims) == 1:
        return next(iter(claims.values()))
    if claims:
        return None  # the best fits name different entries: the line does not say which
    return origin


def message(m: CatalogMatch) -> str:
    """The message as the template prints it, with the holes the line shows ("" where the line
    was cut before one)."""
    from kb.catalog.template import Hole

    out: list[str] = []
    caps = iter(m.captures)
    for p in m.template.parts:
        out.append(next(caps, "") if isinstance(p, Hole) else p)
    return "".join(out)


def holes(m: CatalogMatch) -> dict[str, str]:
    """The holes' values by name ("hole<i>" for an unnamed one; a name the template uses twice
    gets "_2", "_3"...), empty holes left out."""
    from kb.catalog.template import Hole

    names = [p.name for p in m.template.parts if isinstance(p, Hole)]
    out: dict[str, str] = {}
    for i, (name, value) in enumerate(zip(names, m.captures)):
        key = name or f"hole{i}"
        n = 2
        while key in out:
            key = f"{name or 'hole'}_{n}"
            n += 1
        if value:
            out[key] = value
    return out


def _template_captures(m: CatalogMatch) -> dict[str, str]:
    t = m.template
    caps = holes(m)
    caps["template"] = t.text
    caps["template_source"] = f"{t.source} {t.version}"
    if t.file:
        caps["template_file"] = t.file
    op = _op(m)
    if op:
        caps["template_op"] = op
    return caps


def _op(m: CatalogMatch) -> str:
    """The operator the message names: the one the line shows before "(): " where the template
    has a hole there ("index_add_" in "{func}_(): self ..."), else the template's own."""
    t = m.template
    lead = re.match(_LEAD_OP, t.text)
    if lead and m.captures and m.captures[0]:
        return m.captures[0] + lead.group(1)
    return t.op or t.func


def _retyped(m: CatalogMatch, line: str) -> bool:
    """The line shows the template's words in another case (lower-cased by a tool or a person)."""
    first = next((p.strip() for p in m.template.parts if isinstance(p, str) and p.strip()), "")
    return bool(first) and first not in line and first.lower() in line.lower()


def _signature_hits(
    signatures: SignatureIndex, m: CatalogMatch, number: int, line: str, count: int
) -> list[Hit]:
    """The entries' signatures on the message the template prints, where that differs from the
    line (cut, retyped, wrapped): specific entries only."""
    text = message(m)
    if " ".join(text.split()) == " ".join(line[m.start : m.end].split()):
        return []
    partial = m.cut or _retyped(m, line)
    caps = _template_captures(m)
    out: list[Hit] = []
    for h in signatures.match_line(text, number, count):
        if h.entry.generic:
            continue
        out.append(
            Hit(
                h.entry,
                h.signature,
                number,
                line,
                {**h.captures, **caps},
                count,
                partial=partial or h.partial,
                source="catalog",
            )
        )
    return out


def _mapped_hit(
    entry, m: CatalogMatch, mapping: Mapping, number: int, line: str, count: int
) -> Hit:
    sig = Signature(id=f"catalog-{mapping.family}", pattern="", level=mapping.confidence)
    return Hit(
        entry,
        sig,
        number,
        line,
        _template_captures(m),
        count,
        partial=m.cut,
        source="catalog",
    )


def _origin(m: CatalogMatch, mapping: Mapping | None, number: int) -> MessageOrigin | None:
    t = m.template
    if t.is_warning:
        return None  # a warning printed on the root's line says nothing of where it failed
    return MessageOrigin(
        project=t.source,
        version=t.version,
        file=t.file,
        line=t.line,
        function=t.func,
        op=_op(m),
        kind=t.kind,
        exception=t.exc,
        template=t.text,
        family=mapping.family if mapping is not None else "",
        captures=tuple(holes(m).items()),
        line_number=number,
    )


__all__ = ["MAX_LINES", "Reading", "message", "read"]
