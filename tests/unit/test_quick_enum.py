"""The enums `@quick` makes (the packet's, and the state machine's moves) behave exactly as
`enum.StrEnum` classes declared the usual way: members, lookups, text, pickling, msgspec."""

from __future__ import annotations

import enum
import pickle

import msgspec
import pytest

from waypost.core import moves
from waypost.model import QuickStrEnum, actors, base, delivery, packet, quick

QUICK = sorted((value for module in (packet, delivery, actors, moves)
                for value in vars(module).values()
                if isinstance(value, type) and issubclass(value, enum.StrEnum)
                and value.__module__ == module.__name__), key=lambda e: e.__name__)


def declared(made: type[enum.StrEnum]) -> type[enum.StrEnum]:
    """The same enum declared the usual way, through `enum`'s full class machinery."""
    usual = enum.StrEnum(made.__name__, [(m.name, m.value) for m in made])  # type: ignore[misc]
    return usual


def test_the_packet_and_the_moves_are_made_quick() -> None:
    names = {e.__name__ for e in QUICK}
    assert {"State", "Kind", "BlockerKind", "Authority", "Role", "Move"} <= names
    assert len(QUICK) == 16


@pytest.mark.parametrize("made", QUICK, ids=lambda e: e.__name__)
def test_a_quick_enum_is_the_usual_str_enum(made: type[enum.StrEnum]) -> None:
    usual = declared(made)
    assert type(made) is enum.EnumType
    assert issubclass(made, enum.StrEnum)
    assert [(m.name, m.value) for m in made] == [(m.name, m.value) for m in usual]
    assert list(made.__members__) == list(usual.__members__)
    values = [m.value for m in made]
    assert len(set(values)) == len(values)  # `quick` skips enum's own check for this
    for member, twin in zip(made, usual, strict=True):
        assert made(member.value) is member
        assert made[member.name] is member
        assert isinstance(member, str)
        assert member == member.value
        assert str(member) == str(twin) == member.value
        assert f"{member}" == f"{twin}"
        assert hash(member) == hash(member.value)
        assert repr(member) == repr(twin).replace(usual.__qualname__, made.__qualname__)
        assert pickle.loads(pickle.dumps(member)) is member
        assert msgspec.json.decode(msgspec.json.encode(member), type=made) is member
    with pytest.raises(ValueError, match="no such value"):
        made("no such value")
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(b'"no such value"', type=made)


@pytest.mark.parametrize("made", QUICK, ids=lambda e: e.__name__)
def test_a_quick_enum_keeps_its_members_in_its_class(made: type[enum.StrEnum]) -> None:
    """`State.IN_PROGRESS` is a plain lookup (on 3.11 `enum` makes it a Python call), and
    a member is still not reassigned through its class."""
    for member in made:
        assert vars(made)[member.name] is member
        with pytest.raises(AttributeError):
            setattr(made, member.name, "other")


def test_quick_without_the_standard_library_shortcut_makes_the_same(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "_simple_enum", None)

    @quick
    class Colour(QuickStrEnum):
        RED = "red"
        GREEN = "green"

        def loud(self) -> str:
            return self.value.upper()

    assert type(Colour) is enum.EnumType
    assert issubclass(Colour, enum.StrEnum)
    assert [(m.name, m.value) for m in Colour] == [("RED", "red"), ("GREEN", "green")]
    assert Colour("green") is Colour.GREEN
    assert Colour.GREEN.loud() == "GREEN"
    assert msgspec.json.decode(b'"red"', type=Colour) is Colour.RED
