"""Derived views of a packet: liveness, watch coverage, delivery, and when to look again.

Nothing here is stored in the packet; `observe` is computed each time a packet is read.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import msgspec

from waypost.model import TERMINAL, Kind, Liveness, Observed, Packet, State

DEFAULT_REVIEW_WITHIN = 24 * 3600.0
UNWATCHED = "unwatched: nobody will notice silence; check back later"


def last_sign_of_life(packet: Packet) -> datetime:
    candidates = [packet.created_at]
    if packet.progress.last_heartbeat is not None:
        candidates.append(packet.progress.last_heartbeat)
    if packet.worker is not None:
        candidates.append(packet.worker.acquired_at)
    return max(candidates)


def liveness(packet: Packet, now: datetime) -> Liveness | None:
    """fresh / late / silent from the last heartbeat; None when not measured."""
    if packet.state not in (State.IN_PROGRESS, State.BLOCKED):
        return None
    rules = packet.stop_rules
    if rules.heartbeat_interval is None and rules.max_silence is None:
        return None
    quiet = (now - last_sign_of_life(packet)).total_seconds()
    if rules.max_silence is not None and quiet > rules.max_silence:
        return Liveness.SILENT
    if rules.heartbeat_interval is not None and quiet > rules.heartbeat_interval:
        return Liveness.LATE
    return Liveness.FRESH


def next_check_at(packet: Packet) -> datetime | None:
    """When a watchdog must next look at this run (None: never)."""
    if packet.state in TERMINAL or packet.kind is Kind.BOUNDED:
        return None
    rules = packet.stop_rules
    due: list[datetime] = []
    if packet.state is State.IN_PROGRESS:
        base = last_sign_of_life(packet)
        for seconds in (rules.heartbeat_interval, rules.max_silence):
            if seconds is not None:
                due.append(base + timedelta(seconds=seconds))
    if rules.deadline is not None and packet.state in (State.IN_PROGRESS, State.BLOCKED):
        due.append(rules.deadline)
    if packet.state is State.READY_FOR_REVIEW and packet.result is not None:
        within = rules.review_within or DEFAULT_REVIEW_WITHIN
        due.append(packet.result.submitted_at + timedelta(seconds=within))
    return min(due) if due else None


def delivery_line(packet: Packet) -> str:
    if packet.target.startswith("none:"):
        return "target none: nobody will be told when this finishes"
    if packet.state is State.DELIVERED:
        return f"delivered to {packet.target}"
    return f"not yet queued; will go once to {packet.target} after approval"


def watch_line(packet: Packet) -> str:
    if packet.state in TERMINAL:
        return "finished: nothing to watch"
    if packet.kind is Kind.BOUNDED:
        return "bounded: runs inline, no watcher expected"
    return UNWATCHED


def observe(packet: Packet, now: datetime) -> Packet:
    """The packet with its derived `observed` view filled in for `now`."""
    quiet = None
    if packet.state in (State.IN_PROGRESS, State.BLOCKED):
        quiet = round((now - last_sign_of_life(packet)).total_seconds(), 3)
    observed = Observed(as_of=now, liveness=liveness(packet, now), silent_for_s=quiet,
                        watch=watch_line(packet), delivery=delivery_line(packet))
    return msgspec.structs.replace(packet, observed=observed)
