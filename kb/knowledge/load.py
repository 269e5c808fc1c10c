"""Find, load and validate entry files.

Every problem names the file, line and column, a stable check code and what to do. A broken file
never stops the others from loading. Checks that need the matcher (an example that does not
match its own entry...) live in lint.py; these are the ones a file can fail on its own.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path

import yaml

from kb.knowledge.regex_literal import (
    backtracking_risk,
    key_words,
    leading_literal,
    required_any,
    required_literal,
)
from kb.model.entry import (
    Cause,
    Code,
    Diagnostic,
    Entry,
    Fix,
    NearMiss,
    NotReproducible,
    Problem,
    Program,
    Reference,
    Repro,
    Requirements,
    Signature,
)
from kb.model.record import record
from kb.paths import entry_files

TYPE_CHECKING = False  # typing stays unimported at run time (kb lookup's cold start)
if TYPE_CHECKING:
    from typing import Any

_Loader: type[yaml.CSafeLoader] | type[yaml.SafeLoader]
try:
    _Loader = yaml.CSafeLoader  # about 8x faster than the pure-Python loader
except AttributeError:  # pragma: no cover - PyYAML built without libyaml
    _Loader = yaml.SafeLoader

MAX_ENTRY_BYTES = 1 << 20  # an entry is a page of YAML; anything this big is a mistake

# Stable check codes: users and CI scripts grep for them.
CHECKS = {
    "KB001": "file cannot be read as UTF-8 text",
    "KB002": "file is not valid YAML",
    "KB003": "document is not a mapping",
    "KB004": "entry does not follow the schema",
    "KB005": "id does not equal the file name",
    "KB006": "duplicate id",
    "KB007": "signature regex does not compile",
    "KB008": "signature can match the empty string",
    "KB009": "match example does not match its own entry",
    "KB010": "no_match example matches the entry",
    "KB011": "repro expects a signature id that does not exist",
    "KB012": "file is too large to be an entry",
    "KB013": "duplicate signature id in one entry",
    "KB014": "code is not in the CUDA code table",
    "KB015": "not_reproducible names a signature id that does not exist",
    "KB016": "signature is not exercised by any match example",
    "KB017": "no_match example belongs to an entry that does not exist",
    "KB018": "signature is prone to catastrophic backtracking",
    "KB019": "signature uses the deprecated weight (read as a level)",
    "KB020": "two entries match one example at the same level on the same line",
    "KB021": "YAML anchors and aliases are not allowed in an entry",
    "KB022": "a damaged evidence record (unreadable, or against evidence.schema.json)",
}

_SCHEMA_PATH = Path(__file__).with_name("schema.json")


def level_of_weight(weight: float) -> str:
    """The level an old entry's `weight` stands for (weight is deprecated: lint says so). A
    weight of 1 or more was a wording of its own (high); below 1 one that other classes share
    (medium); below 0.5 a weak hint (low)."""
    w = float(weight)
    return "high" if w >= 1.0 else "medium" if w >= 0.5 else "low"


@record
class LoadResult:
    entries: list[Entry]
    problems: list[Problem]
    unsettled: bool = False  # a broken file was modified just now: maybe still being written


def _validator():
    # jsonschema costs ~80 ms to import: only paid when entries are (re)validated, never on a
    # cached lookup.
    import jsonschema

    schema = json.loads(_SCHEMA_PATH.read_text(encoding="utf-8"))
    return jsonschema.Draft202012Validator(schema)


_VALIDATOR = None


def _locate(node: yaml.Node | None, path: Iterable[Any]) -> tuple[int, int]:
    """Line and column (1-based) of the YAML node at a JSON path, as close as it exists."""
    if node is None:
        return 1, 1
    best = node
    for key in path:
        nxt = None
        if isinstance(best, yaml.MappingNode):
            for k, v in best.value:
                if getattr(k, "value", None) == key:
                    nxt = v
                    break
        elif isinstance(best, yaml.SequenceNode) and isinstance(key, int) and key < len(best.value):
            nxt = best.value[key]
        if nxt is None:
            break
        best = nxt
    return best.start_mark.line + 1, best.start_mark.column + 1


def _shares_nodes(root: yaml.Node) -> bool:
    """Whether a node is reached twice: only an alias (*name) makes that, and aliases nested
    over a few levels (a "billion laughs" file) expand to more values than memory holds once
    the document is built and walked. Seen on the node graph, before anything is built: one
    step per node written in the file."""
    seen: set[int] = set()
    stack: list[yaml.Node] = [root]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            return True
        seen.add(id(n))
        if isinstance(n, yaml.MappingNode):
            for k, v in n.value:
                stack.append(k)
                stack.append(v)
        elif isinstance(n, yaml.SequenceNode):
            stack.extend(n.value)
    return False


def _first_alias(text: str) -> tuple[int, int]:
    """Line and column of the first alias in the text (events only: nothing expanded)."""
    try:
        for ev in yaml.parse(text, Loader=_Loader):
            if isinstance(ev, yaml.AliasEvent) and ev.start_mark is not None:
                return ev.start_mark.line + 1, ev.start_mark.column + 1
    except yaml.YAMLError:
        pass
    return 1, 1


def _schema_message(err) -> str:
    where = "/".join(str(p) for p in err.absolute_path) or "(top level)"
    msg = err.message
    if len(msg) > 200:
        msg = msg[:200] + "..."
    return f"{where}: {msg}"


def _schema_hint(err, schema: str = "") -> str:
    """What to change for one schema error, and where the fields are described: `kb schema`
    (an installed kb has no repository to point into)."""
    see = f"`kb schema {schema}`" if schema else "`kb schema`"
    kind, want, got = err.validator, err.validator_value, err.instance
    if kind == "required" and isinstance(got, dict):
        # One error per missing field, each naming it ("'tags' is a required property").
        missing = [k for k in want if k not in got and f"{k!r} is a required" in err.message]
        todo = "add " + ", ".join(f"'{k}:'" for k in missing) if missing else ""
    elif kind == "additionalProperties" and isinstance(got, dict):
        todo = "remove it or correct its name"
    elif kind == "pattern":
        todo = f"write it to match {want}"
    elif kind == "minLength":
        todo = f"write at least {want} characters"
    elif kind == "maxLength":
        todo = f"keep it to {want} characters"
    elif kind == "minItems":
        todo = f"give at least {want} item{'s' if want != 1 else ''}"
    elif kind == "enum":
        todo = "use one of " + ", ".join(repr(v) for v in want)
    elif kind == "type":
        todo = f"give a {want if isinstance(want, str) else ' or '.join(want)}"
    else:
        todo = ""
    return f"{todo}; {see} shows the fields" if todo else f"{see} shows the fields"


def load_file(
    path: Path, local: bool = False, raw: bytes | None = None
) -> tuple[Entry | None, list[Problem]]:
    """Load one entry file. Returns (entry or None, problems)."""
    global _VALIDATOR
    p = str(path)

    def problem(code: str, msg: str, line: int = 1, col: int = 1, hint: str = "") -> Problem:
        return Problem(p, line, col, code, msg, hint)

    try:
        size = path.stat().st_size
        if size > MAX_ENTRY_BYTES:
            return None, [
                problem(
                    "KB012",
                    f"{size} bytes; an entry is at most {MAX_ENTRY_BYTES}",
                    hint="is this really an entry file? move it out of the entries folder",
                )
            ]
        if raw is None:
            raw = path.read_bytes()
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = e.object[: e.start].count(b"\n") + 1  # e.object: the bytes being decoded
        return None, [
            problem(
                "KB001", f"invalid UTF-8 at byte {e.start}", line, hint="save the file as UTF-8"
            )
        ]
    except OSError as e:
        return None, [problem("KB001", f"cannot read: {e.strerror or e}")]
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        return None, [problem("KB001", "NUL byte in file", line, hint="entry files are plain text")]

    try:
        loader = _Loader(text)
        try:
            node = loader.get_single_node()
            if node is not None and _shares_nodes(node):
                line, col = _first_alias(text)
                return None, [
                    problem(
                        "KB021",
                        "YAML alias (*name) found: entries do not use anchors and aliases",
                        line,
                        col,
                        hint="write each value out in full; an alias can make a few lines "
                        "expand to billions of values",
                    )
                ]
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        what = getattr(e, "problem", None) or str(e)
        return None, [
            problem(
                "KB002",
                f"invalid YAML: {what}",
                line,
                col,
                hint="check indentation and quoting; regexes are safest in single quotes",
            )
        ]

    if not isinstance(data, dict):
        kind = type(data).__name__ if data is not None else "empty"
        return None, [
            problem(
                "KB003",
                f"top level is {kind}, expected a mapping of fields",
                hint="an entry starts with 'id: ...'",
            )
        ]

    if _VALIDATOR is None:
        _VALIDATOR = _validator()
    problems: list[Problem] = []
    for err in sorted(_VALIDATOR.iter_errors(data), key=lambda e: list(map(str, e.absolute_path))):
        line, col = _locate(node, err.absolute_path)
        problems.append(
            problem(
                "KB004",
                _schema_message(err),
                line,
                col,
                hint=_schema_hint(err),
            )
        )
    if problems:
        return None, problems

    if data["id"] != path.stem:
        line, col = _locate(node, ["id"])
        problems.append(
            problem(
                "KB005",
                f"id '{data['id']}' but file is '{path.name}'",
                line,
                col,
                hint=f"rename the file to {data['id']}.yaml or fix the id",
            )
        )

    sigs: list[Signature] = []
    seen_sig: set[str] = set()
    for i, s in enumerate(data["signatures"]):
        line, col = _locate(node, ["signatures", i, "pattern"])
        if s["id"] in seen_sig:
            problems.append(problem("KB013", f"signature id '{s['id']}' appears twice", line, col))
        seen_sig.add(s["id"])
        flags = re.IGNORECASE if s.get("ignore_case") else 0
        try:
            rx = re.compile(s["pattern"], flags)
        except re.error as e:
            problems.append(
                problem(
                    "KB007",
                    f"signature '{s['id']}': {e}",
                    line,
                    col,
                    hint="signatures are Python regexes: escape ( ) [ ] . * + ?",
                )
            )
            continue
        if rx.search("") is not None:
            problems.append(
                problem(
                    "KB008",
                    f"signature '{s['id']}' matches the empty string",
                    line,
                    col,
                    hint="it would match every line; make it require text",
                )
            )
            continue
        risk = backtracking_risk(s["pattern"])
        if risk:
            problems.append(
                problem(
                    "KB018",
                    f"signature '{s['id']}': {risk}",
                    line,
                    col,
                    hint="make the inner part exact or the outer one bounded; "
                    "in a local entry it is stopped after a time limit",
                )
            )
        if "weight" in s:
            wline, wcol = _locate(node, ["signatures", i, "weight"])
            lv = s.get("level") or level_of_weight(s["weight"])
            problems.append(
                problem(
                    "KB019",
                    f"signature '{s['id']}': weight is deprecated; {s['weight']} is read as "
                    f"level {lv}",
                    wline,
                    wcol,
                    hint=f"write 'level: {lv}' (high, medium or low) instead of weight",
                )
            )
        caseless = bool(s.get("ignore_case", False))
        literal = required_literal(s["pattern"], caseless)
        words = tuple(key_words(literal))
        any_of = () if words else required_any(s["pattern"], caseless)
        sigs.append(
            Signature(
                id=s["id"],
                pattern=s["pattern"],
                ignore_case=caseless,
                level=s.get("level") or level_of_weight(s.get("weight", 1.0)),
                era=s.get("era", ""),
                versions=dict(s.get("versions", {})),
                literal=literal,
                head=leading_literal(s["pattern"]),
                explained_by=tuple(s.get("explained_by", ())),
                announces=bool(s.get("announces", False)),
                # No whole word to file the signature under: the alternatives it needs instead.
                any_of=any_of,
                words=words,
                any_words=tuple(tuple(key_words(a)) for a in any_of),
                consequence=s.get("consequence", ""),
                diagnosis=s.get("diagnosis", ""),
                raised_in=s.get("raised_in", ""),
            )
        )

    repro = None
    if "repro" in data:
        r = data["repro"]
        for j, sid in enumerate(r["expect"]):
            if sid not in seen_sig:
                line, col = _locate(node, ["repro", "expect", j])
                problems.append(
                    problem(
                        "KB011",
                        f"repro expects '{sid}', which is not a signature id",
                        line,
                        col,
                        hint="known: " + ", ".join(sorted(seen_sig)),
                    )
                )
        req = r.get("requires", {})
        repro = Repro(
            code=r["code"],
            expect=tuple(r["expect"]),
            env=dict(r.get("env", {})),
            timeout=float(r.get("timeout", 120)),
            requires=Requirements(
                gpu=bool(req.get("gpu", True)),
                gpus=int(req.get("gpus", 1)),
                free_memory_gb=float(req.get("free_memory_gb", 0)),
                compute_capability=req.get("compute_capability", ""),
                torch=req.get("torch", ""),
                exclusive=bool(req.get("exclusive", False)),
                packages=tuple(req.get("packages", ())),
            ),
        )
    fix_check = None
    if "fix_check" in data:
        f = data["fix_check"]
        fix_check = Program(
            code=f["code"], env=dict(f.get("env", {})), timeout=float(f.get("timeout", 120))
        )
    for j, nr in enumerate(data.get("not_reproducible", [])):
        if nr["signature"] not in seen_sig:
            line, col = _locate(node, ["not_reproducible", j, "signature"])
            problems.append(
                problem("KB015", f"'{nr['signature']}' is not a signature id", line, col)
            )

    entry = Entry(
        id=data["id"],
        area=path.parent.name,
        path=p,
        title=data["title"],
        summary=data["summary"],
        tags=tuple(data["tags"]),
        codes=tuple(Code(c["api"], c["value"], c.get("name", "")) for c in data.get("codes", [])),
        signatures=tuple(sigs),
        causes=tuple(Cause(c["title"], c["detail"], c.get("evidence", "")) for c in data["causes"]),
        diagnostics=tuple(
            Diagnostic(d["title"], d["command"], d.get("tells", "")) for d in data["diagnostics"]
        ),
        fixes=tuple(
            Fix(f["title"], f.get("detail", ""), f.get("code", ""), f.get("lang") or "python")
            for f in data["fixes"]
        ),
        examples_match=tuple(data["examples"]["match"]),
        examples_no_match=tuple(
            NearMiss(x["text"], x["belongs"]) for x in data["examples"]["no_match"]
        ),
        references=tuple(Reference(r["url"], r.get("title", "")) for r in data["references"]),
        repro=repro,
        aliases=tuple(data.get("aliases", ())),
        generic=bool(data.get("generic", False)),
        domain=data.get("domain", "unknown"),
        action=data.get("action", "unknown"),
        consequence=data.get("consequence", ""),
        fix_check=fix_check,
        not_reproducible=tuple(
            NotReproducible(n["signature"], n["reason"]) for n in data.get("not_reproducible", [])
        ),
        local=local,
    )
    # An entry with a broken regex is still returned (its other signatures work) but lint fails.
    return entry, problems


_DATA_VALIDATORS: dict[str, Any] = {}


def load_data_file(path: Path, schema: str) -> tuple[dict | None, list[Problem]]:
    """Load one data file of kb/data (wrapper forms, job-log wordings) as entries are loaded:
    the same YAML reader, its schema (kb/knowledge/<schema>), and every `pattern` compiled, each
    problem naming the file, line and column. Returns (the data, or None when it cannot be
    used; problems)."""
    p = str(path)

    def problem(code: str, msg: str, where: list | None = None, hint: str = "") -> Problem:
        line, col = _locate(node, where or [])
        return Problem(p, line, col, code, msg, hint)

    node = None
    try:
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        return None, [problem("KB001", f"cannot read: {e}")]
    try:
        loader = _Loader(text)
        try:
            node = loader.get_single_node()
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        return None, [Problem(p, line, col, "KB002", f"invalid YAML: {getattr(e, 'problem', e)}")]
    if not isinstance(data, dict):
        return None, [problem("KB003", "top level is not a mapping of fields")]
    validator = _DATA_VALIDATORS.get(schema)
    if validator is None:
        import jsonschema

        doc = json.loads(_SCHEMA_PATH.with_name(schema).read_text(encoding="utf-8"))
        validator = _DATA_VALIDATORS[schema] = jsonschema.Draft202012Validator(doc)
    problems = [
        problem(
            "KB004",
            _schema_message(err),
            list(err.absolute_path),
            hint=_schema_hint(err, schema.removesuffix(".schema.json")),
        )
        for err in sorted(
            validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path))
        )
    ]
    if problems:
        return None, problems
    for where, pattern in _patterns(data, []):
        try:
            rx = re.compile(pattern, re.IGNORECASE)
        except re.error as e:
            problems.append(problem("KB007", f"pattern does not compile: {e}", where))
            continue
        if rx.search("") is not None:
            problems.append(problem("KB008", "pattern matches the empty string", where))
        risk = backtracking_risk(pattern)
        if risk:
            problems.append(problem("KB018", f"pattern: {risk}", where))
    return (None if problems else data), problems


def _patterns(data: Any, where: list) -> Iterable[tuple[list, str]]:
    """(JSON path, regex) of every `pattern` field in a data file."""
    if isinstance(data, dict):
        for k, v in data.items():
            if k == "pattern" and isinstance(v, str):
                yield [*where, k], v
            else:
                yield from _patterns(v, [*where, k])
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from _patterns(v, [*where, i])


def load_dirs(
    bundled: Iterable[Path],
    local: Iterable[Path] = (),
    data: dict[Path, bytes | None] | None = None,
    load_one: Callable[..., tuple[Entry | None, list[Problem]]] | None = None,
    just_changed: Callable[[os.stat_result], bool] | None = None,
) -> LoadResult:
    """Load every entry file; `data` holds the bytes already read (knowledge.load hashes and
    parses the same bytes). `load_one` stands in for load_file (same arguments): the cache's
    memo of files parsed before (kb.knowledge.base). `just_changed` says whether a file that
    could not be read as an entry may still be being written (the cache's own test, passed in
    so that this module sits below kb.knowledge.base)."""

    load_one = load_one or load_file

    entries: list[Entry] = []
    problems: list[Problem] = []
    seen: dict[str, str] = {}
    unsettled = False
    for files, is_local in ((entry_files(bundled), False), (entry_files(local), True)):
        for f in files:
            entry, probs = load_one(f, local=is_local, raw=(data or {}).get(f))
            if entry is None and just_changed is not None:
                try:
                    unsettled |= just_changed(f.stat())
                except OSError:
                    unsettled = True
            problems.extend(probs)
            if entry is None:
                continue
            taken = [i for i in (entry.id, *entry.aliases) if i in seen]
            if taken:
                problems.append(
                    Problem(
                        str(f),
                        1,
                        1,
                        "KB006",
                        f"id '{taken[0]}' is already used by {seen[taken[0]]}",
                        "ids and aliases are unique across all entry folders; pick another",
                    )
                )
                continue
            for i in (entry.id, *entry.aliases):
                seen[i] = str(f)
            entries.append(entry)
    return LoadResult(entries, problems, unsettled)
