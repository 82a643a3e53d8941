"""PostgreSQL for tests: the server at WAYPOST_TEST_POSTGRES_URL, one fresh schema per test.

Outside CI an unreachable server (or a missing psycopg) skips the test with the reason; in
CI (`CI=true`) it fails, so PostgreSQL tests are counted, never silently skipped.
"""

from __future__ import annotations

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
