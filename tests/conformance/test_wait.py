"""Conformance: `wait` follows the store-wide change cursor on both backends. A waiter
returns once another writer's change makes the run need the parent, including an owner's
blocker added to a run that is already blocked (no state change, so no NOTIFY on
PostgreSQL); it times out, ends otherwise, and refuses an unknown run before waiting.
The timeouts here are hang guards, never speed assertions."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from tests.helpers import claimed_run
from waypost.core.waiting import Outcome
from waypost.errors import NotFound
from waypost.model import BlockerKind, State
from waypost.store import Store, open_store
from waypost.usecases import runs, waiting

GUARD = 30.0  # a hang guard: a wait that works returns long before it


def _claimed(store: Store) -> tuple[str, int]:
    return claimed_run(store)


def _url(store: Store) -> str:
    url = getattr(store, "url", None)
    assert isinstance(url, str), "a store says where it is"
    return url


@contextmanager
def later(store: Store, change: Callable[[Store], object],
          after: float = 0.5) -> Iterator[dict[str, float]]:
    """`change` made by another writer (its own store connection, in a thread) `after`
    seconds from now; yields where the moment it committed is recorded."""
    done: dict[str, float] = {}
    errors: list[BaseException] = []

    def write() -> None:
        try:
            time.sleep(after)
            with open_store(_url(store)) as other:
                change(other)
            done["at"] = time.monotonic()
        except BaseException as exc:  # re-raised in the test
            errors.append(exc)

    thread = threading.Thread(target=write)
    thread.start()
    try:
        yield done
    finally:
        thread.join(GUARD)
    assert not errors, errors


def _worker(store: Store, run: str, epoch: int) -> runs.Run:
    return runs.Run(store, run, actor="w1", epoch=epoch)


def test_a_wait_returns_once_another_writer_makes_the_run_need_the_parent(
        store: Store) -> None:
    run, epoch = _claimed(store)
    started = time.monotonic()
    with later(store, lambda s: _worker(s, run, epoch).block(
            BlockerKind.MISSING_INPUT, "the API key")) as done:
        waited = waiting.wait(store, [run], timeout=GUARD)
        returned = time.monotonic()
    assert waited.outcome is Outcome.REACHED
    [packet] = waited.packets
    assert packet.state is State.BLOCKED
    assert done["at"] - 0.05 <= returned < started + GUARD  # after the change, not timed out


def test_an_owners_blocker_on_a_run_already_blocked_wakes_the_waiter(store: Store) -> None:
    run, epoch = _claimed(store)
    _worker(store, run, epoch).block(BlockerKind.FAILED_COMMAND, "tests fail")
    assert waiting.wait(store, [run], timeout=0).outcome is Outcome.TIMED_OUT  # its own
    started = time.monotonic()
    with later(store, lambda s: _worker(s, run, epoch).block(
            BlockerKind.PERMISSION_BOUNDARY, "may I push?")):
        waited = waiting.wait(store, [run], timeout=GUARD)
    assert waited.outcome is Outcome.REACHED
    assert time.monotonic() < started + GUARD
    assert {b.kind for b in waited.packets[0].open_blockers} == {
        BlockerKind.FAILED_COMMAND, BlockerKind.PERMISSION_BOUNDARY}


def test_a_wait_for_named_states_ends_otherwise_when_the_run_is_cancelled(
        store: Store) -> None:
    run, _ = _claimed(store)
    with later(store, lambda s: runs.Run(s, run, actor="alice").cancel("not needed")):
        waited = waiting.wait(store, [run], until=frozenset({State.READY_FOR_REVIEW}),
                              timeout=GUARD)
    assert waited.outcome is Outcome.ENDED
    assert waited.packets[0].state is State.CANCELLED


def test_a_wait_times_out_when_nothing_needs_the_parent(store: Store) -> None:
    run, epoch = _claimed(store)
    _worker(store, run, epoch).heartbeat(note="working")
    waited = waiting.wait(store, [run], timeout=0.3)
    assert waited.outcome is Outcome.TIMED_OUT
    assert waited.outcomes == {run: Outcome.TIMED_OUT}


def test_an_unknown_run_is_not_found_before_any_waiting(store: Store) -> None:
    run, _ = _claimed(store)
    started = time.monotonic()
    with pytest.raises(NotFound):
        waiting.wait(store, [run, "wp_unknown"], timeout=GUARD)
    assert time.monotonic() < started + GUARD


def test_many_waiting_threads_share_one_follower_and_all_wake(store: Store) -> None:
    ids = [_claimed(store) for _ in range(5)]
    follower = waiting.follower_of(store)
    results: list[waiting.Waited] = []
    threads = [threading.Thread(target=lambda r=r: results.append(
        waiting.wait(store, [r], timeout=GUARD))) for r, _ in ids for _ in range(20)]
    for thread in threads:
        thread.start()

    def submit_all(s: Store) -> None:
        for r, epoch in ids:
            _worker(s, r, epoch).block(BlockerKind.MISSING_INPUT, "input")

    with later(store, submit_all):
        for thread in threads:
            thread.join(GUARD)
    assert len(results) == len(threads)
    assert all(w.outcome is Outcome.REACHED for w in results)
    assert waiting.follower_of(store) is follower
