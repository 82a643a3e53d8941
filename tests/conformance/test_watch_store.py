"""The watchdog's store operations, on every backend: watcher registrations, due runs,
deferred checks and retention."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import msgspec
import pytest

from tests.helpers import FakeClock
from waypost.core.due import next_check_at
from waypost.core.history import verify_run
from waypost.errors import InvalidInput, NotFound
from waypost.model import ArtifactRole, BlockerKind, Kind, State, Watcher
from waypost.store import Store
from waypost.usecases import artifacts, runs, starting

# blobs record when they were stored by the wall clock, not the test's: this grace is past
# any of them
NO_GRACE = timedelta(days=36500)


def _start(store: Store, clock: FakeClock, *, owner: str = "alice", max_silence: float = 60,
           title: str = "t") -> runs.Run:
    run, _ = starting.start(store, title, actor=owner, owner=owner, target="none:",
                        kind=Kind.LONG_RUNNING, max_silence=max_silence, clock=clock)
    return run


def _watcher(clock: FakeClock, wid: str = "w-1", *, lease: float = 90,
             owner: str | None = None) -> Watcher:
    now = clock()
    return Watcher(id=wid, host="host", pid=123, interval_s=lease / 3, owner=owner,
                   started_at=now, last_beat=now, expires_at=now + timedelta(seconds=lease))


# --- watchers ---------------------------------------------------------------------------


def test_a_registered_watcher_is_live_until_its_lease_expires(
        store: Store, clock: FakeClock) -> None:
    watcher = _watcher(clock, owner="alice")
    store.beat_watcher(watcher)
    assert store.watchers(now=clock()) == [watcher]
    assert store.watchers(now=clock.advance(89.9)) == [watcher]
    assert store.watchers(now=clock.advance(0.1)) == []  # expires_at is not after now


def test_a_beat_renews_the_registration_in_place(store: Store, clock: FakeClock) -> None:
    first = _watcher(clock)
    store.beat_watcher(first)
    clock.advance(60)
    renewed = msgspec.structs.replace(_watcher(clock), started_at=first.started_at,
                                      last_sweep=clock())
    store.beat_watcher(renewed)
    assert store.watchers(now=clock.advance(80)) == [renewed]


def test_removed_watchers_are_gone_and_unknown_ids_are_ignored(
        store: Store, clock: FakeClock) -> None:
    store.beat_watcher(_watcher(clock, "a"))
    clock.advance(1)
    store.beat_watcher(_watcher(clock, "b"))
    assert [w.id for w in store.watchers(now=clock())] == ["b", "a"]  # latest beat first
    store.remove_watcher("a")
    store.remove_watcher("never-registered")
    assert [w.id for w in store.watchers(now=clock())] == ["b"]


# --- due runs ---------------------------------------------------------------------------


def test_due_runs_are_those_whose_next_check_has_come_in_due_order(
        store: Store, clock: FakeClock) -> None:
    late = _start(store, clock, max_silence=100, title="later")
    early = _start(store, clock, max_silence=10, title="sooner")
    bounded, _ = starting.start(store, "inline", actor="alice", kind=Kind.BOUNDED, clock=clock)
    assert store.due_runs(now=clock.advance(9)) == []
    clock.advance(1)
    assert [d.packet.id for d in store.due_runs(now=clock())] == [early.id]
    due = store.due_runs(now=clock.advance(1000))
    assert [d.packet.id for d in due] == [early.id, late.id]
    assert due[0].due_at == next_check_at(early.packet)
    assert due[0].head_hash == store.load(early.id).head_hash
    assert bounded.id not in {d.packet.id for d in due}


def test_due_runs_page_by_keyset_and_filter_by_owner(store: Store, clock: FakeClock) -> None:
    ids = []
    for i in range(5):
        ids.append(_start(store, clock, owner="bob" if i == 2 else "alice").id)
        clock.advance(1)
    now = clock.advance(3600)
    first = store.due_runs(now=now, limit=2)
    rest = store.due_runs(now=now, after=(first[-1].due_at, first[-1].packet.id), limit=10)
    assert [d.packet.id for d in first + rest] == ids
    assert [d.packet.id for d in store.due_runs(now=now, owner="bob")] == [ids[2]]


def test_defer_check_moves_the_next_check_only_at_the_expected_version(
        store: Store, clock: FakeClock) -> None:
    run = _start(store, clock, max_silence=10)
    now = clock.advance(20)
    assert store.defer_check(run.id, expected_version=1, at=now + timedelta(seconds=30))
    assert store.due_runs(now=now) == []
    assert [d.packet.id for d in store.due_runs(now=now + timedelta(seconds=30))] == [run.id]
    assert not store.defer_check(run.id, expected_version=7, at=None)
    assert not store.defer_check("wp_missing", expected_version=1, at=None)
    assert store.defer_check(run.id, expected_version=1, at=None)
    assert store.due_runs(now=now + timedelta(days=999)) == []
    run.heartbeat()  # a write stores its own next check again
    assert [d.packet.id for d in store.due_runs(now=now + timedelta(days=1))] == [run.id]


# --- retention --------------------------------------------------------------------------


def test_prune_removes_old_finished_runs_and_keeps_active_ones_and_their_blobs(
        store: Store, clock: FakeClock, tmp_path: Path) -> None:
    shared, only_old = tmp_path / "shared.md", tmp_path / "old.md"
    shared.write_text("# shared result\n" * 20)
    only_old.write_text("# only in the old run\n" * 20)
    old = _start(store, clock, title="old")
    old.add_artifact(str(shared), role=ArtifactRole.REPORT, max_bytes=10**6)
    old.add_artifact(str(only_old), role=ArtifactRole.REPORT, max_bytes=10**6)
    old.cancel("superseded")
    active = _start(store, clock, title="active")
    active.add_artifact(str(shared), role=ArtifactRole.REPORT, max_bytes=10**6)
    clock.advance(100 * 86400)
    recent = _start(store, clock, title="recent")
    recent.cancel("not needed")
    pruned = store.prune(before=clock() - timedelta(days=90), states=[State.CANCELLED],
                         blobs_before=clock() + NO_GRACE)
    assert (pruned.runs, pruned.blobs) == (1, 1)
    assert pruned.events == 4
    assert set(store.run_ids()) == {active.id, recent.id}
    with pytest.raises(NotFound):
        store.load(old.id)
    with pytest.raises(NotFound):
        store.events(old.id)
    assert artifacts.fetch(store, active.id, "shared.md")[1] == shared.read_bytes()
    for rid in store.run_ids():
        verify_run(rid, store.events(rid), store.get(rid))


def test_prune_never_touches_active_states(store: Store, clock: FakeClock) -> None:
    run = _start(store, clock)
    with pytest.raises(InvalidInput, match="in_progress"):
        store.prune(before=clock() + timedelta(days=1), states=[State.IN_PROGRESS],
                    blobs_before=clock())
    assert store.run_ids() == [run.id]


def test_prune_spares_blobs_stored_within_the_grace(store: Store, clock: FakeClock) -> None:
    orphan = store.put_blob(b"stored just before the artifact event that names it")
    pruned = store.prune(before=clock(), states=[State.CANCELLED],
                         blobs_before=clock() - timedelta(hours=1))
    assert pruned.blobs == 0
    assert store.get_blob(orphan)
    pruned = store.prune(before=clock(), states=[State.CANCELLED],
                         blobs_before=clock() + NO_GRACE)
    assert pruned.blobs == 1
    with pytest.raises(NotFound):
        store.get_blob(orphan)


def test_prune_removes_the_outbox_rows_of_pruned_runs(store: Store, clock: FakeClock) -> None:
    run, _ = starting.start(store, "t", actor="alice", owner="alice", target="none:",
                        notify="file:notices.log", kind=Kind.LONG_RUNNING, max_silence=60,
                        clock=clock)
    run.block(BlockerKind.MISSING_INPUT, "the API key for staging")
    run.cancel("no key coming")
    assert len(store.deliveries([run.id])) == 1
    pruned = store.prune(before=clock.advance(1), states=[State.CANCELLED],
                         blobs_before=clock())
    assert (pruned.runs, pruned.deliveries) == (1, 1)
    assert store.deliveries([run.id]) == []
