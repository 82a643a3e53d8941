"""PostgreSQL for tests: the server at WAYPOST_TEST_POSTGRES_URL, one fresh schema per test.

Outside CI an unreachable server (or a missing psycopg) skips the test with the reason; in
CI (`CI=true`) it fails, so PostgreSQL tests are counted, never silently skipped.
"""

from __future__ import annotations

import contextlib
import functools
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"


def server_url() -> str:
    return os.environ.get("WAYPOST_TEST_POSTGRES_URL") or DEFAULT_URL


@functools.cache
def _unavailable() -> str | None:
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed (pip install -e '.[dev]')"
    try:
        with psycopg.connect(server_url(), connect_timeout=3):
            return None
    except psycopg.Error as exc:
        return f"PostgreSQL unreachable at {server_url()}: {str(exc).strip()}"


def require_postgres() -> str:
    """The server URL, or skip (fail in CI) naming why PostgreSQL cannot be used."""
    reason = _unavailable()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (CI=true: the PostgreSQL tests must run)")
        pytest.skip(reason)
    return server_url()


def with_schema(url: str, schema: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}schema={schema}"


def drop_schema(schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(server_url(), autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@contextmanager
def fresh_schema() -> Iterator[str]:
    """A store URL with a schema of its own, dropped afterwards."""
    url = require_postgres()
    schema = f"t_{uuid.uuid4().hex[:16]}"
    try:
        yield with_schema(url, schema)
    finally:
        drop_schema(schema)


def other_database_url() -> str:
    """The server's URL with another database than the tests' own (`postgres`, which every
    cluster has; `template1` when the tests' own is `postgres`)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(server_url())
    other = "template1" if parts.path.strip("/") == "postgres" else "postgres"
    return urlunsplit(parts._replace(path=f"/{other}"))


@contextmanager
def open_transactions(schema: str) -> Iterator[list[int]]:
    """Other applications' sessions on the same server, each in a transaction that took an
    id and stays open until the block ends: one in another database; one in the store's
    database writing a table of its own (outside the store's schema); one in the store's
    database that, after taking its id, read the store's runs. Yields their ids."""
    import psycopg
    from psycopg import sql

    url = require_postgres()
    with contextlib.ExitStack() as stack:
        sessions = [stack.enter_context(psycopg.connect(u, autocommit=False))
                    for u in (other_database_url(), url, url)]
        sessions[0].execute("SELECT pg_current_xact_id()")
        sessions[1].execute("CREATE TEMP TABLE other_app (note text)")
        sessions[1].execute("INSERT INTO other_app VALUES ('kept open')")
        sessions[2].execute("SELECT pg_current_xact_id()")
        sessions[2].execute(sql.SQL("SELECT count(*) FROM {}.runs").format(
            sql.Identifier(schema)))
        rows = [s.execute("SELECT pg_current_xact_id()::text::bigint").fetchone()
                for s in sessions]
        yield [int(row[0]) for row in rows if row is not None]
        for session in sessions:
            session.rollback()


def still_running(ids: list[int]) -> bool:
    """Whether every one of these transactions is still in progress."""
    import psycopg

    with psycopg.connect(server_url(), autocommit=True) as conn:
        return all(conn.execute("SELECT pg_xact_status(%s::text::xid8)",
                                (str(i),)).fetchone() == ("in progress",) for i in ids)


@contextmanager
def each_backend(backend: str, folder: object) -> Iterator[str]:
    """A store URL on `backend`: a fresh PostgreSQL schema, or a SQLite file in `folder`."""
    if backend == "postgres":
        with fresh_schema() as found:
            yield found
    else:
        yield f"{folder}/w.db"
