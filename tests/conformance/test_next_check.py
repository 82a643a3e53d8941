"""The stored next check is a lower bound, on every backend: a heartbeat leaves it alone,
the watchdog finds the run, sees nothing due yet and moves the check on; a commit that
makes a check come sooner lowers it at once."""

from __future__ import annotations

from datetime import datetime

from hypothesis import example, given
from hypothesis import strategies as st

from tests.helpers import FakeClock
from waypost.model import BlockerKind, EvidenceKind, Kind, Verdict
from waypost.store import Store
from waypost.store.base import check_moves
from waypost.usecases import runs, starting, watchdog


def _due_ids(store: Store, now: datetime) -> list[str]:
    return [d.packet.id for d in store.due_runs(now=now)]


def test_a_heartbeat_leaves_the_check_and_the_sweep_moves_it_on(
        store: Store, clock: FakeClock) -> None:
    run, _ = starting.start(store, "t", actor="alice", target="none:", kind=Kind.LONG_RUNNING,
                        max_silence=10, worker="w", clock=clock)
    worker = runs.Run(store, run.id, actor="w", clock=clock)
    worker.claim()
    clock.advance(5)
    worker.heartbeat(note="still going")  # silent now at +15; the stored check stays at +10
    assert _due_ids(store, clock.advance(5)) == [run.id]
    report = watchdog.sweep(store, watcher_id="w-1", now=clock())
    assert report.actions == ()  # looked: nothing due until +15
    assert report.deferred == 1
    assert _due_ids(store, clock.advance(4.9)) == []
    assert _due_ids(store, clock.advance(0.1)) == [run.id]
    report = watchdog.sweep(store, watcher_id="w-1", now=clock())
    assert [a.recorded.split(" ")[0] for a in report.actions] == [BlockerKind.WORKER_SILENT]


def test_a_commit_that_brings_the_check_sooner_lowers_it(
        store: Store, clock: FakeClock) -> None:
    run, _ = starting.start(store, "t", actor="alice", target="none:", kind=Kind.LONG_RUNNING,
                        max_silence=3600, review_within=60, clock=clock)
    worker = runs.Run(store, run.id, actor="w", clock=clock)
    worker.claim()
    worker.report_evidence(EvidenceKind.TEST, Verdict.PASSED, "12 passed")
    worker.ready("done")  # review overdue at +60, long before an hour of silence
    assert _due_ids(store, clock.advance(59)) == []
    assert _due_ids(store, clock.advance(1)) == [run.id]


def test_a_finished_run_leaves_the_index(store: Store, clock: FakeClock) -> None:
    run, _ = starting.start(store, "t", actor="alice", target="none:", kind=Kind.LONG_RUNNING,
                        max_silence=10, clock=clock)
    run.cancel("not needed")
    assert _due_ids(store, clock.advance(86400 * 365)) == []


# whole seconds, so that a stored check often falls exactly at a commit's now
moments = st.one_of(st.none(), st.integers(min_value=0, max_value=100).map(float))


@given(st.lists(st.tuples(st.integers(min_value=0, max_value=10).map(float), moments),
                max_size=30))
@example([(5.0, 5.0), (0.0, 9.0)])  # the check came at this very commit: replaced
def test_the_stored_check_is_exact_or_a_lower_bound_still_ahead(
        commits: list[tuple[float, float | None]]) -> None:
    """After every commit the stored check is the run's own, or an earlier one that has
    not come yet: the watchdog never looks too late, and never misses a run."""
    now, stored = 0.0, None
    for step, due in commits:
        now += step
        if check_moves(stored, due, now=now):
            stored = due
        assert stored == due or (stored is not None and due is not None
                                 and now < stored <= due)
