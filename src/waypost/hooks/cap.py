"""The cap on one run's refused stops, for every adapter that answers a host's stop hook
(`waypost hook` on the command line, `POST /hooks/claude/stop`): a stop let through resets
the count; a refused one counts (once per host turn, when the host names its turn); past
`cap` refusals in a row a named blocker is recorded on the run and the agent may stop,
saying so. The decision itself is `waypost.hooks.decide`'s."""

from __future__ import annotations

from typing import TYPE_CHECKING

from waypost.errors import WaypostError
from waypost.hooks import decide as hooks
from waypost.hooks.decide import StopDecision
from waypost.model import BlockerKind, Packet

if TYPE_CHECKING:
    from waypost.store.base import Store


def capped(store: Store, packet: Packet, decision: StopDecision, *, cap: int,
           turn: str | None = None, actor: str | None = None) -> StopDecision:
    """`decision` for the run's stop, counted against `cap`. The cap's blocker is written
    as `actor` (with its lease epoch when it holds the lease), else as the lease holder,
    else as the owner."""
    if not decision.block:
        store.count_stop_block(packet.id, reset=True)
        return decision
    if hooks.cap_blocker_open(packet):  # the hook gave up on this run already
        return StopDecision(block=False, reason=decision.reason)
    blocks = store.count_stop_block(packet.id, turn=turn)
    if blocks <= cap:
        return decision
    return _give_up(store, packet, decision, blocks - 1, actor)


def _give_up(store: Store, packet: Packet, decision: StopDecision, blocks: int,
             actor: str | None) -> StopDecision:
    from waypost.usecases.runs import (
        Run,  # only here: a stop hook that is let through never loads it
    )

    lease = packet.worker
    if actor is None:
        actor = lease.actor if lease is not None else packet.owner
    epoch = lease.epoch if lease is not None and lease.actor == actor else None
    store.count_stop_block(packet.id, reset=True)
    said = f"waypost: the agent was refused a stop {blocks} times in a row"
    try:
        _, blocker = Run(store, packet.id, actor=actor, epoch=epoch).block(
            BlockerKind.OTHER, hooks.cap_detail(decision, blocks))
    except WaypostError as exc:
        return StopDecision(block=False, reason=(
            f"{said}; the cap's blocker could not be recorded ({exc.message}); it may stop"))
    return StopDecision(block=False, reason=(
        f"{said}; recorded blocker {blocker} on run {packet.id} and let it stop. Resolve it "
        f"when the work goes on: waypost unblock {packet.id} {blocker} --resolution TEXT"))
