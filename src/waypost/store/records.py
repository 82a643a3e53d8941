"""What a store hands back besides packets: the state of its schema, what `doctor` found,
what a prune removed; and the sweeper lock, in its two shapes (shared by hosts, or held by
every watcher of a store on one machine)."""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod

import msgspec


class SchemaState(msgspec.Struct, frozen=True, kw_only=True):
    version: int  # the newest migration applied to the store
    latest: int  # the newest migration this waypost ships
    # the migrations this process applied when it opened the store; None on SQLite, which
    # upgrades itself on open
    applied_now: tuple[int, ...] | None = None
    # the oldest schema whose waypost may still write to the store (None: it does not say)
    min_writer: int | None = None


class Status(enum.StrEnum):
    OK = "ok"  # as it should be
    WARN = "warn"  # works, but look at it
    FAIL = "fail"  # needs fixing: doctor exits 1


class Diagnosis(msgspec.Struct, frozen=True, kw_only=True):
    """One thing `waypost doctor` checked, and what it found."""

    name: str
    status: Status
    detail: str


class Pruned(msgspec.Struct, frozen=True, kw_only=True):
    """What `Store.prune` removed."""

    runs: int
    events: int
    deliveries: int  # outbox rows
    blobs: int
    blob_bytes: int
    # of `runs`: those whose owner had not acknowledged their last event in its inbox
    unacknowledged: int = 0


class SweeperLock(ABC):
    """The right to sweep one scope of a store (every run, or one owner's runs).

    Where several hosts share a store, at most one watcher per scope holds it at a time (the
    active sweeper); the others stay registered as standbys and retry every interval.
    """

    @abstractmethod
    def try_acquire(self) -> bool:
        """Take the lock if nobody holds it, never waiting. True while this holder has it:
        each call checks that a hold taken earlier is still in force."""

    @abstractmethod
    def take_over(self) -> bool:
        """End whoever holds the lock and take it; True when taken. Only for a holder whose
        registration has lapsed: it is stuck, or its host is gone."""

    @abstractmethod
    def close(self) -> None:
        """Give the lock up, if held, and release what keeps it."""


class AlwaysHeld(SweeperLock):
    """The sweeper lock of a store on one machine, which every watcher holds at once: its
    writes serialise, and sweeps that overlap still record each condition once (the machine
    refuses a second record), so nothing needs one sweeper at a time."""

    def try_acquire(self) -> bool:
        return True

    def take_over(self) -> bool:
        return True

    def close(self) -> None:
        pass
