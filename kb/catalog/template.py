"""A template: a message's literal parts with holes for what the program fills in.

The text form is a Python format string: `{}` or `{name}` is a hole, `{{` and `}}` are literal
braces ("index_add_(): self ({}) and source ({}) must have the same scalar type"). One form for
the data files, the families' regexes and people reading them.
"""

from __future__ import annotations

import re

from kb.model.record import record


@record(frozen=True)
class Hole:
    """A value the program puts into the message; `name` is the variable when it was a plain
    name in the source ("dim", "index"), else ""."""

    name: str = ""


Part = "str | Hole"

_WORD = re.compile(r"[A-Za-z][A-Za-z_']+")
_HOLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}")


def hole_name(expr: str) -> str:
    """The hole's name from the expression that fills it: the last identifier of a plain name or
    attribute chain (`self.dim` -> "dim"), nothing for anything more complex (no code kept)."""
    expr = expr.strip()
    m = re.fullmatch(r"(?:[A-Za-z_]\w*(?:\.|->|::))*([A-Za-z_]\w*)(?:\(\))?", expr)
    if not m:
        return ""
    name = m.group(1)
    return name if _HOLE_NAME.fullmatch(name) else ""


def format_parts(parts: list[str | Hole]) -> str:
    out: list[str] = []
    for p in parts:
        if isinstance(p, Hole):
            out.append("{" + p.name + "}")
        else:
            out.append(p.replace("{", "{{").replace("}", "}}"))
    return "".join(out)


def parse_text(text: str) -> list[str | Hole]:
    """The parts of a template's text: literal strings and holes, adjacent literals joined."""
    parts: list[str | Hole] = []
    buf: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "{" and i + 1 < n and text[i + 1] == "{":
            buf.append("{")
            i += 2
        elif c == "}" and i + 1 < n and text[i + 1] == "}":
            buf.append("}")
            i += 2
        elif c == "{":
            j = text.find("}", i)
            if j < 0:  # a lone brace is text, not a hole
                buf.append(c)
                i += 1
                continue
            if buf:
                parts.append("".join(buf))
                buf = []
            parts.append(Hole(text[i + 1 : j]))
            i = j + 1
        else:
            buf.append(c)
            i += 1
    if buf:
        parts.append("".join(buf))
    return parts


def normalise_parts(parts: list[str | Hole]) -> list[str | Hole]:
    """Adjacent literals joined, adjacent holes merged into one (two values printed side by side
    cannot be told apart), whitespace runs inside literals kept as written."""
    out: list[str | Hole] = []
    for p in parts:
        if isinstance(p, Hole):
            if out and isinstance(out[-1], Hole):
                continue
            out.append(p)
        elif p:
            if out and isinstance(out[-1], str):
                out[-1] = out[-1] + p
            else:
                out.append(p)
    return out


def literal_words(parts: list[str | Hole]) -> list[str]:
    words: list[str] = []
    for p in parts:
        if isinstance(p, str):
            words.extend(_WORD.findall(p))
    return words


def literal_text(parts: list[str | Hole]) -> str:
    return " ".join(p.strip() for p in parts if isinstance(p, str) and p.strip())


@record(frozen=True)
class Template:
    """One message template and where it comes from.

    kind: how the source raises it (TORCH_CHECK, raise, warn, status, ...); exc: the exception
    type a Python user sees ("RuntimeError" for a TORCH_CHECK) when known; n: how many places in
    the source print this same text (the file and function are the first of them)."""

    source: str
    version: str
    text: str
    file: str = ""
    line: int = 0
    func: str = ""
    op: str = ""
    exc: str = ""
    kind: str = ""
    n: int = 1
    code: int | None = None
    api: str = ""
    # Worked out from `text` when not given; compared and hashed with it, so it changes
    # nothing that `text` does not.
    parts: tuple[str | Hole, ...] = ()

    def __post_init__(self) -> None:
        if not self.parts:
            object.__setattr__(self, "parts", tuple(parse_text(self.text)))

    @property
    def is_warning(self) -> bool:
        return self.kind.startswith("warn") or self.exc.endswith("Warning")

    def where(self) -> str:
        """Where the message comes from, for a person: 'pytorch 2.7.0a0 aten/src/...:123 in f'."""
        loc = self.file + (f":{self.line}" if self.line else "")
        fn = f" in {self.func}" if self.func else ""
        return f"{self.source} {self.version} {loc}{fn}".strip()

    def to_json(self) -> dict[str, object]:
        d: dict[str, object] = {"text": self.text}
        for k in ("file", "line", "func", "op", "exc", "kind", "api"):
            v = getattr(self, k)
            if v:
                d[k] = v
        if self.n != 1:
            d["n"] = self.n
        if self.code is not None:
            d["code"] = self.code
        return d
