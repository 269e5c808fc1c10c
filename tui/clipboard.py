"""Getting text to the user's clipboard, and saying truthfully whether it got there.

The terminal's clipboard is reached by OSC 52 (Textual's copy_to_clipboard), which no terminal
acknowledges: many take it, tmux by default does not (set-clipboard off), and some ignore it.
So kb also tries the system clipboard where this machine has one (wl-copy, xclip, xsel, pbcopy,
clip.exe), which does say whether it worked; when nothing confirms the copy the app shows the
text to select by hand. Blocking (a clipboard tool can hang on a dead display): call copy_system
from a background thread. Nothing here imports Textual.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass

TOOL_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class Copied:
    system: str  # the tool that put the text on the system clipboard, "" for none
    osc52: str  # what is known of the OSC 52 copy, in words


def _tools() -> list[list[str]]:
    """The clipboard tools that can work here, in the order tried."""
    out: list[list[str]] = []
    if sys.platform == "darwin":
        out.append(["pbcopy"])
    if os.environ.get("WAYLAND_DISPLAY"):
        out.append(["wl-copy"])
    if os.environ.get("DISPLAY"):
        out += [["xclip", "-selection", "clipboard"], ["xsel", "--clipboard", "--input"]]
    release = os.uname().release.lower() if hasattr(os, "uname") else ""
    if sys.platform == "win32" or "microsoft" in release:  # Windows, or WSL
        out.append(["clip.exe"])
    return [t for t in out if shutil.which(t[0])]


def copy_system(text: str) -> str:
    """Put text on the system clipboard; the tool that did it, or "" when none could."""
    for tool in _tools():
        try:
            done = subprocess.run(
                tool,
                input=text.encode(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=TOOL_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.SubprocessError):
            continue
        if done.returncode == 0:
            return tool[0]
    return ""


def osc52_state() -> str:
    """What can be known of an OSC 52 copy here, in words."""
    if os.environ.get("TMUX"):
        try:
            out = subprocess.run(
                ["tmux", "show-options", "-gv", "set-clipboard"],
                capture_output=True,
                text=True,
                timeout=TOOL_TIMEOUT_S,
                check=False,
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            out = ""
        if out == "off":
            return "tmux's set-clipboard is off, so the terminal's copy (OSC 52) did not arrive"
        if out:
            return f"sent through tmux (set-clipboard {out}) to the terminal, which does not confirm it"
    return "sent to the terminal (OSC 52), which does not say whether it took it"


def copy(text: str) -> Copied:
    """Try the system clipboard and say what is known of the terminal's copy."""
    return Copied(copy_system(text), osc52_state())
