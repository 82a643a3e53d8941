"""The one takeover rule that `claim` and `resume` share: a live lease is taken over only by
the owner or by whom the owner named; a lease that is not live may be taken by anyone."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import FakeClock
from waypost.errors import NotAuthorized
from waypost.model import Authority, BlockerKind, Kind
from waypost.store import Store, open_store
from waypost.usecases import runs, starting


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with open_store(str(tmp_path / "store.db")) as opened:
        yield opened


def claimed(store: Store, clock: FakeClock, *, max_silence: float | None = 600,
            heartbeat_interval: float | None = None) -> runs.Run:
    """A run owned by alice whose lease w1 holds; returns alice's handle."""
    owner, _ = starting.start(store, "t", actor="alice", target="none:", kind=Kind.LONG_RUNNING,
                          clock=clock, max_silence=max_silence, deadline="+30d",
                          heartbeat_interval=heartbeat_interval)
    runs.Run(store, owner.id, actor="w1", clock=clock).claim()
    return owner


def take(store: Store, run: runs.Run, actor: str, clock: FakeClock, verb: str) -> None:
    handle = runs.Run(store, run.id, actor=actor, clock=clock)
    if verb == "claim":
        handle.claim()
    else:
        handle.resume()


VERBS = ["claim", "resume"]


@pytest.mark.parametrize("verb", VERBS)
def test_a_stranger_may_not_take_a_live_lease(store: Store, clock: FakeClock, verb: str) -> None:
    run = claimed(store, clock)
    clock.advance(599)  # one second short of silent
    with pytest.raises(NotAuthorized, match="w1 holds a live lease"):
        take(store, run, "mallory", clock, verb)
    assert run.packet.worker is not None
    assert run.packet.worker.actor == "w1"


@pytest.mark.parametrize("verb", VERBS)
def test_a_silent_worker_may_be_taken_over_by_anyone(store: Store, clock: FakeClock,
                                                     verb: str) -> None:
    run = claimed(store, clock)
    clock.advance(600)
    take(store, run, "w2", clock, verb)
    assert run.packet.worker is not None
    assert (run.packet.worker.actor, run.packet.worker.epoch) == ("w2", 2)


@pytest.mark.parametrize("verb", VERBS)
def test_an_expired_lease_may_be_taken_by_anyone(store: Store, clock: FakeClock,
                                                 verb: str) -> None:
    """Without max_silence nobody is ever silent, but the lease (three heartbeat intervals)
    still lapses."""
    run = claimed(store, clock, max_silence=None, heartbeat_interval=60)
    clock.advance(179)
    with pytest.raises(NotAuthorized):
        take(store, run, "w2", clock, verb)
    clock.advance(1)
    take(store, run, "w2", clock, verb)
    assert run.packet.worker is not None
    assert run.packet.worker.actor == "w2"


def test_a_worker_silent_blocker_frees_the_lease(store: Store, clock: FakeClock) -> None:
    run = claimed(store, clock)
    clock.advance(600)
    runs.Run(store, run.id, actor="watchdog:w", clock=clock).block(
        BlockerKind.WORKER_SILENT, "no heartbeat for 10m")
    clock.advance(1)
    runs.Run(store, run.id, actor="w2", clock=clock).claim()
    assert run.packet.worker is not None
    assert run.packet.worker.actor == "w2"


@pytest.mark.parametrize("verb", VERBS)
def test_the_owner_and_whom_it_named_may_take_a_live_lease(store: Store, clock: FakeClock,
                                                           verb: str) -> None:
    run = claimed(store, clock)
    run.transfer(Authority.APPROVE, "w2")  # the wrong authority gives no takeover
    with pytest.raises(NotAuthorized):
        take(store, run, "w2", clock, verb)
    run.transfer(Authority.TAKEOVER, "w2")
    take(store, run, "w2", clock, verb)
    take(store, run, "alice", clock, verb)
    assert run.packet.worker is not None
    assert (run.packet.worker.actor, run.packet.worker.epoch) == ("alice", 3)


def test_the_holder_may_claim_its_own_lease_again(store: Store, clock: FakeClock) -> None:
    run = claimed(store, clock)
    w1 = runs.Run(store, run.id, actor="w1", clock=clock)
    w1.claim()
    assert w1.epoch == 2
