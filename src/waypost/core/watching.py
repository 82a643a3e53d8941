"""What a watchdog must record on a run, and when it must look again: pure decisions over
the due rules, which the sweeps in `waypost.usecases.watchdog` commit.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import lru_cache

from waypost.core.authority import WATCHDOG_PREFIX
from waypost.core.due import (
    DELIVERY_STALL_AFTER,
    deadline_due,
    delivery_stall_due,
    is_due,
    last_sign_of_life,
    next_check_at,
    review_due,
    silent_due,
)
from waypost.core.machine import next_blocker_id
from waypost.durations import format_duration
from waypost.events import AnyEventData, BlockerOpened, Nudged
from waypost.model import BlockerKind, NudgeTopic, Packet


def actor_of(watcher_id: str) -> str:
    return f"{WATCHDOG_PREFIX}{watcher_id}"


def decide(packet: Packet, now: datetime, *, relay_running: bool) -> AnyEventData | None:
    """What a watchdog must record on this run at `now` (None: nothing)."""
    if is_due(silent_due(packet), now):
        return BlockerOpened(blocker_id=next_blocker_id(packet), kind=BlockerKind.WORKER_SILENT,
                             detail=silent_detail(packet, now))
    deadline = packet.stop_rules.deadline
    if deadline is not None and is_due(deadline_due(packet), now):
        return BlockerOpened(blocker_id=next_blocker_id(packet),
                             kind=BlockerKind.DEADLINE_PASSED,
                             detail=f"the deadline {deadline:%Y-%m-%d %H:%M:%S}Z passed "
                             f"while the run was {packet.state}")
    if packet.result is not None and is_due(review_due(packet), now):
        waited = format_duration((now - packet.result.submitted_at).total_seconds())
        return Nudged(topic=NudgeTopic.REVIEW_OVERDUE,
                      detail=f"finished, never heard back: ready for review for {waited}; "
                      f"review it with: waypost review {packet.id}")
    if not relay_running and is_due(delivery_stall_due(packet), now):
        return Nudged(topic=NudgeTopic.DELIVERY_STALLED,
                      detail=f"delivery queued, no relay running: nothing will reach "
                      f"{packet.target} until one runs: waypost deliver")
    return None


def silent_detail(packet: Packet, now: datetime) -> str:
    """Names the last heartbeat, the last note and the lease holder."""
    since = last_sign_of_life(packet)
    heard = packet.progress.last_heartbeat
    last = (f"last heartbeat {_stamp(heard)}Z" if heard
            else f"no heartbeat since {_stamp(since)}Z")
    quiet = format_duration((now - since).total_seconds())
    holder = (f"{packet.worker.actor} (epoch {packet.worker.epoch})" if packet.worker
              else "nobody")
    note = f'"{packet.progress.note}"' if packet.progress.note else "none"
    limit = _silence_limit(packet.stop_rules.max_silence or 0)
    return (f"silent for {quiet} (max silence {limit}): {last}; last note: {note}; "
            f"lease holder: {holder}")


def _stamp(moment: datetime) -> str:
    """The moment as `%Y-%m-%d %H:%M:%S` writes it, from its fields: a third of strftime's
    cost and less than isoformat's, which formats the offset only for it to be cut off
    (an f-string's six format specs cost more). Before the year 1000 strftime may leave
    the year unpadded."""
    if moment.year >= 1000:
        return "%04d-%02d-%02d %02d:%02d:%02d" % (  # noqa: UP031
            moment.year, moment.month, moment.day, moment.hour, moment.minute, moment.second)
    return f"{moment:%Y-%m-%d %H:%M:%S}"


@lru_cache(maxsize=64)
def _silence_limit(seconds: float) -> str:
    """A stop rule's max silence as a detail names it: a few values shared by many runs."""
    return format_duration(seconds)


def next_look(packet: Packet, now: datetime, *, relay_running: bool) -> datetime | None:
    """When to look again at a run that needs nothing now."""
    later = next_check_at(packet, after=now)
    if relay_running and is_due(delivery_stall_due(packet), now):
        again = now + timedelta(seconds=DELIVERY_STALL_AFTER)  # in case the relay goes away
        later = min(later, again) if later else again
    return later
