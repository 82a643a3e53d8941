"""The read model: a run as its reader may see it, for every door. The rule is the core's
(`waypost.core.readers`: the owner, the lease holder and the transferees see everything,
a watcher the public view with liveness, a viewer or anyone else the public view); here it
is applied to what the store holds, with the observed view (`usecases.views`) and the
project's `[sanitize]` terms. The caller is a bearer token's grant on an authenticated door
(its role is checked first, `core.access`), or None on a local store, where the reader is
self-asserted and sees everything: the store's file is theirs to read anyway.

Nothing here writes: what a reader sees changes no stored event.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime

from waypost.config import Config
from waypost.core import access, readers
from waypost.core.access import Caller, Operation
from waypost.durations import utcnow
from waypost.events import Event
from waypost.model import Artifact, Packet
from waypost.store.base import Store
from waypost.usecases.views import observe_runs

NO_CONFIG = Config()


def seen_packets(caller: Caller | None, packets: Sequence[Packet], *,
                 config: Config = NO_CONFIG) -> list[Packet]:
    """Packets already read (with their observed view) as `caller` may see each."""
    return [readers.packet_seen(p, readers.sight(caller, p), deny=config.deny,
                                allow=config.allow) for p in packets]


def runs(store: Store, caller: Caller | None, packets: Sequence[Packet], *,
         config: Config = NO_CONFIG, now: datetime | None = None) -> list[Packet]:
    """`packets` with their observed view, as `caller` may see each (a listing: which runs
    it may list is `core.access`'s)."""
    return seen_packets(caller, observe_runs(store, packets, now or utcnow()), config=config)


def readable(store: Store, caller: Caller | None, run_id: str) -> Packet:
    """The stored packet, once `caller`'s token may read it (NotFound, NotAuthorized)."""
    packet = store.get(run_id)
    if caller is not None:
        access.check_operation(caller, Operation.READ, packet)
    return packet


def sees_all(caller: Caller | None, packet: Packet) -> bool:
    """Whether `caller` sees everything of `packet` (its artifacts' bytes included)."""
    return readers.sight(caller, packet) is readers.Sight.ALL


def run(store: Store, caller: Caller | None, run_id: str, *,
        config: Config = NO_CONFIG) -> Packet:
    """One run, with its observed view, as `caller` may see it."""
    return runs(store, caller, [readable(store, caller, run_id)], config=config)[0]


def events(store: Store, caller: Caller | None, run_id: str, *,
           config: Config = NO_CONFIG, fold: bool = False) -> list[Event]:
    """The run's events in order, as `caller` may see them (`fold`: every one kept, for a
    use case that folds them again, `core.readers.events_seen`)."""
    packet = readable(store, caller, run_id)
    return readers.events_seen(store.events(run_id), readers.sight(caller, packet),
                               deny=config.deny, allow=config.allow, fold=fold)


def events_window(store: Store, caller: Caller | None, run_id: str, *, limit: int,
                  before: int | None = None, types: Collection[str] = (),
                  config: Config = NO_CONFIG) -> list[Event]:
    """The run's last `limit` stored events before seq `before` (of `types`, when given),
    as `caller` may see them (`events`; a viewer's without the heartbeats among them)."""
    packet = readable(store, caller, run_id)
    return readers.events_seen(store.events_window(run_id, before=before, limit=limit,
                                                   types=types),
                               readers.sight(caller, packet), deny=config.deny,
                               allow=config.allow)


def artifact(store: Store, caller: Caller | None, run_id: str,
             name: str) -> tuple[Artifact, bytes]:
    """An artifact's stored bytes, for a reader who sees everything (else NotAuthorized)."""
    from waypost.usecases.artifacts import fetch

    readers.may_fetch(caller, readable(store, caller, run_id), name)
    return fetch(store, run_id, name)
