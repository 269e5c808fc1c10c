"""The knowledge kept in kb/data beside the entries: the frames other software prints a CUDA
error in (wrappers.yaml) and what a job's ranks print because another rank failed
(job-wordings.yaml), and what the members of a process group must agree on for each collective
(collectives.yaml). Read by the loader entries go through (kb.knowledge.load.load_data_file:
schema, regexes, file and line in every problem), checked by `kb lint`, and cached with the
entries (kb.knowledge.base), so a lookup never parses YAML.

The Python that reads them (kb.knowledge.wrappers, kb.job.consequences, kb.job.collectives) holds
no wording."""

from __future__ import annotations

import os

from kb.model.entry import Problem
from kb.model.record import field, record

_DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "data")
# file -> its schema, under kb/knowledge
FILES = {
    "wrappers.yaml": "wrappers.schema.json",
    "job-wordings.yaml": "job-wordings.schema.json",
    "collectives.yaml": "collectives.schema.json",
    "failure-events.yaml": "failure-events.schema.json",
}


def data_paths() -> list[str]:
    """The data files, for the entry cache's key: a change to one makes a new cache."""
    return [os.path.join(_DATA, f) for f in FILES]


@record(frozen=True)
class Frame:
    wrapper: str
    key: str  # lowercase text a line must hold before `pattern` is tried
    pattern: str  # groups: text, num, rest (see wrappers.schema.json)
    examples: tuple[str, ...] = ()


@record(frozen=True)
class WrapperForms:
    frames: tuple[Frame, ...]
    name_keys: tuple[str, ...]
    name_pattern: str
    hip_aliases: dict[str, str]
    gdb_keys: tuple[str, ...]
    gdb_pattern: str
    gdb_codes: dict[int, int]
    gdb_words: tuple[tuple[str, int], ...]
    sanitizer_key: str
    sanitizer_pattern: str
    sanitizer_code: int
    name_examples: tuple[str, ...] = ()
    path: str = ""

    def keys(self) -> list[str]:
        """What a line must hold for any form to read it: words of the scan's trigger set."""
        return [f.key for f in self.frames] + [*self.name_keys, *self.gdb_keys, self.sanitizer_key]


@record(frozen=True)
class Wording:
    role: str  # a key of JobWordings.roles
    pattern: str
    examples: tuple[str, ...] = ()


@record(frozen=True)
class JobWordings:
    roles: dict[str, str]  # role -> what a rank showing it was doing
    consequences: tuple[Wording, ...]
    neutral: tuple[Wording, ...]  # role ""
    stopped_by_others: dict[int, str]
    path: str = ""


@record(frozen=True)
class CollectiveOp:
    """One collective and what the members of its group must agree on (collectives.yaml)."""

    op: str
    sizes_agree: bool
    dtypes_agree: bool
    names: tuple[str, ...]  # after the backend prefix, as torch's recorder writes them
    point_to_point: bool = False
    why: str = ""
    examples: tuple[str, ...] = ()


@record(frozen=True)
class CollectiveRules:
    backends: tuple[str, ...]
    ops: tuple[CollectiveOp, ...]
    path: str = ""


@record(frozen=True)
class LineRule:
    """One kind of line that is a failure of its own (failure-events.yaml `lines`)."""

    id: str  # the handler that reads its named groups (kb.diagnosis.root)
    kind: str  # a RootKind value
    role: str  # initiating | ending | report
    keys: tuple[str, ...]  # text one of which the line must hold first
    lower: bool  # the keys are looked for in the lowercased line
    pattern: str  # placeholders already filled in
    flags: str = ""
    launcher: str = ""
    examples: tuple[str, ...] = ()


@record(frozen=True)
class FailureEvents:
    """failure-events.yaml as kb.diagnosis.root reads it."""

    signal_words: dict[str, str]
    signals: dict[int, str]
    stopped_by_others: frozenset[str]
    lines: tuple[LineRule, ...]
    srun_exit: str
    message_signal: str
    message_exit: str
    logged_error: str
    # the forms' own examples, for lint: (form name, pattern, examples)
    forms: tuple[tuple[str, str, tuple[str, ...]], ...] = ()
    # launchers' lines about their workers: name -> (key, pattern) (kb.job.parsers.torchrun)
    launchers: dict[str, tuple[str, str]] = field(default_factory=dict)
    path: str = ""


@record
class KnowledgeData:
    wrappers: WrapperForms | None
    jobs: JobWordings | None
    problems: list[Problem] = field(default_factory=list)
    # kb/data/cuda_codes.json as read (kb.knowledge.cuda_codes): pickled with the entry cache, so
    # a lookup that meets a CUDA error neither imports json nor parses the file.
    cuda_codes: dict | None = None
    collectives: CollectiveRules | None = None
    events: FailureEvents | None = None  # failure-events.yaml: kb.diagnosis.root's wordings

    def literals(self) -> list[str]:
        """Text every line these forms read holds, for the scan's trigger set."""
        from kb.knowledge.regex_literal import required_any, required_literal

        out = list(self.wrappers.keys()) if self.wrappers else []
        for w in (*self.jobs.consequences, *self.jobs.neutral) if self.jobs else ():
            lit = required_literal(w.pattern)
            out += [lit] if lit else list(required_any(w.pattern))
        return out


def load_data(folder: str | None = None) -> KnowledgeData:
    """Parse and check the data files (YAML and schema: only when the entry cache is made, or
    for lint); `folder`: where they are, kb/data by default."""
    from pathlib import Path

    from kb.knowledge.load import load_data_file

    problems: list[Problem] = []
    got = {}
    for name, schema in FILES.items():
        path = Path(folder or _DATA) / name
        data, probs = load_data_file(path, schema)
        problems += probs
        got[name] = (data, str(path))
    w, wpath = got["wrappers.yaml"]
    j, jpath = got["job-wordings.yaml"]
    c, cpath = got["collectives.yaml"]
    fe, fepath = got["failure-events.yaml"]
    from kb.knowledge import cuda_codes

    return KnowledgeData(
        _wrappers(w, wpath) if w is not None else None,
        _jobs(j, jpath) if j is not None else None,
        problems,
        cuda_codes.table(),
        _collectives(c, cpath) if c is not None else None,
        _events(fe, fepath) if fe is not None else None,
    )


def _wrappers(d: dict, path: str) -> WrapperForms:
    return WrapperForms(
        frames=tuple(
            Frame(f["wrapper"], f["key"], f["pattern"], tuple(f.get("examples", ())))
            for f in d["frames"]
        ),
        name_keys=tuple(d["names"]["keys"]),
        name_pattern=d["names"]["pattern"],
        hip_aliases=dict(d["hip_aliases"]),
        gdb_keys=tuple(d["cuda_gdb"]["keys"]),
        gdb_pattern=d["cuda_gdb"]["pattern"],
        gdb_codes={int(k): int(v) for k, v in d["cuda_gdb"]["codes"].items()},
        gdb_words=tuple((str(w), int(v)) for w, v in d["cuda_gdb"]["words"]),
        sanitizer_key=d["sanitizer"]["key"],
        sanitizer_pattern=d["sanitizer"]["pattern"],
        sanitizer_code=int(d["sanitizer"]["code"]),
        name_examples=tuple(d["names"].get("examples", ())),
        path=path,
    )


def _jobs(d: dict, path: str) -> JobWordings:
    return JobWordings(
        roles=dict(d["roles"]),
        consequences=tuple(
            Wording(w["role"], w["pattern"], tuple(w.get("examples", ())))
            for w in d["consequences"]
        ),
        neutral=tuple(
            Wording("", w["pattern"], tuple(w.get("examples", ()))) for w in d["neutral"]
        ),
        stopped_by_others={int(k): str(v) for k, v in d["stopped_by_others"].items()},
        path=path,
    )


def _collectives(d: dict, path: str) -> CollectiveRules:
    return CollectiveRules(
        backends=tuple(d["backends"]),
        ops=tuple(
            CollectiveOp(
                o["op"],
                o["sizes"] == "agree",
                o["dtypes"] == "agree",
                tuple(o["names"]),
                bool(o.get("point_to_point", False)),
                o.get("why", ""),
                tuple(o.get("examples", ())),
            )
            for o in d["ops"]
        ),
        path=path,
    )


_CURRENT: list[KnowledgeData] = []


def register(data: KnowledgeData) -> None:
    """The data of a knowledge base loaded in this process (from its cache): what the readers
    that are given none use, so they never parse the files again."""
    if not _CURRENT:
        _CURRENT.append(data)
        if data.cuda_codes is not None:
            from kb.knowledge import cuda_codes

            cuda_codes.register(data.cuda_codes)


def bundled() -> KnowledgeData:
    """The data for a reader given none: a loaded knowledge base's, else parsed now (once)."""
    if not _CURRENT:
        _CURRENT.append(load_data())
    return _CURRENT[0]


def _texts(v) -> tuple[str, ...]:
    return (v,) if isinstance(v, str) else tuple(v)


def _events(d: dict, path: str) -> FailureEvents:
    import re

    words = sorted(d["signal_words"], key=len, reverse=True)
    fill = {
        "words": "|".join(re.escape(w) for w in words),
        "core": "|".join(re.escape(c) for c in d["core_dumped"]),
    }
    lines = []
    for r in d["lines"]:
        lower = "key_lower" in r
        keys = _texts(r["key_lower"] if lower else r["key"])
        if keys == ("{words}",):
            keys = tuple(words)
        pattern = r["pattern"].replace("{words}", fill["words"]).replace("{core}", fill["core"])
        lines.append(
            LineRule(
                r["id"],
                r["kind"],
                r["role"],
                keys,
                lower,
                pattern,
                r.get("flags", ""),
                r.get("launcher", ""),
                tuple(r["examples"]),
            )
        )
    forms = tuple(
        (name, d[name]["pattern"], tuple(d[name]["examples"]))
        for name in ("srun_exit", "message_signal", "message_exit", "logged_error")
    ) + tuple(
        (f"launchers.{name}", v["pattern"], tuple(v["examples"]))
        for name, v in d["launchers"].items()
    )
    return FailureEvents(
        signal_words={str(k): str(v) for k, v in d["signal_words"].items()},
        signals={int(k): str(v) for k, v in d["signals"].items()},
        stopped_by_others=frozenset(d["stopped_by_others"]),
        lines=tuple(lines),
        srun_exit=d["srun_exit"]["pattern"],
        message_signal=d["message_signal"]["pattern"],
        message_exit=d["message_exit"]["pattern"],
        logged_error=d["logged_error"]["pattern"],
        forms=forms,
        launchers={name: (v["key"], v["pattern"]) for name, v in d["launchers"].items()},
        path=path,
    )
