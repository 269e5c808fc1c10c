"""`kb lookup`: read the input safely, run the lookup, print for people or machines.

Inputs: one error text (quoted), --stdin, or log files and folders (positional or --file, any
number). Several files are one job (a job's per-rank logs); a folder is one job (torchrun's
--log-dir, a `kb run` folder, per-rank logs) or several, as `kb triage` finds them (a folder of
unrelated logs, or of job folders: one result each, and said); --batch looks each input up on its
own instead.
"""

from __future__ import annotations

import os
import sys

from kb import exit_codes
from kb.diagnosis.engine import default_engine
from kb.job.lookup import InputError, JobLookup, lookup_paths, lookup_stream, lookup_text
from kb.render.style import Style, use_color
from kb.render.terminal import inert, json_text

_LOG_SUFFIXES = (".log", ".txt", ".out", ".err", ".gz", ".json")


def _as_paths(args) -> tuple[list[str] | None, str | None]:
    """(paths, None) for file inputs, (None, None) for a text, or (None, error)."""
    inputs = list(args.inputs or [])
    files = list(args.file or [])
    if (inputs == ["-"] and not files) or (files == ["-"] and not inputs):
        args.stdin = True  # `kb lookup -`, as cat and grep read it: standard input
        inputs, files = [], []
        args.inputs, args.file = [], []
    if args.stdin and (inputs or files):
        return None, "--stdin reads standard input only; give files or --stdin, not both"
    for f in files:
        if os.path.isdir(f):
            return None, f"{f} is a folder, not a log file (give a job's folder without --file)"
        if not os.path.exists(f):
            return None, f"no such file: {f}"
    if files or len(inputs) > 1:
        return inputs + files, None
    if len(inputs) == 1:
        one = inputs[0]
        if os.path.exists(one):
            return [one], None
        # A path that is not there is a mistake worth saying; an error message is never one word
        # ending in .log.
        if not any(c.isspace() for c in one) and (os.sep in one or one.endswith(_LOG_SUFFIXES)):
            return None, f"no such file: {one}"
    return None, None


def _read(args, engine) -> tuple[list[tuple[str | None, JobLookup]], str | None]:
    """[(input name, lookup)]: one for the input, or one per input with --batch."""
    paths, err = _as_paths(args)
    if err:
        return [], err
    top = args.top
    try:
        if paths is not None:
            if not args.batch and len(paths) == 1 and os.path.isdir(paths[0]):
                jobs = _jobs_in(paths[0])
                if len(jobs) > 1:
                    args.batch = True  # a folder of several jobs: one result each
                    paths = jobs
            if args.batch:
                return [(p, lookup_paths(engine, [p], top=top)) for p in paths], None
            return [(None, lookup_paths(engine, paths, top=top))], None
        if args.stdin or (not args.inputs and _piped()):
            # `cmd | kb lookup`, as grep reads it: no argument and a standard input that is no
            # terminal is the input (on a terminal kb would wait for typing nobody meant).
            if sys.stdin is None:
                return [], "no standard input"
            return [(None, lookup_stream(engine, sys.stdin.buffer, top=top))], None
    except InputError as e:
        return [], str(e)
    if not args.inputs:
        return [], "give the error text, --stdin or log files (see kb lookup --help)"
    # Arguments that were not valid UTF-8 arrive as surrogate escapes; keep their bytes.
    return [
        (None, lookup_text(engine, args.inputs[0].encode("utf-8", "surrogateescape"), top=top))
    ], None


def _one_message(args) -> bool:
    """The input is a message given as the argument, not files or standard input."""
    return len(args.inputs or []) == 1 and not args.file and not args.stdin and not _piped()


def _piped() -> bool:
    """Standard input is there and is no terminal: a pipe, a file, /dev/null."""
    try:
        return sys.stdin is not None and not sys.stdin.isatty()
    except (OSError, ValueError):
        return False


def _jobs_in(folder: str) -> list[str]:
    """The jobs a folder holds, as `kb triage` finds them (kb.fleet.discover): one (the folder)
    for a job's folder; several for a folder of jobs, or of unrelated logs, which is said."""
    from kb.fleet.discover import discover

    jobs = [j.path for j in discover([folder])]
    if len(jobs) > 1:
        print(
            f"kb: {folder} holds {len(jobs)} jobs, read as `kb triage` reads it (logs with no "
            "rank of their own, or job folders side by side, are jobs of their own): one result "
            "each",
            file=sys.stderr,
        )
    return jobs


def run_lookup(args) -> int:
    if args.top < 1:
        print("kb: --top must be at least 1", file=sys.stderr)
        return exit_codes.USAGE
    from kb.render.progress import lookup_label, reading_label, step

    engine = default_engine(args.kb_dir)
    with step(reading_label):  # on a terminal, word of a first run's cache build
        engine.knowledge  # noqa: B018 - loaded here, where the wait is said, not in the lookup
    if getattr(args, "start_up_gc", False):
        # `kb` paused the collector for its start-up (kb.cli.main): what is loaded now stays
        # for the process's life, out of every later collection's way.
        import gc

        gc.freeze()
        gc.enable()
    # Typed or pasted on the terminal (`kb lookup --stdin`, then the text): no line of kb's
    # may write over what the user types.
    typed = (args.stdin or "-" in (args.inputs or []) + (args.file or [])) and not _piped()
    with step(lookup_label if _one_message(args) else "reading the input", shown=not typed):
        looked, err = _read(args, engine)
    if err:
        print(f"kb: {err}", file=sys.stderr)
        return exit_codes.USAGE
    kb = engine.knowledge
    for p in kb.problems:
        print(f"kb: {inert(str(p))}", file=sys.stderr)  # a broken entry of the user's is named
    for w in dict.fromkeys(w for _, jl in looked for w in jl.result.warnings):
        print(f"kb: warning: {inert(w)}", file=sys.stderr)
    fmt = args.format or ("json" if args.json else "text")
    sys.stdout.write(render(looked, fmt, kb, batch=args.batch))
    if any(jl.result.matches for _, jl in looked):
        return exit_codes.OK
    # No entry; a failure all the same (its root, or a job's root rank): 4, not "nothing found".
    failed = any(jl.result.root is not None or (jl.job and jl.job.root) for _, jl in looked)
    return exit_codes.ROOT_ONLY if failed else exit_codes.NOT_FOUND


def start_up_regexes(kb) -> dict:
    """The regex table (kb.knowledge.regex_cache) of what this process compiled, with json's
    own patterns (a --json lookup compiles them) and without the entries' signatures (each line
    compiles only the few its words pick)."""
    import json  # noqa: F401 - imported for the patterns it compiles

    from kb.knowledge import regex_cache

    signatures = {s.pattern for e in kb.entries for s in e.signatures}
    return regex_cache.make_table(p for p in regex_cache.compiled_now() if p[0] not in signatures)


def keep_regexes(args) -> None:
    """Keep the table in the state folder (best effort: without it only start-up is slower),
    made by a lookup that read the entry cache: one that built it also compiled what reading
    entry files needs."""
    from kb import paths
    from kb.knowledge import base, pickle_file, regex_cache

    if base.PARSED_HERE:
        return

    kb = default_engine(args.kb_dir).knowledge
    where = os.path.join(paths.state_folder(), regex_cache.file_name())
    pickle_file.write(where, start_up_regexes(kb))


def render(looked: list[tuple[str | None, JobLookup]], fmt: str, kb, *, batch: bool = False) -> str:
    from kb.render.report import result_dict, result_markdown, result_text

    plain = (
        not batch and len(looked) == 1 and looked[0][1].job is None and len(looked[0][1].paths) <= 1
    )
    if plain and fmt in ("text", "json", "markdown"):
        # One process's log: the single-result renderings, without the job modules.
        r = looked[0][1].result
        if fmt == "json":
            import json  # only for --json: a plain-text lookup never imports it

            return json_text(json.dumps(result_dict(r, kb), indent=2, ensure_ascii=False)) + "\n"
        return (
            result_markdown(r, kb) if fmt == "markdown" else result_text(r, kb, Style(use_color()))
        )
    import kb.render.job as job_report

    if fmt == "jsonl":
        return "".join(job_report.lookup_jsonl(jl, name, kb) for name, jl in looked)
    if fmt == "github":
        return "".join(job_report.lookup_github(jl) for _, jl in looked)
    if fmt == "json":
        docs = [job_report.lookup_dict(jl, kb) for _, jl in looked]
        if batch:
            for (name, _), d in zip(looked, docs):
                d["input"]["name"] = name
        import json

        doc = json.dumps(docs if batch else docs[0], indent=2, ensure_ascii=False)
        return json_text(doc) + "\n"
    out = []
    for name, jl in looked:
        if batch:
            out.append(f"==> {inert(name or '')} <==\n")
        if fmt == "markdown":
            out.append(job_report.lookup_markdown(jl, kb))
        else:
            out.append(job_report.lookup_text(jl, kb, Style(use_color())))
    return "\n".join(out) if batch else "".join(out)
