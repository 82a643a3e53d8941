"""Which deliveries an event causes: a pure plan, committed with the event itself.

The final delivery has one key per run, ever (`<run>.final`), so re-approving, replaying
or racing approvers can never queue a second one; each notice is keyed by the event that
caused it, so it is queued at most once per event.
"""

from __future__ import annotations

from waypost.events import (
    Approved,
    BlockerOpened,
    BlockerResolved,
    DeliveryFailed,
    Event,
    MarkedReady,
    Nudged,
)
from waypost.model import OutboxItem, Packet, Purpose, State


def final_key(run_id: str) -> str:
    return f"{run_id}.final"


def plan(before: Packet, after: Packet, event: Event) -> list[OutboxItem]:
    """The outbox rows `event` adds (empty for most events).

    Resolving the `delivery_failed` blocker plans the final delivery again under its one
    key: the store queues that same row again (same key, same webhook-id).
    """
    data = event.data
    requeued = (isinstance(data, BlockerResolved) and before.state is State.BLOCKED
                and after.state is State.APPROVED)  # the delivery_failed blocker was resolved
    if isinstance(data, Approved) or requeued:
        return [OutboxItem(key=final_key(after.id), run_id=after.id, purpose=Purpose.FINAL,
                           topic="approved", target=after.target, event_seq=event.seq,
                           created_at=event.at)]
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
