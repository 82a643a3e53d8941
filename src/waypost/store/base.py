"""The store contract: domain operations every backend implements in its own idiom."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Sequence
from types import TracebackType
from typing import Self

from waypost.model import Event, OutboxItem, Packet, State


class Snapshot:
    """A packet as read, with the hash of its last event (what the next event chains to)."""

    __slots__ = ("head_hash", "packet")

    def __init__(self, packet: Packet, head_hash: str) -> None:
        self.packet = packet
        self.head_hash = head_hash


class Store(ABC):
    """Where packets, their events and blobs live. Every write is one durable transaction."""

    url: str

    @abstractmethod
    def create(self, event: Event, packet: Packet, *, fingerprint: str) -> tuple[Packet, bool]:
        """Commit a new run's first event and packet; return (packet, created).

        With `packet.idempotency_key` set and already used: the same `fingerprint` returns
        the existing run with created=False; another raises IdempotencyConflict.
        """

    @abstractmethod
    def load(self, run_id: str) -> Snapshot:
        """The current packet and its head hash, or NotFound."""

    @abstractmethod
    def commit(self, run_id: str, expected_version: int, events: Sequence[Event],
               packet: Packet, outbox: Sequence[OutboxItem] = ()) -> None:
        """Append `events`, replace the packet and queue `outbox` rows, all in one
        transaction, if the packet's version is still `expected_version`.

        Raises VersionConflict when another write came first, NotFound for no such run.
        An outbox key that already exists is kept as it is (never queued twice).
        """

    @abstractmethod
    def events(self, run_id: str) -> list[Event]:
        """The run's events in order (IntegrityError names a row that does not decode)."""

    @abstractmethod
    def list_runs(self, *, states: Collection[State] | None = None, owner: str | None = None,
                  limit: int | None = None) -> list[Packet]:
        """Packets, most recently updated first, filtered by state and owner."""

    @abstractmethod
    def run_ids(self) -> list[str]:
        """Every run id, oldest first."""

    @abstractmethod
    def put_blob(self, data: bytes) -> str:
        """Store bytes content-addressed; return their sha256 (idempotent)."""

    @abstractmethod
    def get_blob(self, sha256: str) -> bytes:
        """The bytes stored under `sha256`, or NotFound."""

    @abstractmethod
    def close(self) -> None:
        """Release connections."""

    def get(self, run_id: str) -> Packet:
        return self.load(run_id).packet

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
