"""The pure rules of a retarget: where the move is allowed, what it changes in the packet,
and what the store does with a final delivery's row when it is planned again."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import msgspec
import pytest

from waypost.core import outbox
from waypost.core.moves import TABLE, Move
from waypost.errors import Conflict, RuleViolation
from waypost.model import Delivery, DeliveryStatus, OutboxItem, Purpose, State

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_retarget_is_allowed_before_delivery_and_never_after() -> None:
    allowed = {state for state, moves in TABLE.items() if Move.RETARGET in moves}
    assert allowed == {State.IN_PROGRESS, State.BLOCKED, State.READY_FOR_REVIEW,
                       State.APPROVED}
    assert all(TABLE[s][Move.RETARGET] is None for s in allowed)  # the state stays


def _row(**changes: object) -> Delivery:
    row = Delivery(key="wp_1.final", run_id="wp_1", purpose=Purpose.FINAL, topic="approved",
                   target="https://old.example/hook", event_seq=5, created_at=NOW,
                   queued_at=NOW, status=DeliveryStatus.QUEUED, attempts=1,
                   next_attempt_at=NOW + timedelta(minutes=5), last_attempt_at=NOW,
                   last_error="HTTP 503")
    return msgspec.structs.replace(row, **changes)


def _item(target: str = "file:new.md", *, topic: str = outbox.RETARGETED,
          accept_duplicate: bool = False, at: datetime = NOW + timedelta(minutes=1)
          ) -> OutboxItem:
    return OutboxItem(key="wp_1.final", run_id="wp_1", purpose=Purpose.FINAL, topic=topic,
                      target=target, event_seq=9, created_at=at,
                      accept_duplicate=accept_duplicate)


def test_a_queued_row_takes_the_new_target_due_at_once_with_its_history_kept() -> None:
    moved = outbox.settle_final(_row(), _item())
    assert moved is not None
    at = NOW + timedelta(minutes=1)
    assert (moved.target, moved.status, moved.next_attempt_at, moved.queued_at) == (
        "file:new.md", DeliveryStatus.QUEUED, at, at)
    assert (moved.attempts, moved.last_error, moved.event_seq, moved.created_at) == (
        1, "HTTP 503", 5, NOW)


def test_a_failed_row_is_queued_again_by_approved_but_not_by_a_retarget_alone() -> None:
    failed = _row(status=DeliveryStatus.FAILED)
    moved = outbox.settle_final(failed, _item())
    assert moved is not None
    assert (moved.target, moved.status) == ("file:new.md", DeliveryStatus.FAILED)
    requeued = outbox.settle_final(moved, _item(topic="approved"))
    assert requeued is not None
    assert (requeued.target, requeued.status) == ("file:new.md", DeliveryStatus.QUEUED)


def test_a_sent_row_and_a_row_planned_as_it_is_are_kept() -> None:
    assert outbox.settle_final(_row(status=DeliveryStatus.SENT), _item()) is None
    assert outbox.settle_final(_row(), _item("https://old.example/hook")) is None


def test_a_live_lease_refuses_and_a_lapsed_one_is_an_unknown_outcome() -> None:
    leased = _row(lease_owner="relay:1", lease_expires_at=NOW + timedelta(minutes=2))
    with pytest.raises(Conflict, match="a relay is sending it now"):
        outbox.settle_final(leased, _item(accept_duplicate=True))
    lapsed = _row(lease_owner="relay:1", lease_expires_at=NOW + timedelta(seconds=30))
    with pytest.raises(RuleViolation, match="unknown"):
        outbox.settle_final(lapsed, _item())
    moved = outbox.settle_final(lapsed, _item(accept_duplicate=True))
    assert moved is not None
    assert (moved.lease_owner, moved.maybe_delivered_to) == (None, ("https://old.example/hook",))


def test_an_unknown_outcome_moves_only_when_accepted_and_is_remembered() -> None:
    unknown = _row(outcome_unknown_at=NOW, maybe_delivered_to=("exec:first",))
    with pytest.raises(RuleViolation, match="may already have reached"):
        outbox.settle_final(unknown, _item())
    assert outbox.settle_final(unknown, _item("https://old.example/hook", topic="approved")) \
        is None  # the same target dedupes on the same key: nothing to accept
    moved = outbox.settle_final(unknown, _item(accept_duplicate=True))
    assert moved is not None
    assert (moved.outcome_unknown_at, moved.maybe_delivered_to) == (
        None, ("exec:first", "https://old.example/hook"))

