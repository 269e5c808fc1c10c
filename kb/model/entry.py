"""The shapes kb works with. Frozen records (kb.record), no I/O: every other module passes these
around."""

from __future__ import annotations

from kb.model.record import field, fields, record

TYPE_CHECKING = False  # typing stays unimported at run time (kb lookup's cold start)
if TYPE_CHECKING:
    from typing import Any


def _packed(obj: Any, key: str, names: tuple[str, ...]) -> bytes:
    """The fields `names` of a record as one nested pickle: the one it was read with (kept under
    `key` while none of them has been read), else made now."""
    blob = obj.__dict__.get(key)
    if blob is None:
        from kb.model.cpickle import pickle

        blob = pickle.dumps(tuple(getattr(obj, n) for n in names), -1)
    return blob


def _unpacked(obj: Any, key: str, names: tuple[str, ...], name: str) -> Any:
    """Field `name` of a record whose fields `names` still wait in the nested pickle under `key`
    (_packed): all of them are unpickled into its __dict__ at once."""
    d = obj.__dict__
    blob = d.get(key)
    if blob is None or name not in names:
        raise AttributeError(f"{type(obj).__name__!r} object has no attribute {name!r}")
    from kb.model.cpickle import pickle

    for n, value in zip(names, pickle.loads(blob)):
        d.setdefault(n, value)  # another thread may have got here first: keep its objects
    d.pop(key, None)
    return d[name]


@record(frozen=True)
class Code:
    api: str  # runtime | runtime-legacy | driver
    value: int
    name: str = ""


@record(frozen=True)
class Signature:
    id: str
    pattern: str
    ignore_case: bool = False
    # How sure a hit of this wording is: high | medium (a wording other classes share) | low (a
    # weak hint). Matches are ordered by it first (docs/ordering.md).
    level: str = "high"
    era: str = ""
    versions: dict[str, str] = field(default_factory=dict)
    # The longest literal every match must contain (lowercased when ignore_case): lines without it
    # are never handed to the regex. Empty when the pattern has no such literal.
    literal: str = ""
    # The literal the pattern starts with, lowercased: a line cut off inside it is a partial hit.
    head: str = ""
    # Entries whose presence in the same log explains this wording: they rank above it.
    explained_by: tuple[str, ...] = ()
    # The line only announces an error printed after it (mp.spawn's "terminated with the
    # following error:"): when an exception line follows, that exception is the answer, known or
    # not, and this hit is dropped.
    announces: bool = False
    # When the literal has no whole word: literals of which every match holds one (lowercased
    # when ignore_case), to file and prefilter the signature by instead.
    any_of: tuple[str, ...] = ()
    # The whole words of `literal` and of each `any_of` literal (regex_literal.key_words), worked
    # out once when the entry is loaded: the signature index files signatures by them on every
    # cold start. Left empty by code that makes a Signature itself; the index works them out then.
    words: tuple[str, ...] = ()
    any_words: tuple[tuple[str, ...], ...] = ()
    # What this wording shows of a job (kb.job.consequences): a rank that prints it failed because
    # another one did ("timeout", "sigterm"...); "" when the entry's own `consequence` holds.
    consequence: str = ""
    # The diagnosis that reads this wording's captures (kb.diagnosis.diagnose.DIAGNOSES), or "".
    diagnosis: str = ""
    # "package": the wording names this entry only where the log's traceback shows it raised
    # inside an installed package (a library boundary), not in the user's own code or with no
    # traceback at all (kb.diagnosis.catalog_match applies it to the root failure's line).
    raised_in: str = ""

    # Pickled (kb's entry cache) as what the index reads of every candidate (_SIGNATURE_EAGER:
    # its id, the literal a line must hold, the head a cut-off line is told by) and the rest as
    # one nested pickle, unpickled when another field is first read: a cold lookup files ~1,400
    # signatures by word (the cache's tables) but reads the rest of only those whose literal
    # its lines hold.
    def __reduce__(self) -> tuple[Any, ...]:
        rest = _packed(self, "_rest", _SIGNATURE_REST)
        return (_signature_from_cache, (tuple(getattr(self, n) for n in _SIGNATURE_EAGER), rest))

    def __getattr__(self, name: str) -> Any:  # only for a name not (yet) in __dict__
        return _unpacked(self, "_rest", _SIGNATURE_REST, name)


_SIGNATURE_EAGER = ("id", "literal", "ignore_case", "any_of", "head")
_SIGNATURE_REST = tuple(n for n in fields(Signature) if n not in _SIGNATURE_EAGER)


def _signature_from_cache(eager: tuple[Any, ...], rest: bytes) -> Signature:
    sig = object.__new__(Signature)
    d = sig.__dict__
    d.update(zip(_SIGNATURE_EAGER, eager))
    d["_rest"] = rest
    return sig


@record(frozen=True)
class Program:
    code: str
    env: dict[str, str] = field(default_factory=dict)
    timeout: float = 120.0


@record(frozen=True)
class NearMiss:
    """A no_match example: text that must not name its entry, and the entry (or "none") that a
    lookup must put first instead."""

    text: str
    belongs: str


@record(frozen=True)
class Requirements:
    gpu: bool = True
    gpus: int = 1
    free_memory_gb: float = 0.0
    compute_capability: str = ""
    torch: str = ""
    exclusive: bool = False
    # Distributions the repro's interpreter must have besides torch ("transformers>=4.40").
    packages: tuple[str, ...] = ()


@record(frozen=True)
class Repro:
    code: str
    expect: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    timeout: float = 120.0
    requires: Requirements = field(default_factory=Requirements)


class _ReadLikeADict:
    """Compatibility for code written when these sections were dicts from the YAML:
    `record.get("detail")` and `record["title"]`. A key the YAML left out reads as missing (its
    default, or `default`), as it did then. New code uses the attributes."""

    def get(self, key: str, default: Any = None) -> Any:
        value = getattr(self, key, "") if key in _field_names(self) else ""
        return default if value == "" else value

    def __getitem__(self, key: str) -> Any:
        if key not in _field_names(self):
            raise KeyError(key)
        return getattr(self, key)


def _field_names(rec: Any) -> tuple[str, ...]:  # Any: one of the records below
    return fields(rec)


@record(frozen=True)
class Cause(_ReadLikeADict):
    """One likely cause of an entry's error (entries list the most likely first)."""

    title: str
    detail: str
    evidence: str = ""  # what in the log or a diagnostic tells this cause apart from the others


@record(frozen=True)
class Diagnostic(_ReadLikeADict):
    """A command to run, and what its output tells."""

    title: str
    command: str
    tells: str = ""


@record(frozen=True)
class Fix(_ReadLikeADict):
    """A way out of the error (entries list the one to try first, first)."""

    title: str
    detail: str = ""
    code: str = ""
    lang: str = "python"  # the language of `code`, for highlighting


@record(frozen=True)
class Reference(_ReadLikeADict):
    url: str
    title: str = ""


@record(frozen=True)
class NotReproducible(_ReadLikeADict):
    """A wording (signature id) today's stack cannot print, and why."""

    signature: str
    reason: str


@record(frozen=True)
class Entry:
    id: str
    area: str
    path: str
    title: str
    summary: str
    tags: tuple[str, ...]
    codes: tuple[Code, ...]
    signatures: tuple[Signature, ...]
    causes: tuple[Cause, ...]
    diagnostics: tuple[Diagnostic, ...]
    fixes: tuple[Fix, ...]
    examples_match: tuple[str, ...]
    examples_no_match: tuple[NearMiss, ...]
    references: tuple[Reference, ...]
    repro: Repro | None = None
    fix_check: Program | None = None
    not_reproducible: tuple[NotReproducible, ...] = ()
    local: bool = False  # from a user's own folder, not the bundled knowledge base
    aliases: tuple[str, ...] = ()  # earlier ids of this entry, still accepted wherever an id is
    generic: bool = False  # a language/platform class: answers only where no specific entry does
    domain: str = "unknown"  # user-code / environment / infrastructure / unknown (fleet triage)
    action: str = "unknown"  # fix-code / fix-environment / restart / drain-node / unknown
    # Every wording of the entry shows a job's consequence (kb.job.consequences), e.g. "timeout":
    # a rank that prints it waited for another one. A signature's own `consequence` wins.
    consequence: str = ""

    def signature(self, sig_id: str) -> Signature | None:
        for s in self.signatures:
            if s.id == sig_id:
                return s
        return None

    # Pickled (kb's entry cache) in two parts: what every lookup reads (ids, codes, signatures)
    # as objects, and the sections only a shown entry needs (_DETAILS) as one nested pickle,
    # unpickled when one of them is first read. A cold lookup then makes a tenth of the objects.
    def __reduce__(self) -> tuple[Any, ...]:
        details = _packed(self, "_details", _DETAILS)
        return (_entry_from_cache, (tuple(self.__dict__[n] for n in _SUMMARY), details))

    def __getattr__(self, name: str) -> Any:  # only for a name not (yet) in __dict__
        return _unpacked(self, "_details", _DETAILS, name)


_DETAILS = (
    "summary",
    "causes",
    "diagnostics",
    "fixes",
    "examples_match",
    "examples_no_match",
    "references",
    "repro",
    "fix_check",
    "not_reproducible",
)
_SUMMARY = tuple(n for n in fields(Entry) if n not in _DETAILS)


def _entry_from_cache(summary: tuple[Any, ...], details: bytes) -> Entry:
    entry = object.__new__(Entry)
    d = entry.__dict__
    d.update(zip(_SUMMARY, summary))
    d["_details"] = details
    return entry


@record(frozen=True)
class Problem:
    """One thing wrong with an entry file, as lint reports it."""

    path: str
    line: int
    column: int
    code: str  # KB001...
    message: str
    hint: str = ""

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}:{self.column}"
        text = f"{where}: {self.code} {self.message}"
        return f"{text} ({self.hint})" if self.hint else text


@record(frozen=True)
class HitRef:
    """One line that fired for a match: which signature, where, and the line itself."""

    signature: str
    line_number: int
    line: str


@record(frozen=True)
class Match:
    """One entry found in the input, with the evidence for it."""

    entry: Entry
    score: float
    confidence: str  # high | medium | low
    source: str  # signature | fulltext
    signature: str | None = None
    line: str = ""
    line_number: int = 0
    captures: dict[str, str] = field(default_factory=dict)
    hits: tuple[HitRef, ...] = ()  # every line and signature of this entry that fired
    # the entry's causes whose evidence quotes a wording this log shows (kb.diagnosis.causes)
    causes_seen: tuple[int, ...] = ()

    @property
    def id(self) -> str:
        return self.entry.id

    def causes_in_order(self) -> list[tuple[Cause, bool]]:
        """The entry's causes, those this log shows (causes_seen) first: (cause, shown) pairs.
        What kb lookup's report and the TUI list, in the same order."""
        causes = self.entry.causes
        lead = [(causes[i], True) for i in self.causes_seen]
        return lead + [(c, False) for i, c in enumerate(causes) if i not in self.causes_seen]


@record(frozen=True)
class Evidence:
    """What one `kb verify --record` run saw for one entry in one environment."""

    entry: str
    status: str
    fix_status: str
    gpu: str
    gpu_memory_mib: int
    driver: str
    cuda: str
    torch: str
    date: str
    duration_s: float
    matched: tuple[str, ...] = ()
    detail: str = ""
    # How many runs the record combines (kb verify --repeat N) and how many reproduced the
    # error; 0 in records written before kb recorded the counts (kb.evidence_summary reads
    # them from the detail then).
    runs: int = 0
    reproduced_runs: int = 0
    # The repro's output (its first run), whole or an excerpt (kb.evidence_output): a lookup of
    # it must still name the entry. Empty in records written before kb stored it.
    output: str = ""

    def summary(self) -> str:
        fix = {"fix-verified": ", fix verified", "fix-failed": ", fix FAILED"}.get(
            self.fix_status, ""
        )
        # A CPU record has no driver or CUDA: name only what the record holds.
        env = [
            f"{label}{value}"
            for label, value in (
                ("driver ", self.driver),
                ("torch ", self.torch),
                ("CUDA ", self.cuda),
                ("", self.date),
            )
            if value
        ]
        where = "on the CPU (no GPU)" if self.gpu == "no GPU" else f"on {self.gpu}"
        return f"{self.status}{fix} {where}" + "".join(f", {e}" for e in env)
