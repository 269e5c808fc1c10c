"""Text that came from input, made inert before it reaches a terminal.

A log, a file or folder name, a table cell, a local entry: any of it may hold bytes a terminal
obeys. `inert` is the one function every output of kb passes such text through (the text and
Markdown of a lookup, `kb show` and `kb list`, the triage summary and its `--sql` tables, the
TUI):

- whole control sequences are removed: CSI (`ESC [ ... m`, cursor moves, `ESC [ 2 J`), the
  strings OSC, DCS, SOS, PM and APC with their terminator (`ESC ] 2 ; title BEL`), designations
  (`ESC ( 0`, `ESC # 8`) and single escapes (`ESC 7`, `ESC c`, `ESC D`);
- every other control character is shown, not obeyed, as a Python escape: C0 controls but tab
  (and newline where lines are allowed), DEL, the C1 controls (U+009B, the one-character CSI,
  among them), the Unicode format characters (bidirectional overrides and isolates such as
  U+202E, zero-width characters, the byte order mark), line and paragraph separators, and lone
  surrogates (bytes that were not UTF-8, read with surrogateescape: shown as `\\xNN`, never
  written out as the raw byte, which a terminal may take for a C1 control).

Nothing else changes: printable text, tabs and (where asked) newlines pass as they are. JSON
output keeps the same characters as `\\u` escapes instead (`json_text`), so no byte is lost.
"""

from __future__ import annotations

import re

# ECMA-48 control sequences, 7-bit forms; an introducer without its terminator is left to the
# control rule (its ESC shown, the rest plain text).
_SEQUENCE = (
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: parameters, intermediates, final byte
    r"|\x1b[\]PX^_][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)"  # OSC, DCS, SOS, PM, APC strings
    r"|\x1b[ -/]+[0-~]"  # nF: ESC ( 0, ESC # 8, ESC % G
    r"|\x1b[0-~]"  # Fp, Fe, Fs: ESC 7, ESC D, ESC c
)
# Unicode categories Cc (but tab and newline), Cf, Zl, Zp and Cs, as of Unicode 15.
_CONTROLS = (
    "\x00-\x08\x0b-\x1f\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e"
    "\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ud800-\udfff\ufeff\ufff9-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0001\U000e0020-\U000e007f"
)
# One pass: a whole sequence where one starts, else one control character (a lone ESC too).
_LINE = re.compile(f"{_SEQUENCE}|[{_CONTROLS}\n]")
_BLOCK = re.compile(f"{_SEQUENCE}|[{_CONTROLS}]")
_CONTROL = re.compile(f"[{_CONTROLS}]")
# kb's own styles (kb.render.style.Style): bold, dim, red, green, yellow, magenta, cyan, reset.
_KB_SGR = frozenset({"0", "1", "2", "31", "32", "33", "35", "36"})
_NAMED = {"\n": "\\n", "\r": "\\r"}


def _shown(c: str) -> str:
    named = _NAMED.get(c)
    if named:
        return named
    n = ord(c)
    if 0xDC80 <= n <= 0xDCFF:  # a byte that was not UTF-8 (surrogateescape)
        return f"\\x{n - 0xDC00:02x}"
    if n <= 0xFF:
        return f"\\x{n:02x}"
    return f"\\u{n:04x}" if n <= 0xFFFF else f"\\U{n:08x}"


def _is_plain(text: str) -> bool:
    # The common case, decided in C: printable ASCII (and spaces) only.
    return text.isascii() and text.isprintable()


def _drop_or_show(m: re.Match[str]) -> str:
    c = m.group()
    return "" if len(c) > 1 else _shown(c)


def inert(text: str, *, newlines: bool = False) -> str:
    """text with every control sequence removed and every other control character shown as an
    escape (see the module). newlines: keep line breaks (a block of lines); by default a newline
    is shown as `\\n`, so a name or a cell can never fake a line of kb's own."""
    if _is_plain(text):
        return text
    return (_BLOCK if newlines else _LINE).sub(_drop_or_show, text)


def _kb_style(seq: str) -> bool:
    return seq.startswith("\x1b[") and seq.endswith("m") and set(seq[2:-1].split(";")) <= _KB_SGR


def _rich_style(seq: str) -> bool:
    """An SGR sequence rich writes for a style: colours and attributes, never concealed text."""
    if not (seq.startswith("\x1b[") and seq.endswith("m")):
        return False
    params = seq[2:-1].split(";")
    if not all(p.isdigit() or p == "" for p in params):
        return False
    # 8: conceal. (38/48 take their colour numbers after them: 38;5;8 is a colour, not 8.)
    i = 0
    while i < len(params):
        if params[i] in ("38", "48", "58"):
            i += 3 if params[i + 1 : i + 2] == ["5"] else 5
            continue
        if params[i] == "8":
            return False
        i += 1
    return True


def for_terminal(text: str, *, colour: bool = False, rich: bool = False) -> str:
    """A whole rendering, made safe where it is written: kb's own colours (rich's styles for a
    rich console) are kept when colour is on, every other sequence removed, every other control
    character shown. Line breaks are the rendering's own and kept; the names and cells inside
    it were made inert, newlines included, when they were put in."""
    if _is_plain(text.replace("\n", " ")):
        return text
    keep = (_rich_style if rich else _kb_style) if colour else None

    def one(m: re.Match[str]) -> str:
        c = m.group()
        if len(c) == 1:
            return _shown(c)
        return c if keep is not None and keep(c) else ""

    return _BLOCK.sub(one, text)


def json_text(text: str) -> str:
    """JSON (written with ensure_ascii=False) with the characters a terminal would obey or
    reorder written as `\\u` escapes: the same data, nothing for a terminal to act on. (JSON
    escapes C0 controls itself; these are DEL, C1, format characters, separators, surrogates.)"""
    if text.isascii() and "\x7f" not in text:
        return text
    return _CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


class InertWriter:
    """A text stream whose writes pass through for_terminal (rich's styles kept when the console
    colours): give it to a rich Console as its file. Everything else is the stream's."""

    def __init__(self, stream, colour: bool | None = None):
        self._stream = stream
        self._colour = colour

    def write(self, text: str) -> int:
        if self._colour is None:
            import os

            isatty = getattr(self._stream, "isatty", None)
            try:
                tty = bool(isatty and isatty())
            except (OSError, ValueError):
                tty = False
            self._colour = tty or bool(os.environ.get("FORCE_COLOR"))
        self._stream.write(for_terminal(text, colour=self._colour, rich=True))
        return len(text)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


__all__ = ["InertWriter", "for_terminal", "inert", "json_text"]
