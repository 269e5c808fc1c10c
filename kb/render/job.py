"""The job view for people (text, led by the root ranks), machines (JSON, JSON Lines) and CI
(GitHub Actions annotations). Single-process output is kb.report's; this adds the job on top.

A job whose root has an entry of its own leads with that entry (its causes and first fix). A
root with none (a rank that stalled, stopped short, ran a mismatched collective) leads with what
it was doing, from its Flight Recorder dump; the waiting ranks' entries follow as what they are,
consequences, never as the answer.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from kb.job.analyze import ranges, ranks_text
from kb.job.lookup import JobLookup, display_path
from kb.job.view import JobKind, JobView, Part, RankVerdict, Role, RootRank
from kb.knowledge.base import KnowledgeBase
from kb.render.report import match_dict, result_dict, result_markdown, result_text, root_text
from kb.render.style import Style
from kb.render.terminal import for_terminal, inert, json_text

TYPE_CHECKING = False  # typing stays unimported at run time (kb lookup's cold start)
if TYPE_CHECKING:
    from typing import Any

# How a root with no entry of its own is named, by why it is a root.
_KIND_WORDS = {
    "stalled": "stalled",
    "stopped-short": "stopped short",
    "stuck": "stuck in a collective",
    "mismatch": "collective mismatch",
    "missing": "left no dump",
    "straggler": "straggler",
}


def lookup_dict(jl: JobLookup, kb: KnowledgeBase | None = None) -> dict[str, Any]:
    """result_dict, plus the job view and where each match's line came from."""
    d = result_dict(jl.result, kb)
    if len(jl.paths) > 1:
        for md in d["matches"]:
            md["path"] = display_path(jl.path_for(md["line_number"], md["line"]))
    if jl.job is not None:
        job = jl.job.to_dict()
        for r in job["ranks"]:
            r["path"] = display_path(r["path"])
            if "surfaced_as" in r:
                r["surfaced_as"]["path"] = display_path(r["surfaced_as"]["path"])
        if job["root"]:
            job["root"]["path"] = display_path(job["root"]["path"])
        d["job"] = job
        d["input"]["files"] = [display_path(p) for p in jl.paths]
        if jl.left_out:
            d["input"]["left_out"] = [
                {"path": display_path(p), "why": why} for p, why in jl.left_out
            ]
    return d


def _what(v: RankVerdict, job: JobView) -> str:
    """A rank's verdict in a word or two: its entry, else why it is a root, else its cause."""
    if v.role == Role.ROOT and v.id is None and v.root_kind is not None:
        return _KIND_WORDS.get(str(v.root_kind), str(v.root_kind))
    if v.role == Role.ROOT and job.kind == JobKind.DESYNC and v.id is None:
        return "straggler"  # its class is the others' timeout; it is the one they waited for
    if v.part == Part.WAITED:
        return "waited"
    return v.id or v.cause


def job_lines(job: JobView, st: Style) -> list[str]:
    """The job's verdict in a few lines: every root first, then every rank's part in it."""
    out = []
    root = job.root
    if root is not None:
        head = f"root cause: {_who(root)}"
        if root.id:
            head += f"  {st.bold(root.id)}"
        others = [r for r in job.roots if r.rank != root.rank or r.host != root.host]
        if others:
            head += f"; roots too: {_whose(others)}"
        out.append(st.bold("job") + f"  {head}")
        out.append("  " + _wrap_plain(job.summary))
    else:
        out.append(st.bold("job") + f"  {job.kind}: {job.summary}")
    rows = _rows(job)
    width = max([len(w) for w, _ in rows] + [6])
    for who, v in rows:
        role = {"root": st.red, "consequence": st.dim}.get(str(v.role), st.yellow)(f"{v.role:11}")
        line = f"  {who:{width}}  {role} {_what(v, job):30} {v.reason}"
        out.append(line.rstrip())
        ev = _evidence(job, v)
        pad = f"  {'':{width}}  {'':11} "
        if ev.line and v.role == Role.ROOT:
            where = inert(display_path(ev.path) or "")
            loc = f"{where}:{ev.line_number}" if where and ev.line_number else where
            if ev is not v:
                loc = f"{_who(ev)}, {loc}"
            out.append(pad + st.dim(f"{loc}  " if loc else "") + ev.line[:240])
        if v.surfaced_as is not None and v.role == Role.ROOT:
            s = v.surfaced_as
            where = inert(display_path(s.path) or "")
            loc = f"{where}:{s.line_number}  " if where and s.line_number else ""
            out.append(pad + st.dim(f"surfaced as {s.what}: {loc}") + s.line[:200])
    if job.desync and job.desync.detail:
        out.append("  " + job.desync.detail)
    if job.torchrun and job.torchrun.root is not None:
        out.append(
            st.dim(
                f"  {job.torchrun.launcher}: first observed failure rank {job.torchrun.root.rank}, exit code "
                f"{job.torchrun.root.exitcode}"
                + (f" ({job.torchrun.root.signal})" if job.torchrun.root.signal else "")
            )
        )
    for n in job.notes:
        out.append(st.dim("  " + _wrap_plain(n)))
    for p in job.problems:
        out.append(st.yellow("  not read: ") + _wrap_plain(p))
    return out


def _evidence(job: JobView, v: RankVerdict) -> RankVerdict:
    return job.evidence_of(v)


ROOT_ROWS = 8  # root ranks shown one row each; past that, grouped as the other ranks are


def _rows(job: JobView) -> list[tuple[str, RankVerdict]]:
    """One row per root rank (the first ROOT_ROWS of them); the other ranks grouped by what
    happened to them ("ranks 0-6, 9"), so a 512-rank job reads in a few lines, even one where
    half the ranks straggled."""
    rows: list[tuple[str, RankVerdict]] = []
    groups: dict[tuple, list[RankVerdict]] = {}
    for v in job.in_order():
        if v.rank is None or (v.role == Role.ROOT and len(rows) < ROOT_ROWS):
            rows.append((_who(v), v))
        else:
            groups.setdefault((str(v.role), v.id or v.cause, v.reason), []).append(v)
    for vs in groups.values():
        ranked = [v.rank for v in vs if v.rank is not None]  # grouped ranks all have one
        name = _who(vs[0]) if len(vs) == 1 else "ranks " + ranges(ranked, cap=4)
        rows.append((name, vs[0]))
    # Each row where its first rank stands in the job's one order (JobView.in_order).
    place = {id(v): i for i, v in enumerate(job.in_order())}
    rows.sort(key=lambda r: place[id(r[1])])
    return rows


def _wrap_plain(s: str) -> str:
    return " ".join(s.split())


def _who(v: RankVerdict) -> str:
    return _who_rank(v.rank, v.host)


def _whose(vs: Sequence[RootRank]) -> str:
    """Ranks as spans, capped (512 straggling ranks of a 1,024-rank job stay one short line);
    hosts and the launcher by name."""
    ranks = [v.rank for v in vs if v.rank is not None]
    named = [_who_rank(v.rank, v.host) for v in vs if v.rank is None]
    return ", ".join(([ranks_text(ranks)] if ranks else []) + named)


def _who_rank(rank: int | None, host: str | None) -> str:
    if rank is not None:
        return f"rank {rank}"
    return f"host {host}" if host else "launcher"


def _leads_with_entry(job: JobView) -> bool:
    """Whether the job's text leads with an entry's detail: only when that entry is the root's.
    A root with none (a straggler) must not lead with the entry of a rank that waited for it."""
    return job.root is None or job.root.id is not None


def lookup_text(jl: JobLookup, kb: KnowledgeBase, st: Style) -> str:
    job = jl.job
    if job is None:
        return result_text(jl.result, kb, st)
    head = "\n".join(job_lines(job, st)) + "\n\n"
    if _leads_with_entry(job):
        return for_terminal(head + result_text(jl.result, kb, st), colour=st.on)
    return for_terminal(head + "\n".join(_straggler_text(jl, st)) + "\n", colour=st.on)


def _straggler_text(jl: JobLookup, st: Style) -> list[str]:
    """For roots with no entry of their own: what each was last doing (its dump's last
    collective and the code that called it), then the waiting ranks' entries, as consequences."""
    job = jl.job
    assert job is not None
    out: list[str] = []
    lroot = jl.result.root
    if (
        lroot is not None
        and lroot.role == "initiating"
        and job.root is not None
        and job.root.id is None
        and lroot.rank == job.root.rank
    ):
        # The root rank's own failure, which no entry knows: what the log shows of it.
        out += root_text(lroot, st)
        out.append("")
    dumps = {d.rank: d for d in job.dumps if d.rank is not None}
    for r in job.roots:
        if r.entry is not None:
            continue
        d = dumps.get(r.rank)
        if d is None or not d.entries:
            continue
        last = max(d.entries, key=lambda e: (e.created_ns, e.seq))
        frames = [f for f in last.frame_list() if "/torch/" not in f.filename.replace("\\", "/")][
            :4
        ]
        out.append(
            st.bold(f"What {_who_rank(r.rank, r.host)} was last doing")
            + " (its Flight Recorder dump)"
        )
        out.append(
            f"  its last collective: #{last.seq} ({last.op}) of group {last.pg}"
            + (f" ({last.pg_desc})" if last.pg_desc and last.pg_desc != last.pg else "")
            + f", {last.state}"
        )
        for f in frames:
            out.append("    " + st.cyan(str(f)))
        out.append(
            st.dim(
                "  the code above is where it last called a collective; `py-spy dump --pid` on a "
                "rank that still hangs shows where it is now"
            )
        )
        out.append("")
    ms = jl.result.matches or jl.result.followers
    if ms:
        out.append(
            st.bold("Entries the other ranks and the launcher matched")
            + " (not the root's own failure)"
        )
        for m in ms:
            where = inert(display_path(jl.path_for(m.line_number, m.line)) or "")
            where = f"{where}:{m.line_number}" if where else f"line {m.line_number}"
            rank = _rank_of_line(job, m.line)
            who = f"rank {rank}, " if rank is not None else ""
            out.append(f"  {m.id:34} {who}{where}")
        out.append(st.dim(f"  kb show {ms[0].id}  for that entry's causes and fixes"))
    return out


def _rank_of_line(job: JobView, line: str) -> int | None:
    for v in job.ranks:
        if v.line == line:
            return v.rank
    return None


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
    for v in job.in_order():
        out.append(
            f"| {_who(v)} | {v.role} | {f'`{v.id}`' if v.id else _what(v, job)} | {v.reason.replace('|', '/')} |"
        )
    ev = job.root_evidence()
    if ev is not None and ev.line:
        out += ["", "```", ev.line, "```"]
    if job.problems:
        out += ["", "Not read:", ""] + [f"- {p}" for p in job.problems]
    if not _leads_with_entry(job):
        # the root has no entry of its own: the others' entries are listed, never detailed as
        # if they were the answer
        body = "Entries the other ranks and the launcher matched (not the root's own failure):\n\n"
        for m in jl.result.matches:
            where = inert(display_path(jl.path_for(m.line_number, m.line)) or "line")
            rank = _rank_of_line(job, m.line)
            who = f"rank {rank}, " if rank is not None else ""
            body += f"- `{m.id}` ({who}{where}:{m.line_number}): {m.entry.title}\n"
    return for_terminal("\n".join(out) + "\n\n" + body)


def lookup_jsonl(jl: JobLookup, name: str | None = None, kb: KnowledgeBase | None = None) -> str:
    d = lookup_dict(jl, kb)
    if name is not None:
        d["input"]["name"] = name
    return json_text(json.dumps(d, ensure_ascii=False, separators=(",", ":"))) + "\n"


# ---------------------------------------------------------------- GitHub Actions
def _esc_data(s: str) -> str:
    # https://github.com/actions/toolkit/blob/main/packages/core/src/command.ts (escapeData)
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _esc_prop(s: str) -> str:
    # ... and escapeProperty: also ':' and ','
    return _esc_data(s).replace(":", "%3A").replace(",", "%2C")


def lookup_github(jl: JobLookup) -> str:
    """One ::error annotation for the root cause (::warning when kb knows no entry for it),
    titled with the root rank's verdict, never a consequence's entry."""
    r = jl.result
    job = jl.job
    root = job.root if job else None
    best = r.matches[0] if r.matches else None
    if job is not None and root is not None and root.id is None:
        best = None  # the waiting ranks' entry is not the root's verdict
    if best is None and root is None and (job is None or job.kind == JobKind.NONE):
        if r.root is not None:  # a failure no entry knows: its line, marked as such
            return _github_root(jl)
        return "::warning title=kb: no known entry::kb found no known error in this log\n"
    entry_id = (root.id if root else None) or (best.id if best and root is None else None)
    who = ""
    if root is not None and root.rank is not None:
        who = f" (rank {root.rank})"
    elif root is not None and root.host:
        who = f" (host {root.host})"
    what = entry_id
    if what is None and root is not None and root.root_kind is not None:
        what = _KIND_WORDS.get(str(root.root_kind), str(root.root_kind))
    if what is None and job is not None:
        what = {
            "desync": "desync",
            "signal": f"killed by {root.signal}" if root else "killed",
            "exit": f"exit code {root.exitcode}" if root else "exit",
            "terminated": "terminated",
        }.get(str(job.kind))
    more = len(job.roots) - 1 if job is not None and root is not None else 0
    title = f"kb: {what or 'unknown error'}{who}" + (
        f" and {more} more root rank{'s' if more > 1 else ''}" if more > 0 else ""
    )
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
    return for_terminal(f"::{level} {','.join(props)}::{_esc_data(msg)}\n")


def _github_root(jl: JobLookup) -> str:
    """A ::warning for the root failure of an input no entry knows (kb.diagnosis.root)."""
    fail = jl.result.root
    assert fail is not None
    what = fail.exception or fail.kind.value
    title = f"kb: {what} (root failure, not in the knowledge base)"
    msg = fail.line
    if fail.frame is not None:
        msg += f"\nraised in {fail.package or 'your code'}: {fail.frame.where()}"
    if fail.user_frame is not None and fail.user_frame is not fail.frame:
        msg += f"\nyour code: {fail.user_frame.where()}"
    props = [f"title={_esc_prop(title)}"]
    shown = display_path(jl.paths[fail.source]) if fail.source < len(jl.paths) else None
    if shown and not shown.startswith(("<", "/")):
        props[:0] = [f"file={_esc_prop(shown)}", f"line={fail.line_number}"]
    return for_terminal(f"::warning {','.join(props)}::{_esc_data(msg)}\n")


__all__ = [
    "job_lines",
    "lookup_dict",
    "lookup_github",
    "lookup_jsonl",
    "lookup_markdown",
    "lookup_text",
    "match_dict",
]
