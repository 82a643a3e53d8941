"""Which deliveries an event causes: a pure plan, committed with the event itself.

The final delivery has one key per run, ever (`<run>.final`), so re-approving, replaying
or racing approvers can never queue a second one; each notice is keyed by the event that
caused it, so it is queued at most once per event.
"""

from __future__ import annotations

from datetime import datetime

import msgspec

from waypost.errors import Conflict, RuleViolation, step
from waypost.events import (
    Approved,
    BlockerOpened,
    BlockerResolved,
    DeliveryFailed,
    Event,
    MarkedReady,
    Nudged,
    Retargeted,
)
from waypost.model import Delivery, DeliveryStatus, OutboxItem, Packet, Purpose, State

RETARGETED = "retargeted"  # the topic of a final delivery planned again by a retarget


def final_key(run_id: str) -> str:
    return f"{run_id}.final"


def _final(after: Packet, event: Event, topic: str, *, accept_duplicate: bool = False
           ) -> OutboxItem:
    return OutboxItem(key=final_key(after.id), run_id=after.id, purpose=Purpose.FINAL,
                      topic=topic, target=after.target, event_seq=event.seq,
                      created_at=event.at, accept_duplicate=accept_duplicate)


def plan(before: Packet, after: Packet, event: Event) -> list[OutboxItem]:
    """The outbox rows `event` adds (empty for most events).

    Resolving the `delivery_failed` blocker plans the final delivery again under its one
    key: the store queues that same row again (same key, same webhook-id). A retarget of
    an approved run (its final delivery exists) plans it again to the new target: the
    store moves that row (`settle_final`).
    """
    data = event.data
    requeued = (isinstance(data, BlockerResolved) and before.state is State.BLOCKED
                and after.state is State.APPROVED)  # the delivery_failed blocker was resolved
    if isinstance(data, Approved) or requeued:
        return [_final(after, event, "approved")]
    if isinstance(data, Retargeted):
        moved = after.target != before.target and before.approval is not None
        return [_final(after, event, RETARGETED, accept_duplicate=data.accept_duplicate)] \
            if moved else []
    if after.notify is None:
        return []
    topic = None
    if isinstance(data, BlockerOpened):
        topic = "silent" if data.kind == "worker_silent" else "blocked"
    elif isinstance(data, MarkedReady):
        topic = "ready_for_review"
    elif isinstance(data, DeliveryFailed):
        topic = "delivery_failed"
    elif isinstance(data, Nudged):
        topic = data.topic.value  # review_overdue, delivery_stalled
    if topic is None:
        return []
    return [OutboxItem(key=f"{after.id}.{event.seq}.{topic}", run_id=after.id,
                       purpose=Purpose.NOTICE, topic=topic, target=after.notify,
                       event_seq=event.seq, created_at=event.at)]


# --- a final delivery planned again: what the store does with its existing row ---------


def leased(row: Delivery, now: datetime) -> bool:
    """Whether a relay is attempting the row now (its lease is live)."""
    return row.lease_owner is not None and row.lease_expires_at is not None and \
        row.lease_expires_at > now


def outcome_unknown(row: Delivery, now: datetime) -> bool:
    """Whether its current target may already have it: an attempt's outcome was unknown
    (a timeout or a dropped connection after sending), or a relay's lease ran out with no
    outcome recorded (it died, or hung, mid-send)."""
    return row.status is not DeliveryStatus.SENT and (
        row.outcome_unknown_at is not None
        or (row.lease_owner is not None and not leased(row, now)))


def refuse_leased(row: Delivery, now: datetime) -> None:
    """Conflict while a relay holds a live lease on `row`: moving it now could send twice."""
    if leased(row, now):
        until = f"{row.lease_expires_at:%Y-%m-%d %H:%M:%S}Z"
        raise Conflict(
            f"{row.key} is being sent to {row.target} now by {row.lease_owner} (lease until "
            f"{until}): a relay is sending it now, so it was not changed",
            hint="wait for that attempt to end, then try again",
            steps=[step("read", row.run_id, why="see it")])


def refuse_unknown(row: Delivery, target: str, accept_duplicate: bool, now: datetime) -> None:
    """RuleViolation when `row` would move to another `target` although its current target
    may already have it, unless the owner accepts a duplicate."""
    if target == row.target or accept_duplicate or not outcome_unknown(row, now):
        return
    when = row.outcome_unknown_at or row.last_attempt_at
    said = f" at {when:%Y-%m-%d %H:%M:%S}Z" if when else ""
    raise RuleViolation(
        f"{row.key} may already have reached {row.target}: the outcome of an attempt{said} "
        "is unknown (it timed out or lost the connection after sending), so a new target "
        "could deliver the result twice",
        steps=[step("retarget", row.run_id, why="if a duplicate is acceptable", target=target,
                    accept_duplicate="true"),
               step("deliver", why="or let the relay retry the same target")])


def settle_final(row: Delivery, item: OutboxItem) -> Delivery | None:
    """The row a final delivery planned again (`item`) leaves, or None to keep it as it is.

    Raises Conflict while a relay holds a live lease on it, and RuleViolation when it would
    move away from a target that may already have it without `item.accept_duplicate`.
    A sent row is kept. A new target is taken (a queued row is due again at once, its
    retry horizon restarted); a failed row is queued again by an `approved` plan (its
    delivery_failed blocker was resolved), not by a retarget alone (the run stays blocked).
    """
    now = item.created_at
    if row.status is DeliveryStatus.SENT:
        return None
    refuse_leased(row, now)
    refuse_unknown(row, item.target, item.accept_duplicate, now)
    moved = item.target != row.target
    requeue = row.status is DeliveryStatus.FAILED and item.topic != RETARGETED
    if not moved and not requeue:
        return None
    changed = row
    if moved:
        earlier = (row.target,) if outcome_unknown(row, now) else ()
        changed = msgspec.structs.replace(
            changed, target=item.target, outcome_unknown_at=None,
            maybe_delivered_to=(*row.maybe_delivered_to, *earlier))
    if requeue or row.status is DeliveryStatus.QUEUED:
        changed = msgspec.structs.replace(
            changed, status=DeliveryStatus.QUEUED, next_attempt_at=now, queued_at=now,
            lease_owner=None, lease_expires_at=None)
    return changed
