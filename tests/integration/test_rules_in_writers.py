"""The rules a writer decides before it writes (who resolves which blocker, whose gates run
at review) hold against older wayposts too: a store brought up to this schema takes writes
only from a waypost that knows it, on both backends, while older ones still read."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import psycopg

from tests import pg
from waypost.errors import Refused
from waypost.store.postgres.setup import latest_version, migrate, parse_url
from waypost.store.shared import write_refusal
from waypost.store.sqlite.setup import MIGRATIONS, SCHEMA_VERSION, migrations, run_script
from waypost.store.sqlite.store import SqliteStore


def _sqlite_min_writer(path: Path) -> str:
    with closing(sqlite3.connect(path)) as db:
        (value,) = db.execute(
            "SELECT value FROM meta WHERE name = 'min_writer_version'").fetchone()
    return str(value)


def test_a_sqlite_store_takes_no_writer_from_before_the_rules(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "fresh.db"):
        pass
    old = tmp_path / "old.db"
    with closing(sqlite3.connect(old, isolation_level=None)) as db:
        db.execute("BEGIN")
        for script in migrations()[: MIGRATIONS.index("sqlite_11_rules_in_writers.sql")]:
            run_script(db, script)
        db.execute("PRAGMA user_version = 10")
        db.execute("COMMIT")
    assert _sqlite_min_writer(old) == "10"
    with SqliteStore(old):
        pass  # brought up to date on open
    for path in (tmp_path / "fresh.db", old):
        needed = _sqlite_min_writer(path)
        # 12 (the inbox's marks), 13 (the answers queue) and 14 (the keys) add tables older
        # writers never touch, 15 a column they leave empty: 11 still writes
        assert (needed, SCHEMA_VERSION) == ("11", 15)
        refusal = write_refusal(str(path), SCHEMA_VERSION, 10, needed)
        assert isinstance(refusal, Refused)
        assert "knows schema 11 or newer" in str(refusal)
        assert write_refusal(str(path), SCHEMA_VERSION, 11, needed) is None


def test_a_postgres_store_takes_no_writer_from_before_the_rules() -> None:
    pg.require_postgres()
    with (psycopg.connect(pg.server_url(), autocommit=True) as conn,
          pg.fresh_schema() as fresh_url, pg.fresh_schema() as old_url):
        found: dict[str, Any] = {}
        for url, stops in ((fresh_url, [None]), (old_url, [11, None])):
            schema = parse_url(url).schema
            conn.execute(f"SET search_path TO {schema}")
            for stop in stops:
                migrate(conn, schema, upto=stop)
                found[f"{url} {stop}"] = conn.execute(
                    "SELECT value FROM meta WHERE name = 'min_writer_version'").fetchone()
    assert sorted(found.values()) == [("10",), ("12",), ("12",)]
    refusal = write_refusal("pg", latest_version(), 11, "12")
    assert isinstance(refusal, Refused)
    # 13 (the inbox's marks) and 14 (the answers queue) add tables older writers never
    # touch: 12 still writes
    assert write_refusal("pg", latest_version(), 12, "12") is None
    assert latest_version() == 16
