"""When things fall due: a packet's liveness (fresh / late / silent), the moments the
watchdog must act on, and when it must next look. Pure: derived from the packet alone.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from functools import lru_cache

from waypost.model import (
    BlockerKind,
    Kind,
    Liveness,
    NudgeTopic,
    Packet,
    State,
    StopRules,
)

DEFAULT_REVIEW_WITHIN = 24 * 3600.0
DELIVERY_STALL_AFTER = 300.0  # a final delivery queued this long with no live relay is stalled


def last_sign_of_life(packet: Packet) -> datetime:
    """The latest of: created, last heartbeat, lease taken, a worker_silent blocker resolved
    (of equal moments, the first). Read on every write and every sweep: no list is built."""
    latest = packet.created_at
    heard = packet.progress.last_heartbeat
    if heard is not None and heard > latest:
        latest = heard
    if packet.worker is not None and packet.worker.acquired_at > latest:
        latest = packet.worker.acquired_at
    # resolving a worker_silent blocker restarts the silence clock: someone has looked
    for b in packet.blockers:
        if (b.kind is BlockerKind.WORKER_SILENT and b.resolved_at is not None
                and b.resolved_at > latest):
            latest = b.resolved_at
    return latest


def liveness(packet: Packet, now: datetime) -> Liveness | None:
    """fresh / late / silent from the last heartbeat; None when not measured. A run with
    an open worker_silent blocker is silent until a takeover (resume, or a claim) resolves
    the blocker, whatever its state says: a heartbeat alone does not end a silence the
    watchdog recorded, and no reader is told `fresh` beside it."""
    if packet.state not in (State.IN_PROGRESS, State.BLOCKED):
        return None
    if any(b.kind is BlockerKind.WORKER_SILENT for b in packet.open_blockers):
        return Liveness.SILENT
    rules = packet.stop_rules
    if rules.heartbeat_interval is None and rules.max_silence is None:
        return None
    quiet = (now - last_sign_of_life(packet)).total_seconds()
    if rules.max_silence is not None and quiet >= rules.max_silence:
        return Liveness.SILENT
    if rules.heartbeat_interval is not None and quiet >= rules.heartbeat_interval:
        return Liveness.LATE
    return Liveness.FRESH


# --- when the watchdog must look: each returns the moment a condition holds (None: never) ---


def silent_due(packet: Packet) -> datetime | None:
    """When an in_progress run turns silent: the watchdog blocks it with worker_silent.
    (Late needs no watchdog: it is derived whenever the packet is read.)"""
    seconds = packet.stop_rules.max_silence
    if packet.state is not State.IN_PROGRESS or seconds is None:
        return None
    return last_sign_of_life(packet) + _span(seconds)


def deadline_due(packet: Packet) -> datetime | None:
    """When the deadline blocks the run: once per run, while it is in progress or blocked."""
    deadline = packet.stop_rules.deadline
    if deadline is None or packet.state not in (State.IN_PROGRESS, State.BLOCKED):
        return None
    for b in packet.blockers:
        if b.kind is BlockerKind.DEADLINE_PASSED:
            return None
    return deadline


def review_due(packet: Packet) -> datetime | None:
    """When a result waiting for review is overdue: once per submission."""
    if packet.state is not State.READY_FOR_REVIEW or packet.result is None:
        return None
    since = packet.result.submitted_at
    if _nudged_since(packet, NudgeTopic.REVIEW_OVERDUE, since):
        return None
    within = packet.stop_rules.review_within or DEFAULT_REVIEW_WITHIN
    return since + _span(within)


def delivery_stall_due(packet: Packet) -> datetime | None:
    """When a queued final delivery counts as stalled (if no relay runs): once per queueing."""
    if packet.state is not State.APPROVED or packet.approval is None:
        return None
    queued = packet.approval.at  # or queued again later: a delivery_failed blocker resolved
    for b in packet.blockers:
        if (b.kind is BlockerKind.DELIVERY_FAILED and b.resolved_at is not None
                and b.resolved_at > queued):
            queued = b.resolved_at
    if _nudged_since(packet, NudgeTopic.DELIVERY_STALLED, queued):
        return None
    return queued + _span(DELIVERY_STALL_AFTER)


@lru_cache(maxsize=256)
def _span(seconds: float) -> timedelta:
    """`timedelta(seconds=seconds)`, made once per value: a stop rule's few values recur on
    every run, and making one from a float costs more than the rest of a due moment."""
    return timedelta(seconds=seconds)


def _nudged_since(packet: Packet, topic: NudgeTopic, since: datetime) -> bool:
    return any(n.topic is topic and n.at >= since for n in packet.nudges)


def is_due(moment: datetime | None, now: datetime) -> bool:
    return moment is not None and now >= moment


def next_check_at(packet: Packet, after: datetime | None = None) -> datetime | None:
    """When a watchdog must next look at this run (None: never); with `after`, the first
    such moment later than it (where a sweep that acted on nothing looks next)."""
    if packet.kind is Kind.BOUNDED:
        return None
    earliest = None  # the first of equal moments wins, as with min()
    for due in _WATCHED_IN.get(packet.state, ()):
        moment = due(packet)
        if (moment is not None and (after is None or moment > after)
                and (earliest is None or moment < earliest)):
            earliest = moment
    return earliest


# the due moments that can hold in each state (each returns None in the others), in the
# order next_check_at weighs them: on every write, only these are worked out
_WATCHED_IN: dict[State, tuple[Callable[[Packet], datetime | None], ...]] = {
    State.IN_PROGRESS: (silent_due, deadline_due),
    State.BLOCKED: (deadline_due,),
    State.READY_FOR_REVIEW: (review_due,),
    State.APPROVED: (delivery_stall_due,),
}


def lease_until(rules: StopRules, now: datetime) -> datetime | None:
    """When a lease taken or renewed at `now` lapses: max_silence, else three heartbeat
    intervals; None when the stop rules measure no silence."""
    seconds = rules.max_silence or (rules.heartbeat_interval or 0) * 3
    return now + timedelta(seconds=seconds) if seconds else None
