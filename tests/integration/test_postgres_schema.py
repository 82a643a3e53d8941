"""A fresh PostgreSQL schema (`postgres.sql`) equals one migrated step by step from any
earlier version (`postgres_NNN_*.sql`): tables, columns, defaults, constraints, indexes,
functions and triggers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests import pg
from waypost.store.postgres.setup import latest_version, migrate, migrations, parse_url

Catalog = dict[str, list[tuple[Any, ...]]]

_CATALOG_QUERIES = {
    "columns": "SELECT table_name, column_name, data_type, is_nullable, column_default"
               " FROM information_schema.columns WHERE table_schema = %(s)s ORDER BY 1, 2",
    "constraints": "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid)"
                   " FROM pg_constraint WHERE connamespace = %(s)s::regnamespace"
                   " ORDER BY 1, 2",
    "indexes": "SELECT tablename, indexname, indexdef FROM pg_indexes"
               " WHERE schemaname = %(s)s ORDER BY 1, 2",
    "functions": "SELECT proname, pg_get_functiondef(oid) FROM pg_proc"
                 " WHERE pronamespace = %(s)s::regnamespace ORDER BY 1",
    "triggers": "SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger"
                " WHERE tgrelid IN (SELECT oid FROM pg_class"
                "  WHERE relnamespace = %(s)s::regnamespace) AND NOT tgisinternal ORDER BY 1",
}


def catalog(conn: psycopg.Connection[Any], schema: str) -> Catalog:
    """The schema's definition, with its name taken out so two schemas compare."""
    found: Catalog = {}
    for part, query in _CATALOG_QUERIES.items():
        rows = conn.execute(query, {"s": schema}).fetchall()
        found[part] = [tuple(str(v).replace(f"{schema}.", "S.") for v in row) for row in rows]
    return found


@pytest.fixture
def connect() -> Iterator[psycopg.Connection[Any]]:
    pg.require_postgres()
    with psycopg.connect(pg.server_url(), autocommit=True) as conn:
        yield conn


def _build(conn: psycopg.Connection[Any], schema: str, *stops: int | None) -> Catalog:
    conn.execute(f"SET search_path TO {schema}")
    for stop in stops:
        migrate(conn, schema, upto=stop)
    found = catalog(conn, schema)
    found["meta"] = conn.execute("SELECT name, value FROM meta ORDER BY 1").fetchall()
    return found


@pytest.mark.parametrize("start", range(1, len(migrations()) + 1))
def test_a_migrated_schema_equals_a_fresh_one(connect: psycopg.Connection[Any],
                                              start: int) -> None:
    with pg.fresh_schema() as fresh_url, pg.fresh_schema() as old_url:
        fresh, old = parse_url(fresh_url).schema, parse_url(old_url).schema
        expected = _build(connect, fresh, None)
        assert expected["columns"], "the fresh schema is empty"
        assert _build(connect, old, start, None) == expected


def test_migrations_are_numbered_without_gaps() -> None:
    assert [m.version for m in migrations()] == list(range(1, latest_version() + 1))
