"""The SQLite schema: an older store upgrades in place and keeps every run intact."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from tests.helpers import FakeClock
from waypost.core.history import verify_run
from waypost.model import Kind
from waypost.store.sqlite.setup import SCHEMA_VERSION, migrations, run_script
from waypost.store.sqlite.store import SqliteStore
from waypost.usecases import runs, starting

COPIED = ("runs", "events", "outbox", "relays", "watchers", "blobs")


def _columns(db: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in db.execute(f"PRAGMA table_info({table})")]


def _as_version_5(current: Path, old: Path) -> None:
    """A copy of `current` in the schema of version 5, the rows carried over."""
    db = sqlite3.connect(old, isolation_level=None)
    db.execute("BEGIN")
    for script in migrations()[:5]:
        run_script(db, script)
    db.execute("PRAGMA user_version = 5")
    db.execute("ATTACH DATABASE ? AS current", (str(current),))
    for table in COPIED:
        names = ", ".join(_columns(db, table))
        db.execute(f"INSERT INTO main.{table} ({names}) SELECT {names} FROM current.{table}")
    db.execute("COMMIT")
    db.execute("DETACH DATABASE current")
    db.close()


def test_a_version_5_store_upgrades_and_every_run_still_verifies(
        tmp_path: Path, clock: FakeClock) -> None:
    with SqliteStore(tmp_path / "new.db") as store:
        made = []
        for n in range(3):
            run, _ = starting.start(store, f"run {n}", actor="alice", target="none:",
                                kind=Kind.LONG_RUNNING, max_silence=60 * (n + 1),
                                idempotency_key=f"key-{n}", clock=clock)
            worker = runs.Run(store, run.id, actor="w", clock=clock)
            worker.claim()
            worker.heartbeat(note=f"step {n}")
            made.append(run.id)
        runs.Run(store, made[0], actor="alice", clock=clock).cancel("not needed")
        before = {p.id: p for p in store.list_runs()}
    _as_version_5(tmp_path / "new.db", tmp_path / "old.db")
    with closing(sqlite3.connect(tmp_path / "old.db")) as db:
        (ddl,) = db.execute("SELECT sql FROM sqlite_master WHERE name = 'runs'").fetchone()
    assert "WITHOUT ROWID" in ddl

    with SqliteStore(tmp_path / "old.db") as store:
        assert store.pragmas()["schema_version"] == SCHEMA_VERSION == 15
        assert {p.id: p for p in store.list_runs()} == before
        for run_id in made:
            verify_run(run_id, store.events(run_id), store.load(run_id).packet)
        again, created = starting.start(store, "run 1", actor="alice", target="none:",
                                    kind=Kind.LONG_RUNNING, max_silence=120,
                                    idempotency_key="key-1", clock=clock)
        assert (again.id, created) == (made[1], False)  # the unique key came across
        due = store.due_runs(now=clock.advance(3600))
        assert [d.packet.id for d in due] == made[1:]  # the cancelled run is not due
        runs.Run(store, made[2], actor="w", epoch=1, clock=clock).heartbeat(note="after")
    with closing(sqlite3.connect(tmp_path / "old.db")) as db:
        (ddl,) = db.execute("SELECT sql FROM sqlite_master WHERE name = 'runs'").fetchone()
        indexes = {r[0] for r in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'runs'"
            " AND sql IS NOT NULL")}
    assert "WITHOUT ROWID" not in ddl
    assert indexes == {"runs_state_updated", "runs_owner", "runs_next_check",
                       "runs_session", "runs_change"}


def test_a_busy_store_is_waited_for_half_a_minute_and_writes_are_durable(
        tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "w.db") as store:
        db = store._db
        assert db is not None
        assert db.execute("PRAGMA busy_timeout").fetchone() == (30_000,)
        assert db.execute("PRAGMA synchronous").fetchone() == (2,)  # FULL
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def _definition(path: Path) -> tuple[list[tuple[str, str, str]], list[tuple[str, str]]]:
    """The schema's definition (every table, index and trigger) and its meta rows."""
    with closing(sqlite3.connect(path)) as db:
        ddl = db.execute("SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL"
                         " ORDER BY type, name").fetchall()
        meta = db.execute("SELECT name, value FROM meta ORDER BY name").fetchall()
    return ddl, meta


@pytest.mark.parametrize("start", range(1, SCHEMA_VERSION))
def test_a_migrated_schema_equals_a_fresh_one(tmp_path: Path, start: int) -> None:
    SqliteStore(tmp_path / "fresh.db").close()
    with closing(sqlite3.connect(tmp_path / "old.db", isolation_level=None)) as db:
        db.execute("BEGIN")
        for script in migrations()[:start]:
            run_script(db, script)
        db.execute(f"PRAGMA user_version = {start}")
        db.execute("COMMIT")
    SqliteStore(tmp_path / "old.db").close()
    fresh = _definition(tmp_path / "fresh.db")
    # migrations 8 and 9 were additive; 10's change cursor needs writers that set it; 11's
    # rules are decided by the writer before it writes; 12's inbox marks and 13's answers
    # queue are tables older writers never touch
    assert fresh[1] == [("min_writer_version", "11")]
    assert _definition(tmp_path / "old.db") == fresh
