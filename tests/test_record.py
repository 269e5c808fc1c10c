"""kb.record: the records every kb shape is made of behave as the standard dataclasses do (the
modules were declared with those), without importing them."""

from __future__ import annotations

import pickle
import subprocess
import sys

import pytest

from kb.model.record import FrozenInstanceError, asdict, field, fields, record, replace


@record(frozen=True)
class Point:
    x: int
    y: int = 0
    tags: tuple[str, ...] = ()


@record
class Bag:
    name: str
    items: list[int] = field(default_factory=list)
    seen: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.seen.setdefault(self.name, len(self.items))


@record(frozen=True)
class Line:
    start: Point
    end: Point
    bags: tuple[Bag, ...] = ()


def test_init_positional_keyword_and_defaults():
    assert Point(1) == Point(x=1, y=0, tags=())
    assert Point(1, 2).y == 2 and Point(y=3, x=1).y == 3
    with pytest.raises(TypeError, match="missing required argument: 'x'"):
        Point()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument 'z'"):
        Point(1, z=2)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="multiple values for argument 'x'"):
        Point(1, x=2)  # type: ignore[misc]
    with pytest.raises(TypeError, match="takes 3 positional arguments but 4"):
        Point(1, 2, (), 4)  # type: ignore[call-arg]


def test_default_factories_are_fresh_and_post_init_runs():
    a, b = Bag("a"), Bag("b", [1, 2])
    a.items.append(1)
    assert Bag("c").items == [] and Bag("c").items is not Bag("c").items
    assert b.seen == {"b": 2} and a.seen == {"a": 0}
    assert "items" not in Bag.__dict__  # the factory marker is not left as a class attribute
    assert "y" not in Point.__dict__  # nor a plain default (it lives in the field table)


def test_equality_hash_and_repr():
    assert Point(1, 2) == Point(1, 2) and Point(1, 2) != Point(2, 1)
    assert Point(1) != (1, 0, ()) and hash(Point(1, 2)) == hash(Point(1, 2))
    assert len({Point(1), Point(1), Point(2)}) == 2
    assert repr(Point(1, 2)) == "Point(x=1, y=2, tags=())"
    with pytest.raises(TypeError):
        hash(Bag("a"))  # mutable records compare by value, so they are unhashable


def test_frozen_records_refuse_assignment_mutable_ones_take_it():
    p = Point(1)
    with pytest.raises(FrozenInstanceError):
        p.x = 2  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        del p.x  # type: ignore[misc]
    assert isinstance(FrozenInstanceError(), AttributeError)
    b = Bag("a")
    b.name = "b"
    assert b.name == "b"


def test_fields_replace_asdict():
    assert fields(Point) == ("x", "y", "tags") == fields(Point(1))
    with pytest.raises(TypeError):
        fields(object())
    p = Point(1, 2, ("t",))
    q = replace(p, y=5)
    assert q == Point(1, 5, ("t",)) and p.y == 2
    bag = replace(Bag("a", [1]), name="z")
    assert bag.seen == {"a": 1, "z": 1}  # __post_init__ ran again, as dataclasses.replace does
    line = Line(Point(0), Point(1, 1), (Bag("b"),))
    assert asdict(line) == {
        "start": {"x": 0, "y": 0, "tags": ()},
        "end": {"x": 1, "y": 1, "tags": ()},
        "bags": ({"name": "b", "items": [], "seen": {"b": 0}},),
    }


def test_records_pickle_round_trip():
    line = Line(Point(0, 1, ("a",)), Point(2), (Bag("b", [1]),))
    back = pickle.loads(pickle.dumps(line, protocol=pickle.HIGHEST_PROTOCOL))
    assert back == line and type(back.start) is Point
    with pytest.raises(FrozenInstanceError):
        back.start.x = 3  # type: ignore[misc]


def test_a_field_without_default_after_one_with_is_refused():
    with pytest.raises(TypeError, match="non-default field 'b' after a default"):

        @record
        class Bad:
            a: int = 0
            b: int  # type: ignore[misc]


def test_inherited_fields_come_first():
    @record(frozen=True)
    class Point3(Point):
        z: int = 0

    assert fields(Point3) == ("x", "y", "tags", "z")
    assert Point3(1, z=3) == Point3(x=1, y=0, tags=(), z=3)


def test_importing_records_does_not_import_dataclasses_or_typing():
    code = "import sys, kb.model.record, kb.model.entry; print(sorted({'dataclasses', 'inspect', 'typing'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_entries_from_the_cache_load_their_details_on_first_read(kb_bundled):
    """kb.model.entry.Entry pickles its details apart; every field reads back equal, defaults too."""
    for e in kb_bundled.entries:
        back = pickle.loads(pickle.dumps(e, protocol=pickle.HIGHEST_PROTOCOL))
        assert "_details" in back.__dict__
        assert (back.repro is None) == (e.repro is None)  # a default, not shadowed by the class
        assert back == e and "_details" not in back.__dict__
        again = pickle.loads(pickle.dumps(back))
        assert again.fixes == e.fixes and again.fix_check == e.fix_check
