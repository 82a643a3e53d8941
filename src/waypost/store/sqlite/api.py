"""What the HTTP surfaces need of the SQLite store: the change feed a board follows, the
API's bearer tokens and the inbox's marks. SQL on one connection, called by `SqliteStore`
inside its write transaction or under its read lock."""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Mapping
from datetime import datetime

from waypost.model import Grant, Role
from waypost.store.shared import token_taken

_GRANT_COLUMNS = "id, holder, role, run_id, created_at, created_by, expires_at, revoked_at"


def change_cursor(db: sqlite3.Connection) -> int:
    (pos,) = db.execute("SELECT coalesce(max(change_pos), 0) + 1 FROM runs").fetchone()
    return int(pos)


def changes_since(db: sqlite3.Connection, cursor: int,
                  limit: int) -> tuple[list[tuple[str, bytes]], int]:
    """(id, packet JSON) of the runs at or past `cursor` in position order, and the next
    cursor. Positions are unique, so a page ends anywhere."""
    rows = db.execute("SELECT id, CAST(packet AS BLOB), change_pos FROM runs"
                      " WHERE change_pos >= ? ORDER BY change_pos LIMIT ?",
                      (max(cursor, 0), limit)).fetchall()
    following = rows[-1][2] + 1 if rows else max(cursor, 0)
    return [(r[0], r[1]) for r in rows], int(following)


def put_token(db: sqlite3.Connection, grant: Grant, token_hash: str) -> None:
    """Insert the grant; a token id already taken is refused (`Conflict`), atomically."""
    cur = db.execute(f"INSERT INTO tokens (hash, {_GRANT_COLUMNS})"
                     " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
                     (token_hash, grant.id, grant.holder, grant.role.value, grant.run_id,
                      grant.created_at.isoformat(), grant.created_by,
                      _text(grant.expires_at), _text(grant.revoked_at)))
    if cur.rowcount != 1:
        raise token_taken(grant.id)


def token_grant(db: sqlite3.Connection, token_hash: str) -> Grant | None:
    row = db.execute(f"SELECT {_GRANT_COLUMNS} FROM tokens WHERE hash = ?",
                     (token_hash,)).fetchone()
    return None if row is None else _grant(row)


def grants(db: sqlite3.Connection) -> list[Grant]:
    return [_grant(r) for r in db.execute(f"SELECT {_GRANT_COLUMNS} FROM tokens"
                                          " ORDER BY created_at, id")]


def revoke_token(db: sqlite3.Connection, token_id: str, at: datetime) -> Grant | None:
    db.execute("UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
               (at.isoformat(), token_id))
    row = db.execute(f"SELECT {_GRANT_COLUMNS} FROM tokens WHERE id = ?",
                     (token_id,)).fetchone()
    return None if row is None else _grant(row)


def _text(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat()


def _grant(row: tuple[str, ...]) -> Grant:
    def moment(text: str | None) -> datetime | None:
        return None if text is None else datetime.fromisoformat(text)

    created = moment(row[4])
    assert created is not None  # NOT NULL
    return Grant(id=row[0], holder=row[1], role=Role(row[2]), run_id=row[3],
                 created_at=created, created_by=row[5], expires_at=moment(row[6]),
                 revoked_at=moment(row[7]))


# --- the inbox's marks ---------------------------------------------------------------------


def inbox_events(db: sqlite3.Connection, reader: str, types: Collection[str],
                 limit: int) -> list[tuple[str, int, bytes, int]]:
    """(run id, seq, event JSON, shown mark) of `Store.inbox_events`."""
    marks = ", ".join("?" * len(types))
    return db.execute(
        "SELECT e.run_id, e.seq, CAST(e.body AS BLOB), coalesce(c.shown_upto, 0) FROM runs r"
        " LEFT JOIN inbox_cursors c ON c.reader = ? AND c.run_id = r.id"
        " JOIN events e ON e.run_id = r.id AND e.seq > coalesce(c.acked_upto, 0)"
        " WHERE r.owner = ? AND r.version > coalesce(c.acked_upto, 0) AND e.actor <> ?"
        f" AND e.type IN ({marks}) ORDER BY e.at, e.run_id, e.seq LIMIT ?",
        (reader, reader, reader, *types, limit)).fetchall()


def inbox_versions(db: sqlite3.Connection, reader: str, most: int) -> dict[str, int]:
    """`InboxScan.versions`: {} past `most` runs."""
    rows = db.execute(
        "SELECT r.id, r.version FROM runs r"
        " LEFT JOIN inbox_cursors c ON c.reader = ? AND c.run_id = r.id"
        " WHERE r.owner = ? AND r.version > coalesce(c.acked_upto, 0) LIMIT ?",
        (reader, reader, most + 1)).fetchall()
    return {} if len(rows) > most else {r[0]: int(r[1]) for r in rows}


def mark_inbox(db: sqlite3.Connection, reader: str, marks: Mapping[str, int],
               acked: bool) -> None:
    db.executemany(
        "INSERT INTO inbox_cursors (reader, run_id, shown_upto, acked_upto)"
        " SELECT ?, id, ?, ? FROM runs WHERE id = ?"
        " ON CONFLICT (reader, run_id) DO UPDATE SET"
        " shown_upto = max(shown_upto, excluded.shown_upto),"
        " acked_upto = max(acked_upto, excluded.acked_upto)",
        [(reader, seq, seq if acked else 0, run_id) for run_id, seq in marks.items()])
