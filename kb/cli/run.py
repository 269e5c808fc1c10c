"""`kb run -- COMMAND`: run a training command as it would run alone, keep what it printed and
the evidence a failure leaves, and, if it fails, say which rank failed first and why.

On success kb prints nothing of its own. On failure the job-level diagnosis goes to stderr
(--json FILE also writes it as JSON, docs/json.md) and kb exits with the command's status (a
death by signal N as 128 + N). A command that cannot start is said as a shell says it (exit 127,
126) and nothing is made. The user's Ctrl-C (SIGINT to kb, or the command dying of SIGINT) is
said as an interrupt, not a failure, and kb exits 130 (the command's status where it exits 0).
The default run folder (./kb-runs/<time>-<pid>) is kept only when there is something to
diagnose: removed after a success, and after an interrupt unless the output had shown a failure
before it. A folder named with --run-dir is always kept. The run folder holds:
  output.log            everything the command printed, stdout and stderr as they arrived
  error.json            TORCHELASTIC_ERROR_FILE (kb.run_env says which variables kb sets)
  torchrun/             torchrun's --log-dir: per-rank error files (and logs with --tee)
  fr/                   Flight Recorder dumps, one per rank, when a collective timed out
  kb-run.json           the command, what kb set, exit status, times
  kb-diagnosis.json     on failure: the diagnosis, as `kb lookup --json <run folder>` gives it
  .kb-earlier/<time>/   a reused run folder: the files of the runs before this one (kb.run.folder)
The diagnosis reads only what this run wrote: never an earlier run's error file, nor another
file that happens to lie in the folder (`--run-dir .`).

kb never changes what the command does or returns (kb.run.runner): its output is passed through
first and kept as far as the disk allows; a full disk is said once, never a reason to stop; the
command dies with kb; after a signal asking it to stop it has --kill-after seconds before SIGKILL.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time

from kb import exit_codes
from kb.render.style import Style, use_color

TYPE_CHECKING = False  # typing stays unimported at run time (kb lookup's cold start)
if TYPE_CHECKING:
    from typing import Any


def _default_run_dir() -> str:
    return os.path.join("kb-runs", time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}")


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


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
    from kb.run import folder
    from kb.run.env import evidence_env
    from kb.run.runner import KILL_AFTER_S, run

    kill_after = KILL_AFTER_S if getattr(args, "kill_after", None) is None else args.kill_after
    cannot = _cannot_start(argv[0], os.environ.get("PATH", os.defpath))
    if cannot is not None:  # said as a shell says it, before any folder is made
        rc, why = cannot
        print(f"kb: {why}: {argv[0]}", file=sys.stderr)
        return rc
    run_dir = os.path.abspath(args.run_dir or _default_run_dir())
    made = not os.path.lexists(run_dir)  # kb makes it: kb may remove it
    default = not args.run_dir  # a folder the user named is always kept
    have_dir = True
    try:
        os.makedirs(run_dir, exist_ok=True)
    except OSError as e:
        # The command runs all the same: kb must never be the reason a job did not run.
        _say(
            f"kb: cannot create the run folder {run_dir} ({e.strerror or e}); the command runs "
            "without it: its output is not kept and no evidence is collected"
        )
        have_dir = False
    env: dict[str, str] = dict(os.environ)
    added: dict[str, str] = {}
    evidence: list[str] = []
    before: folder.Snapshot = {}
    if have_dir:
        _moved, warning = folder.set_aside(run_dir)
        if warning:
            _say(warning)
        env, added = evidence_env(env, run_dir)
        names = folder.evidence_names(run_dir, added, run_dir)
        evidence = sorted(os.path.join(run_dir, n) for n in names)
        before = folder.snapshot(evidence)
    record: dict[str, Any] = {  # kb-run.json
        "argv": argv,
        "cwd": os.getcwd(),
        "run_dir": run_dir,
        "env_set": added,
        "start": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    record_path = os.path.join(run_dir, folder.RECORD)
    if have_dir:  # now, so a run folder whose kb was killed is still known as one
        _write_json(record_path, record, quiet=True)
    log_path = os.path.join(run_dir, folder.OUTPUT) if have_dir else None
    try:
        out = run(argv, env, log_path, kill_after=kill_after, warn=_say)
    except (FileNotFoundError, PermissionError) as e:  # nothing ran: nothing to keep
        if have_dir and made:
            _remove(run_dir, default)
        if isinstance(e, PermissionError):
            print(f"kb: permission denied: {argv[0]}", file=sys.stderr)
            return 126
        print(f"kb: command not found: {argv[0]}", file=sys.stderr)
        return 127
    record.update(
        end=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        returncode=out.returncode,
        raw_returncode=out.raw,
        exit_code=out.exit_code,
        signal=out.signal or None,
        killed_by_kb=out.killed,
        wall_s=round(out.wall_s, 3),
        output_bytes=out.bytes,
        output_kept_bytes=out.kept,
        output_error=out.log_error or None,
        forwarded_signals=out.forwarded,
    )
    interrupted = "SIGINT" in out.forwarded or out.raw == -signal.SIGINT
    if have_dir:
        _write_json(record_path, record)
    if out.returncode == 0:
        if have_dir and made and default:
            _remove(run_dir, default)
        return 0
    if interrupted and not _failed_before(args, log_path, out):
        if have_dir and made and default:
            _remove(run_dir, default)
            where = ""
        else:
            where = f"; output in {run_dir}" if have_dir else ""
        how = "" if out.raw == -signal.SIGINT else f" (the command ended: {status_words(out)})"
        _say(f"kb: interrupted{how}{where}")
        return 130
    files: list[str] = []
    if log_path is not None and os.path.isfile(log_path) and (out.kept or not out.log_error):
        files.append(log_path)
    files += folder.written(evidence, before)
    try:
        _diagnose(args, run_dir, out, files, evidence)
    except Exception as e:  # the command's status matters more than kb's diagnosis of it
        print(
            f"kb: could not diagnose the run ({type(e).__name__}: {e}); output in {run_dir}",
            file=sys.stderr,
        )
    return 130 if interrupted else out.returncode


def _cannot_start(cmd: str, path: str) -> tuple[int, str] | None:
    """(exit status, why) as a shell says it when cmd cannot be run, else None."""
    if os.sep in cmd:
        if not os.path.exists(cmd):
            return 127, "no such file or directory"
        if os.path.isdir(cmd):
            return 126, "is a directory"
        if not os.access(cmd, os.X_OK):
            return 126, "permission denied"
        return None
    if shutil.which(cmd, path=path) is None:
        return 127, "command not found"
    return None


def _remove(run_dir: str, default: bool) -> None:
    """Remove a run folder kb made, and ./kb-runs when that leaves it empty."""
    shutil.rmtree(run_dir, ignore_errors=True)
    if default:
        try:
            os.rmdir(os.path.dirname(run_dir))
        except OSError:  # other runs' folders in it, or not ours to remove
            pass


def _failed_before(args, log_path: str | None, out) -> bool:
    """Whether the output printed before the interrupt shows a failure: a known error or a
    root failure kb can name. A run whose output was not kept has nothing to show."""
    if log_path is None or not os.path.isfile(log_path):
        return False
    upto = out.interrupted_at if out.interrupted_at >= 0 else None
    try:
        with open(log_path, "rb") as fh:
            text = fh.read() if upto is None else fh.read(upto)
    except OSError:
        return False
    if not text.strip():
        return False
    try:
        from kb.diagnosis.engine import default_engine
        from kb.job.lookup import lookup_text

        r = lookup_text(default_engine(args.kb_dir), text, top=1).result
    except Exception:  # kb's own trouble: say the interrupt, and keep the folder to read
        return True
    return bool(r.matches) or r.root is not None


def status_words(out) -> str:
    """How the command ended, as a shell would say it: an exit status, or the signal that ended
    it (only a real signal is named: an `exit 130` is an exit)."""
    if not out.signal:
        return f"exit {out.returncode}"
    how = f"killed by {out.signal} (signal {-out.raw})"
    if out.killed:
        how += " from kb: it outlived the signals asking it to stop"
    return f"{how}; exit {out.returncode}"


def _lookup_hint(run_dir: str, files: list[str], evidence: list[str]) -> str:
    """What to give `kb lookup` for the full diagnosis: the run folder when it holds only what
    kb and the run put there, else this run's files."""
    from kb.job.lookup import display_path
    from kb.run import folder

    ours = {folder.OUTPUT, folder.RECORD, folder.DIAGNOSIS, folder.EARLIER}
    ours |= {os.path.basename(e) for e in evidence}
    try:
        only_ours = all(n in ours for n in os.listdir(run_dir))
    except OSError:
        only_ours = False
    if only_ours:
        return display_path(run_dir) or run_dir
    shown = [display_path(f) or f for f in files[:6]]
    return " ".join(shown) + (" ..." if len(files) > 6 else "")


def _diagnose(args, run_dir: str, out, files: list[str], evidence: list[str]) -> None:
    from kb.job.lookup import display_path, lookup_paths
    from kb.render.job import lookup_dict

    st = Style(use_color(sys.stderr))
    shown_dir = display_path(run_dir) or run_dir
    if not files:
        sys.stderr.write(
            "\n"
            + st.bold("kb")
            + f": the command failed ({status_words(out)}); its output was not kept, so kb "
            "has nothing to diagnose\n"
        )
        return
    from kb.diagnosis.engine import default_engine

    engine = default_engine(args.kb_dir)
    jl = lookup_paths(engine, files, top=3)
    doc = lookup_dict(jl)
    doc["run"] = {
        "argv": args.argv,
        "returncode": out.returncode,
        "exit_code": out.exit_code,
        "signal": out.signal or None,
        "run_dir": display_path(run_dir),
        "forwarded_signals": out.forwarded,
    }
    _write_json(os.path.join(run_dir, "kb-diagnosis.json"), doc)
    if args.json:
        _write_json(args.json, doc)
    sys.stderr.write(
        diagnosis_text(
            jl, engine.knowledge, st, out, shown_dir, _lookup_hint(run_dir, files, evidence)
        )
    )


def diagnosis_text(jl, kb, st: Style, outcome, run_dir: str, hint: str = "") -> str:
    """Short: the job's verdict, the entry and its first fix, and where to read more."""
    from kb.render.job import job_lines

    status = status_words(outcome)
    what = "the command failed"
    if "SIGINT" in outcome.forwarded or outcome.raw == -signal.SIGINT:
        what = "interrupted, after the command had shown a failure"
    out = ["", st.bold("kb") + f": {what} ({status}); output and evidence in {run_dir}"]
    if outcome.log_error:
        out.append(
            f"  the output was kept only in part ({outcome.kept:,} of {outcome.bytes:,} bytes: "
            f"{outcome.log_error}); this is the diagnosis of that part"
        )
    if jl.job is not None:
        out += job_lines(jl.job, st)
    r = jl.result
    # a root with no entry of its own (a straggler): the waiting ranks' entry is no fix for it
    straggler = jl.job is not None and jl.job.root is not None and jl.job.root.id is None
    if r.matches and not straggler:
        m = r.matches[0]
        e = m.entry
        out.append(st.bold(e.id) + "  " + e.title)
        if m.line:
            out.append(f"  line {m.line_number:<6} {m.line[:240]}")
        fix = e.fixes[0] if e.fixes else None
        if fix:
            out.append("  try first: " + fix.title)
        out.append(st.dim(f"  kb show {e.id}  for causes and every fix"))
    elif r.root is not None and (jl.job is None or jl.job.root is None):
        root = r.root
        out.append(
            st.bold("root failure")
            + f"  {root.exception or root.kind.value}  (not in the knowledge base)"
        )
        out.append(f"  line {root.line_number:<6} {root.line[:240]}")
    elif jl.job is None or jl.job.root is None:
        out.append("  no known error in the output")
    out.append(st.dim(f"  kb lookup {hint or run_dir}  for the full diagnosis"))
    return "\n".join(out) + "\n"


def _write_json(path: str, doc, quiet: bool = False) -> bool:
    try:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=2, ensure_ascii=False)
            fh.write("\n")
        return True
    except OSError as e:
        if not quiet:
            print(f"kb: cannot write {path}: {e.strerror or e}", file=sys.stderr)
        return False
