"""Retarget: the owner changes where a run's result (or its notices) goes before it is
delivered, for a target that could never work. One write: the `retargeted` event, and for a
run blocked because its final delivery failed, that blocker resolved, so the same delivery
(same key, same webhook-id) is queued again, now to the new target.

"Once" survives it: a final delivery a relay is sending now is not moved (Conflict, decided
again by the store inside the commit), and one whose earlier attempt's outcome is unknown
moves only when the owner accepts that the old target may already have the result.
"""

from __future__ import annotations

from datetime import datetime

from waypost import inputs
from waypost.config import Config
from waypost.core import outbox
from waypost.core.history import Step, prepare
from waypost.core.observed import final_of
from waypost.core.writes import RunWrite, Snapshot
from waypost.errors import InvalidInput, step
from waypost.events import BlockerResolved, Retargeted
from waypost.model import BlockerKind, Delivery, State
from waypost.store.base import Store
from waypost.usecases.fields import check_targets


def check_uris(store: Store, config: Config, run_id: str, target: str | None,
               notify: str | None) -> None:
    """The new URIs, decided as `start` decides them, before anything is read or written."""
    if target is None and notify is None:
        raise InvalidInput("name a new target, a new notify URI, or both",
                           steps=[step("retarget", run_id)])
    for field, uri in (("target", target), ("notify", notify)):
        if uri is not None:
            inputs.text(uri, field, limit=inputs.TEXT_LIMITS["uri"])
    check_targets(store, config, target=target, notify=notify)


def decide(store: Store, snap: Snapshot, *, actor: str, at: datetime, target: str | None,
           notify: str | None, accept_duplicate: bool) -> RunWrite:
    """The retarget, decided: the rules first (state, owner), then the final delivery as it
    stands (not being sent now; not moved from a target that may have it, unless
    accepted). The store decides the delivery again when it commits."""
    before = snap.packet
    steps: list[Step] = [(Retargeted(target=target, notify=notify,
                                     accept_duplicate=accept_duplicate), None)]
    if before.state is State.BLOCKED and target is not None:  # notify alone sends nothing
        new = target
        steps += [(BlockerResolved(blocker_id=b.id, resolution=f"retargeted to {new}: the "
                                   "final delivery is queued again under the same key"), None)
                  for b in before.open_blockers if b.kind is BlockerKind.DELIVERY_FAILED]
    write = prepare(snap, steps, actor=actor, at=at)
    final = final_of(store.deliveries([before.id]))
    if final is not None:
        check_final(final, write.packet.target, accept_duplicate, at)
    return write


def check_final(final: Delivery, target: str, accept_duplicate: bool, at: datetime) -> None:
    outbox.refuse_leased(final, at)
    outbox.refuse_unknown(final, target, accept_duplicate, at)
