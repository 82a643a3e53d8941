"""What every stored shape is built from: `Record` (a frozen, keyword-only msgspec struct,
refusing unknown fields, untracked by the cyclic GC), `@quick` enums, and JSON in and out
(decoding validates and names the offending path)."""

import enum
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from waypost.errors import InvalidInput

E = TypeVar("E", bound=enum.StrEnum)

# The packet's enums are made by `@quick` from a plain class body: the same `StrEnum`
# (members, values, lookups, pickling, msgspec), made in half the time. `enum`'s class
# machinery costs ~0.45M instructions an enum and ~75k a member on 3.11, ~13M for the 16 a
# heartbeat loads: a tenth of its work above the dependency floor. The standard library
# makes its own start-up enums (`re`, `http`, `uuid`) the same way.
if TYPE_CHECKING:
    QuickStrEnum = enum.StrEnum
else:
    class QuickStrEnum:
        """The base of an enum made by `@quick`: at run time a plain class body."""


_simple_enum = getattr(enum, "_simple_enum", None)


def quick(body: type[E]) -> type[E]:
    """The `StrEnum` whose members are `body`'s names and values, made without `enum`'s
    checks (that no name or value repeats is held by a test over every enum made so)."""
    if _simple_enum is not None:
        made: type[E] = _simple_enum(enum.StrEnum)(body)
    else:
        namespace = enum.EnumType.__prepare__(body.__name__, (enum.StrEnum,))
        for name, value in vars(body).items():
            if name not in ("__dict__", "__weakref__"):
                namespace[name] = value
        made = enum.EnumType(body.__name__, (enum.StrEnum,), namespace)  # type: ignore[assignment]
    _members_in_class(made)
    return made


def _members_in_class(made: type[E]) -> None:
    """Keep each member itself in its class, as 3.12 does: 3.11 keeps a descriptor that
    hands it out, so every `State.IN_PROGRESS` was a Python call (nine a heartbeat)."""
    own = made.__dict__
    for name, member in made._member_map_.items():
        if own.get(name) is not member:
            type.__setattr__(made, name, member)  # EnumType's own refuses any member


class Record(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, gc=False):
    """Base for every stored shape. Records are trees of plain values (decoded JSON, or
    built from it: scalars, times, enums, records and tuples of them) and never part of a
    reference cycle, so the cyclic garbage collector does not track them (`gc=False`): a
    sweep or a server makes them by the thousand, and each one tracked brought the next
    collection nearer and made it longer. (A record built with a list where its shape says
    tuple, and that list then made to hold the record, would never be freed: build them
    as the shapes say.)"""


# --- JSON ---------------------------------------------------------------------------------

_encoder = msgspec.json.Encoder()
T = TypeVar("T")


def to_json(obj: Any) -> bytes:
    return _encoder.encode(obj)


def to_builtins(obj: Any) -> Any:
    return msgspec.to_builtins(obj)


_decoders: dict[Any, msgspec.json.Decoder[Any]] = {}


def json_decoder(type_: type[T]) -> msgspec.json.Decoder[T]:
    """The one decoder of `type_`, made on first use: building a decoder costs more than
    using it. Its errors are msgspec's own (`from_json` turns them into InvalidInput)."""
    decoder = _decoders.get(type_)
    if decoder is None:
        decoder = _decoders.setdefault(type_, msgspec.json.Decoder(type_))
    return decoder


def from_json(data: bytes | str, type_: type[T]) -> T:
    """Decode and validate; a bad document raises InvalidInput naming the field."""
    decoder = json_decoder(type_)
    try:
        result: T = decoder.decode(data)
        return result
    except msgspec.ValidationError as exc:
        raise InvalidInput(
            f"invalid {type_.__name__}: {exc}",
            hint="compare the document with `waypost schema`",
        ) from exc
    except msgspec.DecodeError as exc:
        raise InvalidInput(f"malformed JSON: {exc}") from exc
