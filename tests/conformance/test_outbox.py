"""Conformance: the outbox and relay operations every Store must implement the same way."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.delivery_support import approved_run
from tests.helpers import FakeClock
from waypost.core import outbox
from waypost.core.history import make_event
from waypost.core.machine import apply, next_blocker_id
from waypost.core.writes import RunWrite
from waypost.errors import NotFound, StaleLease, VersionConflict
from waypost.events import Delivered, DeliveryFailed, Heartbeat
from waypost.model import Authority, DeliveryStatus, Kind, OutboxItem, Purpose, RelayInfo, State
from waypost.store import Store
from waypost.usecases import runs, starting

LEASE = 60.0


def notice_run(store: Store, clock: FakeClock, count: int = 1) -> tuple[str, list[str]]:
    """A run with `count` notices queued by heartbeats (the store contract alone, no rules)."""
    run, _ = starting.start(store, "t", actor="alice", owner="alice", target="none:",
                        kind=Kind.LONG_RUNNING, max_silence=600, clock=clock)
    keys = []
    for i in range(count):
        snap = store.load(run.id)
        event = make_event(snap.packet, run.id, Heartbeat(note=str(i)), actor="alice",
                           at=clock(), prev_hash=snap.head_hash)
        key = f"{run.id}.{event.seq}.test"
        item = OutboxItem(key=key, run_id=run.id, purpose=Purpose.NOTICE, topic="test",
                          target="file:n.jsonl", event_seq=event.seq, created_at=clock())
        store.commit(run.id, snap.packet.version, [event], apply(snap.packet, event), [item])
        keys.append(key)
        clock.advance(1)
    return run.id, keys


def _write(store: Store, run_id: str, data: Delivered | DeliveryFailed,
           clock: FakeClock) -> RunWrite:
    snap = store.load(run_id)
    event = make_event(snap.packet, run_id, data, actor="relay:1", at=clock(),
                       prev_hash=snap.head_hash)
    after = apply(snap.packet, event)
    return RunWrite(run_id=run_id, expected_version=snap.packet.version, events=(event,),
                    packet=after, outbox=tuple(outbox.plan(snap.packet, after, event)))


def test_approval_queues_exactly_one_final_delivery(store: Store, clock: FakeClock) -> None:
    run_id = approved_run(store, clock, target="file:out.md")
    [row] = [d for d in store.deliveries([run_id]) if d.purpose is Purpose.FINAL]
    assert row.key == outbox.final_key(run_id)
    assert (row.status, row.attempts, row.target, row.topic) == (
        DeliveryStatus.QUEUED, 0, "file:out.md", "approved")
    assert row.queued_at == row.created_at == row.next_attempt_at
    assert row.lease_owner is None
    assert row.last_attempt_at is None


def test_a_key_planned_twice_is_kept_as_it_is(store: Store, clock: FakeClock) -> None:
    run_id, [key] = notice_run(store, clock)
    snap = store.load(run_id)
    event = make_event(snap.packet, run_id, Heartbeat(), actor="alice", at=clock(),
                       prev_hash=snap.head_hash)
    again = OutboxItem(key=key, run_id=run_id, purpose=Purpose.NOTICE, topic="other",
                       target="file:elsewhere", event_seq=event.seq, created_at=clock())
    store.commit(run_id, snap.packet.version, [event], apply(snap.packet, event), [again])
    [row] = store.deliveries([run_id])
    assert (row.topic, row.target, row.event_seq) == ("test", "file:n.jsonl", 2)


def test_claim_leases_due_rows_oldest_first_and_counts_the_attempt(
        store: Store, clock: FakeClock) -> None:
    keys = [notice_run(store, clock)[1][0] for _ in range(3)]
    claimed = store.claim_deliveries("relay:1", now=clock(), lease_s=LEASE, limit=2)
    assert [d.key for d in claimed] == keys[:2]
    for row in claimed:
        assert row.lease_owner == "relay:1"
        assert row.lease_expires_at == clock() + timedelta(seconds=LEASE)
        assert row.last_attempt_at == clock()
        assert row.attempts == 1
        assert row.status is DeliveryStatus.QUEUED


def test_rows_not_yet_due_are_not_claimed(store: Store, clock: FakeClock) -> None:
    notice_run(store, clock)
    assert store.claim_deliveries("relay:1", now=clock() - timedelta(seconds=30),
                                  lease_s=LEASE) == []


def test_a_leased_row_is_not_claimed_again_until_its_lease_expires(
        store: Store, clock: FakeClock) -> None:
    _, [key] = notice_run(store, clock)
    assert [d.key for d in store.claim_deliveries("relay:1", now=clock(), lease_s=LEASE)] == [key]
    assert store.claim_deliveries("relay:2", now=clock(), lease_s=LEASE) == []
    later = clock() + timedelta(seconds=LEASE + 1)
    [taken] = store.claim_deliveries("relay:2", now=later, lease_s=LEASE)
    assert (taken.key, taken.lease_owner, taken.attempts) == (key, "relay:2", 2)
    with pytest.raises(StaleLease, match="relay:2 holds it now"):
        store.retry_delivery(key, "relay:1", error="x", retry_at=later)


def test_retry_keeps_it_queued_for_later_and_releases_the_lease(
        store: Store, clock: FakeClock) -> None:
    _, [key] = notice_run(store, clock)
    store.claim_deliveries("relay:1", now=clock(), lease_s=LEASE)
    retry_at = clock() + timedelta(seconds=5)
    row = store.retry_delivery(key, "relay:1", error="HTTP 500", retry_at=retry_at)
    assert (row.status, row.last_error, row.next_attempt_at) == (
        DeliveryStatus.QUEUED, "HTTP 500", retry_at)
    assert row.lease_owner is None
    assert row.lease_expires_at is None
    assert store.next_delivery_due() == retry_at
    assert store.claim_deliveries("relay:1", now=clock(), lease_s=LEASE) == []
    assert [d.key for d in store.claim_deliveries("relay:1", now=retry_at, lease_s=LEASE)] == [key]


def test_finish_without_a_run_write_settles_the_row(store: Store, clock: FakeClock) -> None:
    run_id, keys = notice_run(store, clock, count=2)
    store.claim_deliveries("relay:1", now=clock(), lease_s=LEASE, limit=2)
    sent = store.finish_delivery(keys[0], "relay:1", at=clock(), receipt="appended")
    assert (sent.status, sent.receipt, sent.sent_at, sent.lease_owner) == (
        DeliveryStatus.SENT, "appended", clock(), None)
    store.claim_deliveries("relay:1", now=clock(), lease_s=LEASE)  # one row per run at once
    failed = store.finish_delivery(keys[1], "relay:1", at=clock(), error="disk full")
    assert (failed.status, failed.last_error) == (DeliveryStatus.FAILED, "disk full")
    assert store.get(run_id).version == 3  # notices never write to the run
    with pytest.raises(StaleLease, match="it is sent"):
        store.finish_delivery(keys[0], "relay:1", at=clock(), receipt="again")
    assert store.next_delivery_due() is None


def test_finish_of_an_unknown_key_is_not_found(store: Store, clock: FakeClock) -> None:
    with pytest.raises(NotFound, match=r"no delivery wp_nope\.final"):
        store.finish_delivery("wp_nope.final", "relay:1", at=clock(), receipt="x")


def test_finish_with_the_delivered_event_is_one_transaction(
        store: Store, clock: FakeClock) -> None:
    run_id = approved_run(store, clock)
    key = outbox.final_key(run_id)
    store.claim_deliveries("relay:1", now=clock(), lease_s=LEASE)
    write = _write(store, run_id, Delivered(key=key, detail="HTTP 204", attempts=1), clock)
    done = store.finish_delivery(key, "relay:1", at=clock(), receipt="HTTP 204", write=write)
    assert done.status is DeliveryStatus.SENT
    packet = store.get(run_id)
    assert packet.state is State.DELIVERED
    assert packet.receipt is not None
    assert (packet.receipt.detail, packet.receipt.relay) == ("HTTP 204", "relay:1")
    assert store.events(run_id)[-1].type == "delivered"


def test_a_version_conflict_leaves_row_and_run_untouched(store: Store, clock: FakeClock) -> None:
    run_id = approved_run(store, clock)
    key = outbox.final_key(run_id)
    store.claim_deliveries("relay:1", now=clock(), lease_s=LEASE)
    stale = _write(store, run_id, Delivered(key=key, detail="HTTP 200", attempts=1), clock)
    runs.Run(store, run_id, actor="alice", clock=clock).transfer(Authority.DELIVER, "bob")
    version = store.get(run_id).version
    with pytest.raises(VersionConflict):
        store.finish_delivery(key, "relay:1", at=clock(), receipt="HTTP 200", write=stale)
    [row] = [d for d in store.deliveries([run_id]) if d.key == key]
    assert (row.status, row.lease_owner) == (DeliveryStatus.QUEUED, "relay:1")
    assert store.get(run_id).version == version
    assert store.get(run_id).state is State.APPROVED


def test_a_lost_lease_leaves_the_run_untouched(store: Store, clock: FakeClock) -> None:
    run_id = approved_run(store, clock)
    key = outbox.final_key(run_id)
    store.claim_deliveries("relay:1", now=clock(), lease_s=LEASE)
    store.claim_deliveries("relay:2", now=clock() + timedelta(seconds=LEASE), lease_s=LEASE)
    write = _write(store, run_id, Delivered(key=key, detail="HTTP 200", attempts=1), clock)
    with pytest.raises(StaleLease):
        store.finish_delivery(key, "relay:1", at=clock(), receipt="HTTP 200", write=write)
    assert store.get(run_id).state is State.APPROVED


def test_a_failed_final_delivery_is_queued_again_under_the_same_key(
        store: Store, clock: FakeClock) -> None:
    run_id = approved_run(store, clock)
    key = outbox.final_key(run_id)
    store.claim_deliveries("relay:1", now=clock(), lease_s=LEASE)
    packet = store.get(run_id)
    failed = DeliveryFailed(key=key, blocker_id=next_blocker_id(packet),
                            detail="final delivery to https://x failed: HTTP 410 Gone",
                            attempts=1)
    store.finish_delivery(key, "relay:1", at=clock(), error="HTTP 410 Gone",
                          write=_write(store, run_id, failed, clock))
    blocked = store.get(run_id)
    assert blocked.state is State.BLOCKED
    assert blocked.resume_state is State.APPROVED
    clock.advance(100)
    runs.Run(store, run_id, actor="alice", clock=clock).unblock(failed.blocker_id, "fixed")
    [row] = [d for d in store.deliveries([run_id]) if d.key == key]
    assert (row.status, row.attempts, row.last_error) == (
        DeliveryStatus.QUEUED, 1, "HTTP 410 Gone")
    assert row.queued_at == row.next_attempt_at == clock()
    assert row.created_at < row.queued_at
    assert store.get(run_id).state is State.APPROVED


def test_deliveries_of_many_runs_in_one_call(store: Store, clock: FakeClock) -> None:
    a, keys_a = notice_run(store, clock, count=2)
    b, keys_b = notice_run(store, clock, count=1)
    rows = store.deliveries([b, a, "wp_unknown"])
    assert [d.key for d in rows if d.run_id == a] == keys_a
    assert [d.key for d in rows if d.run_id == b] == keys_b
    assert store.deliveries([]) == []


def test_next_due_counts_a_live_lease(store: Store, clock: FakeClock) -> None:
    assert store.next_delivery_due() is None
    notice_run(store, clock)
    due = store.next_delivery_due()
    assert due is not None
    assert due <= clock()
    store.claim_deliveries("relay:1", now=clock(), lease_s=LEASE)
    assert store.next_delivery_due() == clock() + timedelta(seconds=LEASE)


def test_relays_register_renew_expire_and_leave(store: Store, clock: FakeClock) -> None:
    def info(relay_id: str, beat_at: float) -> RelayInfo:
        at = clock() + timedelta(seconds=beat_at)
        return RelayInfo(id=relay_id, host="h", pid=7, started_at=clock(), last_beat=at,
                         expires_at=at + timedelta(seconds=30))

    store.beat_relay(info("relay:1", 0))
    store.beat_relay(info("relay:2", 5))
    assert [r.id for r in store.relays(now=clock())] == ["relay:2", "relay:1"]
    store.beat_relay(info("relay:1", 10))  # renewed
    assert [r.id for r in store.relays(now=clock() + timedelta(seconds=36))] == ["relay:1"]
    [renewed] = store.relays(now=clock())[:1]
    assert renewed.last_beat == clock() + timedelta(seconds=10)
    assert renewed.started_at == clock()
    store.remove_relay("relay:1")
    store.remove_relay("relay:unknown")
    assert [r.id for r in store.relays(now=clock())] == ["relay:2"]
