"""The outbox as stored and read: what a delivery is, how it stands, and the receipt that
proves it reached its target; a relay's registration."""

# No `from __future__ import annotations` here: msgspec reads these annotations when it
# builds a decoder, and resolving them from strings would cost every command that reads a
# packet a millisecond or two; every name they use is defined above its first use.

from datetime import datetime

from waypost.model.base import QuickStrEnum, Record, quick


@quick
class Purpose(QuickStrEnum):
    FINAL = "final"  # the one visible completion, to the run's target
    NOTICE = "notice"  # a non-final notice (blocked, ready, silent…), to the notify target


class OutboxItem(Record, frozen=True, kw_only=True):
    """A delivery queued in the same transaction as the event that caused it."""

    key: str  # idempotency key: stable across retries (the webhook-id)
    run_id: str
    purpose: Purpose
    topic: str  # what happened: approved, blocked, ready_for_review, …
    target: str
    event_seq: int
    created_at: datetime
    # planned by a retarget whose owner accepted that the old target may already have it:
    # the store then moves a final delivery whose earlier attempt's outcome is unknown
    accept_duplicate: bool = False


@quick
class DeliveryStatus(QuickStrEnum):
    QUEUED = "queued"  # waiting for its next attempt, or being attempted under a relay's lease
    SENT = "sent"  # the target accepted it; the receipt is stored
    FAILED = "failed"  # failed for good; a final one is queued again when its blocker is resolved


class Delivery(Record, frozen=True, kw_only=True):
    """An outbox row as the relay and `show` see it."""

    key: str  # idempotency key: stable across retries (the webhook-id)
    run_id: str
    purpose: Purpose
    topic: str
    target: str
    event_seq: int
    created_at: datetime
    queued_at: datetime  # when it was (last) queued: the retry horizon runs from here
    status: DeliveryStatus
    attempts: int  # attempts started (a claim counts, even if its relay died mid-send)
    next_attempt_at: datetime
    last_attempt_at: datetime | None = None
    lease_owner: str | None = None  # the relay attempting it now
    lease_expires_at: datetime | None = None
    last_error: str | None = None
    sent_at: datetime | None = None
    receipt: str | None = None  # what the target said when it accepted
    # when an attempt whose outcome is unknown started (a timeout or a dropped connection
    # after the request went out): the current target may already have it
    outcome_unknown_at: datetime | None = None
    # earlier targets it was moved away from while an attempt's outcome there was unknown
    # (the owner accepted a duplicate): they may already have it too
    maybe_delivered_to: tuple[str, ...] = ()


@quick
class DeliveryAssurance(QuickStrEnum):
    """How strong "once" was for a sent delivery: only what waypost itself can know."""

    KEYED = "keyed"  # the receiver got a stable key to dedupe on (webhook-id, exec:'s env)
    IDEMPOTENT = "idempotent"  # writing it again changes nothing (file:, content-addressed)
    UPSERT = "upsert"  # found and updated in place (Slack ts/metadata, GitHub comment, status)
    AT_LEAST_ONCE = "at_least_once"  # no way to check: a retry may have made a duplicate
    NONE = "none"  # nothing was sent (none:)


class Receipt(Record, frozen=True, kw_only=True):
    """Proof that the final delivery reached the run's target."""

    key: str  # the delivery's idempotency key
    target: str
    detail: str  # what the target said, e.g. "HTTP 204" or "wrote /srv/result.md (…)"
    attempts: int
    relay: str
    delivered_at: datetime
    assurance: DeliveryAssurance | None = None  # None: recorded before receipts said it


class RelayInfo(Record, frozen=True, kw_only=True):
    """A running delivery relay's registration, renewed by its beat."""

    id: str
    host: str
    pid: int
    started_at: datetime
    last_beat: datetime
    expires_at: datetime  # past this without a beat, the relay counts as gone
