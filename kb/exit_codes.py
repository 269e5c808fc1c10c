"""Exit codes, defined once for every command (grep-like).

0   found / success
1   not found: no entry matched, an unknown id, lint found problems, a repro failed
2   usage error or unreadable input (a missing file or folder, an unwritable state dir for
    `kb index`, invalid arguments)
3   `kb verify`: nothing could be verified here (every repro skipped: no GPU, no torch...)
130 interrupted (Ctrl-C)
"""

OK = 0
NOT_FOUND = 1
USAGE = 2
NOTHING_VERIFIED = 3
INTERRUPTED = 130
