"""The inbox's part of the store contract: each reader's marks on the runs it owns.

An inbox item is an event already stored (`core.inbox` decides which events are items, for
which reader); the store keeps only how far each reader was shown, and how far it
acknowledged, each run's events, so nothing is written twice."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Final, NamedTuple

if TYPE_CHECKING:
    from waypost.events import Event

SCAN_RUNS: Final = 1000  # runs whose versions one inbox read returns at most


class InboxScan(NamedTuple):
    """What one read of a reader's inbox found."""

    events: list[tuple[Event, int]]  # each with the reader's shown mark on its run
    # read before the events: the version of each run the reader owns past its
    # acknowledged mark (run id → version); empty when more than SCAN_RUNS runs are
    versions: dict[str, int]


class InboxCursors(ABC):
    """Durable per-reader marks, the same for every process and host using the store."""

    @abstractmethod
    def inbox_events(self, reader: str, *, types: Collection[str], limit: int) -> InboxScan:
        """The events of the runs `reader` owns that lie past the reader's acknowledged
        mark on their run, of these `types` and written by another actor than `reader`:
        oldest first (by time, then run and seq), at most `limit`. Each comes with the
        reader's shown mark on its run (0: never shown). IntegrityError names a row that
        does not decode.

        Before the events, the versions of those runs are read (`InboxScan.versions`):
        every event at or below a run's version was committed before the events were
        read, so when fewer than `limit` events came, acknowledging a run up to its
        version passes over nothing the reader was not given."""

    @abstractmethod
    def mark_inbox(self, reader: str, marks: Mapping[str, int], *, acked: bool) -> None:
        """Raise the reader's shown mark on each run (run id → seq) to seq, never lowering
        it; with `acked`, the acknowledged mark too (an acknowledged event counts as shown).
        One transaction; a run no longer stored gets no mark."""
