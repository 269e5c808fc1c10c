"""kb's package shows its layers: the import contracts in pyproject.toml hold, and no module
imports another that (directly or through others) imports it back."""

from __future__ import annotations

import grimp
from _repo import REPO
from importlinter.cli import lint_imports


def test_import_contracts_hold(monkeypatch):
    monkeypatch.chdir(REPO)
    monkeypatch.syspath_prepend(str(REPO))
    assert lint_imports(config_filename=str(REPO / "pyproject.toml")) == 0


def test_no_import_cycles(monkeypatch):
    """Deferred (function-level) imports count too: a cycle through one is still two modules
    that each need the other."""
    monkeypatch.syspath_prepend(str(REPO))
    graph = grimp.build_graph("kb", cache_dir=None)
    edges = {m: graph.find_modules_directly_imported_by(m) for m in graph.modules}
    state: dict[str, int] = {}
    cycles = []

    def visit(m, stack):
        state[m] = 1
        stack.append(m)
        for n in sorted(edges.get(m, ())):
            if n == "kb" or n not in edges:
                continue  # the package's __init__ loads its names lazily
            if state.get(n) == 1:
                cycles.append(stack[stack.index(n) :] + [n])
            elif n not in state:
                visit(n, stack)
        stack.pop()
        state[m] = 2

    for m in sorted(edges):
        if m not in state:
            visit(m, [])
    assert cycles == []
