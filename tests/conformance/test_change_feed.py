"""The store-wide change feed a board follows: every committed write comes at or past the
cursor read before it, in commit order, and nothing is ever skipped, on every backend."""

from __future__ import annotations

import threading

import psycopg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import pg
from tests.helpers import FakeClock
from waypost.model import BlockerKind, Kind, Packet
from waypost.store import Store, open_store
from waypost.usecases import starting, watchdog
from waypost.usecases.runs import Run


def _follow(store: Store, cursor: int, *, limit: int = 500) -> tuple[list[Packet], int]:
    """Every change at or past `cursor`, page by page, until a page brings nothing newer
    (a change may come again while an old transaction holds PostgreSQL's horizon back; a
    reader keeps the newest version of each run), and where the feed then stands."""
    seen: list[Packet] = []
    newest: dict[str, int] = {}
    for _ in range(10_000):
        page, following = store.changes_since(cursor, limit=limit)
        fresh = [p for p in page if p.version > newest.get(p.id, 0)]
        seen += fresh
        newest.update((p.id, p.version) for p in fresh)
        if not fresh and following == cursor:
            return seen, following
        cursor = following
    raise AssertionError("the feed never ran dry")


def _worker(store: Store, run_id: str) -> Run:
    run = Run(store, run_id, actor="w")
    run.claim()
    return run


def test_writes_after_the_cursor_come_in_commit_order(store: Store) -> None:
    a, _ = starting.start(store, "a", actor="alice", target="none:")
    b, _ = starting.start(store, "b", actor="alice", target="none:")
    cursor = store.change_cursor()
    assert _follow(store, cursor)[0] == []
    worker_b, worker_a = _worker(store, b.id), _worker(store, a.id)
    worker_b.heartbeat("b first")
    worker_a.heartbeat("then a")
    seen, cursor = _follow(store, cursor)
    # a run written twice comes at its latest place, as it stands now
    assert [(p.id, p.version) for p in seen] == [(b.id, 3), (a.id, 3)]
    assert seen[1].progress is not None
    assert seen[1].progress.note == "then a"
    worker_b.block(BlockerKind.MISSING_INPUT, "which port?")
    again, _ = _follow(store, cursor)
    assert [(p.id, p.state.value) for p in again] == [(b.id, "blocked")]


def test_from_zero_the_feed_holds_every_run(store: Store) -> None:
    started = [starting.start(store, f"r{i}", actor="alice", target="none:")[0].id
               for i in range(7)]
    seen, _ = _follow(store, 0, limit=3)
    assert [p.id for p in seen] == started


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=st.lists(st.tuples(st.integers(0, 4), st.booleans()), min_size=1, max_size=25),
       limit=st.integers(1, 4))
def test_polling_between_any_writes_misses_nothing(store: Store, plan: list[tuple[int, bool]],
                                                   limit: int) -> None:
    """Whatever the writes and whenever the board looks, the last version it saw of each
    run is the run's version now."""
    ids = [starting.start(store, f"r{i}", actor="alice", target="none:")[0].id for i in range(5)]
    workers: dict[int, Run] = {}
    latest: dict[str, int] = {}
    seen, cursor = _follow(store, store.change_cursor(), limit=limit)
    for index, poll in plan:
        if index not in workers:
            workers[index] = _worker(store, ids[index])
        else:
            workers[index].heartbeat()
        if poll:
            page, cursor = _follow(store, cursor, limit=limit)
            seen += page
    page, cursor = _follow(store, cursor, limit=limit)
    for p in seen + page:
        latest[p.id] = p.version
    for index in workers:
        assert latest[ids[index]] == store.get(ids[index]).version


def test_concurrent_writers_never_slip_past_a_reader(store: Store) -> None:
    """Writers on other threads commit while the board polls: when they are done, the
    board has seen every run's final version."""
    ids = [starting.start(store, f"r{i}", actor="alice", target="none:")[0].id for i in range(4)]
    cursor = store.change_cursor()
    latest: dict[str, int] = {}

    def write(run_id: str) -> None:
        run = _worker(store, run_id)
        for _ in range(15):
            run.heartbeat()

    threads = [threading.Thread(target=write, args=(i,)) for i in ids]
    for t in threads:
        t.start()
    writing = True
    while writing:
        writing = any(t.is_alive() for t in threads)
        page, cursor = store.changes_since(cursor, limit=2)
        latest.update((p.id, p.version) for p in page)
    for t in threads:
        t.join()
    page, _ = _follow(store, cursor)
    latest.update((p.id, p.version) for p in page)
    assert latest == {i: store.get(i).version for i in ids}


def test_postgres_a_transaction_that_began_first_and_commits_last_is_not_skipped() -> None:
    """Transaction ids are handed out at the first write, not at commit: a writer that
    took its id first but commits after a later one must still come after the cursor a
    reader took between the two commits."""
    with pg.fresh_schema() as url, open_store(url) as store:
        slow, _ = starting.start(store, "slow", actor="alice", target="none:")
        fast, _ = starting.start(store, "fast", actor="alice", target="none:")
        cursor = store.change_cursor()
        schema = url.rsplit("schema=", 1)[-1].split("&")[0]
        with psycopg.connect(pg.server_url(), autocommit=False) as early:
            early.execute(f"SET search_path TO {schema}")
            early.execute("UPDATE runs SET change_xid = pg_current_xact_id() WHERE id = %s",
                          (slow.id,))  # takes its id now, commits later
            _worker(store, fast.id)  # a later id, committed at once
            page, held = store.changes_since(cursor)
            # the later commit is shown at once, but the cursor stays below the open
            # transaction's id: what it commits later is not skipped
            assert [p.id for p in page] == [fast.id]
            again, _ = store.changes_since(held)
            assert [p.id for p in again] == [fast.id]
            early.commit()
            cursor = held
        seen, _ = _follow(store, cursor)
        assert {p.id for p in seen} == {slow.id, fast.id}


def test_a_sweeps_page_comes_run_by_run_in_page_order(store: Store) -> None:
    """A page of a sweep's writes, committed together, gives each run a place of its own in
    the feed, in the order of the page: a reader taking one change at a time sees them all."""
    clock = FakeClock()
    ids = []
    for n in range(4):
        run, _ = starting.start(store, f"quiet {n}", actor="alice", owner="alice",
                                target="none:", kind=Kind.LONG_RUNNING, max_silence=60.0,
                                clock=clock)
        Run(store, run.id, actor="w", clock=clock).claim()
        ids.append(run.id)
    cursor = store.change_cursor()
    report = watchdog.sweep(store, watcher_id="t", now=clock.advance(61))
    assert [a.run_id for a in report.actions] == sorted(ids)  # one page, in due order
    seen, _ = _follow(store, cursor, limit=1)
    assert [(p.id, p.state.value) for p in seen] == [(i, "blocked") for i in sorted(ids)]
