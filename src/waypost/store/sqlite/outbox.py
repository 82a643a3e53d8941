"""The SQLite outbox and relay registry: SQL on one connection, always called by
`SqliteStore` inside its BEGIN IMMEDIATE transaction (writes) or under its lock (reads).

Times are stored as unix seconds (REAL) where the relay compares them, ISO text elsewhere.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

from waypost.core.writes import RunWrite
from waypost.errors import NotFound
from waypost.model import Delivery, DeliveryStatus, OutboxItem, Purpose, RelayInfo
from waypost.store.base import CLAIM_WINDOW as WINDOW
from waypost.store.base import lost_lease

_COLUMNS = ("key, run_id, purpose, topic, target, event_seq, created_at, queued_at, status,"
            " attempts, next_attempt_at, last_attempt_at, lease_owner, lease_expires_at,"
            " last_error, sent_at, receipt, outcome_unknown_at, maybe_delivered_to")
# an attempt whose outcome is unknown marks its row (from when the attempt started)
_UNKNOWN = "outcome_unknown_at = CASE WHEN ? THEN last_attempt_at ELSE outcome_unknown_at END"
# held by the relay, and (given the claim's attempt, its fencing token) not claimed since
_HELD = "key = ? AND status = 'queued' AND lease_owner = ? AND (? IS NULL OR attempts = ?)"


class Settle(NamedTuple):
    """A relay's record of one attempt, handed to the store's group commit: `retry` when
    `retry_at` is set, else `finish` (with the run's `write`, if any)."""

    key: str
    relay: str
    at: datetime
    receipt: str | None = None
    error: str | None = None
    write: RunWrite | None = None
    outcome_unknown: bool = False
    attempt: int | None = None
    retry_at: datetime | None = None


def _moment(unix: float | None) -> datetime | None:
    return None if unix is None else datetime.fromtimestamp(unix, UTC)


def _iso(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


def from_row(row: Sequence[Any]) -> Delivery:
    (key, run_id, purpose, topic, target, event_seq, created_at, queued_at, status, attempts,
     next_attempt_at, last_attempt_at, lease_owner, lease_expires_at, last_error, sent_at,
     receipt, outcome_unknown_at, maybe_delivered_to) = row
    created = datetime.fromisoformat(created_at)
    return Delivery(
        key=key, run_id=run_id, purpose=Purpose(purpose), topic=topic, target=target,
        event_seq=event_seq, created_at=created, queued_at=_moment(queued_at) or created,
        status=DeliveryStatus(status), attempts=attempts,
        next_attempt_at=_moment(next_attempt_at) or created,
        last_attempt_at=_moment(last_attempt_at), lease_owner=lease_owner,
        lease_expires_at=_moment(lease_expires_at), last_error=last_error,
        sent_at=_iso(sent_at), receipt=receipt,
        outcome_unknown_at=_moment(outcome_unknown_at),
        maybe_delivered_to=tuple(maybe_delivered_to.split("\n")) if maybe_delivered_to else (),
    )


def queue(db: sqlite3.Connection, items: Sequence[OutboxItem]) -> None:
    """Insert new rows (a key that exists is kept); a final delivery planned again is
    decided against its row as it stands in this transaction (`settle_final`)."""
    db.executemany(
        "INSERT INTO outbox (key, run_id, purpose, topic, target, event_seq, created_at,"
        " queued_at, next_attempt_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (key) DO NOTHING",
        [(o.key, o.run_id, o.purpose.value, o.topic, o.target, o.event_seq,
          o.created_at.isoformat(), o.created_at.timestamp(), o.created_at.timestamp())
         for o in items if o.purpose is not Purpose.FINAL],
    )
    for item in items:
        if item.purpose is Purpose.FINAL:
            _queue_final(db, item)


def _queue_final(db: sqlite3.Connection, item: OutboxItem) -> None:
    row = db.execute(f"SELECT {_COLUMNS} FROM outbox WHERE key = ?", (item.key,)).fetchone()
    if row is None:
        at = item.created_at
        db.execute("INSERT INTO outbox (key, run_id, purpose, topic, target, event_seq,"
                   " created_at, queued_at, next_attempt_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (item.key, item.run_id, item.purpose.value, item.topic, item.target,
                    item.event_seq, at.isoformat(), at.timestamp(), at.timestamp()))
        return
    from waypost.core.outbox import settle_final  # here: reading deliveries (`show`) needs none

    changed = settle_final(from_row(row), item)
    if changed is not None:
        db.execute(
            "UPDATE outbox SET target = ?, status = ?, next_attempt_at = ?, queued_at = ?,"
            " lease_owner = ?, lease_expires_at = ?, outcome_unknown_at = ?,"
            " maybe_delivered_to = ? WHERE key = ?",
            (changed.target, changed.status.value, changed.next_attempt_at.timestamp(),
             changed.queued_at.timestamp(), changed.lease_owner, _unix(changed.lease_expires_at),
             _unix(changed.outcome_unknown_at), "\n".join(changed.maybe_delivered_to) or None,
             changed.key))


def _unix(moment: datetime | None) -> float | None:
    return None if moment is None else moment.timestamp()


def get(db: sqlite3.Connection, key: str) -> Delivery:
    row = db.execute(f"SELECT {_COLUMNS} FROM outbox WHERE key = ?", (key,)).fetchone()
    if row is None:
        raise NotFound(f"no delivery {key}", hint="list a run's deliveries with: waypost show RUN")
    return from_row(row)


# the due rows a claim chooses from: the earliest `WINDOW` times its limit, none of a run
# with a row in flight (leased live); of those, each run's earliest
_CLAIMABLE = (
    "SELECT key FROM (SELECT key, next_attempt_at, row_number() OVER"
    " (PARTITION BY run_id ORDER BY next_attempt_at, key) AS nth FROM ("
    "  SELECT key, run_id, next_attempt_at FROM outbox AS o WHERE status = 'queued'"
    "  AND next_attempt_at <= :at AND (lease_expires_at IS NULL OR lease_expires_at <= :at)"
    "  AND NOT EXISTS (SELECT 1 FROM outbox AS b WHERE b.run_id = o.run_id"
    "   AND b.status = 'queued' AND b.lease_expires_at > :at)"
    "  ORDER BY next_attempt_at, key LIMIT :window))"
    " WHERE nth = 1 ORDER BY next_attempt_at, key LIMIT :limit")


def claim(db: sqlite3.Connection, relay: str, *, now: datetime, lease_s: float,
          limit: int) -> list[Delivery]:
    at, most = now.timestamp(), max(0, int(limit))
    keys = [r[0] for r in db.execute(_CLAIMABLE, {"at": at, "limit": most,
                                                  "window": most * WINDOW})]
    db.executemany(
        "UPDATE outbox SET lease_owner = ?, lease_expires_at = ?, last_attempt_at = ?,"
        " attempts = attempts + 1 WHERE key = ?",
        [(relay, at + lease_s, at, key) for key in keys])
    rows = {row[0]: row for row in db.execute(  # key is the first column
        f"SELECT {_COLUMNS} FROM outbox WHERE key IN ({', '.join('?' * len(keys))})", keys)}
    return [from_row(rows[key]) for key in keys]  # in claim order


def retry(db: sqlite3.Connection, key: str, relay: str, *, error: str,
          retry_at: datetime, outcome_unknown: bool = False,
          attempt: int | None = None) -> Delivery:
    cur = db.execute(
        "UPDATE outbox SET next_attempt_at = ?, last_error = ?, lease_owner = NULL,"
        f" lease_expires_at = NULL, {_UNKNOWN} WHERE {_HELD}",
        (retry_at.timestamp(), error, outcome_unknown, key, relay, attempt, attempt))
    if cur.rowcount != 1:
        raise lost_lease(get(db, key), relay)
    return get(db, key)


def finish(db: sqlite3.Connection, key: str, relay: str, *, at: datetime,
           receipt: str | None, error: str | None, outcome_unknown: bool = False,
           attempt: int | None = None) -> None:
    if receipt is not None:
        cur = db.execute(
            "UPDATE outbox SET status = 'sent', sent_at = ?, receipt = ?, lease_owner = NULL,"
            f" lease_expires_at = NULL WHERE {_HELD}",
            (at.isoformat(), receipt, key, relay, attempt, attempt))
    else:
        cur = db.execute(
            "UPDATE outbox SET status = 'failed', last_error = COALESCE(?, last_error),"
            f" lease_owner = NULL, lease_expires_at = NULL, {_UNKNOWN} WHERE {_HELD}",
            (error, outcome_unknown, key, relay, attempt, attempt))
    if cur.rowcount != 1:
        raise lost_lease(get(db, key), relay)


def of_runs(db: sqlite3.Connection, run_ids: Collection[str]) -> list[Delivery]:
    ids = list(dict.fromkeys(run_ids))
    if not ids:
        return []
    rows = db.execute(
        f"SELECT {_COLUMNS} FROM outbox WHERE run_id IN ({', '.join('?' * len(ids))})"
        " ORDER BY run_id, event_seq, key", ids).fetchall()
    return [from_row(r) for r in rows]


def next_due(db: sqlite3.Connection) -> datetime | None:
    # a row waits for its own lease, and for its run's other rows' (one in flight per run)
    (due,) = db.execute(
        "SELECT MIN(MAX(next_attempt_at, COALESCE((SELECT MAX(b.lease_expires_at) FROM outbox"
        " AS b WHERE b.run_id = o.run_id AND b.status = 'queued'), 0))) FROM outbox AS o"
        " WHERE status = 'queued'").fetchone()
    return _moment(due)


def beat_relay(db: sqlite3.Connection, relay: RelayInfo) -> None:
    db.execute(
        "INSERT INTO relays (id, host, pid, started_at, last_beat, expires_at)"
        " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET host = excluded.host,"
        " pid = excluded.pid, last_beat = excluded.last_beat, expires_at = excluded.expires_at",
        (relay.id, relay.host, relay.pid, relay.started_at.isoformat(),
         relay.last_beat.isoformat(), relay.expires_at.timestamp()))


def remove_relay(db: sqlite3.Connection, relay_id: str) -> None:
    db.execute("DELETE FROM relays WHERE id = ?", (relay_id,))


def live_relays(db: sqlite3.Connection, now: datetime) -> list[RelayInfo]:
    rows = db.execute(
        "SELECT id, host, pid, started_at, last_beat, expires_at FROM relays"
        " WHERE expires_at > ? ORDER BY last_beat DESC, id", (now.timestamp(),)).fetchall()
    return [RelayInfo(id=r[0], host=r[1], pid=r[2], started_at=datetime.fromisoformat(r[3]),
                      last_beat=datetime.fromisoformat(r[4]),
                      expires_at=datetime.fromtimestamp(r[5], UTC)) for r in rows]
