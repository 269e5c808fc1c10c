"""`kb run -- COMMAND`: run a training command as it would run alone, keep what it printed and
the evidence a failure leaves, and, if it fails, say which rank failed first and why.

On success kb prints nothing of its own. On failure the job-level diagnosis goes to stderr
(--json FILE also writes it as JSON, docs/json.md) and kb exits with the command's status (a
death by signal N as 128 + N). The run folder (--run-dir, default ./kb-runs/<time>-<pid>) holds:
  output.log            everything the command printed, stdout and stderr as they arrived
  error.json            TORCHELASTIC_ERROR_FILE (kb.run_env says which variables kb sets)
  torchrun/             torchrun's --log-dir: per-rank error files (and logs with --tee)
  fr/                   Flight Recorder dumps, one per rank, when a collective timed out
  kb-run.json           the command, what kb set, exit status, times
  kb-diagnosis.json     on failure: the diagnosis, as `kb lookup --json <run folder>` gives it
"""

from __future__ import annotations

import json
import os
import sys
import time

from kb import exit_codes
from kb.render.style import Style, use_color

TYPE_CHECKING = False  # typing stays unimported at run time (kb lookup's cold start)
if TYPE_CHECKING:
    from typing import Any


def _default_run_dir() -> str:
    return os.path.join("kb-runs", time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}")


def run_command(args) -> int:
    argv = list(args.argv or [])
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        print(
            "kb: give the command to run after --, e.g. kb run -- torchrun train.py",
            file=sys.stderr,
        )
        return exit_codes.USAGE
    run_dir = args.run_dir or _default_run_dir()
    try:
        os.makedirs(run_dir, exist_ok=True)
    except OSError as e:
        print(f"kb: cannot create the run folder {run_dir}: {e}", file=sys.stderr)
        return exit_codes.USAGE
    run_dir = os.path.abspath(run_dir)

    from kb.run.env import evidence_env
    from kb.run.runner import run

    env, added = evidence_env(dict(os.environ), run_dir)
    record: dict[str, Any] = {  # kb-run.json
        "argv": argv,
        "cwd": os.getcwd(),
        "run_dir": run_dir,
        "env_set": added,
        "start": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    try:
        out = run(argv, env, os.path.join(run_dir, "output.log"))
    except FileNotFoundError:
        print(f"kb: command not found: {argv[0]}", file=sys.stderr)
        return 127
    except PermissionError:
        print(f"kb: permission denied: {argv[0]}", file=sys.stderr)
        return 126
    record.update(
        end=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        returncode=out.returncode,
        raw_returncode=out.raw,
        wall_s=round(out.wall_s, 3),
        output_bytes=out.bytes,
        forwarded_signals=out.forwarded,
    )
    _write_json(os.path.join(run_dir, "kb-run.json"), record)
    if out.returncode == 0:
        return 0
    try:
        _diagnose(args, run_dir, out)
    except Exception as e:  # the command's status matters more than kb's diagnosis of it
        print(
            f"kb: could not diagnose the run ({type(e).__name__}: {e}); output in {run_dir}",
            file=sys.stderr,
        )
    return out.returncode


def _diagnose(args, run_dir: str, out) -> None:
    from kb.diagnosis.engine import default_engine
    from kb.job.lookup import display_path, lookup_paths
    from kb.render.job import lookup_dict

    engine = default_engine(args.kb_dir)
    jl = lookup_paths(engine, [run_dir], top=3)
    doc = lookup_dict(jl)
    doc["run"] = {
        "argv": args.argv,
        "returncode": out.returncode,
        "run_dir": display_path(run_dir),
        "forwarded_signals": out.forwarded,
    }
    _write_json(os.path.join(run_dir, "kb-diagnosis.json"), doc)
    if args.json:
        _write_json(args.json, doc)
    st = Style(use_color(sys.stderr))
    sys.stderr.write(
        diagnosis_text(jl, engine.knowledge, st, out.returncode, display_path(run_dir) or run_dir)
    )


def diagnosis_text(jl, kb, st: Style, returncode: int, run_dir: str) -> str:
    """Short: the job's verdict, the entry and its first fix, and where to read more."""
    from kb.render.job import job_lines

    status = f"exit {returncode}" + (f", signal {returncode - 128}" if returncode > 128 else "")
    out = ["", st.bold("kb") + f": the command failed ({status}); output and evidence in {run_dir}"]
    if jl.job is not None:
        out += job_lines(jl.job, st)
    r = jl.result
    if r.matches:
        m = r.matches[0]
        e = m.entry
        out.append(st.bold(e.id) + "  " + e.title)
        if m.line:
            out.append(f"  line {m.line_number:<6} {m.line[:240]}")
        fix = e.fixes[0] if e.fixes else None
        if fix:
            out.append("  try first: " + fix.title)
        out.append(st.dim(f"  kb show {e.id}  for causes and every fix"))
    elif jl.job is None or jl.job.root is None:
        out.append("  no known error in the output")
    out.append(st.dim(f"  kb lookup {run_dir}  for the full diagnosis"))
    return "\n".join(out) + "\n"


def _write_json(path: str, doc) -> None:
    try:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=2, ensure_ascii=False)
            fh.write("\n")
    except OSError as e:
        print(f"kb: cannot write {path}: {e}", file=sys.stderr)
