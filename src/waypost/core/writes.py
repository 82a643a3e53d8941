"""What a write is, before any store sees it: the snapshot it was decided from, the events
and packet it commits (with their outbox rows), or a watchdog's deferred next check; and
which writes of a batch still apply. Pure records and rules; every backend commits them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

import msgspec

from waypost.model import Origin, OutboxItem, Packet

if TYPE_CHECKING:  # a write's events are made where they are decided: reads never load them
    from waypost.events import Event


class Snapshot:
    """A packet as read, with the hash of its last event (what the next event chains to)
    and that event as stored (`head`: its JSON as read, None when the run has no event at
    its version). A snapshot a writer makes of the write it just committed (`chained`)
    holds no stored bytes: it made that head itself (`head_checked`). `origin`: where an
    imported run came from (None for a run of this store's own), which no write may touch."""

    __slots__ = ("head", "head_checked", "head_hash", "origin", "packet")

    def __init__(self, packet: Packet, head_hash: str, head: bytes | str | None = None,
                 origin: Origin | None = None) -> None:
        self.packet = packet
        self.head_hash = head_hash
        self.head = head
        self.head_checked = False
        self.origin = origin

    @classmethod
    def chained(cls, packet: Packet, head_hash: str, head: bytes | str | None = None,
                ) -> Snapshot:
        """The snapshot of a write this process just made, with the JSON of the event it
        wrote last (`head`): that head needs no hash check, and the next write's commit
        still refuses it if the stored event is no longer that JSON."""
        snap = cls(packet, head_hash, head)
        snap.head_checked = True
        return snap


class Due(Snapshot):
    """A run whose next check is due, with its stored `next_check_at` (the paging key)."""

    __slots__ = ("due_at",)

    def __init__(self, packet: Packet, head_hash: str, due_at: datetime,
                 head: bytes | str | None = None) -> None:
        self.packet, self.head_hash = packet, head_hash  # as Snapshot's, without the call
        self.head, self.head_checked, self.origin = head, False, None
        self.due_at = due_at


class RunWrite(msgspec.Struct, frozen=True, kw_only=True):
    """A run write (what `Store.commit` takes), to be committed with an outbox change."""

    run_id: str
    expected_version: int
    events: tuple[Event, ...]
    packet: Packet
    outbox: tuple[OutboxItem, ...] = ()
    # the JSON of the head event the write chains onto, as read or as written: the commit
    # is refused if the stored head event is no longer that (None: not guarded)
    head: bytes | str | None = None


class Deferral(msgspec.Struct, frozen=True, kw_only=True):
    """A run's next check moved to `at` (None: never) without an event, if its packet is
    still at `expected_version` (what `Store.defer_check` does)."""

    run_id: str
    expected_version: int
    at: datetime | None


def in_force(writes: Sequence[RunWrite | Deferral], versions: Mapping[str, int]) -> list[bool]:
    """Which of a batch's writes apply, given each run's version as it stands (read under
    the batch's write lock): those whose run is at their `expected_version` once the
    batch's earlier writes are applied. After a run's first miss, its later writes miss
    too: they were decided from a packet that another writer has replaced."""
    at: dict[str, int | None] = dict(versions)
    applies = []
    for write in writes:
        hit = at.get(write.run_id) == write.expected_version
        if not hit:
            at[write.run_id] = None
        elif isinstance(write, RunWrite):
            at[write.run_id] = write.packet.version
        applies.append(hit)
    return applies
