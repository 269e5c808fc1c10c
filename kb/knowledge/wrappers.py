"""CUDA errors in any wrapper: the same error, printed by PyTorch, Triton, ROCm/HIP, CuPy,
JAX/XLA, TensorRT, TransformerEngine, NCCL, cuda-gdb, compute-sanitizer or a custom extension.

Each wrapper puts the CUDA error's text, name or number in its own frame. Reading the frame
tells which part is the error; the code table (kb/data/cuda_codes.json) then says which code it
is, and the entry that owns the code answers. The wrapper itself is kept as a fact. The frames,
names, cuda-gdb's and compute-sanitizer's forms are data (kb/data/wrappers.yaml, read with the
entries: kb.knowledge.data); this module only reads lines with them.

A message text is only read inside a frame that says CUDA (or HIP): "invalid argument" alone is
every other OSError. A text cut off at the end of a line (an excerpt, a paste) still counts when
what is left names one code, as a partial sighting.
"""

from __future__ import annotations

import re
from functools import lru_cache

import kb.knowledge.cuda_codes as cuda_codes
from kb.model.record import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from kb.knowledge.data import WrapperForms


@record(frozen=True)
class Sighting:
    api: str  # runtime | driver
    value: int
    name: str
    text: str
    wrapper: str
    partial: bool = False


class _Compiled:
    """A WrapperForms' regexes, each compiled the first time a line holds its key (a lookup
    meets few of the frames: compiling them all cost a cold lookup 2 ms)."""

    def __init__(self, forms: WrapperForms):
        self.forms = forms
        self.frames = [(f.wrapper, f.key, f.pattern) for f in forms.frames]
        self._rx: dict[tuple[str, int], re.Pattern] = {}
        # A line holding none of these is read by no frame (each key holds one of them): most
        # lines of a log are passed over with a few `in` tests.
        keys = {f.key for f in forms.frames}
        self.gate = tuple(k for k in keys if not any(o != k and o in k for o in keys))

    def rx(self, pattern: str, flags: int = 0) -> re.Pattern:
        got = self._rx.get((pattern, flags))
        if got is None:
            got = self._rx[pattern, flags] = re.compile(pattern, flags)
        return got

    @property
    def name(self) -> re.Pattern:
        return self.rx(self.forms.name_pattern)

    @property
    def gdb(self) -> re.Pattern:
        return self.rx(self.forms.gdb_pattern)

    @property
    def sanitizer(self) -> re.Pattern:
        return self.rx(self.forms.sanitizer_pattern)


_COMPILED: dict[int, _Compiled] = {}  # id(forms) -> its regexes (the entry holds the forms alive)


def _compiled(forms: WrapperForms | None) -> _Compiled | None:
    if forms is None:
        from kb.knowledge.data import bundled

        forms = bundled().wrappers
        if forms is None:  # kb/data/wrappers.yaml is broken: kb lint says how
            return None
    c = _COMPILED.get(id(forms))
    if c is None or c.forms is not forms:
        c = _COMPILED[id(forms)] = _Compiled(forms)
    return c


CUT_MIN = 14  # characters of a cut-off text needed before it can name one code


@lru_cache(maxsize=1)
def _texts() -> tuple[tuple[str, cuda_codes.CodeInfo], ...]:
    """(lowercased text, code) for modern runtime then driver codes, longest text first, so the
    longest known text that a frame's text starts with wins."""
    seen: dict[str, cuda_codes.CodeInfo] = {}
    for api in ("runtime", "driver"):
        for value in sorted(int(v) for v in cuda_codes.table()[api.replace("-", "_")]):
            info = cuda_codes.get(api, value)
            if info and info.value != 0 and info.text:
                seen.setdefault(info.text.casefold().rstrip("."), info)
    return tuple(sorted(seen.items(), key=lambda kv: -len(kv[0])))


def code_for_text(text: str) -> tuple[cuda_codes.CodeInfo, bool] | None:
    """(code, partial) for a frame's text: a known text it starts with, else (when the text was
    cut off) the one known text that starts with it."""
    t = text.strip().casefold()
    for known, info in _texts():
        if t.startswith(known) and (len(t) == len(known) or not t[len(known)].isalnum()):
            return info, False
    t = t.rstrip(" .")
    if len(t) >= CUT_MIN:
        # (A text that is itself a whole message returned above: "operation not permitted" is
        # code 800, not a cut-off "operation not permitted when stream is capturing".)
        cut = [info for known, info in _texts() if known.startswith(t) and len(known) > len(t)]
        if len(cut) == 1:
            return cut[0], True
    return None


def _by_name(name: str, aliases: dict[str, str]) -> cuda_codes.CodeInfo | None:
    if name.startswith("hipError"):
        name = aliases.get(name, "cudaError" + name[len("hipError") :])
    return cuda_codes.by_name(name)


def sightings(line: str, forms: WrapperForms | None = None) -> list[Sighting]:
    """Every CUDA error this line states, with the wrapper that printed it. `forms`: the
    knowledge base's (kb/data/wrappers.yaml), by default the bundled ones."""
    c = _compiled(forms)
    if c is None:
        return []
    f = c.forms
    low = line.lower()
    out: list[Sighting] = []
    if _holds(low, f.name_keys):
        for name in c.name.findall(line):
            info = _by_name(name, f.hip_aliases)
            if info:
                wrapper = "hip" if name.startswith("hip") else "name"
                out.append(Sighting(info.api, info.value, info.name, info.text, wrapper))
        if out:
            return out
    if _holds(low, f.gdb_keys):
        m = c.gdb.search(line)
        if m:
            value = f.gdb_codes.get(int(m.group("n"))) if m.group("n") else None
            desc = (m.group("desc") or line[m.end() :]).lower()
            if value is None or m.group("n") is None:
                value = next((v for w, v in f.gdb_words if w in desc), value)
            info = cuda_codes.get("runtime", value) if value is not None else None
            if info:
                return [Sighting("runtime", info.value, info.name, info.text, "cuda-gdb")]
    if f.sanitizer_key in low and c.sanitizer.search(line):
        info = cuda_codes.get("runtime", f.sanitizer_code)
        if info:
            return [Sighting("runtime", info.value, info.name, info.text, "compute-sanitizer")]
    for wrapper, key, pattern in c.frames if _holds(low, c.gate) else ():
        if key not in low:
            continue
        m = c.rx(pattern, re.IGNORECASE).search(line)
        if not m:
            continue
        d = m.groupdict()
        if d.get("num"):
            info = cuda_codes.get("driver", int(d["num"]))
            if info:
                return [Sighting("driver", info.value, info.name, info.text, wrapper)]
        if d.get("rest") is not None:
            found = _after_colons(d["rest"])
        else:
            found = code_for_text(d.get("text") or "")
        if found:
            info, partial = found
            return [Sighting(info.api, info.value, info.name, info.text, wrapper, partial)]
    if not out:
        bare = _distinctive(low)
        if bare:
            out.append(Sighting(bare.api, bare.value, bare.name, bare.text, "bare"))
    return out


def _holds(low: str, keys: tuple[str, ...]) -> bool:
    return any(k in low for k in keys)


def _after_colons(rest: str) -> tuple[cuda_codes.CodeInfo, bool] | None:
    """The code whose text follows one of the colons in `rest` (at most the first few)."""
    pos = 0
    for _ in range(6):
        pos = rest.find(":", pos)
        if pos == -1:
            return None
        pos += 1
        found = code_for_text(rest[pos:])
        if found:
            return found
    return None


DISTINCTIVE_MIN = 24  # a message text this long means its code even with no CUDA frame around it


@lru_cache(maxsize=1)
def _distinctive_texts() -> tuple[tuple[str, cuda_codes.CodeInfo], ...]:
    return tuple((t, i) for t, i in _texts() if len(t) >= DISTINCTIVE_MIN and i.api == "runtime")


# Lines tested with the plain loop before the word index is built (~0.2 ms, and two regexes a
# cold one-line lookup would otherwise compile).
DISTINCTIVE_INDEX_AFTER = 64
_distinctive_calls = 0


@lru_cache(maxsize=1)
def _distinctive_words() -> tuple[dict[str, list[int]], list[int], re.Pattern[str]]:
    """Each distinctive text filed under one word it holds whole (spaces on both sides within
    the text, so that word is a whole word of any line holding the text); texts with no such
    word are tried on every line. Testing ~100 texts with `in` cost ~50 us a line."""
    words = re.compile(r"\w+")
    by_word: dict[str, list[int]] = {}
    always: list[int] = []
    for k, (text, _info) in enumerate(_distinctive_texts()):
        inner = [
            m.group(0)
            for m in words.finditer(text)
            if m.start() > 0 and m.end() < len(text) and len(m.group(0)) > 3
        ]
        if inner:
            by_word.setdefault(max(inner, key=len), []).append(k)
        else:
            always.append(k)
    return by_word, always, re.compile(r"\w{4,}")


def _distinctive(low: str) -> cuda_codes.CodeInfo | None:
    """A long, unmistakable CUDA message text anywhere in the line ("an illegal memory access
    was encountered" quoted in prose, after another library's prefix...)."""
    texts = _distinctive_texts()
    global _distinctive_calls
    if _distinctive_calls < DISTINCTIVE_INDEX_AFTER:  # a short lookup: not worth the index
        _distinctive_calls += 1
        return next((info for text, info in texts if text in low), None)
    by_word, always, line_words = _distinctive_words()
    maybe = set(always)
    for w in set(line_words.findall(low)):
        got = by_word.get(w)
        if got:
            maybe.update(got)
    for k in sorted(maybe):
        text, info = texts[k]
        if text in low:
            return info
    return None
