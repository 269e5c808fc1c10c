"""Exit codes, defined once for every command (grep-like).

0   found / success. For `kb lookup`: an entry matched. A generic entry (a language or platform
    class such as a missing file or a KeyError, `generic: true` in the JSON match) is an entry
    like any other, with causes and fixes, so it exits 0 too: a script that needs to tell it
    from a PyTorch/CUDA class reads `matches[0].generic`. A second code would make `kb lookup
    log && ...` fail for answers kb does have.
1   not found: no entry matched and the input shows no failure at all; an unknown id, lint found
    problems, a repro failed
2   usage error or unreadable input (a missing file or folder, an unwritable state dir for
    `kb index`, invalid arguments)
3   `kb verify`: nothing could be verified here (every repro skipped: no GPU, no torch...)
4   `kb lookup`: no entry matched, but the input shows a failure: its root failure (JSON `root`)
    is all kb can say. Non-zero, as "not found" is, so `kb lookup log || ...` still means "kb has
    no entry"; distinct from 1, so a script can tell "an unknown failure" from "nothing failed"
    without reading the JSON.
130 interrupted (Ctrl-C)
"""

OK = 0
NOT_FOUND = 1
USAGE = 2
NOTHING_VERIFIED = 3
ROOT_ONLY = 4
INTERRUPTED = 130
