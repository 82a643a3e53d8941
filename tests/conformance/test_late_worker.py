"""Conformance: a worker that starts after the watchdog called its run silent. Its claim
ends the silence as `resume` does (the same events: a claim, then each `worker_silent`
blocker resolved), so it is not left heartbeating a blocked run that anyone may take
over; and the observed view never calls a run fresh while it is blocked as silent."""

from __future__ import annotations

import pytest

from tests.helpers import FakeClock
from waypost.core.history import verify_run
from waypost.core.observed import observe
from waypost.model import BlockerKind, Kind, Liveness, State
from waypost.store import Store
from waypost.usecases import runs, starting, watchdog
from waypost.usecases.views import observe_run

SILENCE = 600.0


def _silent_before_anyone_claims(store: Store, clock: FakeClock) -> str:
    """A run started with no worker, which the watchdog blocks as silent before its worker's
    process has even started."""
    run, _ = starting.start(store, "t", actor="alice", owner="alice", target="none:",
                            kind=Kind.LONG_RUNNING, max_silence=SILENCE, clock=clock)
    clock.advance(SILENCE + 1)
    report = watchdog.sweep(store, watcher_id="w", now=clock())
    assert [a.run_id for a in report.actions] == [run.id], report
    [blocker] = store.get(run.id).open_blockers
    assert blocker.kind is BlockerKind.WORKER_SILENT
    return run.id


def _takeover_events(store: Store, run: str, since: int) -> list[tuple[str, str]]:
    return [(e.type, e.actor) for e in store.events(run) if e.seq > since]


@pytest.mark.parametrize("verb", ["claim", "resume"])
def test_a_late_workers_takeover_ends_the_silence(store: Store, clock: FakeClock,
                                                  verb: str) -> None:
    run = _silent_before_anyone_claims(store, clock)
    clock.advance(5)
    before = store.get(run).version
    worker = runs.Run(store, run, actor="w1", clock=clock)
    if verb == "claim":
        assert worker.claim().worker is not None
    else:
        worker.resume()
    assert worker.epoch == 1
    packet = store.get(run)
    assert packet.state is State.IN_PROGRESS
    assert not packet.open_blockers
    [silent] = packet.blockers
    assert silent.resolved_by == "w1"
    assert _takeover_events(store, run, before) == [("claimed", "w1"),
                                                    ("blocker_resolved", "w1")]
    worker.heartbeat(note="started late, working now")
    observed = observe_run(store, store.get(run), clock()).observed
    assert observed is not None
    assert observed.liveness is Liveness.FRESH
    verify_run(run, store.events(run), store.get(run))


def test_a_late_workers_claim_leaves_the_lease_its_own(store: Store,
                                                       clock: FakeClock) -> None:
    """Once claimed, the run is no longer free for anyone to take: the silence ended."""
    from waypost.errors import NotAuthorized

    run = _silent_before_anyone_claims(store, clock)
    runs.Run(store, run, actor="w1", clock=clock).claim()
    clock.advance(1)
    with pytest.raises(NotAuthorized, match="w1 holds a live lease"):
        runs.Run(store, run, actor="mallory", clock=clock).claim()


def test_a_heartbeat_under_a_silent_blocker_is_not_called_fresh(store: Store,
                                                                clock: FakeClock) -> None:
    """The lease holder's heartbeat after the watchdog blocked its run as silent is taken,
    but the run stays silent until a takeover resolves the blocker."""
    run, _ = starting.start(store, "t", actor="alice", owner="alice", target="none:",
                            kind=Kind.LONG_RUNNING, max_silence=SILENCE, clock=clock,
                            worker="w1")
    clock.advance(SILENCE + 1)
    watchdog.sweep(store, watcher_id="w", now=clock())
    clock.advance(20)
    runs.Run(store, run.id, actor="w1", epoch=1, clock=clock).heartbeat(note="back")
    packet = store.get(run.id)
    assert packet.state is State.BLOCKED
    assert [b.kind for b in packet.open_blockers] == [BlockerKind.WORKER_SILENT]
    clock.advance(30)
    observed = observe(packet, clock()).observed
    assert observed is not None
    assert observed.liveness is Liveness.SILENT
    assert observed.silent_for_s is not None
    assert observed.silent_for_s == 50  # silent since it was recorded, not since the beat
