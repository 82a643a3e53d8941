"""Appending to a packet's evidence during a fold in constant time, not in its length.

A packet is frozen and its evidence a tuple, so each `evidence_recorded` event made a new
tuple of every item so far: a fold of n items copied n²/2 references (at 10,000 items the
copies were most of a fold's time, at 20,000 four times as much per event). While a fold
runs, the evidence is a `Growing` instead: a view of the first `size` items of one list
shared with the views it grew from. Appending to the newest view extends the list in place;
appending to an older one (a packet kept from earlier in the fold) copies its items first,
so no view ever sees an item appended after it was made. The fold ends with a plain tuple
again (`settled`): the packet it returns, and every hash, are what they were.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from typing import Any, TypeVar, cast, overload

import msgspec

from waypost.model import Evidence, Packet

T = TypeVar("T")


class Growing(Sequence[T]):
    """The first `size` items of a list that only ever grows."""

    __slots__ = ("_items", "_size")

    def __init__(self, items: list[T], size: int) -> None:
        self._items, self._size = items, size

    def plus(self, values: Iterable[T]) -> Growing[T]:
        items = self._items if self._size == len(self._items) else self._items[: self._size]
        items.extend(values)
        return Growing(items, len(items))

    def __len__(self) -> int:
        return self._size

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[T]: ...
    def __getitem__(self, index: int | slice) -> T | Sequence[T]:
        if isinstance(index, slice):
            return tuple(self)[index]
        if not -self._size <= index < self._size:
            raise IndexError(index)
        return self._items[index % self._size]

    def __iter__(self) -> Iterator[T]:
        return islice(self._items, self._size)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and tuple(self) == tuple(other)

    __hash__ = None  # type: ignore[assignment]  # it compares by value and is not frozen


def appended(values: Sequence[T], *more: T) -> tuple[T, ...]:
    """`values` and then `more`: in place on the newest `Growing`, else a new tuple. The
    annotation says tuple, which a packet outside a fold always holds."""
    if isinstance(values, Growing):
        return cast(tuple[T, ...], values.plus(more))
    return (*values, *more)


def growing(packet: Packet) -> Packet:
    """`packet` with its evidence made a `Growing` (at the start of a fold)."""
    items: list[Evidence] = list(packet.evidence)
    return msgspec.structs.replace(
        packet, evidence=cast(tuple[Evidence, ...], Growing(items, len(items))))


def settled(packet: Packet) -> Packet:
    """`packet` with plain tuples again, as everything outside a fold expects."""
    evidence: Any = packet.evidence
    if isinstance(evidence, Growing):
        return msgspec.structs.replace(packet, evidence=tuple(evidence))
    return packet
