"""The SQLite side of the watchdog: watcher registrations, due runs, deferred checks and
retention. SQL on one connection, always called by `SqliteStore` inside its BEGIN
IMMEDIATE transaction (writes) or under its lock (reads)."""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Sequence
from datetime import UTC, datetime
from typing import Any

import msgspec

from waypost.core.writes import Deferral
from waypost.model import Watcher, WatcherRole
from waypost.store.base import PRUNE_BATCH
from waypost.store.shared import DueRow

_WATCHER_COLUMNS = ("id, host, pid, interval_s, owner, started_at, last_beat, last_sweep,"
                    " expires_at, role")


def due_sql(*, owner: bool, after: bool) -> str:
    """The due-runs query. The partial index runs_next_check (next_check_at, then the
    primary key) serves the range, the paging key and the order: runs that are not due are
    never read, and nothing is sorted. `+owner` keeps the planner off the owner index."""
    sql = ("SELECT id, CAST(packet AS BLOB), head_hash, next_check_at, (SELECT CAST(body AS"
           " BLOB) FROM events WHERE run_id = runs.id AND seq = runs.version) FROM runs"
           " WHERE next_check_at <= :now")
    if after:
        sql += (" AND next_check_at >= :after_at"
                " AND (next_check_at, id) > (:after_at, :after_id)")
    if owner:
        sql += " AND +owner = :owner"
    return sql + " ORDER BY next_check_at, id LIMIT :limit"


# blobs that a remaining packet names: artifacts[].sha256 and evidence[].log_sha256
_NAMED_BLOBS = ("SELECT json_extract(a.value, '$.sha256') AS sha FROM runs,"
                " json_each(runs.packet, '$.artifacts') AS a WHERE sha IS NOT NULL"
                " UNION SELECT json_extract(e.value, '$.log_sha256') AS sha FROM runs,"
                " json_each(runs.packet, '$.evidence') AS e WHERE sha IS NOT NULL")
_UNNAMED_BLOBS = f"coalesce(stored_at, 0) < ? AND sha256 NOT IN ({_NAMED_BLOBS})"


def _moment(unix: float) -> datetime:
    return datetime.fromtimestamp(unix, UTC)


def _iso(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


# --- watchers ---------------------------------------------------------------------------


def watcher_from_row(row: Sequence[Any]) -> Watcher:
    (id_, host, pid, interval_s, owner, started_at, last_beat, last_sweep, expires_at,
     role) = row
    return Watcher(id=id_, host=host, pid=pid, interval_s=interval_s, owner=owner,
                   started_at=datetime.fromisoformat(started_at),
                   last_beat=datetime.fromisoformat(last_beat), last_sweep=_iso(last_sweep),
                   expires_at=_moment(expires_at), role=WatcherRole(role))


def beat_watcher(db: sqlite3.Connection, w: Watcher) -> None:
    db.execute(
        f"INSERT INTO watchers ({_WATCHER_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid,"
        " interval_s = excluded.interval_s, owner = excluded.owner,"
        " started_at = excluded.started_at, last_beat = excluded.last_beat,"
        " last_sweep = excluded.last_sweep, expires_at = excluded.expires_at,"
        " role = excluded.role",
        (w.id, w.host, w.pid, w.interval_s, w.owner, w.started_at.isoformat(),
         w.last_beat.isoformat(), w.last_sweep.isoformat() if w.last_sweep else None,
         w.expires_at.timestamp(), w.role.value),
    )


def remove_watcher(db: sqlite3.Connection, watcher_id: str) -> None:
    db.execute("DELETE FROM watchers WHERE id = ?", (watcher_id,))


def live_watchers(db: sqlite3.Connection, now: datetime) -> list[Watcher]:
    rows = db.execute(f"SELECT {_WATCHER_COLUMNS} FROM watchers WHERE expires_at > ?"
                      " ORDER BY last_beat DESC, id", (now.timestamp(),)).fetchall()
    return [watcher_from_row(r) for r in rows]


# --- due runs -----------------------------------------------------------------------------


def due_rows(db: sqlite3.Connection, *, now: datetime, owner: str | None,
             after: tuple[datetime, str] | None, limit: int) -> list[DueRow]:
    """(run id, packet JSON as bytes, head hash, due at, head event JSON) of the due runs:
    decoded by the caller, which skips a row that does not decode."""
    params = {"now": now.timestamp(), "owner": owner, "limit": int(limit),
              "after_at": after[0].timestamp() if after else None,
              "after_id": after[1] if after else None}
    sql = due_sql(owner=owner is not None, after=after is not None)
    return [(run_id, packet, head, datetime.fromtimestamp(due, UTC), event)  # _moment, inlined
            for run_id, packet, head, due, event in db.execute(sql, params).fetchall()]


_DEFER = "UPDATE runs SET next_check_at = ? WHERE id = ? AND version = ?"


def defer_check(db: sqlite3.Connection, run_id: str, expected_version: int,
                at: datetime | None) -> bool:
    cur = db.execute(_DEFER, (at.timestamp() if at else None, run_id, expected_version))
    return cur.rowcount == 1


def defer_checks(db: sqlite3.Connection, deferrals: Sequence[Deferral]) -> None:
    """`defer_check` for many runs in one statement."""
    if deferrals:
        db.executemany(_DEFER, [(d.at.timestamp() if d.at else None, d.run_id,
                                 d.expected_version) for d in deferrals])


def stored_runs(db: sqlite3.Connection,
                run_ids: Collection[str]) -> dict[str, tuple[int, str, float | None]]:
    """The stored version, owner and next check of each of these runs (unknown ids are
    left out): one query through the primary key, the ids passed as one JSON array however
    many there are."""
    rows = db.execute("SELECT id, version, owner, next_check_at FROM runs WHERE id IN"
                      " (SELECT value FROM json_each(?))",
                      (msgspec.json.encode(list(run_ids)).decode(),))
    return {row[0]: (row[1], row[2], row[3]) for row in rows}


# --- retention ----------------------------------------------------------------------------


def prune_batch(db: sqlite3.Connection, before: datetime,
                states: Collection[str]) -> tuple[int, int, int, int]:
    """Delete up to PRUNE_BATCH matching runs with their rows: (runs, events, outbox, runs
    whose owner had not acknowledged their last event)."""
    marks = ", ".join("?" * len(states))
    ids = [r[0] for r in db.execute(
        f"SELECT id FROM runs WHERE state IN ({marks}) AND updated_at < ?"
        " AND origin IS NULL LIMIT ?",
        (*states, before.isoformat(), PRUNE_BATCH))]
    if not ids:
        return 0, 0, 0, 0
    db.execute("CREATE TEMP TABLE IF NOT EXISTS pruning (id TEXT PRIMARY KEY)")
    db.execute("DELETE FROM temp.pruning")
    db.executemany("INSERT INTO temp.pruning (id) VALUES (?)", [(i,) for i in ids])
    (unread,) = db.execute(
        "SELECT count(*) FROM runs r WHERE r.id IN temp.pruning AND NOT EXISTS (SELECT 1"
        " FROM inbox_cursors c WHERE c.reader = r.owner AND c.run_id = r.id"
        " AND c.acked_upto >= r.version)").fetchone()
    db.execute("DELETE FROM inbox_cursors WHERE run_id IN temp.pruning")
    db.execute("DELETE FROM answers WHERE run_id IN temp.pruning")
    events = db.execute("DELETE FROM events WHERE run_id IN temp.pruning").rowcount
    outbox = db.execute("DELETE FROM outbox WHERE run_id IN temp.pruning").rowcount
    runs = db.execute("DELETE FROM runs WHERE id IN temp.pruning").rowcount
    db.execute("DELETE FROM temp.pruning")
    return runs, events, outbox, int(unread)


def prune_blobs(db: sqlite3.Connection, blobs_before: datetime) -> tuple[int, int]:
    """Delete blobs no remaining packet names, stored before `blobs_before`: (count, bytes)."""
    cutoff = blobs_before.timestamp()
    count, size = db.execute(f"SELECT count(*), coalesce(sum(size), 0) FROM blobs"
                             f" WHERE {_UNNAMED_BLOBS}", (cutoff,)).fetchone()
    if count:
        db.execute(f"DELETE FROM blobs WHERE {_UNNAMED_BLOBS}", (cutoff,))
    return int(count), int(size)


def prune_watchers(db: sqlite3.Connection, before: datetime) -> None:
    db.execute("DELETE FROM watchers WHERE expires_at < ?", (before.timestamp(),))
