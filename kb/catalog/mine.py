"""Extract error message templates from source files (C++/CUDA, Python, Rust).

C++: TORCH_CHECK and its typed forms, TORCH_INTERNAL_ASSERT, AT_ERROR, C10_THROW_ERROR,
TORCH_WARN, the TH/THC macros of PyTorch 1.x (THError, THArgCheck), NCCL's WARN, `throw X(...)`,
status strings (`case X: return "...";`) and messages built with c10::str / fmt::format / `+`.
Python: `raise X(...)` with literal, f-string, `%` or `.format()` text (also through a message
variable assigned just before), warnings.warn, logger warnings and errors, torch._check*.
Rust: thiserror's `#[error("...")]` and `new_err(format!(...))`.

A message argument that is not literal text becomes a hole. Templates with fewer than
MIN_WORDS literal words are dropped: they would match too many lines to say anything.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from .template import Hole, format_parts, hole_name, literal_words, normalise_parts

MIN_WORDS = 3

Parts = list[str | Hole]


@dataclass(frozen=True)
class Mined:
    """A template as found in one place; the store merges equal texts."""

    text: str
    file: str
    line: int
    func: str = ""
    op: str = ""
    exc: str = ""
    kind: str = ""


def useful(parts: Parts, kind: str = "") -> bool:
    """A template says something when it has MIN_WORDS literal words; a status string (an enum
    name such as CUBLAS_STATUS_EXECUTION_FAILED, or a short library phrase) is kept when its
    literal text is long enough to be distinctive."""
    words = literal_words(parts)
    if kind == "nccl-warn":  # NCCL's WARN lines are terse ("Cuda failure '%s'") yet specific
        lit = "".join(p for p in parts if isinstance(p, str)).strip()
        return len(words) >= 2 and len(lit) >= 10
    if kind == "status":
        lit = "".join(p for p in parts if isinstance(p, str)).strip()
        return len(lit) >= 12 and bool(words)
    return len(words) >= MIN_WORDS


# ---------------------------------------------------------------- C++ ------------------------

# name -> (exception a Python user sees, arguments before the message, where the type is)
_CPP_MACROS: dict[str, tuple[str, int]] = {
    "TORCH_CHECK": ("RuntimeError", 1),
    "TORCH_CHECK_VALUE": ("ValueError", 1),
    "TORCH_CHECK_INDEX": ("IndexError", 1),
    "TORCH_CHECK_TYPE": ("TypeError", 1),
    "TORCH_CHECK_NOT_IMPLEMENTED": ("NotImplementedError", 1),
    "TORCH_CHECK_LINALG": ("LinAlgError", 1),
    "TORCH_CHECK_ALWAYS_SHOW_CPP_STACKTRACE": ("RuntimeError", 1),
    "STD_TORCH_CHECK": ("RuntimeError", 1),
    "TORCH_SYM_CHECK": ("RuntimeError", 1),
    "TORCH_INTERNAL_ASSERT": ("RuntimeError", 1),
    "AT_ASSERTM": ("RuntimeError", 1),
    "AT_CHECK": ("RuntimeError", 1),
    "AT_ERROR": ("RuntimeError", 0),
    "TORCH_WARN": ("UserWarning", 0),
    "TORCH_WARN_ONCE": ("UserWarning", 0),
    "TORCH_WARN_DEPRECATION": ("DeprecationWarning", 0),
    "TORCH_WARN_DEPRECATION_ONCE": ("DeprecationWarning", 0),
    # typed forms: the first argument is the C++ error type
    "TORCH_CHECK_WITH": ("", 2),
    "C10_THROW_ERROR": ("", 1),
    # PyTorch 1.x TH/THC/THCUNN (printf-style formats)
    "THError": ("RuntimeError", 0),
    "THArgCheck": ("RuntimeError", 2),
    "THArgCheckWarn": ("UserWarning", 2),
    "THAssertMsg": ("RuntimeError", 1),
    "THCAssertSameGPU": ("RuntimeError", 1),
    "THCUNN_argCheck": ("RuntimeError", 4),
    "THNN_ARGCHECK": ("RuntimeError", 2),
    # NCCL's log macro: a WARN line is what NCCL prints before returning an error
    "WARN": ("", 0),
    # ONNX's checker and shape/type inference (onnx/checker.h, onnx/defs/shape_inference.h)
    "fail_check": ("ValidationError", 0),
    "fail_shape_inference": ("InferenceError", 0),
    "fail_type_inference": ("InferenceError", 0),
}
# what a macro puts before its arguments' text
_MACRO_PREFIX = {
    "fail_shape_inference": "[ShapeInferenceError] ",
    "fail_type_inference": "[TypeInferenceError] ",
}
_PRINTF_MACROS = {
    "THError",
    "THArgCheck",
    "THArgCheckWarn",
    "THAssertMsg",
    "THCUNN_argCheck",
    "THNN_ARGCHECK",
    "WARN",
}
_TYPED = {"TORCH_CHECK_WITH", "C10_THROW_ERROR"}
_WARN_KIND = {
    "TORCH_WARN",
    "TORCH_WARN_ONCE",
    "TORCH_WARN_DEPRECATION",
    "TORCH_WARN_DEPRECATION_ONCE",
    "THArgCheckWarn",
}
# c10 error types and the Python exception each becomes (torch/csrc/Exceptions.h)
_C10_TYPES = {
    "Error": "RuntimeError",
    "ValueError": "ValueError",
    "TypeError": "TypeError",
    "IndexError": "IndexError",
    "NotImplementedError": "NotImplementedError",
    "LinAlgError": "LinAlgError",
    "OutOfMemoryError": "OutOfMemoryError",
    "EnforceFiniteError": "RuntimeError",
    "DistError": "DistError",
    "DistBackendError": "DistBackendError",
    "DistStoreError": "DistStoreError",
    "DistNetworkError": "DistNetworkError",
    "DistQueueEmptyError": "DistQueueEmptyError",
    "AcceleratorError": "AcceleratorError",
    "BufferError": "BufferError",
    "SyntaxError": "SyntaxError",
}

_MACRO_RE = re.compile(
    r"(?<![\w.])("
    + "|".join(sorted(map(re.escape, _CPP_MACROS), key=len, reverse=True))
    + r")\s*\("
)
_THROW_RE = re.compile(r"\bthrow\s+(?:(?:std|c10|py|pybind11|torch)::)*([A-Za-z_]\w*)\s*\(")
# an enum's text: `case X: return "...";` or `if (error == X) { return "..."; }` (cuBLAS's)
_STATUS_RE = re.compile(
    r"(?:\bcase\s+[\w:]+\s*:|\bif\s*\(\s*\w+\s*==\s*[\w:]+\s*\))\s*(?:\{\s*)?"
    r"(?:return|\w+\s*=)\s*(?=\")"
)
_FMT_RE = re.compile(
    r"\b(\w*(?:msg|err|error|message|reason|what)\w*)\s*(?:=|\+=|<<)\s*"
    r"(?:std::string\s*\(\s*)?(c10::str|fmt::format|std::format|at::str)\s*\(",
    re.IGNORECASE,
)
# The C API's raise (Triton's and others' C launchers): PyErr_SetString(PyExc_X, "...")
_PYERR_RE = re.compile(r"\b(PyErr_SetString|PyErr_Format)\s*\(\s*PyExc_(\w+)\s*,\s*(?=\")")
_CONTROL = {
    "if",
    "for",
    "while",
    "switch",
    "catch",
    "return",
    "sizeof",
    "decltype",
    "defined",
    "static_assert",
    "alignof",
    "noexcept",
    "TORCH_CHECK",
    "AT_DISPATCH_SWITCH",
}
_QUALS = re.compile(
    r"\)\s*(?:(?:const|override|noexcept|final|volatile|mutable|&&?|->\s*[\w:<>,\s\*&]+?)\s*)*$"
)
_IMPL_MACROS = {
    "TORCH_IMPL_FUNC",
    "TORCH_META_FUNC",
    "TORCH_META_FUNC2",
    "TORCH_PRECOMPUTE_META_FUNC",
    "TORCH_PRECOMPUTE_META_FUNC2",
    "REGISTER_DISPATCH",
}


def _mask_cpp(src: str) -> tuple[str, str]:
    """Two copies of the source, positions kept: comments blanked (strings kept), and comments
    and string/char literal contents blanked (for counting braces and parentheses)."""
    out_c: list[str] = []
    out_s: list[str] = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if c == "/" and i + 1 < n and src[i + 1] == "/":
            j = src.find("\n", i)
            j = n if j < 0 else j
            blank = " " * (j - i)
            out_c.append(blank)
            out_s.append(blank)
            i = j
        elif c == "/" and i + 1 < n and src[i + 1] == "*":
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            blank = re.sub(r"[^\n]", " ", src[i:j])
            out_c.append(blank)
            out_s.append(blank)
            i = j
        elif (
            c == "R"
            and src.startswith('R"', i)
            and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_") or src[i - 1] in "8uUL")
        ):
            m = re.match(r'R"([^()\\\s]{0,16})\(', src[i:])
            if not m:
                out_c.append(c)
                out_s.append(c)
                i += 1
                continue
            end = src.find(")" + m.group(1) + '"', i + m.end())
            j = n if end < 0 else end + len(m.group(1)) + 2
            out_c.append(src[i:j])
            out_s.append('R"' + re.sub(r"[^\n]", " ", src[i + 2 : j - 1]) + '"')
            i = j
        elif c in "\"'":
            if c == "'" and i > 0 and (src[i - 1].isalnum()) and i + 1 < n and src[i + 1].isalnum():
                # a digit separator (1'000'000), not a char literal
                out_c.append(c)
                out_s.append(c)
                i += 1
                continue
            j = i + 1
            while j < n and src[j] != c and src[j] != "\n":
                j += 2 if src[j] == "\\" else 1
            j = min(j + 1, n)
            out_c.append(src[i:j])
            out_s.append(c + " " * max(0, j - i - 2) + (c if j - i >= 2 else ""))
            i = j
        else:
            out_c.append(c)
            out_s.append(c)
            i += 1
    return "".join(out_c), "".join(out_s)


def _close_paren(masked: str, open_pos: int) -> int:
    depth = 0
    for k in range(open_pos, len(masked)):
        ch = masked[k]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return k
    return -1


def _split_args(text: str, masked: str, start: int, end: int) -> list[tuple[int, int]]:
    """Top-level comma-separated spans of text[start:end] (templates' angle brackets are not
    tracked: a comma inside `<...>` in a message argument is rare enough)."""
    spans: list[tuple[int, int]] = []
    depth = 0
    s = start
    for k in range(start, end):
        ch = masked[k]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            spans.append((s, k))
            s = k + 1
    if text[s:end].strip():
        spans.append((s, end))
    return spans


_ESC = {"n": "\n", "t": "\t", "r": "", '"': '"', "'": "'", "\\": "\\", "0": "", "a": "", "b": ""}


def _unescape(body: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt == "x":
                m = re.match(r"[0-9a-fA-F]{1,2}", body[i + 2 :])
                out.append(chr(int(m.group(0), 16)) if m else "x")
                i += 2 + (len(m.group(0)) if m else 0)
                continue
            out.append(_ESC.get(nxt, nxt))
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


_CPP_STR = re.compile(
    r'(?:u8|u|U|L)?"((?:[^"\\\n]|\\.)*)"|(?:u8|u|U|L)?R"([^()\\\s]{0,16})\((.*?)\)\2"', re.DOTALL
)


def _cpp_literal(expr: str) -> str | None:
    """The text of an expression that is only adjacent string literals (and macros that expand
    to nothing the reader sees, like a stray newline), else None."""
    pos = 0
    out: list[str] = []
    expr = expr.strip()
    if not expr:
        return None
    while pos < len(expr):
        m = _CPP_STR.match(expr, pos)
        if not m:
            return None
        out.append(_unescape(m.group(1)) if m.group(1) is not None else m.group(3))
        pos = m.end()
        while pos < len(expr) and expr[pos].isspace():
            pos += 1
    return "".join(out)


_PRINTF = re.compile(
    r"%(?:%|[-+ #0]*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|L|z|j|t|q)?"
    r"[diouxXeEfFgGaAcspn]|(?:PRI[diouxX](?:8|16|32|64)|PRI[diouxX]PTR)|(?:\"\s*PRI\w+\s*\"))"
)
_FMT_BRACES = re.compile(r"\{\{|\}\}|\{[^{}]*\}")


def printf_parts(fmt: str) -> Parts:
    parts: Parts = []
    pos = 0
    for m in _PRINTF.finditer(fmt):
        parts.append(fmt[pos : m.start()])
        parts.append("%" if m.group(0) == "%%" else Hole())
        pos = m.end()
    parts.append(fmt[pos:])
    return normalise_parts(parts)


def brace_parts(fmt: str, names: list[str] | None = None) -> Parts:
    """`{}` / `{0}` / `{name}` / `{:>8}` holes of fmt::format, str.format and Rust format!."""
    parts: Parts = []
    pos = 0
    k = 0
    for m in _FMT_BRACES.finditer(fmt):
        parts.append(fmt[pos : m.start()])
        tok = m.group(0)
        if tok in ("{{", "}}"):
            parts.append(tok[0])
        else:
            field = tok[1:-1].split(":", 1)[0].split("!", 1)[0].strip()
            if field and re.fullmatch(r"[A-Za-z_]\w*", field):
                name = field
            elif names is not None and (field.isdigit() or not field):
                idx = int(field) if field.isdigit() else k
                name = names[idx] if idx < len(names) else ""
            else:
                name = ""
            k += 1
            parts.append(Hole(name))
        pos = m.end()
    parts.append(fmt[pos:])
    return normalise_parts(parts)


def _split_plus(expr: str) -> list[str] | None:
    """Operands of a top-level `+` (std::string concatenation), or None if there is none."""
    _, masked = _mask_cpp(expr)
    depth = 0
    cuts: list[int] = []
    for k, ch in enumerate(masked):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "+" and depth == 0:
            prev = masked[k - 1] if k else ""
            nxt = masked[k + 1] if k + 1 < len(masked) else ""
            if prev != "+" and nxt not in "+=":
                cuts.append(k)
    if not cuts:
        return None
    out, s = [], 0
    for c in cuts:
        out.append(expr[s:c])
        s = c + 1
    out.append(expr[s:])
    return out


_WRAPPERS = re.compile(
    r"^(?:c10::str|at::str|::c10::str|fmt::format|std::format|std::string|"
    r"c10::Error|at::Error|std::runtime_error)\s*\(",
    re.DOTALL,
)


def cpp_expr_parts(expr: str, printf: bool = False, depth: int = 0) -> Parts:
    """One message argument as parts: literal text, or holes for what the program computes."""
    expr = expr.strip()
    lit = _cpp_literal(expr)
    if lit is not None:
        return printf_parts(lit) if printf else [lit]
    if depth > 4:
        return [Hole()]
    m = _WRAPPERS.match(expr)
    if m and expr.endswith(")"):
        inner = expr[m.end() : -1]
        code, masked = _mask_cpp(inner)
        spans = _split_args(code, masked, 0, len(code))
        args = [code[a:b] for a, b in spans]
        name = m.group(0).split("(")[0].strip()
        if name in ("fmt::format", "std::format") and args:
            first = _cpp_literal(args[0])
            if first is not None:
                return brace_parts(first, [hole_name(a) for a in args[1:]])
        parts: Parts = []
        for a in args:
            parts.extend(cpp_expr_parts(a, printf, depth + 1))
        return normalise_parts(parts)
    operands = _split_plus(expr)
    if operands:
        parts = []
        for o in operands:
            parts.extend(cpp_expr_parts(o, printf, depth + 1))
        return normalise_parts(parts)
    return [Hole(hole_name(expr))]


def _function_spans(masked: str) -> list[tuple[int, int, str]]:
    """(body start, body end, name) for each function body in a C++ file."""
    spans: list[tuple[int, int, str]] = []
    stack: list[tuple[int, str]] = []
    for k, ch in enumerate(masked):
        if ch == "{":
            name = ""
            head = masked[max(0, k - 400) : k]
            q = _QUALS.search(head)
            if q:
                close = k - (len(head) - q.start())
                depth = 0
                j = close
                while j >= 0:
                    if masked[j] == ")":
                        depth += 1
                    elif masked[j] == "(":
                        depth -= 1
                        if depth == 0:
                            break
                    j -= 1
                pre = masked[max(0, j - 200) : j].rstrip()
                if pre.endswith(")"):
                    # TORCH_IMPL_FUNC(name) (args) { : the name is the macro's argument
                    o = masked.rfind("(", 0, j - (len(masked[max(0, j - 200) : j]) - len(pre)))
                    mi = re.search(r"(\w+)\s*$", masked[max(0, o - 60) : o])
                    if o >= 0 and mi and mi.group(1) in _IMPL_MACROS:
                        pre = masked[o + 1 : masked.find(")", o)].split(",")[0].strip()
                mm = re.search(r"([A-Za-z_~][\w]*(?:<[^<>;{}()]*>)?)$", pre)
                if mm and not pre.endswith("]"):
                    ident = re.sub(r"<.*", "", mm.group(1))
                    if ident in _IMPL_MACROS:
                        inner = masked[j + 1 : close]
                        ident = inner.split(",")[0].strip()
                    if ident and ident not in _CONTROL and not ident.isupper():
                        name = ident
                    elif ident in ("TORCH_CHECK",):
                        name = ""
            stack.append((k, name))
        elif ch == "}" and stack:
            start, name = stack.pop()
            if name:
                spans.append((start, k, name))
    return spans


def _enclosing(spans: list[tuple[int, int, str]], pos: int) -> str:
    best = ""
    best_start = -1
    for s, e, name in spans:
        if s <= pos <= e and s > best_start:
            best, best_start = name, s
    return best


_OP_PREFIX = re.compile(
    r"^(?:torch\.|at::|aten::)?([a-z_][a-z0-9_]*(?:\.[a-z_]\w*)?)(?:\(\))?\s*:\s"
)
_OP_SUFFIX = re.compile(
    r"(?:_(?:cpu|cuda|mps|xpu|out|impl|kernel|template|check|checks|meta|"
    r"stub|launcher|symint|nocheck|cuda_template|cpu_template))+_?$"
)


def aten_op(path: str, text: str, func: str) -> str:
    """The ATen op a native check belongs to: the `name(): ` its message starts with, else its
    function's name without the device/out suffixes."""
    if "ATen/native" not in path:
        return ""
    m = _OP_PREFIX.match(text)
    if (m and "_" in m.group(1)) or (m and len(m.group(1)) > 3):
        return m.group(1) if m else ""
    if not func or func.startswith(("operator", "~")):
        return ""
    name = func.split("::")[-1]
    name = re.sub(r"^(?:check_|checks_|_check_|validate_)", "", name)
    m = _OP_SUFFIX.search(name)
    if m:
        # embedding_renorm_cpu_ is the in-place op embedding_renorm_; index_select_out_cpu_
        # is index_select's out= variant, whose trailing underscore says nothing
        inplace = name.endswith("_") and "_out" not in m.group(0)
        name = name[: m.start()] + ("_" if inplace and m.start() else "")
    return name if re.fullmatch(r"[a-z_][a-z0-9_]*", name) else ""


def _lineno(src: str, pos: int, cache: list[int]) -> int:
    # cache holds line-start offsets; bisect keeps it fast on 10k-line files
    import bisect

    if not cache:
        cache.append(0)
        cache.extend(i + 1 for i, ch in enumerate(src) if ch == "\n")
    return bisect.bisect_right(cache, pos)


def mine_cpp(src: str, path: str) -> Iterator[Mined]:
    code, masked = _mask_cpp(src)
    spans = _function_spans(masked)
    lines: list[int] = []
    seen_pos: set[int] = set()

    def emit(parts: Parts, pos: int, exc: str, kind: str) -> Iterator[Mined]:
        parts = normalise_parts(parts)
        if not useful(parts, kind):
            return
        text = format_parts(parts).strip()
        func = _enclosing(spans, pos)
        yield Mined(
            text=text,
            file=path,
            line=_lineno(src, pos, lines),
            func=func,
            op=aten_op(path, text, func),
            exc=exc,
            kind=kind,
        )

    for m in _MACRO_RE.finditer(code):
        name = m.group(1)
        if masked[m.start(1) - 1 : m.start(1)] == "#" or re.search(
            r"#\s*define\s+$", code[max(0, m.start() - 40) : m.start()]
        ):
            continue
        open_pos = m.end() - 1
        close = _close_paren(masked, open_pos)
        if close < 0:
            continue
        args = _split_args(code, masked, open_pos + 1, close)
        exc, skip = _CPP_MACROS[name]
        if name in _TYPED:
            if not args:
                continue
            ctype = code[args[0][0] : args[0][1]].strip().split("::")[-1]
            if not re.fullmatch(r"\w+", ctype):
                continue  # a macro parameter passed through (#define wrappers): not a message
            exc = _C10_TYPES.get(ctype, ctype)
        msg_args = args[skip:]
        if name == "WARN" and not (path.endswith((".cc", ".cu", ".h", ".cpp")) and msg_args):
            continue
        if not msg_args:
            continue
        printf = name in _PRINTF_MACROS
        if name == "THCUNN_argCheck":
            printf = True
        parts: Parts = [_MACRO_PREFIX[name]] if name in _MACRO_PREFIX else []
        if printf:  # the format alone: its % conversions are the holes the arguments fill
            parts.extend(cpp_expr_parts(code[msg_args[0][0] : msg_args[0][1]], True))
        else:
            for a, b in msg_args:
                parts.extend(cpp_expr_parts(code[a:b]))
        kind = "warn" if name in _WARN_KIND else ("nccl-warn" if name == "WARN" else name)
        if name == "WARN":
            exc = ""
        if name == "TORCH_INTERNAL_ASSERT":
            exc = "RuntimeError"
        seen_pos.update(range(open_pos, close))
        yield from emit(parts, m.start(), exc, kind)

    for m in _THROW_RE.finditer(code):
        if m.start() in seen_pos:
            continue
        open_pos = m.end() - 1
        close = _close_paren(masked, open_pos)
        if close < 0:
            continue
        args = _split_args(code, masked, open_pos + 1, close)
        if not args:
            continue
        ctype = m.group(1)
        exc = _C10_TYPES.get(
            ctype,
            {
                "runtime_error": "RuntimeError",
                "invalid_argument": "ValueError",
                "out_of_range": "IndexError",
                "logic_error": "RuntimeError",
                "value_error": "ValueError",
                "type_error": "TypeError",
                "index_error": "IndexError",
                "key_error": "KeyError",
                "attribute_error": "AttributeError",
            }.get(ctype, ctype),
        )
        parts = []
        for a, b in args[:1] if ctype not in _C10_TYPES else args[-1:]:
            parts.extend(cpp_expr_parts(code[a:b]))
        seen_pos.update(range(open_pos, close))
        yield from emit(parts, m.start(), exc, "throw")

    for m in _PYERR_RE.finditer(code):
        lit_m = _CPP_STR.match(code, m.end())
        if not lit_m or lit_m.group(1) is None:
            continue
        exc = m.group(2)
        text = _unescape(lit_m.group(1))
        parts = printf_parts(text) if m.group(1) == "PyErr_Format" else [text]
        yield from emit(parts, m.start(), exc, "raise")

    for m in _STATUS_RE.finditer(code):
        lit_m = _CPP_STR.match(code, m.end())
        if not lit_m or lit_m.group(1) is None:
            continue
        text = _unescape(lit_m.group(1))
        yield from emit([text], m.start(), "", "status")

    for m in _FMT_RE.finditer(code):
        open_pos = m.end() - 1
        if open_pos in seen_pos:
            continue
        close = _close_paren(masked, open_pos)
        if close < 0:
            continue
        expr = code[m.start(2) : close + 1]
        yield from emit(cpp_expr_parts(expr), m.start(), "", "message")


# ---------------------------------------------------------------- Python ---------------------

_PY_PRINTF = re.compile(
    r"%(?:%|(?:\([A-Za-z_]\w*\))?[-+ #0]*(?:\d+|\*)?(?:\.\d+)?[diouxXeEfFgGcrsa])"
)


def _py_printf(fmt: str) -> Parts:
    parts: Parts = []
    pos = 0
    for m in _PY_PRINTF.finditer(fmt):
        parts.append(fmt[pos : m.start()])
        tok = m.group(0)
        if tok == "%%":
            parts.append("%")
        else:
            nm = re.match(r"%\(([A-Za-z_]\w*)\)", tok)
            parts.append(Hole(nm.group(1) if nm else ""))
        pos = m.end()
    parts.append(fmt[pos:])
    return normalise_parts(parts)


def _py_name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Call):
        return _py_name(node.func)
    return ""


_EXC_NAME = re.compile(r"[A-Z]\w*(?:Error|Exception|NotFound)")
_KEBAB = re.compile(r"[a-z]+(?:-[a-z]+){2,}")


def _is_exception_class(node: ast.ClassDef) -> bool:
    """A class that is an exception by its name or its bases' names (Error, Exception,
    Warning): its __init__'s message is a message users see."""
    names = [node.name] + [_py_name(b) for b in node.bases]
    return any(n.endswith(("Error", "Exception", "Warning", "Failure", "Failed")) for n in names)


def _init_params(node: ast.FunctionDef | ast.AsyncFunctionDef | None) -> set[str]:
    if node is None:
        return set()
    a = node.args
    return {p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]}


class _PyMiner(ast.NodeVisitor):
    def __init__(self, path: str) -> None:
        self.path = path
        self.out: list[Mined] = []
        self.funcs: list[str] = []
        self.assigns: list[dict[str, list[tuple[int, ast.AST, bool]]]] = [{}]
        self.classes: list[ast.ClassDef] = []
        self.init_def: ast.FunctionDef | ast.AsyncFunctionDef | None = None
        self.handled: set[int] = set()  # exception calls already read as a raise

    # message expressions --------------------------------------------------------------------
    def parts(self, node: ast.AST, line: int, depth: int = 0) -> Parts:
        if depth > 6:
            return [Hole()]
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [node.value]
        if isinstance(node, ast.JoinedStr):
            out: Parts = []
            for v in node.values:
                if isinstance(v, ast.Constant) and isinstance(v.value, str):
                    out.append(v.value)
                elif isinstance(v, ast.FormattedValue):
                    out.append(
                        Hole(
                            _py_name(v.value)
                            if isinstance(v.value, (ast.Name, ast.Attribute))
                            else ""
                        )
                    )
            return normalise_parts(out)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return normalise_parts(
                self.parts(node.left, line, depth + 1) + self.parts(node.right, line, depth + 1)
            )
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            left = node.left
            if isinstance(left, ast.Constant) and isinstance(left.value, str):
                return _py_printf(left.value)
            return [Hole()]
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "format"
        ):
            base = node.func.value
            if isinstance(base, ast.Constant) and isinstance(base.value, str):
                names = [
                    _py_name(a) if isinstance(a, (ast.Name, ast.Attribute)) else ""
                    for a in node.args
                ]
                return brace_parts(base.value, names)
            return [Hole()]
        if isinstance(node, ast.Call) and node.args and not node.keywords:
            # a message handed through a helper: dedent(f"..."), _with_full_key(msg, key)
            fname = _py_name(node.func)
            inner = node.args[0]
            if isinstance(inner, (ast.Constant, ast.JoinedStr, ast.Name, ast.BinOp)) and not (
                isinstance(inner, ast.Constant) and not isinstance(inner.value, str)
            ):
                if fname == "dedent":
                    got = self.parts(inner, line, depth + 1)
                    return normalise_parts(
                        [re.sub(r"\n[ \t]+", "\n", p) if isinstance(p, str) else p for p in got]
                    )
                if fname.startswith("_") or fname in ("escape", "gettext", "_"):
                    got = self.parts(inner, line, depth + 1)
                    return normalise_parts(got + ([Hole()] if len(node.args) > 1 else []))
            return [Hole()]
        if isinstance(node, ast.Name):
            found = self.lookup(node.id, line)
            if found is not None:
                out = []
                for val in found:
                    out.extend(self.parts(val, line, depth + 1))
                return normalise_parts(out)
            return [Hole(node.id)]
        if isinstance(node, ast.Attribute):
            return [Hole(node.attr)]
        return [Hole()]

    def lookup(self, name: str, line: int) -> list[ast.AST] | None:
        """A message variable's text: its last plain assignment before `line` in this function,
        with the `+=` that follow it."""
        hist = self.assigns[-1].get(name)
        if not hist:
            return None
        before = [h for h in hist if h[0] < line]
        if not before:
            return None
        start = (
            max(i for i, h in enumerate(before) if not h[2])
            if any(not h[2] for h in before)
            else None
        )
        if start is None:
            return None
        return [h[1] for h in before[start:]]

    def assigned(self, name: str, line: int) -> list[list[ast.AST]]:
        """Every text a message variable may hold at `line`: one per plain assignment before it
        in this function (the branches of an if/else each set their own), with the `+=` that
        follow that assignment."""
        hist = [h for h in self.assigns[-1].get(name, []) if h[0] < line]
        out: list[list[ast.AST]] = []
        for i, h in enumerate(hist):
            if h[2]:
                continue
            vals = [h[1]]
            for later in hist[i + 1 :]:
                if not later[2]:
                    break
                vals.append(later[1])
            out.append(vals)
        return out

    # visitors ---------------------------------------------------------------------------------
    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.classes.append(node)
        for stmt in node.body:
            # pip's diagnostic errors print `error: <reference>` above their message
            if (
                isinstance(stmt, ast.Assign)
                and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)
                and stmt.targets[0].id == "reference"
                and isinstance(stmt.value, ast.Constant)
                and isinstance(stmt.value.value, str)
                and _KEBAB.fullmatch(stmt.value.value)
                and _is_exception_class(node)
            ):
                self.emit(stmt, ast.Constant("error: " + stmt.value.value), node.name, "raise")
        self.generic_visit(node)
        self.classes.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.funcs.append(node.name)
        self.assigns.append({})
        outer = self.init_def
        # a method's own __init__ (directly in the class body), not a nested function's
        in_class = bool(self.classes) and node in self.classes[-1].body
        self.init_def = node if (node.name == "__init__" and in_class) else None
        self.generic_visit(node)
        self.init_def = outer
        self.assigns.pop()
        self.funcs.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Assign(self, node: ast.Assign) -> None:
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            self.assigns[-1].setdefault(node.targets[0].id, []).append(
                (node.lineno, node.value, False)
            )
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.target, ast.Name) and isinstance(node.op, ast.Add):
            self.assigns[-1].setdefault(node.target.id, []).append((node.lineno, node.value, True))
        self.generic_visit(node)

    def emit(self, node: ast.AST, msg: ast.AST, exc: str, kind: str, printf: bool = False) -> None:
        line = getattr(node, "lineno", 0)
        if isinstance(msg, ast.Name):
            options = self.assigned(msg.id, line)
            if len(options) > 1:  # set in the branches of an if/else: one template each
                for vals in options:
                    parts: Parts = []
                    for v in vals:
                        parts.extend(self.parts(v, line, 1))
                    self.emit_parts(node, normalise_parts(parts), exc, kind)
                return
        if printf and isinstance(msg, ast.Constant) and isinstance(msg.value, str):
            parts = _py_printf(msg.value)  # logger.error("... %s ...", value)
        else:
            parts = normalise_parts(self.parts(msg, line))
        self.emit_parts(node, parts, exc, kind)

    def emit_parts(self, node: ast.AST, parts: Parts, exc: str, kind: str) -> None:
        line = getattr(node, "lineno", 0)
        if not useful(parts, kind):
            return
        self.out.append(
            Mined(
                text=format_parts(parts).strip(),
                file=self.path,
                line=line,
                func=self.funcs[-1] if self.funcs else "",
                exc=exc,
                kind=kind,
            )
        )

    def visit_Raise(self, node: ast.Raise) -> None:
        exc = node.exc
        if isinstance(exc, ast.Call):
            msg = (
                exc.args[0]
                if exc.args
                else next(
                    (k.value for k in exc.keywords if k.arg in ("msg", "message", "reason")), None
                )
            )
            if msg is not None:
                self.emit(node, msg, _py_name(exc.func), "raise")
            self.handled.add(id(exc))
        self.generic_visit(node)

    def visit_Return(self, node: ast.Return) -> None:
        # an exception's __str__: what a raise of it prints
        if (
            node.value is not None
            and self.classes
            and self.funcs
            and self.funcs[-1] == "__str__"
            and _is_exception_class(self.classes[-1])
        ):
            self.emit(node, node.value, self.classes[-1].name, "raise")
        self.generic_visit(node)

    def init_message(self, node: ast.Call) -> None:
        """An exception class that builds its message in __init__ and hands it to its base
        (`super().__init__(msg)`, `Base.__init__(self, message=...)`): the message is what its
        `raise` prints, whatever the raise site passes."""
        cls = self.classes[-1]
        func = node.func
        assert isinstance(func, ast.Attribute)
        args = list(node.args)
        if not (isinstance(func.value, ast.Call) and _py_name(func.value) == "super"):
            if args and isinstance(args[0], ast.Name) and args[0].id == "self":
                args = args[1:]
            else:
                return
        msg = args[0] if args else None
        if msg is None:
            msg = next((k.value for k in node.keywords if k.arg in ("msg", "message")), None)
        if msg is None:
            return
        if isinstance(msg, ast.Name):
            options = self.assigned(msg.id, getattr(node, "lineno", 0))
            if len(options) > 1:
                for vals in options:
                    parts: Parts = []
                    for v in vals:
                        parts.extend(self.parts(v, getattr(node, "lineno", 0), 1))
                    self.emit_parts(node, normalise_parts(parts), cls.name, "raise")
                return
        if isinstance(msg, ast.Name) and msg.id in _init_params(self.init_def):
            return  # the caller's text, mined where it raises
        self.emit(node, msg, cls.name, "raise")

    def visit_Call(self, node: ast.Call) -> None:
        name = _py_name(node.func)
        base = _py_name(node.func.value) if isinstance(node.func, ast.Attribute) else ""
        if (
            id(node) not in self.handled
            and _EXC_NAME.fullmatch(name)
            and isinstance(node.func, (ast.Name, ast.Attribute))
            and node.args
            and not (isinstance(node.func, ast.Attribute) and node.func.attr == "__init__")
        ):
            # an exception made here and raised elsewhere (`return DistributionNotFound(...)`,
            # `cause=ConfigKeyError(msg)`)
            self.emit(node, node.args[0], name, "raise")
        if (
            name == "__init__"
            and isinstance(node.func, ast.Attribute)
            and self.classes
            and self.funcs
            and self.funcs[-1] == "__init__"
            and self.init_def is not None
            and _is_exception_class(self.classes[-1])
        ):
            self.init_message(node)
        if name == "warn" and base == "warnings" and node.args:
            cat = (
                _py_name(node.args[1])
                if len(node.args) > 1
                else next(
                    (_py_name(k.value) for k in node.keywords if k.arg == "category"), "UserWarning"
                )
            )
            self.emit(node, node.args[0], cat or "UserWarning", "warn")
        elif (
            name
            in (
                "warning",
                "warning_once",
                "warning_advice",
                "warn",
                "error",
                "critical",
                "exception",
                "fatal",
            )
            and "log" in base.lower()
            and node.args
        ):
            kind = "warn" if name.startswith("warn") else "log-error"
            self.emit(node, node.args[0], "", kind, printf=len(node.args) > 1)
        elif name.startswith("_check") and base == "torch" and len(node.args) >= 2:
            msg = node.args[-1]
            if isinstance(msg, ast.Lambda):
                msg = msg.body
            exc = {
                "_check_value": "ValueError",
                "_check_index": "IndexError",
                "_check_type": "TypeError",
                "_check_not_implemented": "NotImplementedError",
            }.get(name, "RuntimeError")
            if name == "_check_with":
                exc = _py_name(node.args[0])
            self.emit(node, msg, exc, "check")
        self.generic_visit(node)


def mine_python(src: str, path: str) -> list[Mined]:
    try:
        tree = ast.parse(src)
    except (SyntaxError, ValueError):
        return []
    miner = _PyMiner(path)
    miner.visit(tree)
    return miner.out


# ---------------------------------------------------------------- Rust -----------------------

_RS_ERROR_ATTR = re.compile(r'#\[error\(\s*"((?:[^"\\]|\\.)*)"')
_RS_NEW_ERR = re.compile(
    r'(?:new_err|PyErr::new::<\s*(\w+)[^>]*>)\s*\(\s*(?:format!\s*\(\s*)?"((?:[^"\\]|\\.)*)"'
)


def mine_rust(src: str, path: str) -> Iterator[Mined]:
    for m in _RS_ERROR_ATTR.finditer(src):
        parts = brace_parts(_unescape(m.group(1)))
        if useful(parts):
            yield Mined(
                text=format_parts(parts),
                file=path,
                line=src.count("\n", 0, m.start()) + 1,
                kind="error-attr",
            )
    for m in _RS_NEW_ERR.finditer(src):
        parts = brace_parts(_unescape(m.group(2)))
        if useful(parts):
            yield Mined(
                text=format_parts(parts),
                file=path,
                line=src.count("\n", 0, m.start()) + 1,
                exc=m.group(1) or "",
                kind="raise",
            )


CPP_EXT = (".cpp", ".cc", ".cu", ".cuh", ".h", ".hpp", ".cxx", ".c", ".mm", ".hip")


def mine_file(path: str, src: str) -> list[Mined]:
    """Templates of one file by its extension; unknown kinds of file give none."""
    if path.endswith(".py"):
        return mine_python(src, path)
    if path.endswith(CPP_EXT):
        return list(mine_cpp(src, path))
    if path.endswith(".rs"):
        return list(mine_rust(src, path))
    return []


def mine_files(files: Iterable[tuple[str, str]]) -> list[Mined]:
    out: list[Mined] = []
    for path, src in files:
        out.extend(mine_file(path, src))
    return out
