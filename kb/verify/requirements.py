"""What an entry's repro needs (GPUs, free memory, compute capability, torch) against what the
machine offers, and the reason in words when it cannot run here."""

from __future__ import annotations

import re

TYPE_CHECKING = False  # typing stays unimported at run time (kb lookup's cold start)


if TYPE_CHECKING:
    from kb.model.entry import Entry
    from kb.verify.probe import Environment

_RELEASE = re.compile(r"\s*v?(\d+(?:\.\d+)*)")
_CLAUSE = re.compile(r"^\s*(~=|==|!=|<=|>=|<|>)?\s*v?(\d+(?:\.\d+)*)(\.\*)?\s*$")


def _release(v: str) -> tuple[int, ...] | None:
    m = _RELEASE.match(v)
    return tuple(int(x) for x in m.group(1).split(".")) if m else None


def _cmp(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    n = max(len(a), len(b))
    a, b = a + (0,) * (n - len(a)), b + (0,) * (n - len(b))
    return (a > b) - (a < b)


def version_matches(version: str, spec: str) -> bool | None:
    """Does a version ("2.11.0+cu130", "9.0") meet a PEP 440-style specifier (">=2.1,<2.6",
    "==2.4.*", "~=8.0", bare "9.0" meaning ==)? Release numbers only: pre-release and local
    tags count as their release. None when either cannot be read."""
    have = _release(version)
    if have is None:
        return None
    for clause in (c for c in spec.split(",") if c.strip()):
        m = _CLAUSE.match(clause)
        if not m:
            return None
        op, want, star = (
            m.group(1) or "==",
            tuple(int(x) for x in m.group(2).split(".")),
            m.group(3),
        )
        if star:
            if op not in ("==", "!="):
                return None
            ok = have[: len(want)] + (0,) * max(0, len(want) - len(have)) == want
            ok = ok if op == "==" else not ok
        elif op == "~=":
            if len(want) < 2:
                return None
            ok = _cmp(have, want) >= 0 and have[: len(want) - 1] == want[:-1]
        else:
            c = _cmp(have, want)
            ok = {"==": c == 0, "!=": c != 0, "<=": c <= 0, ">=": c >= 0, "<": c < 0, ">": c > 0}[
                op
            ]
        if not ok:
            return False
    return True


# A repro that imports torch needs it whether or not it names a version range; so does one that
# looks the installed package up by name (importlib's find_spec / import_module).
_IMPORTS_TORCH = re.compile(
    r"^[ \t]*(?:from[ \t]+torch\b|import[ \t]+(?:[\w.]+[ \t]*,[ \t]*)*torch\b)"
    r"|\b(?:find_spec|import_module)\(\s*[\"']torch[\"'.]",
    re.MULTILINE,
)


def check_requirements(entry: Entry, env: Environment, trust: bool = False) -> str | None:
    """None when the entry's repro can run here; otherwise the unmet requirement, in words."""
    if entry.repro is None:
        return "no repro"
    if entry.local and not trust:
        return "local entry: pass --trust"
    req = entry.repro.requires
    g = env.gpu
    if req.gpu:
        if g is None:
            return f"no GPU: {env.gpu_reason}" if env.gpu_reason else "no GPU"
        if g.count < req.gpus:
            return f"needs {req.gpus} GPUs, {g.count} visible"
        if req.free_memory_gb and g.memory_free_mib < req.free_memory_gb * 1024:
            return (
                f"needs {req.free_memory_gb:g} GiB free GPU memory, "
                f"{g.memory_free_mib / 1024:.1f} GiB free on {g.name}"
            )
        if req.compute_capability:
            if not g.compute_capability:
                return f"needs compute capability {req.compute_capability}, NVML cannot tell {g.name}'s"
            ok = version_matches(g.compute_capability, req.compute_capability)
            if ok is None:
                return f"cannot read the compute_capability requirement {req.compute_capability!r}"
            if not ok:
                return f"needs compute capability {req.compute_capability}, {g.name} is {g.compute_capability}"
    if not req.torch and not env.torch and _IMPORTS_TORCH.search(entry.repro.code):
        why = f" ({env.torch_error})" if env.torch_error else ""
        return f"needs torch, {env.python} cannot import torch{why}"
    if req.torch:
        if not env.torch:
            why = f" ({env.torch_error})" if env.torch_error else ""
            return f"needs torch {req.torch}, {env.python} cannot import torch{why}"
        ok = version_matches(env.torch, req.torch)
        if ok is None:
            return f"cannot read the torch requirement {req.torch!r}"
        if not ok:
            return f"needs torch {req.torch}, found {env.torch}"
    return None


# What the repros need from the interpreter they run in besides the standard library. A repro
# can import one where no static look can see it (in a program it writes and runs, in its
# fix_check, through torchrun), so a run is also read afterwards: failing on importing one of
# these where the interpreter lacks it proves nothing about the entry either way.
DEPENDENCIES = ("torch", "numpy", "pip")
# ModuleNotFoundError's words, and `python -m pip`'s where pip is not installed (no quotes).
_NO_MODULE = re.compile(r"No module named (?:'([A-Za-z_]\w*)|([A-Za-z_]\w*)\s*$)", re.MULTILINE)


def missing_dependency(output: str, env: Environment, importable) -> str | None:
    """The unmet requirement a run's output shows, in check_requirements' words, or None: a
    `No module named 'X'` for a DEPENDENCIES module the interpreter cannot import
    (`importable(name)` asks it). One the interpreter can import is the repro's own point
    (`No module named 'torch._six'` on torch 2.x), never a missing requirement."""
    for m in _NO_MODULE.finditer(output):
        top = m.group(1) or m.group(2)
        if top not in DEPENDENCIES:
            continue
        if top == "torch":
            if env.torch:
                continue
            why = f" ({env.torch_error})" if env.torch_error else ""
            return f"needs torch, {env.python} cannot import torch{why}"
        if not importable(top):
            return f"needs {top}, {env.python} cannot import {top}"
    return None
