"""The run folder of `kb run`: an earlier run's files set aside, and what this run wrote.

A run folder is reused (`--run-dir runs/exp1` run twice, or `--run-dir .`), so the diagnosis
reads only what this run wrote, never a file an earlier run or anyone else left there:

  - set_aside: before the run, the files an earlier `kb run` wrote here (named by its
    kb-run.json: its output, the error file, the torchrun and Flight Recorder folders kb
    pointed the job at, kb's own records) move into .kb-earlier/<its start time>/. Nothing is
    deleted, and a file kb did not write there is never moved. A hidden folder, so `kb lookup`
    of the run folder does not read it either.
  - snapshot / written: what stat says of the evidence paths before the run, and after it the
    files that are new or changed: this run's error files and dumps, and nothing else from a
    folder that holds other files too (`--run-dir .`).
"""

from __future__ import annotations

import json
import os
import re

OUTPUT = "output.log"
RECORD = "kb-run.json"
DIAGNOSIS = "kb-diagnosis.json"
EARLIER = ".kb-earlier"
_MAX_FILES = 200_000  # files stat'ed under one evidence folder (a 16k-rank job's dumps and logs)

Snapshot = dict[str, tuple[int, int, int]]


def evidence_names(run_dir: str, env_set: dict[str, str], recorded_dir: str) -> set[str]:
    """The names directly in run_dir that the variables kb set point into (error.json, torchrun,
    fr), as a run whose folder was recorded_dir set them."""
    out: set[str] = set()
    for value in env_set.values():
        if not isinstance(value, str) or not os.path.isabs(value):
            continue
        rel = os.path.relpath(value, recorded_dir)
        first = rel.split(os.sep, 1)[0]
        if first not in ("", ".", "..") and not rel.startswith(".." + os.sep):
            out.add(first)
    return out


def set_aside(run_dir: str) -> tuple[str | None, str | None]:
    """Move an earlier run's files out of the way: (where they went or None, a warning or None)."""
    rec_path = os.path.join(run_dir, RECORD)
    if not os.path.isfile(rec_path):
        return None, None
    try:
        with open(rec_path, encoding="utf-8") as fh:
            rec = json.load(fh)
        if not isinstance(rec, dict):
            rec = {}
    except (OSError, ValueError):  # a record cut short (a full disk): only kb's fixed names
        rec = {}
    env_set = rec.get("env_set")
    env_set = env_set if isinstance(env_set, dict) else {}
    recorded = rec.get("run_dir")
    recorded = recorded if isinstance(recorded, str) else run_dir
    names = {OUTPUT, RECORD, DIAGNOSIS} | evidence_names(run_dir, env_set, recorded)
    present = sorted(n for n in names if os.path.lexists(os.path.join(run_dir, n)))
    stamp = re.sub(r"[^0-9A-Za-z+-]", "", str(rec.get("start", "")))[:24]
    if not stamp:
        try:
            stamp = str(int(os.stat(rec_path).st_mtime))
        except OSError:
            stamp = "earlier"
    base = os.path.join(run_dir, EARLIER, stamp)
    dest, n = base, 1
    while os.path.lexists(dest):
        n += 1
        dest = f"{base}-{n}"
    try:
        os.makedirs(dest)
        for name in present:
            os.rename(os.path.join(run_dir, name), os.path.join(dest, name))
    except OSError as e:
        return None, (
            f"kb: could not set the earlier run's files in {run_dir} aside ({e.strerror or e}); "
            "the diagnosis reads only what this run writes"
        )
    return dest, None


def snapshot(paths: list[str]) -> Snapshot:
    """path -> (size, mtime_ns, inode) of every file at or under these paths."""
    out: Snapshot = {}
    for p in paths:
        for f in _files(p):
            try:
                st = os.stat(f)
            except OSError:
                continue
            out[f] = (st.st_size, st.st_mtime_ns, st.st_ino)
    return out


def written(paths: list[str], before: Snapshot) -> list[str]:
    """What the run wrote at or under these paths: a folder that held no file before is given
    whole (the job reader walks it, saying what it leaves out), else its new or changed files."""
    out: list[str] = []
    for p in paths:
        if os.path.isdir(p) and not any(k == p or k.startswith(p + os.sep) for k in before):
            if next(iter(_files(p)), None) is not None:
                out.append(p)
            continue
        for f in _files(p):
            try:
                st = os.stat(f)
            except OSError:
                continue
            if before.get(f) != (st.st_size, st.st_mtime_ns, st.st_ino):
                out.append(f)
    return out


def _files(p: str):
    if os.path.isfile(p):
        yield p
        return
    if not os.path.isdir(p):
        return
    n = 0
    for here, dirs, files in os.walk(p):
        dirs.sort()
        for name in sorted(files):
            n += 1
            if n > _MAX_FILES:
                return
            yield os.path.join(here, name)
