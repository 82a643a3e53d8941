"""Where a PostgreSQL store lives and how its schema gets there.

A store is one schema in one database: `postgresql://host/db?schema=NAME` (default schema
`waypost`). Opening it creates the schema and brings it up to date under an advisory lock,
so many hosts may open it at once; the applied migrations are rows in `waypost_migrations`.
A fresh store runs `postgres.sql` (the whole current schema); an older one runs the
`postgres_NNN_*.sql` files it has not seen, in order.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from datetime import timedelta
from importlib import resources
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import sql

from waypost.errors import InvalidInput, Refused
from waypost.store.records import Diagnosis, Status
from waypost.store.shared import DEFAULT_BUSY_TIMEOUT, MIN_WRITER, write_refusal

DEFAULT_SCHEMA = "waypost"
CHANNEL_PREFIX = "waypost_runs."
CONNECT_TIMEOUT = 10  # seconds
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,47}")
_MIGRATION_FILE = re.compile(r"postgres_(\d{3})_\w+\.sql")
_MIGRATIONS_TABLE = b"""
CREATE TABLE IF NOT EXISTS waypost_migrations (
    version     integer PRIMARY KEY,
    name        text NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now()
)"""


@dataclass(frozen=True, kw_only=True)
class Database:
    """A parsed store URL: what libpq is given, the schema, and a URL safe to print."""

    conninfo: str
    schema: str
    display: str
    options: str  # libpq `options`: the schema as the search_path, times in UTC

    @property
    def channel(self) -> str:
        """The LISTEN/NOTIFY channel runs starting and changing state are announced on."""
        return CHANNEL_PREFIX + self.schema

    def connect_kwargs(self) -> dict[str, Any]:
        return {"options": self.options, "autocommit": True,
                "connect_timeout": CONNECT_TIMEOUT}

    def connect(self) -> psycopg.Connection[Any]:
        """A connection of its own (LISTEN, session locks, migrations): not from the pool."""
        return psycopg.connect(self.conninfo, **self.connect_kwargs())


def parse_url(url: str, *, busy_s: float = DEFAULT_BUSY_TIMEOUT) -> Database:
    """Split `?schema=NAME` off a postgresql:// URL (libpq would refuse it). A statement
    waits `busy_s` at most for a lock another session holds (`lock_timeout`), then fails:
    StoreBusy (see `driver_errors`)."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    schemas = [value for key, value in query if key == "schema"]
    schema = schemas[-1] if schemas else DEFAULT_SCHEMA
    if not _SCHEMA_NAME.fullmatch(schema):
        raise InvalidInput(f"bad schema name {schema!r} in the store URL",
                           hint="use lowercase letters, digits and _ (at most 48), "
                           "e.g. postgresql://host/db?schema=waypost")
    options = " ".join(value for key, value in query if key == "options")
    rest = [(key, value) for key, value in query if key not in ("schema", "options")]
    if "application_name" not in dict(rest):
        rest.append(("application_name", "waypost"))
    return Database(conninfo=urlunsplit(parts._replace(query=urlencode(rest))), schema=schema,
                  display=_without_password(url),
                  options=f"{options} -c search_path={schema} -c TimeZone=UTC"
                  f" -c lock_timeout={max(1, round(busy_s * 1000))}".strip())


def _without_password(url: str) -> str:
    parts = urlsplit(url)
    userinfo, _, hostport = parts.netloc.rpartition("@")
    netloc = f"{userinfo.split(':')[0]}:***@{hostport}" if ":" in userinfo else parts.netloc
    query = [(k, "***" if k == "password" else v)
             for k, v in parse_qsl(parts.query, keep_blank_values=True)]
    return urlunsplit(parts._replace(netloc=netloc, query=urlencode(query, safe="*")))


def lock_key(schema: str, name: str) -> int:
    """A stable 64-bit advisory lock key for `name` in this store (the same on every host)."""
    digest = hashlib.sha256(f"waypost:{schema}:{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


# --- migrations -----------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Migration:
    version: int
    name: str
    script: bytes


@functools.cache
def _shipped() -> tuple[Migration, ...]:
    folder = resources.files("waypost.store.postgres")
    found = []
    for item in folder.iterdir():
        match = _MIGRATION_FILE.fullmatch(item.name)
        if match:
            found.append(Migration(version=int(match[1]), name=item.name.removesuffix(".sql"),
                                   script=item.read_bytes()))
    return tuple(sorted(found, key=lambda m: m.version))


def migrations() -> list[Migration]:
    """Every migration shipped with this waypost, oldest first (read once a process)."""
    return list(_shipped())


def latest_version() -> int:
    return max(m.version for m in migrations())


def full_schema() -> bytes:
    return resources.files("waypost.store.postgres").joinpath("postgres.sql").read_bytes()


def applied_versions(conn: psycopg.Connection[Any]) -> list[int]:
    """The migrations recorded in the store's schema ([] when it has none yet)."""
    row = conn.execute("SELECT to_regclass('waypost_migrations')").fetchone()
    if row is None or row[0] is None:
        return []
    return [r[0] for r in conn.execute("SELECT version FROM waypost_migrations ORDER BY 1")]


def migrate(conn: psycopg.Connection[Any], schema: str, *,
            upto: int | None = None) -> list[int]:
    """Create or upgrade the schema; return the versions applied now ([] when up to date).

    Concurrent openers queue on a transaction-level advisory lock, so each migration runs
    once. `upto` stops at that version (tests build old schemas with it).
    """
    wanted = [m for m in migrations() if upto is None or m.version <= upto]
    if {m.version for m in wanted} <= set(applied_versions(conn)):
        return []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(schema, "#migrate"),))
        _create_schema(conn, schema)
        conn.execute(_MIGRATIONS_TABLE)
        done = set(applied_versions(conn))
        if not done and upto is None:
            conn.execute(full_schema())
            todo = wanted
        else:
            todo = [m for m in wanted if m.version not in done]
            for migration in todo:
                conn.execute(migration.script)
        for migration in todo:
            conn.execute("INSERT INTO waypost_migrations (version, name) VALUES (%s, %s)",
                         (migration.version, migration.name))
    return [m.version for m in todo]


def schema_versions(conn: psycopg.Connection[Any]) -> tuple[int, int | None]:
    """(the newest migration applied, the oldest schema whose writers it takes, None
    when it does not say), in one round trip where the schema is current."""
    try:
        row = conn.execute("SELECT (SELECT max(version) FROM waypost_migrations),"
                           " (SELECT value FROM meta WHERE name = %s)", (MIN_WRITER,)).fetchone()
    except psycopg.errors.UndefinedTable:  # a schema older than its meta table, or none
        return max(applied_versions(conn), default=0), None
    assert row is not None
    try:
        return int(row[0] or 0), int(row[1]) if row[1] is not None else None
    except ValueError:
        return int(row[0] or 0), None


def writer_refusal(conn: psycopg.Connection[Any], where: str) -> Refused | None:
    """Why this waypost may not write to the store (a newer schema that takes no writes
    from it), or None."""
    version, min_writer = schema_versions(conn)
    return write_refusal(where, version, latest_version(),
                         None if min_writer is None else str(min_writer))


def _create_schema(conn: psycopg.Connection[Any], schema: str) -> None:
    # only when missing: a role handed an existing schema needs no right to create one
    row = conn.execute("SELECT to_regnamespace(%s) IS NULL", (schema,)).fetchone()
    if row and row[0]:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))


def skew_diagnosis(skew: timedelta, round_trip: timedelta, max_skew: float) -> Diagnosis:
    """The clock skew between this host and the database, measured within half the round
    trip: liveness and leases compare times written by different hosts."""
    seconds = skew.total_seconds()
    ahead = ("in step" if abs(seconds) < 0.001 else
             "the database is ahead" if seconds > 0 else "this host is ahead")
    detail = (f"{seconds:+.3f} s ({ahead}; measured within ±{round_trip.total_seconds() / 2:.3f}"
              f" s, limit {max_skew:g} s)")
    if abs(seconds) <= max_skew:
        return Diagnosis(name="clock_skew", status=Status.OK, detail=detail)
    return Diagnosis(name="clock_skew", status=Status.FAIL,
                     detail=f"{detail}: sync this host's clock (NTP); liveness and leases "
                     "compare times written by different hosts")
