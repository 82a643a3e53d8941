"""One active sweeper per scope, in-process with an injected clock: on PostgreSQL the sweeper
lock (an advisory lock) picks it, the others stand by registered, and a standby takes over
from a holder that is gone or stuck; on SQLite every watcher sweeps."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path

import msgspec
import pytest

from tests.helpers import FakeClock
from waypost.core.observed import observe
from waypost.model import Kind, State, Watcher, WatcherRole
from waypost.store import Store, open_store
from waypost.usecases import runs, starting
from waypost.usecases.watchdog import Watch


@pytest.fixture
def pg_store(pg_url: str) -> Iterator[Store]:
    with open_store(pg_url) as store:
        yield store


@pytest.fixture
def watches() -> Iterator[ExitStack]:
    """Closes every watcher a test opened (its lock session and its registration)."""
    with ExitStack() as stack:
        yield stack


def _watch(stack: ExitStack, store: Store, clock: FakeClock, name: str,
           owner: str | None = None) -> Watch:
    watch = Watch(store, interval=10, owner=owner, watcher_id=name, clock=clock)
    stack.callback(watch.release)
    return watch


def _silent_run(store: Store, clock: FakeClock, owner: str = "alice") -> str:
    run, _ = starting.start(store, "quiet worker", actor=owner, owner=owner, target="none:",
                        kind=Kind.LONG_RUNNING, max_silence=5, clock=clock)
    runs.Run(store, run.id, actor="w1", clock=clock).claim()
    return run.id


def _roles(store: Store, clock: FakeClock) -> dict[str, str]:
    return {w.id: w.role.value for w in store.watchers(now=clock())}


def test_one_watcher_per_scope_sweeps_and_the_others_stand_by(
        pg_store: Store, clock: FakeClock, watches: ExitStack) -> None:
    a, b = (_watch(watches, pg_store, clock, name) for name in ("a", "b"))
    bob = _watch(watches, pg_store, clock, "bob-only", owner="bob")
    assert a.turn().role is WatcherRole.ACTIVE
    standby = b.turn()
    assert (standby.role, standby.sweeper, standby.examined) == (WatcherRole.STANDBY, "a", 0)
    assert bob.turn().role is WatcherRole.ACTIVE  # another scope, another lock
    assert _roles(pg_store, clock) == {"a": "active", "b": "standby", "bob-only": "active"}
    run_id = _silent_run(pg_store, clock)
    clock.advance(6)
    assert b.turn().actions == ()
    assert [x.recorded for x in a.turn().actions] == ["worker_silent (b1)"]
    (blocker,) = pg_store.get(run_id).blockers
    assert blocker.opened_by == "watchdog:a"
    seen = observe(pg_store.get(run_id), clock(), pg_store.watchers(now=clock())).observed
    assert seen is not None
    assert seen.watched_by == "a"
    assert seen.watch == "watched by a (last sweep 0 s ago, interval 10s; standby: b)"


def test_a_standby_takes_the_lock_as_soon_as_the_sweeper_lets_go(
        pg_store: Store, clock: FakeClock, watches: ExitStack) -> None:
    a, b = (_watch(watches, pg_store, clock, name) for name in ("a", "b"))
    a.turn()
    assert b.turn().role is WatcherRole.STANDBY
    a.release()  # a clean stop; a killed process's session ends the same way
    report = b.turn()
    assert (report.role, report.took_over) == (WatcherRole.ACTIVE, False)
    assert _roles(pg_store, clock) == {"b": "active"}


def test_a_stuck_sweeper_is_replaced_once_its_lease_has_lapsed(
        pg_store: Store, clock: FakeClock, watches: ExitStack) -> None:
    a, b = (_watch(watches, pg_store, clock, name) for name in ("a", "b"))
    a.turn()
    b.turn()
    clock.advance(29)  # a is stuck: it holds the lock, but stopped renewing its lease (30 s)
    assert b.turn().role is WatcherRole.STANDBY  # a still counts
    clock.advance(2)
    assert b.turn().role is WatcherRole.STANDBY  # a's lease is over: first look
    run_id = _silent_run(pg_store, clock)
    clock.advance(10)
    report = b.turn()  # second look: b ends a's hold and sweeps
    assert (report.role, report.took_over) == (WatcherRole.ACTIVE, True)
    assert [x.recorded for x in report.actions] == ["worker_silent (b1)"]
    assert pg_store.get(run_id).blockers[0].opened_by == "watchdog:b"
    woke = a.turn()  # a comes back: its session was ended, so it stands by
    assert (woke.role, woke.sweeper, woke.examined) == (WatcherRole.STANDBY, "b", 0)
    assert _roles(pg_store, clock) == {"a": "standby", "b": "active"}


def test_a_watcher_that_just_took_the_lock_is_not_mistaken_for_a_stuck_one(
        pg_store: Store, clock: FakeClock, watches: ExitStack) -> None:
    a, b = (_watch(watches, pg_store, clock, name) for name in ("a", "b"))
    a.turn()
    for _ in range(5):  # a keeps its lease: b never ends its hold
        clock.advance(10)
        assert a.turn().role is WatcherRole.ACTIVE
        assert b.turn().role is WatcherRole.STANDBY


def test_without_an_active_sweeper_the_run_is_unwatched_and_the_standby_named(
        pg_store: Store, clock: FakeClock, watches: ExitStack) -> None:
    a, b = (_watch(watches, pg_store, clock, name) for name in ("a", "b"))
    a.turn()
    b.turn()
    run_id = _silent_run(pg_store, clock)
    clock.advance(25)
    b.turn()  # renewed; a's lease (from its turn 25 s ago) ends in 5 s
    clock.advance(6)
    seen = observe(pg_store.get(run_id), clock(), pg_store.watchers(now=clock())).observed
    assert seen is not None
    assert seen.watched_by is None
    assert seen.watch == ("unwatched: no active sweeper (standby: b, waiting for the sweeper "
                          "lock); check back later")


def test_on_sqlite_every_watcher_sweeps(tmp_path: Path, clock: FakeClock,
                                        watches: ExitStack) -> None:
    store = watches.enter_context(open_store(str(tmp_path / "one-host.db")))
    a, b = (_watch(watches, store, clock, name) for name in ("a", "b"))
    run_id = _silent_run(store, clock)
    clock.advance(6)
    reports = [a.turn(), b.turn()]
    assert [r.role for r in reports] == [WatcherRole.ACTIVE] * 2
    assert sum(len(r.actions) for r in reports) == 1  # the machine records it once
    assert store.get(run_id).state is State.BLOCKED
    assert _roles(store, clock) == {"a": "active", "b": "active"}


def test_a_watchers_role_is_stored_on_every_backend(store: Store, clock: FakeClock) -> None:
    now = clock()
    standby = Watcher(id="w", host="h", pid=1, interval_s=10, started_at=now, last_beat=now,
                      expires_at=now + timedelta(seconds=30), role=WatcherRole.STANDBY)
    store.beat_watcher(standby)
    assert store.watchers(now=now) == [standby]
    active = msgspec.structs.replace(standby, role=WatcherRole.ACTIVE)
    store.beat_watcher(active)
    assert store.watchers(now=now) == [active]
