"""The imported runs' part of the store contract: a run brought in from a bundle
(`waypost import`), kept with its origin and read-only.

An imported run's events and packet are stored as the bundle holds them, beside its origin
(`model.Origin`). `Store.load` hands the origin over with the packet, so that every write
is refused by `core/history.prepare`; the run has no next check (the watchdog never sees
it), no outbox rows (the relay never does) and `prune` leaves it alone."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from waypost.errors import Conflict, step

if TYPE_CHECKING:
    from waypost.events import Event
    from waypost.model import Origin, Packet


class ImportedRuns(ABC):
    """Runs brought in from bundles, read-only here."""

    @abstractmethod
    def import_run(self, events: Sequence[Event], packet: Packet, origin: Origin) -> bool:
        """Store a run whose chain and packet were verified, marked with `origin`, in one
        transaction. False (nothing written) when the run is already here with the same
        chain (the same number of events and the same head); Conflict (nothing written)
        when a run of that id is here with another chain (`another_chain`)."""

    @abstractmethod
    def origins(self, run_ids: Collection[str]) -> dict[str, Origin]:
        """The origin of each imported run among `run_ids` (a local run has none)."""


def another_chain(run_id: str, stored: tuple[int, str], given: tuple[int, str]) -> Conflict:
    """The refusal of a bundle whose chain is not the one stored under its run's id."""
    (have, head), (bring, new) = stored, given
    return Conflict(
        f"run {run_id} is already in this store with another history ({have} events, head "
        f"{head[:12]}…) than the bundle's ({bring} events, head {new[:12]}…): nothing "
        "was imported", hint="a run's id is inside every event's hash: the two are "
        "different runs, or one of them is older",
        steps=[step("read", run_id, why="see the run stored here")])
