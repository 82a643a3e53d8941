"""The demo's checks of its own story, each step against the events it narrates: a
history that differs from what a step tells fails that step, naming what happened."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import FakeClock
from waypost.cli.demo import DemoFailed, _check_resumed, _check_worker_one_worked
from waypost.model import BlockerKind, Kind
from waypost.store import Store, open_store
from waypost.usecases import runs, starting

SILENCE = 3.0


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with open_store(str(tmp_path / "store.db")) as opened:
        yield opened


def _run(store: Store, clock: FakeClock) -> str:
    run, _ = starting.start(store, "notes", actor="alice", owner="alice", target="none:",
                            kind=Kind.LONG_RUNNING, max_silence=SILENCE, clock=clock)
    return run.id


def _watchdog_blocks(store: Store, run: str, clock: FakeClock) -> str:
    clock.advance(SILENCE)
    _, blocker = runs.Run(store, run, actor="watchdog:demo", clock=clock).block(
        BlockerKind.WORKER_SILENT, "no heartbeat for 3s")
    return blocker


def test_worker_one_first_then_killed_is_the_story(store: Store, clock: FakeClock) -> None:
    run = _run(store, clock)
    runs.Run(store, run, actor="worker-1", clock=clock).claim()
    _check_worker_one_worked(list(store.events(run)))


def test_a_watchdog_before_worker_ones_claim_differs_at_step_3(store: Store,
                                                               clock: FakeClock) -> None:
    run = _run(store, clock)
    _watchdog_blocks(store, run, clock)
    runs.Run(store, run, actor="worker-1", clock=clock).claim()
    with pytest.raises(DemoFailed, match=r"step 3: watchdog:demo blocked the run as "
                                         r"worker_silent \(b1, .*\) before worker-1 claimed"):
        _check_worker_one_worked(list(store.events(run)))


def test_a_silence_while_worker_one_still_worked_differs_at_step_4(store: Store,
                                                                   clock: FakeClock) -> None:
    run = _run(store, clock)
    runs.Run(store, run, actor="worker-1", clock=clock).claim()
    _watchdog_blocks(store, run, clock)
    with pytest.raises(DemoFailed, match=r"step 4: .* while worker-1 was still working"):
        _check_worker_one_worked(list(store.events(run)))


def test_a_takeover_that_did_not_end_the_silence_differs_at_step_6(store: Store,
                                                                   clock: FakeClock) -> None:
    run = _run(store, clock)
    runs.Run(store, run, actor="worker-1", clock=clock).claim()
    blocker = _watchdog_blocks(store, run, clock)
    since = store.get(run).version
    runs.Run(store, run, actor="alice", clock=clock).unblock(blocker, "I looked")
    runs.Run(store, run, actor="worker-2", clock=clock).claim()
    with pytest.raises(DemoFailed, match=r"step 6: .* blocker_resolved by alice"):
        _check_resumed(list(store.events(run)), since, blocker)


def test_worker_twos_resume_is_the_story(store: Store, clock: FakeClock) -> None:
    run = _run(store, clock)
    runs.Run(store, run, actor="worker-1", clock=clock).claim()
    blocker = _watchdog_blocks(store, run, clock)
    since = store.get(run).version
    runs.Run(store, run, actor="worker-2", clock=clock).resume()
    _check_resumed(list(store.events(run)), since, blocker)
