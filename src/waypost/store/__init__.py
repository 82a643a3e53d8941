"""Opening a store from a URL: `sqlite:///rel.db`, `sqlite:////abs.db`, a plain path, or
`postgresql://…`. With no URL, `WAYPOST_URL`, then `.waypost/waypost.db` found by walking
up from the current directory (like `.git`).

    base.py     the contract: the domain operations every backend implements
    cursors.py  the inbox's part of the contract: each reader's marks on its runs
    answers.py  the answers queue's part: answers from Slack and GitHub until carried out
    keys.py     the signing keys' part: public keys with their holder and validity
    imports.py  the imported runs' part: runs brought in from bundles, read-only
    windows.py  the event windows' part: the latest events of a run, without the rest
    records.py  what a store hands back besides packets (schema, doctor, prune, sweeper lock)
    shared.py   what both backends share: limits, versions, the sweep's overlap
    sqlite/     the embedded backend (the default)
    postgres/   the backend many hosts share
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from waypost.config import find_upward
from waypost.core.writes import Snapshot
from waypost.errors import InvalidInput, NotFound
from waypost.store.base import Store

if TYPE_CHECKING:
    from waypost.store.postgres.store import PostgresStore

STORE_DIR = ".waypost"
STORE_FILE = "waypost.db"
POSTGRES_SCHEMES = ("postgresql://", "postgres://")

__all__ = ["POSTGRES_SCHEMES", "STORE_DIR", "STORE_FILE", "Snapshot", "Store", "find_default",
           "open_postgres", "open_store", "sqlite_path"]


def find_default(start: str | os.PathLike[str] | None = None) -> str | None:
    return find_upward(os.path.join(STORE_DIR, STORE_FILE), start)


def open_store(url: str | None = None, *, create: bool = True,
               group_commit: bool = True) -> Store:
    """Open (migrating if needed) the store at `url`. A SQLite file that does not exist yet
    is created now, or without `create` by its first write (a read finds no store).
    Without `group_commit`, a SQLite store commits every write in a transaction of its own
    (`[store] group_commit` in waypost.toml; PostgreSQL commits each write on its own)."""
    url = url or os.environ.get("WAYPOST_URL") or None
    if url is None:
        found = find_default()
        if found is None:
            raise NotFound(
                "no waypost store here or in any parent directory",
                hint="create one with: waypost init  (or set WAYPOST_URL / pass --store)",
            )
        url = found
    check_url(url)
    if url.startswith(POSTGRES_SCHEMES):
        return open_postgres(url)
    from waypost.store.sqlite.store import SqliteStore

    return SqliteStore(sqlite_path(url), create=create, group_commit=group_commit)


def check_url(url: str) -> None:
    """Refuse a store URL no file system or server takes: one holding a NUL byte (the OS
    would refuse the path deep inside a driver, as a crash)."""
    if "\x00" in url:
        raise InvalidInput(f"bad store URL {url[:200]!r}: it holds a NUL byte",
                           hint="pass a path or URL without NUL (--store / WAYPOST_URL)")


def sqlite_path(url: str) -> str:
    """The file a `sqlite:///…` URL or a plain path names."""
    check_url(url)
    if url.startswith("sqlite:"):
        rest = url.removeprefix("sqlite:")
        if not rest.startswith("///"):
            raise InvalidInput(f"bad SQLite URL {url!r}: write sqlite:///relative.db or "
                               "sqlite:////absolute.db")
        return rest[3:]
    if "://" in url:
        raise InvalidInput(f"unknown store URL scheme in {url!r}",
                           hint="use sqlite:///path.db, a plain path, or postgresql://…")
    return url


def open_postgres(url: str, *, migrate_schema: bool = True) -> PostgresStore:
    """Open a postgresql:// store; without `migrate_schema`, as found (`waypost doctor`)."""
    # Imported here so that SQLite users never load (or need) psycopg.
    try:
        from waypost.store.postgres.store import PostgresStore
    except ImportError as exc:
        if exc.name not in ("psycopg", "psycopg_pool"):
            raise
        raise InvalidInput(
            f"a postgresql:// store needs psycopg, which is not installed ({exc.name})",
            hint="install it with: pip install 'waypost[postgres]'",
        ) from exc
    return PostgresStore(url, migrate_schema=migrate_schema)
