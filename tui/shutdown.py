"""Leaving at once when the user quits, without leaving a repro behind.

A cancelled repro's process group gets SIGTERM at once and SIGKILL only after kb.verify's grace
period (seconds); the app does not wait that long to quit. When the app has ended, any process
group this process still leads through a child (a repro runs in a session of its own) is killed
here, so quitting never orphans a GPU job. Linux (/proc); elsewhere the verifier's own cleanup is
all there is. Nothing here imports Textual.
"""

from __future__ import annotations

import os
import signal


def child_groups() -> list[int]:
    """The process groups led by this process's children (a child that is its group's leader)."""
    me = os.getpid()
    out: list[int] = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as fh:
                stat = fh.read()
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses, so split after it
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) < 3:
            continue
        ppid, pgrp = int(fields[1]), int(fields[2])
        if ppid == me and pgrp == int(name):
            out.append(pgrp)
    return out


def kill_child_groups() -> int:
    """SIGKILL every group child_groups names; how many there were."""
    groups = child_groups()
    for pgrp in groups:
        try:
            os.killpg(pgrp, signal.SIGKILL)
        except OSError:
            pass
    return len(groups)
