"""The evidence `kb run` turns on before a command starts: environment variables that cost
nothing while the job runs well and leave the facts behind when it fails. A variable the user
already set is left alone.

  TORCHELASTIC_ERROR_FILE  a process whose entry point has torch's @record writes its exception
                           and traceback there as JSON (under torchrun: the agent copies the root
                           cause's error file there; torchrun gives each rank its own file)
  PET_LOG_DIR              torchrun's --log-dir: the ranks' error files (and, with --tee or
                           --redirects, their logs) go to the run folder, not a /tmp folder
  TORCH_NCCL_TRACE_BUFFER_SIZE, TORCH_FR_BUFFER_SIZE
                           the Flight Recorder ring buffer (last 2000 collectives per rank)
  TORCH_NCCL_DUMP_ON_TIMEOUT
                           write it on a collective timeout or error, from every rank
  TORCH_NCCL_DEBUG_INFO_TEMP_FILE, TORCH_FR_DUMP_TEMP_FILE
                           where: <run folder>/fr/nccl_trace_rank_<global rank>
The TORCH_FR_* names are the ones newer releases read first (torch >= 2.8); older ones read only
the TORCH_NCCL_* names, so both are set, and neither when the user set either.
"""

from __future__ import annotations

import os

TRACE_ENTRIES = "2000"


def evidence_env(base: dict[str, str], run_dir: str) -> tuple[dict[str, str], dict[str, str]]:
    """(the command's environment, the variables kb set in it)."""
    env = dict(base)
    fr_dir = os.path.join(run_dir, "fr")
    wanted: list[tuple[tuple[str, ...], str]] = [
        (("TORCHELASTIC_ERROR_FILE",), os.path.join(run_dir, "error.json")),
        (("PET_LOG_DIR",), os.path.join(run_dir, "torchrun")),
        (("TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_FR_BUFFER_SIZE"), TRACE_ENTRIES),
        (("TORCH_NCCL_DUMP_ON_TIMEOUT",), "1"),
        (
            ("TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "TORCH_FR_DUMP_TEMP_FILE"),
            os.path.join(fr_dir, "nccl_trace_rank_"),
        ),
    ]
    added: dict[str, str] = {}
    for names, value in wanted:
        if any(n in env for n in names):
            continue
        for n in names:
            env[n] = added[n] = value
    if any(k.endswith("TEMP_FILE") for k in added):
        os.makedirs(fr_dir, exist_ok=True)
    return env, added
