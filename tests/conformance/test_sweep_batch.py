"""A sweep commits each page of due runs in one transaction (`Store.commit_writes`), on every
backend, and reports exactly what one run at a time would: a run another writer changed
since the page was read is never written stale, is decided again, and holds up nobody."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

import pytest

from tests.helpers import FakeClock
from waypost.core import watching
from waypost.core.history import prepare, verify_run
from waypost.core.writes import Deferral, RunWrite, in_force
from waypost.errors import StoreError
from waypost.model import Authority, Kind
from waypost.store import Store, open_store, shared
from waypost.usecases import runs, starting, watchdog

WATCHDOG = "watchdog:t"


def _silent(store: Store, clock: FakeClock, **rules: object) -> runs.Run:
    """A claimed run whose worker goes silent 60 s after now."""
    params: dict[str, Any] = {"max_silence": 60.0, **rules}
    run, _ = starting.start(store, "quiet worker", actor="alice", owner="alice", target="none:",
                        kind=Kind.LONG_RUNNING, clock=clock, **params)
    worker = runs.Run(store, run.id, actor="w1", clock=clock)
    worker.claim()
    return worker


def _silence(store: Store, run_id: str, clock: FakeClock) -> RunWrite:
    """The watchdog's worker_silent write on a run, as a sweep decides it."""
    snap = store.load(run_id)
    data = watching.decide(snap.packet, clock(), relay_running=False)
    assert data is not None
    return prepare(snap, [(data, None)], actor=WATCHDOG, at=clock())


def _watchdog_events(store: Store, run_id: str) -> list[str]:
    return [e.type for e in store.events(run_id) if e.actor.startswith("watchdog:")]


def _due(store: Store, clock: FakeClock) -> list[str]:
    return [d.packet.id for d in store.due_runs(now=clock())]


def _verified(store: Store) -> None:
    for run_id in store.run_ids():
        verify_run(run_id, store.events(run_id), store.get(run_id))


# --- the store: commit_writes ----------------------------------------------------------


def test_a_page_of_writes_and_deferrals_commits_together(store: Store, clock: FakeClock) -> None:
    a, b = _silent(store, clock), _silent(store, clock)
    clock.advance(61)
    write = _silence(store, a.id, clock)
    later = clock() + timedelta(hours=1)
    deferral = Deferral(run_id=b.id, expected_version=store.get(b.id).version, at=later)
    assert store.commit_writes([write, deferral]) == [True, True]
    assert store.get(a.id) == write.packet
    assert store.load(a.id).head_hash == write.events[-1].hash
    assert _watchdog_events(store, a.id) == ["blocker_opened"]
    assert _due(store, clock) == []
    (due,) = store.due_runs(now=later)
    assert (due.packet.id, due.due_at) == (b.id, later)
    assert store.commit_writes([]) == []
    _verified(store)


def test_a_run_another_writer_changed_is_skipped_with_its_later_writes_alone(
        store: Store, clock: FakeClock) -> None:
    a, b, c = (_silent(store, clock) for _ in range(3))
    clock.advance(61)
    first, moved = _silence(store, a.id, clock), _silence(store, b.id, clock)
    # b's deferral expects the version b's own write makes: the owner's write below makes
    # that same version, so only the chain rule keeps the deferral from landing on it
    then = Deferral(run_id=b.id, expected_version=moved.packet.version,
                    at=clock() + timedelta(days=1))
    last = Deferral(run_id=c.id, expected_version=store.get(c.id).version, at=None)
    runs.Run(store, b.id, actor="alice", clock=clock).transfer(Authority.APPROVE, "bob")
    assert store.commit_writes([first, moved, then, last]) == [True, False, False, True]
    assert _watchdog_events(store, a.id) == ["blocker_opened"]
    assert _watchdog_events(store, b.id) == []
    assert store.get(b.id).transfers[0].to == "bob"
    assert _due(store, clock) == [b.id]  # still due: no stale deferral moved it on
    _verified(store)


def test_writes_for_runs_that_do_not_exist_are_skipped(store: Store, clock: FakeClock) -> None:
    run = _silent(store, clock)
    clock.advance(61)
    write = _silence(store, run.id, clock)
    ghost = RunWrite(run_id="wp_missing", expected_version=2, events=write.events,
                     packet=write.packet)
    missing = Deferral(run_id="wp_missing", expected_version=1, at=None)
    assert store.commit_writes([ghost, missing, write]) == [False, False, True]
    assert _watchdog_events(store, run.id) == ["blocker_opened"]


def test_a_page_that_fails_commits_nothing(store: Store, clock: FakeClock) -> None:
    a, b = _silent(store, clock), _silent(store, clock)
    clock.advance(61)
    first, second = _silence(store, a.id, clock), _silence(store, b.id, clock)
    # chained on the second by version, but repeating its events: the event rows collide
    clash = RunWrite(run_id=b.id, expected_version=second.packet.version,
                     events=second.events, packet=second.packet)
    before = {rid: store.load(rid) for rid in (a.id, b.id)}
    with pytest.raises(StoreError):
        store.commit_writes([first, second, clash])
    for rid, snap in before.items():
        assert store.load(rid).packet == snap.packet
        assert _watchdog_events(store, rid) == []
    assert sorted(_due(store, clock)) == sorted([a.id, b.id])


def test_meanwhile_runs_once_aside_and_the_commit_returns_after_it(
        store: Store, clock: FakeClock) -> None:
    a, b = _silent(store, clock), _silent(store, clock)
    clock.advance(61)
    writes = [_silence(store, a.id, clock), _silence(store, b.id, clock)]
    calls: list[tuple[int, str]] = []

    def meanwhile() -> None:
        time.sleep(0.05)  # still running when the flush ends: the commit must wait for it
        # it may read the store (on a store of one connection, once the commit let go)
        calls.append((threading.get_ident(), store.load(a.id).packet.id))

    assert store.commit_writes(writes, meanwhile=meanwhile) == [True, True]
    ((thread, read),) = calls
    assert thread != threading.get_ident()
    assert read == a.id
    for run_id in (a.id, b.id):
        assert _watchdog_events(store, run_id) == ["blocker_opened"]


def test_what_meanwhile_raises_is_raised_after_the_page_is_committed(
        store: Store, clock: FakeClock) -> None:
    a = _silent(store, clock)
    clock.advance(61)

    def meanwhile() -> None:
        raise RuntimeError("deciding the next page failed")

    with pytest.raises(RuntimeError, match="the next page"):
        store.commit_writes([_silence(store, a.id, clock)], meanwhile=meanwhile)
    assert _watchdog_events(store, a.id) == ["blocker_opened"]


def test_a_page_that_fails_before_its_flush_never_calls_meanwhile(
        store: Store, clock: FakeClock) -> None:
    a = _silent(store, clock)
    clock.advance(61)
    first = _silence(store, a.id, clock)
    clash = RunWrite(run_id=a.id, expected_version=first.packet.version,
                     events=first.events, packet=first.packet)  # its event rows collide
    called: list[str] = []
    with pytest.raises(StoreError):
        store.commit_writes([first, clash], meanwhile=lambda: called.append("called"))
    assert store.commit_writes([], meanwhile=lambda: called.append("called")) == []
    assert called == []
    assert _watchdog_events(store, a.id) == []


def test_which_writes_are_in_force_follows_each_runs_chain() -> None:
    def write(run_id: str, expected: int) -> Deferral:
        return Deferral(run_id=run_id, expected_version=expected, at=None)

    # b's second write expects the version b is at: in force alone, but not after b's miss
    page: Sequence[RunWrite | Deferral] = [write("a", 1), write("b", 4), write("b", 3),
                                           write("c", 2), write("a", 1)]
    assert in_force(page, {"a": 1, "b": 3, "c": 2}) == [True, False, False, True, True]
    assert in_force(page, {}) == [False] * 5


# --- the sweep ---------------------------------------------------------------------------


def test_n_due_runs_give_n_events_in_one_transaction_a_page(
        store: Store, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    ids = sorted(_silent(store, clock).id for _ in range(7))  # one due time: id order
    clock.advance(61)
    pages: list[int] = []
    real = store.commit_writes

    def counting(writes: Sequence[RunWrite | Deferral], *,
                 meanwhile: Callable[[], None] | None = None) -> list[bool]:
        pages.append(len(writes))
        return real(writes, meanwhile=meanwhile)

    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("a sweep whose pages commit writes nothing one run at a time")

    monkeypatch.setattr(store, "commit_writes", counting)
    for single in ("commit", "commit_write", "defer_check", "load"):
        monkeypatch.setattr(store, single, refused)
    report = watchdog.sweep(store, watcher_id="t", now=clock(), batch=3)
    assert pages == [3, 3, 1]
    assert (report.examined, report.deferred, report.errors) == (7, 0, ())
    assert [a.run_id for a in report.actions] == ids
    assert {a.recorded for a in report.actions} == {"worker_silent (b1)"}
    monkeypatch.undo()
    for run_id in ids:
        assert _watchdog_events(store, run_id) == ["blocker_opened"]
    assert _due(store, clock) == []
    _verified(store)


def test_while_a_page_commits_the_next_page_is_decided_aside(
        store: Store, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    ids = sorted(_silent(store, clock).id for _ in range(7))  # one due time: id order
    clock.advance(61)
    pages: list[tuple[int, bool]] = []  # each commit's writes, and whether it had meanwhile
    aside: list[bool] = []  # for each run decided, whether off the sweep's thread
    real, plan = store.commit_writes, watchdog._plan

    def committing(writes: Sequence[RunWrite | Deferral], *,
                   meanwhile: Callable[[], None] | None = None) -> list[bool]:
        pages.append((len(writes), meanwhile is not None))
        return real(writes, meanwhile=meanwhile)

    def planning(*args: Any) -> Any:
        aside.append(threading.current_thread() is not threading.main_thread())
        return plan(*args)

    monkeypatch.setattr(store, "commit_writes", committing)
    monkeypatch.setattr(watchdog, "_plan", planning)
    report = watchdog.sweep(store, watcher_id="t", now=clock(), batch=3)
    assert pages == [(3, True), (3, True), (1, False)]  # the last page has none to decide
    assert aside == [False] * 3 + [True] * 4  # the first page before any commit
    assert [a.run_id for a in report.actions] == ids
    assert (report.examined, report.deferred, report.errors) == (7, 0, ())
    _verified(store)


def test_a_run_of_the_next_page_written_after_it_was_decided_is_decided_again(
        store: Store, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    workers = sorted((_silent(store, clock) for _ in range(4)), key=lambda w: w.id)
    clock.advance(61)
    woke, late = workers[2:]  # the second page of two, decided while the first commits
    real = store.commit_writes
    commits: list[int] = []

    def interleaved(writes: Sequence[RunWrite | Deferral], *,
                    meanwhile: Callable[[], None] | None = None) -> list[bool]:
        applied = real(writes, meanwhile=meanwhile)
        if not commits:  # the second page is decided now, and not yet committed: the
            # owner writes on one of its runs (still silent), a worker speaks up on another
            runs.Run(store, late.id, actor="alice", clock=clock).transfer(Authority.APPROVE,
                                                                          "bob")
            woke.heartbeat(note="back")
        commits.append(len(writes))
        return applied

    monkeypatch.setattr(store, "commit_writes", interleaved)
    report = watchdog.sweep(store, watcher_id="t", now=clock(), batch=2)
    assert commits == [2, 2]
    assert sorted((a.run_id, a.seq) for a in report.actions) == sorted(
        [(w.id, 3) for w in workers[:2]] + [(late.id, 4)])  # late: after the transfer
    assert (report.examined, report.errors) == (4, ())
    assert [e.type for e in store.events(late.id)][-2:] == ["authority_transferred",
                                                            "blocker_opened"]
    assert _watchdog_events(store, woke.id) == []
    assert store.get(woke.id).state.value == "in_progress"
    _verified(store)


def test_a_sweep_without_a_second_thread_decides_the_next_page_after_the_commit(
        store: Store, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    ids = sorted(_silent(store, clock).id for _ in range(5))  # one due time: id order
    clock.advance(61)

    def no_thread(function: Callable[..., object], args: tuple[object, ...]) -> int:
        raise RuntimeError("can't start new thread")  # waypost's own alone: not the pool's

    monkeypatch.setattr(shared, "start_new_thread", no_thread)
    report = watchdog.sweep(store, watcher_id="t", now=clock(), batch=2)
    assert ([a.run_id for a in report.actions], report.errors) == (ids, ())
    for run_id in ids:
        assert _watchdog_events(store, run_id) == ["blocker_opened"]


def test_pages_after_one_that_failed_before_its_flush_are_still_decided(
        store: Store, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    ids = sorted(_silent(store, clock).id for _ in range(5))  # one due time: id order
    clock.advance(61)
    real = store.commit_writes
    commits: list[int] = []

    def failing_first(writes: Sequence[RunWrite | Deferral], *,
                      meanwhile: Callable[[], None] | None = None) -> list[bool]:
        commits.append(len(writes))
        if len(commits) == 1:  # before its flush: the next page is not decided yet
            raise StoreError("cannot commit 2 writes: disk I/O error")
        return real(writes, meanwhile=meanwhile)

    monkeypatch.setattr(store, "commit_writes", failing_first)
    report = watchdog.sweep(store, watcher_id="t", now=clock(), batch=2)
    assert commits == [2, 2, 1]
    assert ([a.run_id for a in report.actions], report.examined, report.errors) == (
        ids, 5, ())
    for run_id in ids:
        assert _watchdog_events(store, run_id) == ["blocker_opened"]
    _verified(store)


def test_a_run_changed_after_the_page_was_read_is_decided_again_after_the_batch(
        store: Store, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    quiet, moved, woke = (_silent(store, clock) for _ in range(3))
    clock.advance(61)
    real = store.commit_writes

    def interleaved(writes: Sequence[RunWrite | Deferral], *,
                    meanwhile: Callable[[], None] | None = None) -> list[bool]:
        # between reading the page and committing it: the owner writes on one run (still
        # silent), and another worker speaks up on another
        runs.Run(store, moved.id, actor="alice", clock=clock).transfer(Authority.APPROVE, "bob")
        woke.heartbeat(note="still here")
        return real(writes, meanwhile=meanwhile)

    monkeypatch.setattr(store, "commit_writes", interleaved)
    report = watchdog.sweep(store, watcher_id="t", now=clock())
    assert (report.examined, report.deferred, report.errors) == (3, 0, ())
    assert sorted((a.run_id, a.seq, a.state) for a in report.actions) == sorted([
        (quiet.id, 3, "blocked"), (moved.id, 4, "blocked")])  # moved: after the transfer
    assert [e.type for e in store.events(moved.id)][-2:] == ["authority_transferred",
                                                             "blocker_opened"]
    assert _watchdog_events(store, woke.id) == []
    assert store.get(woke.id).state.value == "in_progress"
    assert _due(store, clock) == []
    _verified(store)


def test_every_step_a_run_needs_is_recorded_in_its_page(store: Store, clock: FakeClock) -> None:
    both = _silent(store, clock, deadline=clock() + timedelta(seconds=30))
    other = _silent(store, clock)
    report = watchdog.sweep(store, watcher_id="t", now=clock.advance(61))
    assert [(a.run_id, a.recorded) for a in report.actions] == [
        (both.id, "worker_silent (b1)"), (both.id, "deadline_passed (b2)"),
        (other.id, "worker_silent (b1)")]
    assert _watchdog_events(store, both.id) == ["blocker_opened", "blocker_opened"]
    assert store.due_runs(now=clock.advance(86400)) == []
    _verified(store)


def test_a_due_run_with_nothing_to_record_is_deferred_in_the_page(
        store: Store, clock: FakeClock) -> None:
    silent, calm = _silent(store, clock, max_silence=30.0), _silent(store, clock)
    assert store.defer_check(calm.id, expected_version=2, at=clock())  # due now, needs nothing
    report = watchdog.sweep(store, watcher_id="t", now=clock.advance(31))
    assert (report.examined, report.deferred) == (2, 1)
    assert [a.run_id for a in report.actions] == [silent.id]
    (due,) = store.due_runs(now=clock.advance(3600))
    assert (due.packet.id, due.due_at) == (calm.id, clock() - timedelta(seconds=3600 - 29))


def test_a_deferral_another_writer_came_before_is_left_to_that_writer(
        store: Store, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    calm = _silent(store, clock)
    assert store.defer_check(calm.id, expected_version=2, at=clock())  # due now, needs nothing
    real = store.commit_writes

    def interleaved(writes: Sequence[RunWrite | Deferral], *,
                    meanwhile: Callable[[], None] | None = None) -> list[bool]:
        calm.heartbeat(note="still here")  # stores its own next check
        return real(writes, meanwhile=meanwhile)

    monkeypatch.setattr(store, "commit_writes", interleaved)
    report = watchdog.sweep(store, watcher_id="t", now=clock())
    assert (report.examined, report.deferred, report.actions, report.errors) == (1, 0, (), ())
    assert store.due_runs(now=clock()) == []
    (due,) = store.due_runs(now=clock.advance(61))
    assert due.packet.version == 3  # the heartbeat's check, not one the sweep moved


def test_a_page_the_store_cannot_commit_is_swept_one_run_at_a_time(
        store: Store, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    ids = sorted(_silent(store, clock).id for _ in range(3))  # one due time: id order
    clock.advance(61)

    def broken(writes: Sequence[RunWrite | Deferral], *,
               meanwhile: Callable[[], None] | None = None) -> list[bool]:
        raise StoreError("cannot commit 3 writes: disk I/O error")

    monkeypatch.setattr(store, "commit_writes", broken)
    report = watchdog.sweep(store, watcher_id="t", now=clock())
    assert ([a.run_id for a in report.actions], report.errors) == (ids, ())
    for run_id in ids:
        assert _watchdog_events(store, run_id) == ["blocker_opened"]


def test_two_sweepers_on_one_store_record_each_condition_once(
        store: Store, clock: FakeClock) -> None:
    ids = sorted(_silent(store, clock).id for _ in range(20))  # one due time: id order
    now = clock.advance(61)
    barrier = threading.Barrier(2)
    reports: list[watchdog.SweepReport] = []

    def sweeper(name: str) -> None:
        with open_store(store.url) as own:
            barrier.wait()
            reports.append(watchdog.sweep(own, watcher_id=name, now=now, batch=7))

    threads = [threading.Thread(target=sweeper, args=(n,)) for n in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(len(r.actions) for r in reports) == 20
    assert [r.errors for r in reports] == [(), ()]
    for run_id in ids:
        assert _watchdog_events(store, run_id) == ["blocker_opened"]
    _verified(store)
