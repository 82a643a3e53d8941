"""The store-wide change feed a board follows: every committed write comes at or past the
cursor read before it, in commit order, and nothing is ever skipped, on every backend.

On PostgreSQL every test here runs while other applications' sessions on the same server
hold transactions open (`pg.open_transactions`): the feed of a store does not depend on
what else runs on its server."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg import sql

from tests import pg
from tests.helpers import FakeClock
from waypost.model import BlockerKind, Kind, Packet
from waypost.store import Store, open_store
from waypost.store.postgres.store import PostgresStore
from waypost.usecases import starting, watchdog
from waypost.usecases.runs import Run


@pytest.fixture(autouse=True)
def other_sessions(request: pytest.FixtureRequest) -> Iterator[None]:
    """On a PostgreSQL store, other sessions hold transactions open for the whole test."""
    store = request.getfixturevalue("store") if "store" in request.fixturenames else None
    if not isinstance(store, PostgresStore):
        yield
        return
    with pg.open_transactions(store.schema) as ids:
        yield
        assert pg.still_running(ids)


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


def test_runs_written_once_each_by_concurrent_writers_all_come(store: Store) -> None:
    """Each run written once, by writers on other threads, while the board polls: a write
    in flight as the cursor moves comes all the same (nothing written again saves it)."""
    workers = [_worker(store, starting.start(store, f"r{i}", actor="alice",
                                             target="none:")[0].id) for i in range(60)]
    cursor = store.change_cursor()
    latest: dict[str, int] = {}

    def write(share: list[Run]) -> None:
        for run in share:
            run.block(BlockerKind.MISSING_INPUT, "once")

    threads = [threading.Thread(target=write, args=(workers[n::3],)) for n in range(3)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        page, cursor = store.changes_since(cursor, limit=1)
        latest.update((p.id, p.version) for p in page)
    for t in threads:
        t.join()
    page, _ = _follow(store, cursor)
    latest.update((p.id, p.version) for p in page)
    assert latest == {w.id: store.get(w.id).version for w in workers}


def test_postgres_a_transaction_that_began_first_and_commits_last_is_not_skipped(
        pg_url: str) -> None:
    """Transaction ids are handed out at the first write, not at commit: a writer that
    took its id first but commits after a later one must still come after the cursor a
    reader took between the two commits."""
    with open_store(pg_url) as store:
        assert isinstance(store, PostgresStore)
        slow, _ = starting.start(store, "slow", actor="alice", target="none:")
        fast, _ = starting.start(store, "fast", actor="alice", target="none:")
        cursor = store.change_cursor()
        with pg.open_transactions(store.schema), _in_store(store) as early:
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


@contextlib.contextmanager
def _in_store(store: PostgresStore) -> Iterator[psycopg.Connection[Any]]:
    """A session of its own on the store's schema, in a transaction until it commits."""
    with psycopg.connect(pg.server_url(), autocommit=False) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(store.schema)))
        conn.commit()
        yield conn


def _xact_id(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT pg_current_xact_id()::text::bigint").fetchone()
    assert row is not None
    return int(row[0])


def test_postgres_only_a_transaction_writing_the_store_holds_the_cursor(pg_url: str) -> None:
    """Other sessions' open transactions (another database; this one, writing elsewhere or
    only reading the store) never hold the feed back: a change made while they stay open
    comes at once and the cursor moves past it. A transaction that wrote or locked rows of
    any of the store's tables does hold it, whatever it touched first, and what it commits
    later still comes."""
    with open_store(pg_url) as store:
        assert isinstance(store, PostgresStore)
        first, _ = starting.start(store, "first", actor="alice", target="none:")
        other, _ = starting.start(store, "other", actor="alice", target="none:")
        with pg.open_transactions(store.schema) as others:
            cursor = store.change_cursor()
            worker = _worker(store, first.id)
            page, after = store.changes_since(cursor)
            assert [(p.id, p.version) for p in page] == [(first.id, 2)]
            assert store.change_cursor() >= after > max(others)  # other commits move it on
            assert store.changes_since(after)[0] == []
            for lock in ("SELECT id FROM runs WHERE id = %s FOR UPDATE",
                         "INSERT INTO settings (name, value) VALUES (%s, 'x')"):
                with _in_store(store) as writer:
                    writer.execute(lock, (other.id,))
                    held = _xact_id(writer)
                    worker.heartbeat("while a writer is open")
                    assert store.change_cursor() <= held
                    page, following = store.changes_since(after)
                    assert following <= held
                    writer.execute("UPDATE runs SET version = version,"
                                   " change_xid = pg_current_xact_id() WHERE id = %s",
                                   (other.id,))
                    writer.commit()
                seen, after = _follow(store, following)
                assert other.id in {p.id for p in seen}
            assert pg.still_running(others)


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
