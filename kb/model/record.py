"""Records: classes of named fields with __init__, __repr__, __eq__ (and, frozen, __hash__ and no
assignment), declared as with the standard dataclasses and read by the same helpers (`field`,
`fields`, `replace`, `asdict`).

Why not dataclasses itself: it is on the path of every `kb lookup`, which is timed against
`python -c pass`. `import dataclasses` pulls in inspect (and with it ast, dis, tokenize and
linecache), and each @dataclass compiles its methods from source with exec; on a small machine
the two cost about 25 ms, a quarter of a cold lookup (scripts/bench_lookup.py). Here the methods
are shared functions that read the class's field table, so defining a record costs a dict and
importing this module costs nothing. Type checkers see dataclass semantics through
`dataclass_transform`.

Instances keep their fields in __dict__, so pickle (the knowledge base cache) stores and restores
them without calling __init__ or __setattr__, as it does for dataclasses; a record may pickle
itself otherwise (kb.model.Entry does).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar

    from typing_extensions import dataclass_transform  # typing has it from 3.11 only

    R = TypeVar("R")
else:

    def dataclass_transform(**_kwargs):
        return lambda f: f


__all__ = ["FrozenInstanceError", "asdict", "field", "fields", "record", "replace"]


class FrozenInstanceError(AttributeError):
    """Assignment to a field of a frozen record."""


class _Factory:
    __slots__ = ("make",)

    def __init__(self, make: Callable[[], Any]):
        self.make = make


def field(*, default_factory: Callable[[], Any]) -> Any:
    """A field whose default is made fresh for each instance (a list, a dict, a record)."""
    return _Factory(default_factory)


_MISSING = object()


def _is_classvar(annotation: object) -> bool:
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    return text.startswith(("ClassVar", "typing.ClassVar"))


def _init(self, *args: Any, **kwargs: Any) -> None:
    cls = type(self)
    names: tuple[str, ...] = cls.__record_fields__
    if len(args) > len(names):
        raise TypeError(
            f"{cls.__name__}() takes {len(names)} positional arguments but {len(args)} were given"
        )
    values = self.__dict__  # written directly: a frozen record refuses __setattr__
    for name, value in zip(names, args):
        values[name] = value
    for name, value in kwargs.items():
        if name not in cls.__record_defaults__ and name not in names:
            raise TypeError(f"{cls.__name__}() got an unexpected keyword argument {name!r}")
        if name in values:
            raise TypeError(f"{cls.__name__}() got multiple values for argument {name!r}")
        values[name] = value
    if len(values) < len(names):
        defaults: dict[str, Any] = cls.__record_defaults__
        for name in names:
            if name not in values:
                default = defaults.get(name, _MISSING)
                if default is _MISSING:
                    raise TypeError(f"{cls.__name__}() missing required argument: {name!r}")
                values[name] = default.make() if isinstance(default, _Factory) else default
    post_init = getattr(self, "__post_init__", None)
    if post_init is not None:
        post_init()


# Fields are read with getattr, not from __dict__: a record may load some fields on first read
# (kb.model.Entry's details).
def _values(self: Any) -> tuple[Any, ...]:
    return tuple(getattr(self, name) for name in type(self).__record_fields__)


def _repr(self: Any) -> str:
    inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in type(self).__record_fields__)
    return f"{type(self).__qualname__}({inner})"


def _eq(self: Any, other: object) -> bool:
    if other.__class__ is not self.__class__:
        return NotImplemented
    return _values(self) == _values(other)


def _hash(self: Any) -> int:
    return hash(_values(self))


def _frozen_setattr(self: Any, name: str, value: Any) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _frozen_delattr(self: Any, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r}")


@dataclass_transform(field_specifiers=(field,))
def record(cls: Any = None, /, *, frozen: bool = False) -> Any:
    """`@record` or `@record(frozen=True)` on a class whose annotated attributes are its fields
    (a value given in the class body is the default; `field(default_factory=...)` a fresh one)."""

    def wrap(cls: Any) -> Any:
        names: list[str] = []
        defaults: dict[str, Any] = {}
        for base in reversed(cls.__mro__[1:]):
            for name in getattr(base, "__record_fields__", ()):
                if name not in names:
                    names.append(name)
            defaults.update(getattr(base, "__record_defaults__", {}))
        # The class's own annotations (not inspect.get_annotations: importing inspect is the cost
        # this module exists to avoid).
        for name, annotation in cls.__dict__.get("__annotations__", {}).items():  # noqa: RUF063
            if _is_classvar(annotation):
                continue
            if name not in names:
                names.append(name)
            if name in cls.__dict__:
                # The default moves to the field table: a class attribute would answer for an
                # instance whose field is not loaded yet (kb.model.Entry's details).
                defaults[name] = cls.__dict__[name]
                delattr(cls, name)
            elif defaults:
                # As for dataclasses: once a field has a default, every later one needs one.
                raise TypeError(f"{cls.__name__}: non-default field {name!r} after a default")
        cls.__record_fields__ = tuple(names)
        cls.__record_defaults__ = defaults
        own = cls.__dict__
        for attr, func in (("__init__", _init), ("__repr__", _repr), ("__eq__", _eq)):
            if attr not in own:
                setattr(cls, attr, func)
        if frozen:
            cls.__setattr__ = _frozen_setattr
            cls.__delattr__ = _frozen_delattr
            if "__hash__" not in own or own["__hash__"] is None:
                cls.__hash__ = _hash
        elif "__hash__" not in own:
            cls.__hash__ = None  # mutable and compared by value: unhashable, as dataclasses do
        return cls

    return wrap if cls is None else wrap(cls)


def fields(obj: Any) -> tuple[str, ...]:
    """The field names of a record class or instance, in declaration order."""
    try:
        return obj.__record_fields__
    except AttributeError:
        raise TypeError(f"{obj!r} is not a record") from None


def replace(obj: R, **changes: Any) -> R:
    """A copy of the record with some fields changed (its __post_init__ runs again)."""
    cls = type(obj)
    values = {name: getattr(obj, name) for name in fields(cls)}
    values.update(changes)
    return cls(**values)


def asdict(obj: Any) -> Any:
    """A record as a dict of plain values, records nested in fields, lists, tuples and dicts
    turned into dicts too (the JSON shape of a record)."""
    if hasattr(type(obj), "__record_fields__"):
        return {name: asdict(getattr(obj, name)) for name in type(obj).__record_fields__}
    if isinstance(obj, (list, tuple)):
        return type(obj)(asdict(v) for v in obj)
    if isinstance(obj, dict):
        return {asdict(k): asdict(v) for k, v in obj.items()}
    return obj
