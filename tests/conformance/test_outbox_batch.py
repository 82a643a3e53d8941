"""Conformance: claims in batches, one row per run at a time, and the claim's attempt as
its fencing token, the same way on every Store."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from tests.conformance.test_outbox import LEASE, notice_run
from tests.helpers import FakeClock
from waypost.errors import StaleLease
from waypost.model import DeliveryStatus
from waypost.store import Store


def test_a_batch_takes_the_earliest_row_of_each_run_and_none_of_a_run_in_flight(
        store: Store, clock: FakeClock) -> None:
    _, a = notice_run(store, clock, count=3)
    _, [b] = notice_run(store, clock)
    claimed = store.claim_deliveries("relay:1", now=clock(), lease_s=LEASE, limit=10)
    assert [d.key for d in claimed] == [a[0], b]
    assert [d.attempts for d in claimed] == [1, 1]
    # a's next rows wait while its first is in flight, by this relay or any other
    assert store.claim_deliveries("relay:2", now=clock(), lease_s=LEASE, limit=10) == []
    store.finish_delivery(a[0], "relay:1", at=clock(), receipt="sent")
    assert [d.key for d in store.claim_deliveries("relay:2", now=clock(), lease_s=LEASE,
                                                  limit=10)] == [a[1]]


def test_a_run_whose_row_in_flight_lapsed_is_claimed_again_from_that_row(
        store: Store, clock: FakeClock) -> None:
    _, a = notice_run(store, clock, count=2)
    store.claim_deliveries("relay:1", now=clock(), lease_s=LEASE, limit=10)
    later = clock() + timedelta(seconds=LEASE)
    [again] = store.claim_deliveries("relay:2", now=later, lease_s=LEASE, limit=10)
    assert (again.key, again.attempts, again.lease_owner) == (a[0], 2, "relay:2")


def test_next_due_waits_for_the_row_of_its_run_in_flight(
        store: Store, clock: FakeClock) -> None:
    _, a = notice_run(store, clock, count=2)
    store.claim_deliveries("relay:1", now=clock(), lease_s=LEASE, limit=1)
    assert store.next_delivery_due() == clock() + timedelta(seconds=LEASE)
    store.retry_delivery(a[0], "relay:1", error="HTTP 503",
                         retry_at=clock() + timedelta(seconds=5))
    due = store.next_delivery_due()
    assert due is not None
    assert due <= clock()  # the second row is free to go now


def test_a_settle_under_an_older_claim_is_refused_even_for_the_same_relay(
        store: Store, clock: FakeClock) -> None:
    _, [key] = notice_run(store, clock)
    [first] = store.claim_deliveries("relay:1", now=clock(), lease_s=LEASE)
    later = clock() + timedelta(seconds=LEASE)  # its lease lapsed mid-send; claimed again
    [second] = store.claim_deliveries("relay:1", now=later, lease_s=LEASE)
    assert (first.attempts, second.attempts) == (1, 2)
    with pytest.raises(StaleLease, match=r"relay:1 holds it now \(attempt 2\)"):
        store.finish_delivery(key, "relay:1", at=later, receipt="late", attempt=1)
    with pytest.raises(StaleLease):
        store.retry_delivery(key, "relay:1", error="late", retry_at=later, attempt=1)
    [row] = [d for d in store.deliveries([second.run_id]) if d.key == key]
    assert (row.status, row.receipt, row.lease_owner, row.last_error) == (
        DeliveryStatus.QUEUED, None, "relay:1", None)
    done = store.finish_delivery(key, "relay:1", at=later, receipt="sent", attempt=2)
    assert (done.status, done.receipt) == (DeliveryStatus.SENT, "sent")


def test_the_claim_in_force_settles_under_its_attempt(store: Store, clock: FakeClock) -> None:
    _, [key] = notice_run(store, clock)
    [claimed] = store.claim_deliveries("relay:1", now=clock(), lease_s=LEASE)
    row = store.retry_delivery(key, "relay:1", error="HTTP 503", retry_at=clock(),
                               attempt=claimed.attempts)
    assert (row.status, row.last_error, row.lease_owner) == (
        DeliveryStatus.QUEUED, "HTTP 503", None)


def test_concurrent_batch_claims_never_hand_out_a_row_twice(
        store: Store, clock: FakeClock) -> None:
    keys = {notice_run(store, clock)[1][0] for _ in range(24)}
    taken: dict[str, list[str]] = {}

    def claim_all(relay: str) -> None:
        mine = taken.setdefault(relay, [])
        for _ in range(50):  # bounded: 24 rows, at least one per claim until none is left
            batch = store.claim_deliveries(relay, now=clock(), lease_s=LEASE, limit=4)
            if not batch:
                return
            mine.extend(d.key for d in batch)

    threads = [threading.Thread(target=claim_all, args=(f"relay:{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    every = [key for batch in taken.values() for key in batch]
    assert sorted(every) == sorted(keys)  # each row once, to one relay
