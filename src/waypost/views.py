"""The read side every adapter needs: packets with their observed view (liveness, watch
coverage, deliveries, relays), read in a fixed number of queries however many packets.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from waypost.core import observed
from waypost.durations import utcnow
from waypost.model import Packet
from waypost.store.base import Store


def observe_runs(store: Store, packets: Sequence[Packet], now: datetime) -> list[Packet]:
    """`packets` as `show`, `ls` and the board print them: each with its observed view at
    `now` (`core.observed.observe`), from three queries at most."""
    watchers = store.watchers(now=now)
    deliveries = store.deliveries([p.id for p in packets])
    relays = store.relays(now=now) if observed.waiting(deliveries) else None
    by_run = observed.by_run(deliveries)
    return [observed.observe(p, now, watchers, by_run.get(p.id, ()), relays) for p in packets]


def observe_run(store: Store, packet: Packet, now: datetime | None = None) -> Packet:
    """One packet with its observed view (now, unless told)."""
    return observe_runs(store, [packet], now or utcnow())[0]
