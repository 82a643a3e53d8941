"""The watchdog's sweeps: each condition becomes one event and one notice, however many
sweeps and watchers see it; nothing is recorded that is not due; time is injected."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import Cli, FakeClock
from waypost.core.due import liveness
from waypost.core.history import make_event
from waypost.core.machine import apply
from waypost.durations import utcnow
from waypost.errors import NotAuthorized, RuleViolation
from waypost.events import BlockerOpened, Heartbeat, Nudged
from waypost.model import (
    BlockerKind,
    EvidenceKind,
    Kind,
    Liveness,
    NudgeTopic,
    Purpose,
    RelayInfo,
    State,
    Verdict,
)
from waypost.store import Store, open_store
from waypost.usecases import runs, starting, watchdog

NOTIFY = "file:notices.jsonl"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with open_store(str(tmp_path / "watch.db")) as store:
        yield store


def _start(store: Store, clock: FakeClock, **rules: object) -> runs.Run:
    params: dict[str, Any] = {"max_silence": 2.0, **rules}
    run, _ = starting.start(store, "Fix the flaky test", actor="alice", owner="alice",
                        target="file:result.md", notify=NOTIFY, kind=Kind.LONG_RUNNING,
                        clock=clock, **params)
    return run


def _worker(store: Store, run: runs.Run, clock: FakeClock, name: str = "w1") -> runs.Run:
    worker = runs.Run(store, run.id, actor=name, clock=clock)
    worker.claim()
    return worker


def _notices(store: Store, run_id: str) -> list[str]:
    return [d.topic for d in store.deliveries([run_id]) if d.purpose is Purpose.NOTICE]


def _recorded(store: Store, run_id: str) -> list[str]:
    return [e.type for e in store.events(run_id) if e.actor.startswith("watchdog:")]


def test_a_silent_worker_is_blocked_once_with_one_notice_across_sweeps_and_watchers(
        store: Store, clock: FakeClock) -> None:
    run = _start(store, clock)  # --max-silence 2s
    _worker(store, run, clock).heartbeat(note="reproduced the race")
    clock.advance(1.9)
    assert watchdog.sweep(store, watcher_id="a", now=clock()).examined == 0
    clock.advance(0.2)
    first = watchdog.sweep(store, watcher_id="a", now=clock())
    assert [a.recorded for a in first.actions] == ["worker_silent (b1)"]
    packet = store.get(run.id)
    assert packet.state is State.BLOCKED
    (blocker,) = packet.open_blockers
    assert (blocker.kind, blocker.opened_by) == (BlockerKind.WORKER_SILENT, "watchdog:a")
    assert "last heartbeat 2026-01-02 03:04:05Z" in blocker.detail
    assert 'last note: "reproduced the race"' in blocker.detail
    assert "lease holder: w1 (epoch 1)" in blocker.detail
    for _ in range(5):
        clock.advance(1)
        for watcher in ("a", "b"):
            assert watchdog.sweep(store, watcher_id=watcher, now=clock()).actions == ()
    assert _notices(store, run.id) == ["silent"]
    assert _recorded(store, run.id) == ["blocker_opened"]


def test_two_watchers_racing_on_one_store_record_the_condition_once(
        tmp_path: Path, clock: FakeClock) -> None:
    path = str(tmp_path / "race.db")
    with open_store(path) as store:
        ids = [_start(store, clock).id for _ in range(20)]
    now = clock.advance(60)
    barrier = threading.Barrier(2)
    reports: list[watchdog.SweepReport] = []

    def watcher(name: str) -> None:
        with open_store(path) as own:
            barrier.wait()
            for _ in range(6):
                reports.append(watchdog.sweep(own, watcher_id=name, now=now))

    threads = [threading.Thread(target=watcher, args=(n,)) for n in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(len(r.actions) for r in reports) == 20
    assert not any(r.errors for r in reports)
    with open_store(path) as store:
        for run_id in ids:
            assert _notices(store, run_id) == ["silent"]
            assert _recorded(store, run_id) == ["blocker_opened"]


def test_late_is_derived_and_needs_no_sweep_until_the_worker_can_go_silent(
        store: Store, clock: FakeClock) -> None:
    run = _start(store, clock, heartbeat_interval=10.0, max_silence=60.0)
    start = clock()
    assert watchdog.sweep(store, watcher_id="a", now=clock.advance(15)).examined == 0
    assert liveness(store.get(run.id), clock()) is Liveness.LATE
    (due,) = store.due_runs(now=start + timedelta(seconds=60))
    assert due.due_at == start + timedelta(seconds=60)
    report = watchdog.sweep(store, watcher_id="a", now=clock.advance(45))
    assert [a.recorded for a in report.actions] == ["worker_silent (b1)"]


def test_a_due_run_with_nothing_to_record_is_looked_at_again_later(
        store: Store, clock: FakeClock) -> None:
    run = _start(store, clock, max_silence=60.0)
    snap = store.load(run.id)
    assert store.defer_check(run.id, expected_version=1, at=clock())  # due now, needs nothing
    report = watchdog.sweep(store, watcher_id="a", now=clock.advance(1))
    assert (report.examined, report.actions, report.deferred) == (1, (), 1)
    assert watchdog.sweep(store, watcher_id="a", now=clock.advance(1)).examined == 0
    (due,) = store.due_runs(now=clock.advance(3600))
    assert due.due_at == snap.packet.created_at + timedelta(seconds=60)


def test_a_passed_deadline_blocks_once_even_after_the_owner_resolves_it(
        store: Store, clock: FakeClock) -> None:
    run = _start(store, clock, max_silence=None, deadline=clock() + timedelta(hours=1))
    assert watchdog.sweep(store, watcher_id="a", now=clock.advance(3599)).actions == ()
    report = watchdog.sweep(store, watcher_id="a", now=clock.advance(1))
    assert [a.recorded for a in report.actions] == ["deadline_passed (b1)"]
    assert "passed while the run was in_progress" in store.get(run.id).blockers[0].detail
    run.unblock("b1", "finish anyway: the release moved")
    for _ in range(3):
        assert watchdog.sweep(store, watcher_id="b", now=clock.advance(600)).actions == ()
    assert store.get(run.id).state is State.IN_PROGRESS
    assert _notices(store, run.id) == ["blocked"]


def test_silence_and_a_passed_deadline_are_both_recorded_in_one_sweep(
        store: Store, clock: FakeClock) -> None:
    run = _start(store, clock, deadline=clock() + timedelta(seconds=5))
    report = watchdog.sweep(store, watcher_id="a", now=clock.advance(10))
    assert [a.recorded for a in report.actions] == ["worker_silent (b1)",
                                                    "deadline_passed (b2)"]
    assert _notices(store, run.id) == ["silent", "blocked"]
    assert store.due_runs(now=clock.advance(86400)) == []


def _ready(store: Store, run: runs.Run, clock: FakeClock) -> runs.Run:
    worker = _worker(store, run, clock)
    worker.report_evidence(EvidenceKind.TEST, Verdict.PASSED, "42 passed")
    worker.ready("fixed the race")
    return worker


def test_a_result_nobody_reviews_nudges_the_owner_once_per_submission(
        store: Store, clock: FakeClock) -> None:
    run = _start(store, clock, review_within=3600.0)
    worker = _ready(store, run, clock)
    assert watchdog.sweep(store, watcher_id="a", now=clock.advance(3599)).actions == ()
    report = watchdog.sweep(store, watcher_id="a", now=clock.advance(1))
    assert [a.recorded for a in report.actions] == ["review_overdue"]
    for watcher in ("a", "b", "a", "b"):
        assert watchdog.sweep(store, watcher_id=watcher, now=clock.advance(7200)).actions == ()
    (nudge,) = store.get(run.id).nudges
    assert nudge.topic is NudgeTopic.REVIEW_OVERDUE
    assert nudge.detail.startswith("finished, never heard back")
    assert _notices(store, run.id) == ["ready_for_review", "review_overdue"]
    run.changes("add a regression test")
    worker.ready("fixed, with a regression test")
    clock.advance(3600)
    assert len(watchdog.sweep(store, watcher_id="b", now=clock()).actions) == 1
    assert _notices(store, run.id).count("review_overdue") == 2


def test_the_default_review_window_is_a_day(store: Store, clock: FakeClock) -> None:
    _ready(store, _start(store, clock), clock)
    assert watchdog.sweep(store, watcher_id="a", now=clock.advance(86399)).actions == ()
    assert len(watchdog.sweep(store, watcher_id="a", now=clock.advance(1)).actions) == 1


def _approved(cli: Cli, tmp_path: Path) -> str:
    cli.ok("init")
    run = cli.ok("start", "Write it", "--owner", "alice", "--kind", "long_running",
                 "--target", "file:out.md", "--notify", NOTIFY, "--max-silence", "1h")
    cli.ok("claim", run, actor="w1")
    cli.ok("evidence", "add", run, "--kind", "test", "--verdict", "passed", "--summary", "ok",
           actor="w1")
    cli.ok("ready", run, "--summary", "done", actor="w1")
    cli.ok("review", run)
    cli.ok("approve", run)
    return run


def _relay(now: datetime) -> RelayInfo:
    return RelayInfo(id="relay-1", host="h", pid=1, started_at=now, last_beat=now,
                     expires_at=now + timedelta(hours=2))


def test_a_queued_delivery_with_no_relay_running_nudges_the_owner_once(
        cli: Cli, tmp_path: Path) -> None:
    run = _approved(cli, tmp_path)
    with open_store(str(cli.store)) as store:
        now = utcnow() + timedelta(minutes=6)
        store.beat_relay(_relay(now))
        report = watchdog.sweep(store, watcher_id="a", now=now)
        assert (report.actions, report.deferred) == ((), 1)  # a relay runs: it will come
        store.remove_relay("relay-1")
        assert watchdog.sweep(store, watcher_id="a", now=now).examined == 0
        later = now + timedelta(minutes=5)
        report = watchdog.sweep(store, watcher_id="a", now=later)
        assert [a.recorded for a in report.actions] == ["delivery_stalled"]
        for watcher in ("a", "b", "a"):
            assert watchdog.sweep(store, watcher_id=watcher,
                                  now=later + timedelta(hours=1)).actions == ()
        assert _notices(store, run).count("delivery_stalled") == 1
        assert "no relay running" in store.get(run).nudges[0].detail
    shown = cli.ok("show", run)
    assert "delivery_stalled: delivery queued, no relay running" in shown


def test_the_machine_lets_a_watchdog_record_only_what_it_watches_for(
        store: Store, clock: FakeClock) -> None:
    run = _start(store, clock, max_silence=60.0)
    packet = store.get(run.id)

    def by(actor: str, data: BlockerOpened | Heartbeat | Nudged) -> None:
        apply(packet, make_event(packet, run.id, data, actor=actor, at=clock()))

    silent = BlockerOpened(blocker_id="b1", kind=BlockerKind.WORKER_SILENT, detail="quiet")
    with pytest.raises(RuleViolation, match="not due"):
        by("watchdog:a", silent)
    with pytest.raises(NotAuthorized, match="a watchdog"):
        by("watchdog:a", Heartbeat())
    with pytest.raises(NotAuthorized, match="a watchdog"):
        by("watchdog:a", BlockerOpened(blocker_id="b1", kind=BlockerKind.MISSING_INPUT,
                                       detail="the staging key"))
    clock.advance(60)
    by("watchdog:a", silent)  # due now


def test_only_a_watchdog_nudges(store: Store, clock: FakeClock) -> None:
    run = _start(store, clock, review_within=60.0)
    _ready(store, run, clock)
    packet = store.get(run.id)
    nudge = Nudged(topic=NudgeTopic.REVIEW_OVERDUE, detail="finished, never heard back")
    at = clock.advance(61)
    with pytest.raises(NotAuthorized, match="a watchdog"):
        apply(packet, make_event(packet, run.id, nudge, actor="alice", at=at))
    assert apply(packet, make_event(packet, run.id, nudge, actor="watchdog:a", at=at)).nudges
