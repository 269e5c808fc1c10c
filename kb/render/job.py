"""The job view for people (text, led by the root rank), machines (JSON, JSON Lines) and CI
(GitHub Actions annotations). Single-process output is kb.report's; this adds the job on top."""

from __future__ import annotations

import json

from kb.job.analyze import JobView, RankVerdict
from kb.job.lookup import JobLookup, display_path
from kb.knowledge.base import KnowledgeBase
from kb.render.report import match_dict, result_dict, result_markdown, result_text
from kb.render.style import Style

TYPE_CHECKING = False  # typing stays unimported at run time (kb lookup's cold start)
if TYPE_CHECKING:
    from typing import Any


def lookup_dict(jl: JobLookup) -> dict[str, Any]:
    """result_dict, plus the job view and where each match's line came from."""
    d = result_dict(jl.result)
    if len(jl.paths) > 1:
        for md in d["matches"]:
            md["path"] = display_path(jl.path_for(md["line_number"], md["line"]))
    if jl.job is not None:
        job = jl.job.to_dict()
        for r in job["ranks"]:
            r["path"] = display_path(r["path"])
        if job["root"]:
            job["root"]["path"] = display_path(job["root"]["path"])
        d["job"] = job
        d["input"]["files"] = [display_path(p) for p in jl.paths]
    return d


def job_lines(job: JobView, st: Style) -> list[str]:
    """The job's verdict in a few lines: the root first, then every rank's part in it."""
    out = []
    root = job.root
    if root is not None:
        head = f"root cause: {_who(root)}"
        if (
            root.id and job.kind != "desync"
        ):  # a desync's id is the victims' timeout, not the root's
            head += f"  {st.bold(root.id)}"
        out.append(st.bold("job") + f"  {head}")
        out.append("  " + _wrap_plain(job.summary))
    else:
        out.append(st.bold("job") + f"  {job.kind}: {job.summary}")
    rows = _rows(job)
    width = max([len(w) for w, _ in rows] + [6])
    for who, v in rows:
        role = {"root": st.red, "consequence": st.dim}.get(v.role, st.yellow)(f"{v.role:11}")
        what = v.id or v.cause
        if v.role == "root" and job.kind == "desync":
            what = "straggler"  # its class is the others' timeout; it is the one they waited for
        line = f"  {who:{width}}  {role} {what:30} {v.reason}"
        out.append(line.rstrip())
        ev = job.evidence if (v is job.root and job.evidence is not None) else v
        if ev.line and v.role == "root":
            where = display_path(ev.path) or ""
            loc = f"{where}:{ev.line_number}" if where and ev.line_number else where
            if ev is not v:
                loc = f"{_who(ev)}, {loc}"
            out.append(
                f"  {'':{width}}  {'':11} " + st.dim(f"{loc}  " if loc else "") + ev.line[:240]
            )
    if job.desync and job.desync.detail:
        out.append("  " + job.desync.detail)
    if job.torchrun and job.torchrun.root is not None:
        out.append(
            st.dim(
                f"  torchrun: first observed failure rank {job.torchrun.root.rank}, exit code "
                f"{job.torchrun.root.exitcode}"
                + (f" ({job.torchrun.root.signal})" if job.torchrun.root.signal else "")
            )
        )
    for n in job.notes:
        out.append(st.dim("  " + _wrap_plain(n)))
    return out


def _rows(job: JobView) -> list[tuple[str, RankVerdict]]:
    """One row per root rank; the other ranks grouped by what happened to them ("ranks 0-6, 9"),
    so a 512-rank job reads in a few lines."""
    rows: list[tuple[str, RankVerdict]] = []
    groups: dict[tuple, list[RankVerdict]] = {}
    for v in job.ranks:
        if v.role == "root" or v.rank is None:
            rows.append((_who(v), v))
        else:
            groups.setdefault((v.role, v.id or v.cause, v.reason), []).append(v)
    for vs in groups.values():
        ranked = [v.rank for v in vs if v.rank is not None]  # grouped ranks all have one
        name = _who(vs[0]) if len(vs) == 1 else "ranks " + _ranges(ranked)
        rows.append((name, vs[0]))
    order = {"root": 0, "unknown": 1, "consequence": 2}
    rows.sort(key=lambda r: (order.get(r[1].role, 3), r[1].rank if r[1].rank is not None else -1))
    return rows


def _ranges(ranks: list[int]) -> str:
    """Consecutive ranks as spans: [0, 1, 2, 3, 9] -> "0-3, 9"."""
    spans: list[list[int]] = []  # [first, last] of each run
    for r in sorted(ranks):
        if spans and r == spans[-1][1] + 1:
            spans[-1][1] = r
        else:
            spans.append([r, r])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def _wrap_plain(s: str) -> str:
    return " ".join(s.split())


def _who(v: RankVerdict) -> str:
    if v.rank is not None:
        return f"rank {v.rank}"
    return f"host {v.host}" if v.host else "launcher"


def lookup_text(jl: JobLookup, kb: KnowledgeBase, st: Style) -> str:
    body = result_text(jl.result, kb, st)
    if jl.job is None:
        return body
    return "\n".join(job_lines(jl.job, st)) + "\n\n" + body


def lookup_markdown(jl: JobLookup, kb: KnowledgeBase) -> str:
    body = result_markdown(jl.result, kb)
    job = jl.job
    if job is None:
        return body
    out = [
        f"### kb: job, root cause {_who(job.root) if job.root else job.kind}",
        "",
        job.summary,
        "",
        "| rank | role | entry | why |",
        "| --- | --- | --- | --- |",
    ]
    for v in job.ranks:
        out.append(
            f"| {_who(v)} | {v.role} | {f'`{v.id}`' if v.id else v.cause} | {v.reason.replace('|', '/')} |"
        )
    ev = job.root_evidence()
    if ev is not None and ev.line:
        out += ["", "```", ev.line, "```"]
    return "\n".join(out) + "\n\n" + body


def lookup_jsonl(jl: JobLookup, name: str | None = None) -> str:
    d = lookup_dict(jl)
    if name is not None:
        d["input"]["name"] = name
    return json.dumps(d, ensure_ascii=False, separators=(",", ":")) + "\n"


# ---------------------------------------------------------------- GitHub Actions
def _esc_data(s: str) -> str:
    # https://github.com/actions/toolkit/blob/main/packages/core/src/command.ts (escapeData)
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _esc_prop(s: str) -> str:
    # ... and escapeProperty: also ':' and ','
    return _esc_data(s).replace(":", "%3A").replace(",", "%2C")


def lookup_github(jl: JobLookup) -> str:
    """One ::error annotation for the root cause (::warning when kb knows no entry for it)."""
    r = jl.result
    job = jl.job
    root = job.root if job else None
    best = r.matches[0] if r.matches else None
    if best is None and root is None:
        return "::warning title=kb: no known entry::kb found no known error in this log\n"
    entry_id = (root.id if root else None) or (best.id if best else None)
    who = ""
    if root is not None and root.rank is not None:
        who = f" (rank {root.rank})"
    elif root is not None and root.host:
        who = f" (host {root.host})"
    what = entry_id
    if what is None and job is not None:
        what = {
            "desync": "desync",
            "signal": f"killed by {root.signal}" if root else "killed",
            "exit": f"exit code {root.exitcode}" if root else "exit",
            "terminated": "terminated",
        }.get(job.kind)
    title = f"kb: {what or 'unknown error'}{who}"
    ev = job.root_evidence() if job else None
    line = (ev.line if ev and ev.line else (best.line if best else "")) or (
        job.summary if job else ""
    )
    msg = line
    if best is not None:
        msg += f"\n{best.entry.title}\nkb show {best.id}"
    if job is not None and job.summary != line:
        msg += f"\n{job.summary}"
    props = [f"title={_esc_prop(title)}"]
    path = None
    number = 0
    if ev is not None and ev.path:
        path, number = ev.path, ev.line_number
    elif best is not None and len(jl.paths) == 1:
        path, number = jl.paths[0], best.line_number
    shown = display_path(path)
    if shown and not shown.startswith(("<", "/")):
        props.insert(0, f"file={_esc_prop(shown)}")
        if number:
            props.insert(1, f"line={number}")
    level = "error" if entry_id or root is not None else "warning"
    return f"::{level} {','.join(props)}::{_esc_data(msg)}\n"


__all__ = [
    "job_lines",
    "lookup_dict",
    "lookup_github",
    "lookup_jsonl",
    "lookup_markdown",
    "lookup_text",
    "match_dict",
]
