"""What the HTTP surfaces need of the PostgreSQL store: the change feed a board follows, and
the API's bearer tokens and the inbox's marks. SQL on one cursor, called by `PostgresStore`.

The change feed orders runs by the transaction that last wrote them (`change_xid`).
Transaction ids are handed out when a transaction first writes, not when it commits, so a
cursor never passes a transaction still running that may write the store's runs: nothing
can commit below a cursor once it is handed out, and no writer ever waits on a shared
counter.

Which running transactions hold the cursor back (`HORIZON`): a waypost writer takes its
transaction id with its first write to one of the store's tables, holding a write or row
lock on that table from before the id exists until the transaction ends. So a running
transaction holds the cursor back unless one read of the server's locks shows it holding
its id and no lock on any of the store's tables but a read's (`AccessShareLock`): another
database's transactions, and the same database's that never write the store, never hold
the feed back, however long they stay open. The locks are read after the snapshot that
named the running transactions, and the runs are read with a snapshot taken after both: a
writer seen without its table lock had already ended (its locks go after it leaves the
running set), and the runs read next see what it committed. Anything not shown so (a
prepared transaction, one that ended between the two reads) holds the cursor back, as
every running transaction did before.

So a transaction that writes the store's runs must take its id with a write to the store:
one that took its id elsewhere first (another application's table) and wrote the store's
runs later could be passed. Waypost's writers never do; nothing else writes `change_xid`."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any, LiteralString

import psycopg

from waypost.model import Grant, Role
from waypost.store.shared import token_taken

# the oldest running transaction that may write the store's runs, else the snapshot's
# xmax (every transaction below it has ended): one statement, so its snapshot is taken
# before the lock table is read (once: MATERIALIZED), and only when one is running
HORIZON: LiteralString = """
WITH locks AS MATERIALIZED (
    SELECT locktype, database, relation, transactionid, virtualtransaction, mode, granted
    FROM pg_locks WHERE locktype IN ('relation', 'transactionid')),
writers AS (
    SELECT virtualtransaction FROM locks l
    WHERE l.locktype = 'relation' AND l.mode <> 'AccessShareLock'
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = l.relation
                  AND c.relnamespace = to_regnamespace(current_schema()))),
others AS (
    SELECT transactionid::text::bigint AS xid FROM locks
    WHERE locktype = 'transactionid' AND mode = 'ExclusiveLock' AND granted
      AND virtualtransaction NOT IN (SELECT virtualtransaction FROM writers))
SELECT coalesce((SELECT min(x::text::bigint) FROM pg_snapshot_xip(s) AS x
                 WHERE mod(x::text::bigint, 4294967296) NOT IN (SELECT xid FROM others)),
                pg_snapshot_xmax(s)::text::bigint)
FROM pg_current_snapshot() AS s"""
_GRANT_COLUMNS = "id, holder, role, run_id, created_at, created_by, expires_at, revoked_at"


def changes_since(cursor: psycopg.Cursor[Any], start: int,
                  limit: int) -> tuple[list[tuple[str, str]], int]:
    """(id, packet JSON) of the runs last written by a transaction from `start` on, in id
    order, and the next cursor, which never passes the horizon: a transaction still open
    below it may yet commit there. Below the horizon the feed pages in order, one
    transaction's runs never split; once it is through, the newest `limit` runs written
    above the horizon and already visible come too, so a board sees new changes at once
    while an earlier write to the store is still open (they come again once it ends: a
    reader keeps the newest version of each run)."""
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
    """Insert the grant; a token id already taken is refused (`Conflict`), atomically."""
    cur.execute(f"INSERT INTO tokens (hash, {_GRANT_COLUMNS})"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING",
                (token_hash, grant.id, grant.holder, grant.role.value, grant.run_id,
                 grant.created_at, grant.created_by, grant.expires_at, grant.revoked_at))
    if cur.rowcount != 1:
        raise token_taken(grant.id)


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


# --- the inbox's marks ---------------------------------------------------------------------


def inbox_events(cur: psycopg.Cursor[Any], reader: str, types: Collection[str],
                 limit: int) -> list[tuple[str, int, str, int]]:
    """(run id, seq, event JSON, shown mark) of `Store.inbox_events`."""
    return cur.execute(
        "SELECT e.run_id, e.seq, coalesce(e.body_text, e.body::text),"
        " coalesce(c.shown_upto, 0) FROM runs r"
        " LEFT JOIN inbox_cursors c ON c.reader = %s AND c.run_id = r.id"
        " JOIN events e ON e.run_id = r.id AND e.seq > coalesce(c.acked_upto, 0)"
        " WHERE r.owner = %s AND r.version > coalesce(c.acked_upto, 0) AND e.actor <> %s"
        " AND e.type = ANY(%s) ORDER BY e.at, e.run_id, e.seq LIMIT %s",
        (reader, reader, reader, list(types), limit)).fetchall()


def inbox_versions(cur: psycopg.Cursor[Any], reader: str, most: int) -> dict[str, int]:
    """`InboxScan.versions`: {} past `most` runs."""
    rows = cur.execute(
        "SELECT r.id, r.version FROM runs r"
        " LEFT JOIN inbox_cursors c ON c.reader = %s AND c.run_id = r.id"
        " WHERE r.owner = %s AND r.version > coalesce(c.acked_upto, 0) LIMIT %s",
        (reader, reader, most + 1)).fetchall()
    return {} if len(rows) > most else {r[0]: int(r[1]) for r in rows}


def mark_inbox(cur: psycopg.Cursor[Any], reader: str, marks: Mapping[str, int],
               acked: bool) -> None:
    cur.executemany(
        "INSERT INTO inbox_cursors (reader, run_id, shown_upto, acked_upto)"
        " SELECT %s, id, %s, %s FROM runs WHERE id = %s"
        " ON CONFLICT (reader, run_id) DO UPDATE SET"
        " shown_upto = greatest(inbox_cursors.shown_upto, excluded.shown_upto),"
        " acked_upto = greatest(inbox_cursors.acked_upto, excluded.acked_upto)",
        [(reader, seq, seq if acked else 0, run_id) for run_id, seq in marks.items()])
