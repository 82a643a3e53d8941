"""A PostgreSQL store with a bad row, a newer schema or a row another session holds: the
same named errors as on SQLite, never a driver error."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
import pytest

from tests.helpers import FakeClock
from waypost.errors import IntegrityError, Refused, StoreBusy
from waypost.model import Kind
from waypost.store import open_postgres
from waypost.store.postgres.setup import latest_version, parse_url
from waypost.store.postgres.store import PostgresStore
from waypost.store.shared import Skipped
from waypost.usecases import runs, starting


@pytest.fixture
def conn(pg_url: str) -> Iterator[psycopg.Connection[Any]]:
    target = parse_url(pg_url)
    with psycopg.connect(target.conninfo, options=target.options, autocommit=True) as c:
        yield c


def _start(store: PostgresStore, clock: FakeClock, n: int) -> list[str]:
    return sorted(starting.start(store, f"r{i}", actor="alice", target="none:",
                             kind=Kind.LONG_RUNNING, max_silence=60, clock=clock)[0].id
                  for i in range(n))


def test_a_malformed_packet_is_named_and_skipped(pg_url: str, conn: psycopg.Connection[Any],
                                                 clock: FakeClock) -> None:
    with open_postgres(pg_url) as store:
        made = _start(store, clock, 4)
        conn.execute("UPDATE runs SET packet_text = '{' WHERE id = %s", (made[1],))
        with pytest.raises(IntegrityError, match=made[1]):
            store.load(made[1])
        skipped: list[Skipped] = []
        assert {p.id for p in store.list_runs(skipped=skipped)} == set(made) - {made[1]}
        assert [s.run_id for s in skipped] == [made[1]]
        skipped.clear()
        due = store.due_runs(now=clock.advance(3600), limit=2, skipped=skipped)
        assert [d.packet.id for d in due] == [made[0], made[2]]  # filled past the bad row
        assert [s.run_id for s in skipped] == [made[1]]
        assert made[1] in store.rows_diagnosis().detail


@pytest.mark.parametrize(("min_writer", "writes"), [("99", False), (None, False),
                                                     (str(latest_version()), True)])
def test_a_newer_schema_is_read_and_written_only_if_it_says_so(
        pg_url: str, conn: psycopg.Connection[Any], clock: FakeClock, min_writer: str | None,
        writes: bool) -> None:
    with open_postgres(pg_url) as store:
        (run_id,) = _start(store, clock, 1)
    conn.execute("INSERT INTO waypost_migrations (version, name) VALUES (99, 'future')")
    if min_writer is None:
        conn.execute("DELETE FROM meta")
    else:
        conn.execute("UPDATE meta SET value = %s", (min_writer,))
    with open_postgres(pg_url) as store:
        assert store.get(run_id).version == 1
        assert store.schema_state().version == 99
        worker = runs.Run(store, run_id, actor="alice", clock=clock)
        if writes:
            worker.heartbeat(note="still taken")
            assert store.get(run_id).version == 2
        else:
            with pytest.raises(Refused, match="schema version 99"):
                worker.heartbeat(note="refused")
            with pytest.raises(Refused, match="schema version 99"):
                store.put_setting("limits.title", "1")
            assert store.get(run_id).version == 1


def test_a_row_locked_by_another_session_is_store_busy(
        pg_url: str, conn: psycopg.Connection[Any], clock: FakeClock) -> None:
    with PostgresStore(pg_url, busy_timeout=0.3) as store:
        (run_id,) = _start(store, clock, 1)
        worker = runs.Run(store, run_id, actor="alice", clock=clock)
        with ThreadPoolExecutor(1) as pool, conn.transaction():
            conn.execute("SELECT 1 FROM runs WHERE id = %s FOR UPDATE", (run_id,))
            beat = pool.submit(worker.heartbeat, note="n")
            # a hang guard (the wait is 0.3 s); the lock goes when the block ends
            with pytest.raises(StoreBusy, match="store busy, try again"):
                beat.result(timeout=30)
        runs.Run(store, run_id, actor="alice", clock=clock).heartbeat(note="after")
        assert store.get(run_id).version == 2
