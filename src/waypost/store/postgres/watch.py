"""The PostgreSQL side of the watchdog: watcher registrations, due runs, deferred checks and
retention. SQL on a cursor that `PostgresStore` hands in, inside its transaction (writes)
or as single statements (reads)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any, LiteralString

import psycopg

from waypost.core.writes import Deferral
from waypost.model import Watcher, WatcherRole
from waypost.store.base import PRUNE_BATCH
from waypost.store.shared import DueRow

Cursor = psycopg.Cursor[Any]
_WATCHER_COLUMNS = ("id, host, pid, interval_s, owner, started_at, last_beat, last_sweep,"
                    " expires_at, role")
# blobs that a remaining packet names: artifacts[].sha256 and evidence[].log_sha256
_NAMED_BLOBS = ("SELECT a->>'sha256' FROM runs, jsonb_array_elements(packet->'artifacts') a"
                " WHERE a->>'sha256' IS NOT NULL UNION"
                " SELECT e->>'log_sha256' FROM runs, jsonb_array_elements(packet->'evidence') e"
                " WHERE e->>'log_sha256' IS NOT NULL")


# --- watchers ---------------------------------------------------------------------------


def beat_watcher(cur: Cursor, w: Watcher) -> None:
    cur.execute(
        f"INSERT INTO watchers ({_WATCHER_COLUMNS})"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
        " ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid,"
        " interval_s = excluded.interval_s, owner = excluded.owner,"
        " started_at = excluded.started_at, last_beat = excluded.last_beat,"
        " last_sweep = excluded.last_sweep, expires_at = excluded.expires_at,"
        " role = excluded.role",
        (w.id, w.host, w.pid, w.interval_s, w.owner, w.started_at, w.last_beat, w.last_sweep,
         w.expires_at, w.role.value))


def remove_watcher(cur: Cursor, watcher_id: str) -> None:
    cur.execute("DELETE FROM watchers WHERE id = %s", (watcher_id,))


def live_watchers(cur: Cursor, now: datetime) -> list[Watcher]:
    rows = cur.execute(f"SELECT {_WATCHER_COLUMNS} FROM watchers WHERE expires_at > %s"
                       " ORDER BY last_beat DESC, id", (now,)).fetchall()
    return [_watcher(r) for r in rows]


def _watcher(row: Sequence[Any]) -> Watcher:
    (id_, host, pid, interval_s, owner, started_at, last_beat, last_sweep, expires_at,
     role) = row
    return Watcher(id=id_, host=host, pid=pid, interval_s=interval_s, owner=owner,
                   started_at=started_at, last_beat=last_beat, last_sweep=last_sweep,
                   expires_at=expires_at, role=WatcherRole(role))


# --- due runs -----------------------------------------------------------------------------


def due_rows(cur: Cursor, *, now: datetime, owner: str | None,
             after: tuple[datetime, str] | None, limit: int) -> list[DueRow]:
    """Read through the partial index on (next_check_at, id): no scan of runs not due.
    The packets come as JSON, decoded by the caller (which skips one that does not)."""
    query: LiteralString = ("SELECT id, coalesce(packet_text, packet::text), head_hash,"
                            " next_check_at, (SELECT coalesce(e.body_text, e.body::text)"
                            " FROM events e WHERE e.run_id = runs.id AND e.seq = runs.version)"
                            " FROM runs WHERE next_check_at <= %s")
    params: list[object] = [now]
    if after is not None:
        query += " AND (next_check_at, id) > (%s, %s)"
        params.extend(after)
    if owner is not None:
        query += " AND owner = %s"
        params.append(owner)
    query += " ORDER BY next_check_at, id LIMIT %s"
    params.append(int(limit))
    return [(run_id, packet, head, due, event)
            for run_id, packet, head, due, event in cur.execute(query, params).fetchall()]


_DEFER: LiteralString = "UPDATE runs SET next_check_at = %s WHERE id = %s AND version = %s"


def defer_check(cur: Cursor, run_id: str, expected_version: int, at: datetime | None) -> bool:
    cur.execute(_DEFER, (at, run_id, expected_version))
    return cur.rowcount == 1


def defer_checks(cur: Cursor, deferrals: Sequence[Deferral]) -> None:
    """`defer_check` for many runs in one pipelined round trip (rowcount: how many moved)."""
    cur.executemany(_DEFER, [(d.at, d.run_id, d.expected_version) for d in deferrals])


def lock_versions(cur: Cursor, run_ids: Collection[str]) -> dict[str, int]:
    """Lock these runs' rows until the transaction ends and return their versions (unknown
    ids are left out). Locked in id order, so two batches never wait on each other in a
    cycle; a run another transaction is writing is waited for, then read as it committed."""
    rows = cur.execute("SELECT id, version FROM runs WHERE id = ANY(%s) ORDER BY id"
                       " FOR UPDATE", (list(run_ids),)).fetchall()
    return dict(rows)


# --- retention ----------------------------------------------------------------------------


def prune_batch(cur: Cursor, before: datetime,
                states: Collection[str]) -> tuple[int, int, int, int]:
    """Delete up to PRUNE_BATCH matching runs with their rows: (runs, events, outbox, runs
    whose owner had not acknowledged their last event)."""
    ids = [r[0] for r in cur.execute(
        "SELECT id FROM runs WHERE state = ANY(%s) AND updated_at < %s AND origin IS NULL"
        " LIMIT %s"
        " FOR UPDATE SKIP LOCKED", (list(states), before, PRUNE_BATCH)).fetchall()]
    if not ids:
        return 0, 0, 0, 0
    row = cur.execute(
        "SELECT count(*) FROM runs r WHERE r.id = ANY(%s) AND NOT EXISTS (SELECT 1"
        " FROM inbox_cursors c WHERE c.reader = r.owner AND c.run_id = r.id"
        " AND c.acked_upto >= r.version)", (ids,)).fetchone()
    assert row is not None
    cur.execute("DELETE FROM inbox_cursors WHERE run_id = ANY(%s)", (ids,))
    cur.execute("DELETE FROM answers WHERE run_id = ANY(%s)", (ids,))
    events = cur.execute("DELETE FROM events WHERE run_id = ANY(%s)", (ids,)).rowcount
    outbox = cur.execute("DELETE FROM outbox WHERE run_id = ANY(%s)", (ids,)).rowcount
    runs = cur.execute("DELETE FROM runs WHERE id = ANY(%s)", (ids,)).rowcount
    return runs, events, outbox, int(row[0])


def prune_blobs(cur: Cursor, blobs_before: datetime) -> tuple[int, int]:
    """Delete blobs no remaining packet names, stored before `blobs_before`: (count, bytes)."""
    row = cur.execute(
        "WITH gone AS (DELETE FROM blobs WHERE coalesce(stored_at, '-infinity') < %s"
        f" AND sha256 NOT IN ({_NAMED_BLOBS}) RETURNING size)"
        " SELECT count(*), coalesce(sum(size), 0) FROM gone", (blobs_before,)).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def prune_watchers(cur: Cursor, before: datetime) -> None:
    cur.execute("DELETE FROM watchers WHERE expires_at < %s", (before,))
