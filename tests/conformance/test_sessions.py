"""An agent host's session: the run it started is found by its id, and the stop hook's
count of consecutive refusals lives beside the run, on every backend."""

from __future__ import annotations

import pytest

from tests.helpers import FakeClock
from waypost import runs
from waypost.errors import InvalidInput, NotFound
from waypost.store import Store


def test_a_session_finds_its_newest_run(store: Store, clock: FakeClock) -> None:
    assert store.session_run("s-1") is None
    first, _ = runs.start(store, "one", actor="alice", target="none:", session="s-1",
                          clock=clock)
    assert store.session_run("s-1") == first.id
    clock.advance(5)
    second, _ = runs.start(store, "two", actor="alice", target="none:", session="s-1",
                           clock=clock)
    runs.start(store, "other", actor="alice", target="none:", session="s-2", clock=clock)
    runs.start(store, "none", actor="alice", target="none:", clock=clock)
    assert store.session_run("s-1") == second.id
    assert store.session_run("s-3") is None
    assert [e.type for e in store.events(second.id)] == ["started"]


def test_the_stop_count_adds_up_and_resets(store: Store) -> None:
    run, _ = runs.start(store, "one", actor="alice", target="none:", session="s-1")
    assert [store.count_stop_block(run.id) for _ in range(3)] == [1, 2, 3]
    assert store.count_stop_block(run.id, reset=True) == 0
    assert store.count_stop_block(run.id) == 1
    with pytest.raises(NotFound):
        store.count_stop_block("wp_nosuchrun")


@pytest.mark.parametrize("session", ["", "  ", "a\x00b", "x" * 10_000])
def test_a_bad_session_id_is_refused_before_anything_is_written(store: Store,
                                                                session: str) -> None:
    with pytest.raises(InvalidInput):
        runs.start(store, "one", actor="alice", target="none:", session=session)
    assert store.run_ids() == []
