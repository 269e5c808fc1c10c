"""The failures a rank shows because another rank failed first: timeouts while waiting for a peer,
the watchdog's teardown, aborted communicators, a peer's closed connection, the launcher's
SIGTERM. The job view never picks one of these as the root cause while any rank shows something
else.

Every wording below is quoted from the PyTorch source that prints it:
  torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (watchdog, heartbeat monitor, WorkNCCL),
  torch/csrc/distributed/c10d/ProcessGroupGloo.cpp (monitoredBarrier),
  third_party/gloo/gloo/transport/tcp/{pair.cc,unbound_buffer.cc} (gloo's socket errors),
  torch/csrc/distributed/c10d/TCPStore*.cpp (the store the ranks meet at),
  torch/distributed/elastic/multiprocessing/{api.py,errors/__init__.py} (torchrun's agent).
"""

from __future__ import annotations

import re

# class -> what a rank showing it was doing
CLASSES = {
    "timeout": "timed out waiting for another rank",
    "told": "was told by another rank that a collective had timed out",
    "teardown": "tore itself down after a failed or timed-out collective",
    "abort": "had its communicator aborted",
    "peer-gone": "lost the connection to a rank that had died",
    "sigterm": "was terminated by the launcher after another rank failed",
}

_PATTERNS: list[tuple[str, str]] = [
    # ProcessGroupNCCL: WorkNCCL::checkTimeout, the watchdog's status lines, the heartbeat monitor.
    ("timeout", r"[Cc]aught collective operation timeout"),
    ("timeout", r"timed out in blocking wait"),
    ("timeout", r"Timeout at NCCL work: -?\d+"),
    (
        "timeout",
        r"(?:failure|Exception \(either an error or timeout\)) detected by watchdog at work",
    ),
    # The heartbeat monitor of a rank that did NOT time out itself, told through the store:
    # "Received a dump signal due to a collective timeout from  rank 0" (a straggler prints this).
    ("told", r"Received a dump signal due to a collective timeout from\s+rank"),
    ("timeout", r"Received a dump signal due to a collective timeout from this local rank"),
    ("told", r"Observed flight recorder dump signal from another rank"),
    ("timeout", r"watchdog got stuck for \d+ seconds|Heartbeat monitor timed out"),
    # ProcessGroupGloo::monitoredBarrier (TORCH_DISTRIBUTED_DEBUG=DETAIL): the reporter waited.
    ("timeout", r"failed to pass monitoredBarrier|timed out in monitoredBarrier"),
    # gloo's transport: "Timed out waiting 20000ms for recv operation to complete".
    ("timeout", r"Timed out waiting \d+ms for (?:recv|send) operation"),
    # The store: a rank that never arrived at init or at a barrier.
    ("timeout", r"DistStoreError: .*[Tt]imed? ?out|Socket Timeout|[Ww]ait timeout after \d+"),
    ("timeout", r"Timed out initializing process group in store based barrier"),
    # WorkNCCL::handleException, the watchdog thread's exit, the monitor's abort.
    ("teardown", r"Some NCCL operations have failed or timed out"),
    ("teardown", r"To avoid data inconsistency, we are taking the entire process down"),
    ("teardown", r"Process group watchdog thread terminated with exception"),
    ("teardown", r"Terminating the process after attempting to dump debug info"),
    (
        "teardown",
        r"ProcessGroupNCCL preparing to dump debug info|First PG on this rank to signal dumping",
    ),
    (
        "abort",
        r"NCCL communicator was aborted|ProcessGroupNCCL (?:is )?abort|Launching ProcessGroupNCCL abort",
    ),
    # A peer that died: gloo's "Connection closed by peer [ip]:port. This is typically caused by a
    # remote worker crashing", NCCL's ncclRemoteError, the store's socket errors.
    ("peer-gone", r"Connection (?:closed|reset) by (?:remote )?peer|[Bb]roken pipe"),
    ("peer-gone", r"remote process exited or there was a network error|ncclRemoteError"),
    ("peer-gone", r"recvValue failed|recvBytes failed|Failed to recv, got 0 bytes"),
    # The agent stopping the ranks that were still running (or being stopped itself).
    ("sigterm", r"Signal (?:15 \(SIGTERM\)|2 \(SIGINT\)|1 \(SIGHUP\)) received by PID"),
    (
        "sigterm",
        r"SignalException: Process \d+ got signal: (?:15|2|1)\b|Received (?:Signals\.)?SIG(?:TERM|INT|HUP) death signal",
    ),
]

# Lines that only wrap another error (the error is on the next line): never an answer by
# themselves, whatever entry they match.
_NEUTRAL = re.compile(
    r"terminate called after throwing an instance of 'c10::(?:DistBackendError|Error)'"
    r"|^Exception raised from \w+ at |^Traceback \(most recent call last\)"
)

# Entries whose every signature is a symptom of waiting on another rank.
CONSEQUENCE_IDS = frozenset({"nccl-timeout"})

_COMPILED: list[tuple[str, re.Pattern]] | None = None


def classify(text: str) -> str | None:
    """The consequence class of a line, or None when it is not one."""
    global _COMPILED
    if _COMPILED is None:
        _COMPILED = [(c, re.compile(p)) for c, p in _PATTERNS]
    for cls, rx in _COMPILED:
        if rx.search(text):
            return cls
    return None


def neutral(text: str) -> bool:
    return bool(_NEUTRAL.search(text))


# Signals a process dies of when someone else stops it; any other signal is its own failure.
STOPPED_BY_OTHERS = {1: "SIGHUP", 2: "SIGINT", 15: "SIGTERM"}
