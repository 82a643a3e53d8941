"""Conformance: an owner's inbox. Its items are the events of the runs the reader owns that
need it or tell it how a run ended; a session's start tells each once (the shown mark), and
an item stays until acknowledged (the acknowledged mark); both marks are the store's, the
same for every process, and `prune` says when it drops what a reader has not acknowledged."""

from __future__ import annotations

from datetime import timedelta

from tests.delivery_support import approved_run
from tests.helpers import FakeClock
from waypost.core.inbox import TYPES, Topic
from waypost.delivery.relay import Relay
from waypost.model import BlockerKind, Kind, State
from waypost.store import Store
from waypost.usecases import inbox, runs, starting


def _deliver(store: Store, clock: FakeClock) -> str:
    run = approved_run(store, clock, target="none:")
    Relay(store, clock=clock).drain()
    assert store.get(run).state is State.DELIVERED
    return run


def test_a_delivery_is_in_its_owners_inbox_until_acknowledged(store: Store,
                                                               clock: FakeClock) -> None:
    run = _deliver(store, clock)
    listed = inbox.read(store, "alice")
    assert [(i.run_id, i.topic) for i in listed.items] == [
        (run, Topic.READY_FOR_REVIEW), (run, Topic.DELIVERED)]
    [delivered] = [i for i in listed.items if i.topic is Topic.DELIVERED]
    assert delivered.detail.startswith("receipt: ")
    assert delivered.title
    assert not listed.acknowledged
    assert inbox.read(store, "alice").items == listed.items  # reading acknowledges nothing
    assert inbox.read(store, "bob").items == ()  # nobody else's runs
    acked = inbox.read(store, "alice", ack=True)
    assert acked.acknowledged
    assert acked.items == listed.items
    assert inbox.read(store, "alice").items == ()


def test_a_sessions_start_tells_each_item_once_and_keeps_it_until_acknowledged(
        store: Store, clock: FakeClock) -> None:
    run = _deliver(store, clock)
    told = inbox.while_away(store, "alice")
    assert told is not None
    assert "while you were gone" in told
    assert run in told
    assert "delivered" in told
    assert inbox.while_away(store, "alice") is None  # shown once
    kept = inbox.read(store, "alice").items
    assert kept
    assert all(i.shown for i in kept)
    inbox.read(store, "alice", ack=True)
    assert inbox.read(store, "alice").items == ()


def test_only_what_needs_the_owner_is_news(store: Store, clock: FakeClock) -> None:
    run, _ = starting.start(store, "t", actor="alice", owner="alice", target="none:",
                            kind=Kind.LONG_RUNNING, max_silence=3600, clock=clock)
    worker = runs.Run(store, run.id, actor="w1", clock=clock)
    worker.claim()
    worker.heartbeat(note="working")
    worker.block(BlockerKind.FAILED_COMMAND, "make failed")  # the worker's own obstacle
    worker.block(BlockerKind.MISSING_INPUT, "the staging API key")
    items = inbox.read(store, "alice").items
    assert [(i.topic, i.actor) for i in items] == [(Topic.BLOCKED, "w1")]
    assert "missing_input" in items[0].detail
    assert "staging API key" in items[0].detail
    runs.Run(store, run.id, actor="alice", clock=clock).cancel("not needed any more")
    assert [i.topic for i in inbox.read(store, "alice").items] == [Topic.BLOCKED]  # own act


def test_an_item_that_arrives_after_the_listing_is_not_acknowledged_with_it(
        store: Store, clock: FakeClock) -> None:
    run, _ = starting.start(store, "t", actor="alice", owner="alice", target="none:",
                            kind=Kind.LONG_RUNNING, max_silence=3600, clock=clock)
    worker = runs.Run(store, run.id, actor="w1", clock=clock)
    worker.claim()
    worker.block(BlockerKind.MISSING_INPUT, "first")
    inbox.read(store, "alice", ack=True)
    worker.block(BlockerKind.PERMISSION_BOUNDARY, "second")
    [left] = inbox.read(store, "alice").items
    assert "second" in left.detail
    assert not left.shown


def test_prune_says_how_many_runs_it_dropped_unacknowledged(store: Store,
                                                            clock: FakeClock) -> None:
    _deliver(store, clock)
    _deliver(store, clock)
    inbox.read(store, "alice", ack=True)
    _deliver(store, clock)  # after the acknowledgement: not acknowledged
    clock.advance(3600)
    pruned = store.prune(before=clock(), states=[State.DELIVERED, State.CANCELLED],
                         blobs_before=clock() - timedelta(seconds=60))
    assert pruned.runs == 3
    assert pruned.unacknowledged == 1
    assert inbox.read(store, "alice").items == ()


def test_an_acknowledged_run_with_nothing_new_is_passed_over(store: Store,
                                                             clock: FakeClock) -> None:
    """An acknowledgement that left nothing out marks each run up to the version read
    before its events: a run that ended in the owner's own act (no news of it) is not read
    again, and what arrives after the acknowledgement still is."""
    run, _ = starting.start(store, "t", actor="alice", owner="alice", target="none:",
                            kind=Kind.LONG_RUNNING, max_silence=3600, clock=clock)
    worker = runs.Run(store, run.id, actor="w1", clock=clock)
    worker.claim()
    worker.heartbeat(note="working")
    assert store.inbox_events("alice", types=TYPES, limit=10).versions == {run.id: 3}
    inbox.read(store, "alice", ack=True)  # nothing listed, the run acknowledged to 3
    assert store.inbox_events("alice", types=TYPES, limit=10).versions == {}
    worker.block(BlockerKind.MISSING_INPUT, "after the acknowledgement")
    [item] = inbox.read(store, "alice").items
    assert item.seq == 4
