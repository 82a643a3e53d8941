"""The whole of a store, to show that a refusal left it exactly as it was: every row of
every table (blobs included) on SQLite or PostgreSQL, and every file beside a SQLite
database (a leftover temporary file is a trace too)."""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

Dump = dict[str, list[str]]
DATABASE_FILES = ("", "-wal", "-shm", "-journal")  # the database itself, not a trace


def dump(url: str) -> Dump:
    """Every row of every table of the store at `url` (a SQLite path or sqlite:/// URL,
    or a postgresql:// URL with ?schema=), each table's rows sorted, as text."""
    with contextlib.closing(Dumper(url)) as dumper:
        return dumper()


class Dumper:
    """`dump` of one store, again and again over one connection (PostgreSQL)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._conn: Any = None

    def __call__(self) -> Dump:
        if self.url.startswith(("postgresql://", "postgres://")):
            return self._postgres()
        path = Path(self.url.removeprefix("sqlite://"))
        return {**_sqlite(path), "files beside the database": _files(path)}

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _postgres(self) -> Dump:
        from psycopg import sql

        schema = parse_qs(urlsplit(self.url).query)["schema"][0]
        conn = self._connected()
        tables = [r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY tablename",
            (schema,))]
        return {t: sorted(repr(row) for row in conn.execute(
            sql.SQL("SELECT * FROM {}.{}").format(sql.Identifier(schema), sql.Identifier(t))))
            for t in tables}

    def _connected(self) -> Any:
        if self._conn is None:
            import psycopg

            from tests import pg

            self._conn = psycopg.connect(pg.server_url(), autocommit=True)
        return self._conn


def _sqlite(path: Path) -> Dump:
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        tables = [r[0] for r in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return {t: sorted(repr(row) for row in db.execute(f'SELECT * FROM "{t}"'))
                for t in tables}


def _files(database: Path) -> list[str]:
    kept = {database.name + suffix for suffix in DATABASE_FILES}
    return sorted(f"{p.relative_to(database.parent)} {hashlib.sha256(p.read_bytes()).hexdigest()}"
                  for p in database.parent.rglob("*") if p.is_file() and p.name not in kept)
