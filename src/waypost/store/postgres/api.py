"""What the HTTP surfaces need of the PostgreSQL store: the change feed a board follows, and
the API's bearer tokens. SQL on one cursor, called by `PostgresStore`.

The change feed orders runs by the transaction that last wrote them (`change_xid`).
Transaction ids are handed out when a transaction first writes, not when it commits, so a
cursor never passes its snapshot's xmin, the oldest transaction still running: every
transaction below it has ended, so nothing can commit below a cursor once it is handed
out, and no writer ever waits on a shared counter."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg

from waypost.model import Grant, Role

HORIZON = "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint"
_GRANT_COLUMNS = "id, holder, role, run_id, created_at, created_by, expires_at, revoked_at"


def changes_since(cursor: psycopg.Cursor[Any], start: int,
                  limit: int) -> tuple[list[tuple[str, str]], int]:
    """(id, packet JSON) of the runs last written by a transaction from `start` on, in id
    order, and the next cursor, which never passes the horizon: a transaction still open
    below it may yet commit there. Below the horizon the feed pages in order, one
    transaction's runs never split; once it is through, the newest `limit` runs written
    above the horizon and already visible come too, so a board sees new changes at once
    while an old transaction anywhere on the server holds the horizon back (they come
    again once it moves: a reader keeps the newest version of each run)."""
    (horizon,) = cursor.execute(HORIZON).fetchone() or (0,)
    start, horizon = max(start, 0), int(horizon)
    rows = cursor.execute(
        "SELECT id, coalesce(packet_text, packet::text), change_xid::text::bigint FROM runs"
        " WHERE change_xid >= %s::text::xid8 AND change_xid < %s::text::xid8"
        " ORDER BY change_xid, id LIMIT %s", (str(start), str(horizon), limit)).fetchall()
    if len(rows) == limit:
        last = rows[-1][2]
        whole = [r for r in rows if r[2] != last]
        if whole:  # leave the last transaction's runs to the next page, all of them
            return [(r[0], r[1]) for r in whole], int(last)
        # one transaction wrote a whole page or more: take all of it now
        rows = cursor.execute(
            "SELECT id, coalesce(packet_text, packet::text), 0 FROM runs"
            " WHERE change_xid = %s::text::xid8 ORDER BY id", (str(last),)).fetchall()
        return [(r[0], r[1]) for r in rows], int(last) + 1
    early = cursor.execute(
        "SELECT id, coalesce(packet_text, packet::text) FROM runs"
        " WHERE change_xid >= %s::text::xid8 ORDER BY change_xid DESC, id DESC LIMIT %s",
        (str(max(horizon, start)), limit)).fetchall()
    return [(r[0], r[1]) for r in rows] + [(r[0], r[1]) for r in reversed(early)], \
        max(horizon, start)


def put_token(cur: psycopg.Cursor[Any], grant: Grant, token_hash: str) -> None:
    cur.execute(f"INSERT INTO tokens (hash, {_GRANT_COLUMNS})"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (token_hash, grant.id, grant.holder, grant.role.value, grant.run_id,
                 grant.created_at, grant.created_by, grant.expires_at, grant.revoked_at))


def token_grant(cur: psycopg.Cursor[Any], token_hash: str) -> Grant | None:
    row = cur.execute(f"SELECT {_GRANT_COLUMNS} FROM tokens WHERE hash = %s",
                      (token_hash,)).fetchone()
    return None if row is None else _grant(row)


def grants(cur: psycopg.Cursor[Any]) -> list[Grant]:
    return [_grant(r) for r in cur.execute(f"SELECT {_GRANT_COLUMNS} FROM tokens"
                                           " ORDER BY created_at, id").fetchall()]


def revoke_token(cur: psycopg.Cursor[Any], token_id: str, at: datetime) -> Grant | None:
    row = cur.execute("UPDATE tokens SET revoked_at = coalesce(revoked_at, %s) WHERE id = %s"
                      f" RETURNING {_GRANT_COLUMNS}", (at, token_id)).fetchone()
    return None if row is None else _grant(row)


def _grant(row: tuple[Any, ...]) -> Grant:
    return Grant(id=row[0], holder=row[1], role=Role(row[2]), run_id=row[3],
                 created_at=row[4], created_by=row[5], expires_at=row[6], revoked_at=row[7])
