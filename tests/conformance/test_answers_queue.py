"""Conformance: the answers queue. An answer is stored once under its service's request key
(a retry or a replay stores nothing), claimed by one server at a time, claimable again only
when its claim has expired, and finished only by the claim that holds it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from waypost.store import Store

T0 = datetime(2026, 12, 5, 9, 0, tzinfo=UTC)


def _accept(store: Store, key: str, at: datetime = T0) -> bool:
    return store.accept_answer(key, source="slack", run_id="wp_1", body=b'{"k":"' +
                               key.encode() + b'"}', at=at)


def test_a_key_is_stored_once(store: Store) -> None:
    assert _accept(store, "slack:a")
    assert not _accept(store, "slack:a", T0 + timedelta(seconds=1))  # the replay
    row = store.answer_row("slack:a")
    assert row is not None
    assert row.body == b'{"k":"slack:a"}'
    assert not row.done
    assert store.answer_row("slack:b") is None


def test_a_claim_holds_until_it_expires_and_only_its_holder_finishes(store: Store) -> None:
    _accept(store, "slack:a")
    _accept(store, "slack:b", T0 + timedelta(seconds=1))
    [first, second] = store.claim_answers("one", now=T0, lease_s=60, limit=10)
    assert (first.key, second.key, first.attempts) == ("slack:a", "slack:b", 1)
    assert store.claim_answers("two", now=T0 + timedelta(seconds=59), lease_s=60,
                               limit=10) == []
    [again, _] = store.claim_answers("two", now=T0 + timedelta(seconds=61), lease_s=60,
                                     limit=10)
    assert (again.key, again.attempts) == ("slack:a", 2)
    assert not store.finish_answer("slack:a", "one", outcome=b"{}", at=T0)  # claim lost
    assert store.finish_answer("slack:a", "two", outcome=b'{"ok":true}', at=T0)
    assert not store.finish_answer("slack:a", "two", outcome=b"{}", at=T0)  # done already
    row = store.answer_row("slack:a")
    assert row is not None
    assert row.done
    assert row.outcome == b'{"ok":true}'
    later = store.claim_answers("three", now=T0 + timedelta(hours=1), lease_s=60, limit=10)
    assert [r.key for r in later] == ["slack:b"]  # a finished answer is never claimed


def test_a_claim_takes_at_most_its_limit_oldest_first(store: Store) -> None:
    for i in range(5):
        _accept(store, f"github:{i}", T0 + timedelta(seconds=5 - i))
    claimed = store.claim_answers("one", now=T0, lease_s=60, limit=2)
    assert [r.key for r in claimed] == ["github:4", "github:3"]


def test_a_pruned_runs_answers_go_with_it(store: Store) -> None:
    from tests.delivery_support import approved_run
    from tests.helpers import FakeClock
    from waypost.delivery.relay import Relay
    from waypost.model import Kind, State
    from waypost.usecases import starting

    clock = FakeClock()
    gone = approved_run(store, clock)
    Relay(store, clock=clock).drain()
    assert store.get(gone).state is State.DELIVERED
    kept, _ = starting.start(store, "still going", actor="alice", owner="alice",
                             target="none:", kind=Kind.BOUNDED, clock=clock)
    for key, run in (("slack:gone", gone), ("slack:kept", kept.id)):
        store.accept_answer(key, source="slack", run_id=run, body=b"{}", at=T0)
    store.prune(before=clock() + timedelta(seconds=1), states=[State.DELIVERED],
                blobs_before=clock())
    assert store.answer_row("slack:gone") is None
    assert store.answer_row("slack:kept") is not None
