"""The backend conformance suite: every Store implementation must pass all of it."""

from __future__ import annotations

import hashlib

import pytest

from tests.helpers import FakeClock
from waypost.core.history import make_event, verify_run
from waypost.core.machine import apply
from waypost.errors import IdempotencyConflict, NotFound, StaleLease, VersionConflict
from waypost.events import Heartbeat
from waypost.model import Authority, BlockerKind, Kind, State
from waypost.store import Store
from waypost.usecases import runs, starting


def _start(store: Store, clock: FakeClock, key: str | None = None,
           title: str = "t") -> runs.Run:
    run, _ = starting.start(store, title, actor="alice", owner="alice", target="none:",
                        kind=Kind.LONG_RUNNING, max_silence=60, idempotency_key=key,
                        clock=clock)
    return run


def test_create_then_load_returns_the_same_packet(store: Store, clock: FakeClock) -> None:
    run = _start(store, clock)
    packet = store.get(run.id)
    assert packet.state is State.IN_PROGRESS
    assert packet.version == 1
    assert [e.seq for e in store.events(run.id)] == [1]


def test_missing_run_is_not_found(store: Store) -> None:
    with pytest.raises(NotFound, match="wp_nope"):
        store.load("wp_nope")
    with pytest.raises(NotFound):
        store.events("wp_nope")


def test_commit_appends_events_and_bumps_the_version(store: Store, clock: FakeClock) -> None:
    run = _start(store, clock)
    run.heartbeat(note="one")
    run.heartbeat(note="two")
    packet = store.get(run.id)
    assert packet.version == 3
    assert packet.progress.note == "two"
    assert [e.type for e in store.events(run.id)] == ["started", "heartbeat", "heartbeat"]
    verify_run(run.id, store.events(run.id), packet)


def test_commit_with_a_stale_version_is_a_conflict_and_changes_nothing(
        store: Store, clock: FakeClock) -> None:
    run = _start(store, clock)
    snap = store.load(run.id)
    event = make_event(snap.packet, run.id, Heartbeat(note="x"), actor="alice",
                       at=clock(), prev_hash=snap.head_hash)
    store.commit(run.id, 1, [event], apply(snap.packet, event))
    with pytest.raises(VersionConflict, match="version 2, not 1"):
        store.commit(run.id, 1, [event], apply(snap.packet, event))
    assert store.get(run.id).version == 2
    assert len(store.events(run.id)) == 2


def test_commit_to_a_missing_run_is_not_found(store: Store, clock: FakeClock) -> None:
    run = _start(store, clock)
    snap = store.load(run.id)
    event = make_event(snap.packet, run.id, Heartbeat(), actor="alice", at=clock(),
                       prev_hash=snap.head_hash)
    with pytest.raises(NotFound):
        store.commit("wp_missing", 1, [event], apply(snap.packet, event))


def test_idempotent_start_returns_the_same_run(store: Store, clock: FakeClock) -> None:
    first = _start(store, clock, key="k1")
    second, created = starting.start(store, "t", actor="alice", owner="alice", target="none:",
                                 kind=Kind.LONG_RUNNING, max_silence=60,
                                 idempotency_key="k1", clock=clock)
    assert not created
    assert second.id == first.id
    assert store.run_ids() == [first.id]


def test_idempotency_key_with_other_parameters_is_a_conflict(
        store: Store, clock: FakeClock) -> None:
    first = _start(store, clock, key="k1")
    with pytest.raises(IdempotencyConflict, match=first.id):
        _start(store, clock, key="k1", title="another title")
    assert store.run_ids() == [first.id]


def test_list_runs_filters_by_state_and_owner(store: Store, clock: FakeClock) -> None:
    a = _start(store, clock, title="a")
    clock.advance(1)
    b = _start(store, clock, title="b")
    b.block(BlockerKind.MISSING_INPUT, "the API key for staging")
    blocked = store.list_runs(states=[State.BLOCKED])
    assert [p.id for p in blocked] == [b.id]
    assert {p.id for p in store.list_runs(owner="alice")} == {a.id, b.id}
    assert store.list_runs(owner="bob") == []
    assert [p.id for p in store.list_runs()] == [b.id, a.id]  # most recently updated first
    assert len(store.list_runs(limit=1)) == 1


def test_a_limited_list_of_several_states_is_the_newest_of_them_all(
        store: Store, clock: FakeClock) -> None:
    """A limit over several states gives exactly the newest runs of those states, as one
    sorted scan would (SQLite reads them a state at a time from its index)."""
    started = []
    for i in range(24):
        clock.advance(1)
        run = _start(store, clock, title=f"r{i}")
        if i % 3 == 1:
            run.block(BlockerKind.MISSING_INPUT, "waiting on the staging key")
        elif i % 3 == 2:
            run.cancel("not needed")
        started.append(run)
    for i in (3, 0, 15, 9):  # touched again later: they move to the front of their state
        clock.advance(1)
        started[i].heartbeat(note="again")
    every = store.list_runs()
    assert len(every) == 24
    assert [p.updated_at for p in every] == sorted((p.updated_at for p in every), reverse=True)
    for states in (None, [State.IN_PROGRESS, State.BLOCKED],
                   [State.CANCELLED, State.BLOCKED, State.DELIVERED]):
        expected = [p.id for p in every if states is None or p.state in states]
        for limit in (1, 3, 7, 8, 13, 30):
            got = store.list_runs(states=states, limit=limit)
            assert [p.id for p in got] == expected[:limit], (states, limit)


def test_blobs_are_content_addressed(store: Store) -> None:
    data = b"hello waypost\n"
    digest = store.put_blob(data)
    assert digest == hashlib.sha256(data).hexdigest()
    assert store.put_blob(data) == digest
    assert store.get_blob(digest) == data
    with pytest.raises(NotFound):
        store.get_blob("0" * 64)


def test_fencing_survives_the_round_trip(store: Store, clock: FakeClock) -> None:
    run = _start(store, clock)
    w1 = runs.Run(store, run.id, actor="w1", clock=clock)
    w1.claim()
    run.transfer(Authority.TAKEOVER, "w2")  # the owner lets w2 take over w1's live lease
    w2 = runs.Run(store, run.id, actor="w2", clock=clock)
    w2.claim()
    before = store.get(run.id).version
    with pytest.raises(StaleLease, match="w2"):
        w1.heartbeat()
    assert store.get(run.id).version == before
