"""The event windows' part of the store contract: a stretch of a run's history read
without the rest (the board's run page of a long run reads only the events it shows)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Iterable
from typing import TYPE_CHECKING, Final

import msgspec

from waypost.errors import IntegrityError

if TYPE_CHECKING:
    from waypost.events import Event

NEWEST: Final = 2**31 - 1  # a seq past every run's last event


class EventWindows(ABC):
    """The latest events of a run before a point, optionally of some types only."""

    @abstractmethod
    def events_window(self, run_id: str, *, before: int | None = None, limit: int,
                      types: Collection[str] = ()) -> list[Event]:
        """The run's last `limit` events (of `types`, when given) before seq `before` (None:
        the newest), in order; [] for an unknown run."""


def decoded(run_id: str, rows: Iterable[tuple[int, bytes | str]]) -> list[Event]:
    """Event rows (seq, JSON) decoded, IntegrityError naming a row that does not decode."""
    from waypost.events import Event  # here: no hot verb reads events

    decoder, events = msgspec.json.Decoder(Event), []
    for seq, body in rows:
        try:
            events.append(decoder.decode(body))
        except msgspec.MsgspecError as exc:
            raise IntegrityError(f"run {run_id} seq {seq}: unreadable event: {exc}") from exc
    return events
