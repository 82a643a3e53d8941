"""An agent host's session: the run it started is found by its id, and the stop hook's
count of consecutive refusals lives beside the run, on every backend."""

from __future__ import annotations

import pytest

from tests.helpers import FakeClock
from waypost.errors import InvalidInput, NotFound
from waypost.store import Store
from waypost.usecases import starting


def test_a_session_finds_its_newest_run(store: Store, clock: FakeClock) -> None:
    assert store.session_run("s-1") is None
    first, _ = starting.start(store, "one", actor="alice", target="none:", session="s-1",
                          clock=clock)
    assert store.session_run("s-1") == first.id
    clock.advance(5)
    second, _ = starting.start(store, "two", actor="alice", target="none:", session="s-1",
                           clock=clock)
    starting.start(store, "other", actor="alice", target="none:", session="s-2", clock=clock)
    starting.start(store, "none", actor="alice", target="none:", clock=clock)
    assert store.session_run("s-1") == second.id
    assert store.session_run("s-3") is None
    assert [e.type for e in store.events(second.id)] == ["started"]


def test_the_stop_count_adds_up_and_resets(store: Store) -> None:
    run, _ = starting.start(store, "one", actor="alice", target="none:", session="s-1")
    assert [store.count_stop_block(run.id) for _ in range(3)] == [1, 2, 3]
    assert store.count_stop_block(run.id, reset=True) == 0
    assert store.count_stop_block(run.id) == 1
    with pytest.raises(NotFound):
        store.count_stop_block("wp_nosuchrun")


def test_one_turn_counts_once_until_the_count_is_reset(store: Store) -> None:
    """The same stop delivered twice (Cursor runs its hooks and Claude Code's) counts once."""
    run, _ = starting.start(store, "one", actor="alice", target="none:", session="s-1")
    other, _ = starting.start(store, "two", actor="alice", target="none:", session="s-2")
    assert [store.count_stop_block(run.id, turn="t1") for _ in range(3)] == [1, 1, 1]
    assert store.count_stop_block(other.id, turn="t1") == 1  # a turn is one run's
    assert store.count_stop_block(run.id, turn="t2") == 2
    assert store.count_stop_block(run.id) == 3  # a stop that names no turn always counts
    assert store.count_stop_block(run.id, turn="t2") == 3
    assert store.count_stop_block(run.id, reset=True, turn="t2") == 0
    assert store.count_stop_block(run.id, turn="t2") == 1  # the reset forgot the turn
    store.count_stop_block(run.id, reset=True)
    store.count_stop_block(other.id, reset=True)
    assert not [n for n in store.settings() if n.startswith("hook.")]  # nothing left over


@pytest.mark.parametrize("session", ["", "  ", "a\x00b", "x" * 10_000])
def test_a_bad_session_id_is_refused_before_anything_is_written(store: Store,
                                                                session: str) -> None:
    with pytest.raises(InvalidInput):
        starting.start(store, "one", actor="alice", target="none:", session=session)
    assert store.run_ids() == []


def test_a_session_attached_later_finds_its_run(store: Store) -> None:
    run, _ = starting.start(store, "one", actor="alice", target="none:")
    assert store.session_run("later") is None
    store.attach_session(run.id, "later")
    assert store.session_run("later") == run.id
    assert [e.type for e in store.events(run.id)] == ["started"]  # not part of the history
    with pytest.raises(NotFound):
        store.attach_session("wp_nosuchrun", "later")
