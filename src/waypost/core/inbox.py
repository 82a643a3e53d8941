"""Which events are news for a run's owner: the inbox's rule.

An inbox item is an event already in a run's history: nothing is written twice. The reader
is the run's owner; the events that need the owner, or tell the owner how the run ended,
are items, unless the reader wrote them itself (nobody needs telling what they did). Each
reader keeps two marks per run (`Store.mark_inbox`): how far it was *shown* (a new
session's start tells it once) and how far it *acknowledged* (`waypost inbox --ack`); an
item stays in the inbox until acknowledged.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Final

from waypost.core.authority import OWNER_RESOLVES
from waypost.core.sanitize import WITHHELD
from waypost.events import (
    BlockerOpened,
    Cancelled,
    Delivered,
    DeliveryFailed,
    Event,
    MarkedReady,
    Nudged,
)
from waypost.model import BlockerKind, QuickStrEnum, Record

MAX_ITEMS: Final = 200  # items one inbox answer holds at most (the oldest first)
# the event types that may be items; `topic` decides each event of them
TYPES: Final = ("marked_ready", "blocker_opened", "delivered", "delivery_failed",
                "cancelled", "nudged")


class Topic(QuickStrEnum):
    READY_FOR_REVIEW = "ready_for_review"  # a result waits for the owner's review
    BLOCKED = "blocked"  # a blocker only the owner resolves was opened
    SILENT = "silent"  # the watchdog found the worker silent (worker_silent)
    DELIVERED = "delivered"  # the final delivery reached the target: its receipt
    DELIVERY_FAILED = "delivery_failed"  # the final delivery failed for good
    CANCELLED = "cancelled"  # the run was stopped
    NUDGED = "nudged"  # the watchdog's reminder: a review or a delivery is waiting


class InboxItem(Record, frozen=True, kw_only=True):
    """One event of a run the reader owns, as its inbox shows it."""

    run_id: str
    seq: int  # the event's place in the run's history
    at: datetime
    actor: str  # who wrote the event
    topic: Topic
    detail: str  # what happened, in words (a delivery's receipt, a blocker's detail)
    shown: bool  # a session's start has already told the reader
    title: str = ""  # the run's title (the use case fills it in)


def topic(event: Event) -> tuple[Topic, str] | None:
    """The event as news for its run's owner (topic, detail), or None: not news."""
    data = event.data
    if isinstance(data, MarkedReady):
        withheld = data.summary == WITHHELD  # a reader of the public view (core.readers)
        return Topic.READY_FOR_REVIEW, (data.public_summary or data.summary) if withheld \
            else data.summary
    if isinstance(data, BlockerOpened):
        if data.kind is BlockerKind.WORKER_SILENT:
            return Topic.SILENT, data.detail
        if data.kind in OWNER_RESOLVES:
            return Topic.BLOCKED, f"{data.kind} ({data.blocker_id}): {data.detail}"
        return None  # the worker's own obstacle
    if isinstance(data, Delivered):
        assurance = f", {data.assurance}" if data.assurance else ""
        return Topic.DELIVERED, f"receipt: {data.detail} (attempts {data.attempts}{assurance})"
    if isinstance(data, DeliveryFailed):
        return Topic.DELIVERY_FAILED, f"{data.detail} ({data.blocker_id})"
    if isinstance(data, Cancelled):
        return Topic.CANCELLED, data.reason
    if isinstance(data, Nudged):
        return Topic.NUDGED, f"{data.topic}: {data.detail}"
    return None


def items(found: Iterable[tuple[Event, int]], reader: str) -> list[InboxItem]:
    """The reader's items among the events the store found past its acknowledged marks
    (each with its run's shown mark), in the order found."""
    chosen = []
    for event, shown_upto in found:
        news = topic(event) if event.actor != reader else None
        if news is not None:
            chosen.append(InboxItem(run_id=event.run_id, seq=event.seq, at=event.at,
                               actor=event.actor, topic=news[0], detail=news[1],
                               shown=event.seq <= shown_upto))
    return chosen


def marks(listed: Iterable[InboxItem]) -> dict[str, int]:
    """How far each run's events were listed: the marks that listing sets (never an event
    the reader was not given)."""
    upto: dict[str, int] = {}
    for item in listed:
        upto[item.run_id] = max(upto.get(item.run_id, 0), item.seq)
    return upto
