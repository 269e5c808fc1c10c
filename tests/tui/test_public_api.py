"""The TUI reaches kb only through kb's public names and their documented attributes.

Not a look at import lines: an AST walk over tui/*.py that follows the types of what the TUI
holds (its annotations, kb's own type hints, `for` loops over typed sequences) and checks every
attribute the TUI reads on a kb object: the object's class must be one of kb's public names
(kb.__all__) or reached through one's type hints, and the attribute one of that class's declared
fields, properties or methods, never a private one. Any private attribute (`x._y`) read on
something other than the TUI's own objects fails too, typed or not: that is how `v._match` and
the untyped job internals were reached before.
"""

from __future__ import annotations

import ast
import enum
import importlib
import inspect
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import kb
import tui

TUI = Path(tui.__file__).resolve().parent
KB_PUBLIC = set(kb.__all__)


def kb_class(t: object) -> bool:
    return isinstance(t, type) and t.__module__.split(".")[0] == "kb"


def public_attrs(cls: type) -> set[str]:
    """What a kb class declares: fields (annotations, slots), properties, methods; no private
    names. An enum's members' value and name too."""
    out: set[str] = set()
    for klass in cls.__mro__:
        if not kb_class(klass):
            continue
        out |= set(vars(klass))
        out |= set(getattr(klass, "__annotations__", {}))
        out |= set(getattr(klass, "__slots__", ()))
    if issubclass(cls, enum.Enum):
        out |= {"value", "name"}
    return {n for n in out if not n.startswith("_")}


def hints(obj: object) -> dict[str, object]:
    try:
        return typing.get_type_hints(obj)
    except Exception:  # a hint that cannot be evaluated: nothing known
        return {}


def members(t: object) -> list[object]:
    """A union's members less None (`Match | None` is a Match)."""
    if isinstance(t, types.UnionType) or typing.get_origin(t) is typing.Union:
        return [a for a in typing.get_args(t) if a is not type(None)]
    return [t]


def element(t: object) -> object:
    """What iterating over t gives: list[T], tuple[T, ...], Sequence[T] -> T."""
    for m in members(t):
        args = typing.get_args(m)
        if args and typing.get_origin(m) in (list, tuple, set, frozenset, typing.Sequence):
            return args[0]
        origin = typing.get_origin(m)
        if args and origin is not None and getattr(origin, "__name__", "") == "Sequence":
            return args[0]
    return None


@dataclass
class Report:
    violations: list[str] = field(default_factory=list)
    checked: set[tuple[str, str]] = field(default_factory=set)  # (kb class, attribute) read


class Walker:
    """Follows types through one module's functions and records every attribute read on a kb
    object, and every private attribute read on anything but the TUI's own objects."""

    def __init__(self, tree: ast.Module, module: dict[str, object], own: set[str], where: str):
        self.tree = tree
        self.globals = module
        self.own = own  # every name the TUI itself defines (methods, attributes)
        self.where = where
        self.report = Report()
        self.class_attrs: dict[str, dict[str, object]] = {}

    def flag(self, node: ast.AST, what: str) -> None:
        self.report.violations.append(f"{self.where}:{getattr(node, 'lineno', 0)}: {what}")

    def annotation(self, node: ast.expr | None) -> object:
        if node is None:
            return None
        try:
            return eval(ast.unparse(node), dict(self.globals))
        except Exception:
            return None

    # ---------------------------------------------------------------- walking
    def run(self) -> Report:
        for node in self.tree.body:
            self.top(node)
        for node in ast.walk(self.tree):
            self.imports(node)
            if isinstance(node, ast.Attribute):
                self.private(node)
        return self.report

    def imports(self, node: ast.AST) -> None:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "kb":
            if node.module != "kb":
                self.flag(node, f"imports from kb's insides: {node.module}")
            for alias in node.names:
                if alias.name not in KB_PUBLIC:
                    self.flag(node, f"kb.{alias.name} is not a public name of kb")
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "kb" and alias.name != "kb":
                    self.flag(node, f"imports a kb module: {alias.name}")
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "kb"
            and self.globals.get("kb") is kb  # the module, not a local named kb
            and node.attr not in KB_PUBLIC
        ):
            self.flag(node, f"kb.{node.attr} is not a public name of kb")

    def private(self, node: ast.Attribute) -> None:
        name = node.attr
        if not name.startswith("_") or name.startswith("__"):
            return
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            return
        if name not in self.own:
            self.flag(node, f"reads a private attribute that is not the TUI's own: .{name}")

    def top(self, node: ast.stmt) -> None:
        if isinstance(node, ast.ClassDef):
            cls = self.globals.get(node.name)
            attrs = dict(hints(cls)) if isinstance(cls, type) else {}
            self.class_attrs[node.name] = attrs
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    params = {
                        a.arg: self.annotation(a.annotation)
                        for a in [*item.args.args, *item.args.kwonlyargs]
                        if a.annotation is not None
                    }
                    # self.x: T = ... in a method declares x; so does self.x = a typed parameter
                    for sub in ast.walk(item):
                        if (
                            isinstance(sub, ast.Assign)
                            and len(sub.targets) == 1
                            and isinstance(sub.targets[0], ast.Attribute)
                            and isinstance(sub.targets[0].value, ast.Name)
                            and sub.targets[0].value.id == "self"
                            and isinstance(sub.value, ast.Name)
                            and sub.value.id in params
                        ):
                            attrs.setdefault(sub.targets[0].attr, params[sub.value.id])
                        if (
                            isinstance(sub, ast.AnnAssign)
                            and isinstance(sub.target, ast.Attribute)
                            and isinstance(sub.target.value, ast.Name)
                            and sub.target.value.id == "self"
                        ):
                            attrs.setdefault(sub.target.attr, self.annotation(sub.annotation))
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self.function(item, node.name)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.function(node, None)

    def function(self, fn: ast.FunctionDef | ast.AsyncFunctionDef, owner: str | None) -> None:
        env: dict[str, object] = {}
        args = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
        for a in args:
            if a.annotation is not None:
                env[a.arg] = self.annotation(a.annotation)
        if owner is not None and args:
            env[args[0].arg] = ("self", owner)
        for stmt in fn.body:
            self.statement(stmt, env)

    def statement(self, stmt: ast.stmt, env: dict[str, object]) -> None:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inner = dict(env)
            for a in [*stmt.args.args, *stmt.args.kwonlyargs]:
                if a.annotation is not None:
                    inner[a.arg] = self.annotation(a.annotation)
            for s in stmt.body:
                self.statement(s, inner)
            return
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            env[stmt.target.id] = self.annotation(stmt.annotation)
        elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target = stmt.targets[0]
            if isinstance(target, ast.Name):
                t = self.type_of(stmt.value, env)
                if t is not None:
                    env[target.id] = t
        elif isinstance(stmt, (ast.For, ast.AsyncFor)) and isinstance(stmt.target, ast.Name):
            t = element(self.type_of(stmt.iter, env))
            if t is not None:
                env[stmt.target.id] = t
        for child in ast.iter_child_nodes(stmt):
            if isinstance(child, ast.stmt):
                self.statement(child, env)
            else:
                self.expressions(child, env)

    def expressions(self, node: ast.AST, env: dict[str, object]) -> None:
        for sub in ast.walk(node):
            if isinstance(sub, ast.comprehension) and isinstance(sub.target, ast.Name):
                t = element(self.type_of(sub.iter, env))
                if t is not None:
                    env = {**env, sub.target.id: t}
            if isinstance(sub, ast.Lambda):
                continue
        for sub in ast.walk(node):
            if isinstance(sub, ast.Attribute):
                self.type_of(sub, env)

    # ---------------------------------------------------------------- types
    def type_of(self, node: ast.expr, env: dict[str, object]) -> object:
        if isinstance(node, ast.Name):
            return env.get(node.id)
        if isinstance(node, ast.Attribute):
            return self.attribute(node, self.type_of(node.value, env))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            return self.returns(node.func, self.type_of(node.func.value, env))
        if isinstance(node, ast.Subscript):
            return element(self.type_of(node.value, env))
        return None

    def attribute(self, node: ast.Attribute, owner: object) -> object:
        if isinstance(owner, tuple) and owner[0] == "self":
            return self.class_attrs.get(str(owner[1]), {}).get(node.attr)
        found: list[object] = []
        for m in members(owner):
            if kb_class(m):
                assert isinstance(m, type)
                if node.attr not in public_attrs(m):
                    self.flag(node, f"{m.__name__}.{node.attr} is no public attribute of it")
                    continue
                self.report.checked.add((m.__name__, node.attr))
                found.append(self.declared(m, node.attr))
            elif isinstance(m, type) and m.__module__.split(".")[0] == "tui":
                found.append(self.declared(m, node.attr))
        return found[0] if len(found) == 1 else None

    @staticmethod
    def declared(cls: type, attr: str) -> object:
        h = hints(cls)
        if attr in h:
            return h[attr]
        prop = inspect.getattr_static(cls, attr, None)
        if isinstance(prop, property) and prop.fget is not None:
            return hints(prop.fget).get("return")
        return None

    def returns(self, func: ast.Attribute, owner: object) -> object:
        self.attribute(func, owner)  # the method itself is an attribute read
        for m in members(owner):
            if isinstance(m, type) and m.__module__.split(".")[0] in ("kb", "tui"):
                method = inspect.getattr_static(m, func.attr, None)
                if callable(method):
                    return hints(method).get("return")
        return None


def own_names() -> set[str]:
    """Every name the TUI defines: its functions, methods and the attributes it assigns."""
    names: set[str] = set()
    for path in TUI.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
    return names


def check_source(source: str, module: dict[str, object], where: str = "<src>") -> Report:
    return Walker(ast.parse(source), module, own_names(), where).run()


def tui_modules() -> Iterator[tuple[Path, dict[str, object]]]:
    for path in sorted(TUI.glob("*.py")):
        name = "tui" if path.stem == "__init__" else f"tui.{path.stem}"
        yield path, vars(importlib.import_module(name))


def test_the_tui_reads_only_kbs_public_names_and_their_declared_attributes():
    violations: list[str] = []
    checked: set[tuple[str, str]] = set()
    for path, module in tui_modules():
        report = check_source(path.read_text(encoding="utf-8"), module, path.name)
        violations += report.violations
        checked |= report.checked
    assert not violations, "\n".join(violations)
    # The walk follows the TUI's types far enough to mean something: the records it shows
    # (a lookup, its root failure, an entry and its sections, a job's verdicts) are all read
    # through it, each attribute checked.
    seen = {cls for cls, _ in checked}
    assert {
        "LookupResult",
        "Match",
        "Entry",
        "RootFailure",
        "Frame",
        "RankVerdict",
        "JobView",
    } <= seen
    assert ("LookupResult", "root") in checked and ("RankVerdict", "match") in checked
    assert len(checked) > 60, sorted(checked)


def test_the_walk_catches_what_it_is_for():
    """A private attribute, an attribute a record does not declare, and a kb module path."""
    module = {"RankVerdict": kb.RankVerdict, "LookupResult": kb.LookupResult}
    source = (
        "from kb.job.view import JobView\n"
        "from kb import RankVerdict, _LAZY\n"
        "def f(v: RankVerdict, r: LookupResult):\n"
        "    for m in r.matches:\n"
        "        m.entry.no_such_section\n"
        "    return v._match, v.no_such_field, r.root.frame.where()\n"
    )
    found = "\n".join(check_source(source, module).violations)
    assert "kb's insides: kb.job.view" in found
    assert "kb._LAZY is not a public name" in found
    assert ".\u005fmatch" in found or "._match" in found
    assert "RankVerdict.no_such_field" in found
    assert "Entry.no_such_section" in found
    assert "where" not in found  # RootFailure.frame is a Frame, whose where() is declared
