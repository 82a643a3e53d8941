"""The PostgreSQL outbox and relay registry: SQL on a cursor that `PostgresStore` hands in,
inside its transaction (writes) or as single statements (reads).

Relays on many hosts claim with `FOR UPDATE SKIP LOCKED`: a row one relay is claiming is
skipped by the others, never waited for, and never handed out twice while its lease lives.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime, timedelta
from typing import Any

import psycopg

from waypost.core.outbox import settle_final
from waypost.errors import NotFound
from waypost.model import Delivery, DeliveryStatus, OutboxItem, Purpose, RelayInfo
from waypost.store.base import CLAIM_WINDOW as WINDOW
from waypost.store.base import lost_lease

Cursor = psycopg.Cursor[Any]
_COLUMNS = ("key, run_id, purpose, topic, target, event_seq, created_at, queued_at, status,"
            " attempts, next_attempt_at, last_attempt_at, lease_owner, lease_expires_at,"
            " last_error, sent_at, receipt, outcome_unknown_at, maybe_delivered_to")
# an attempt whose outcome is unknown marks its row (from when the attempt started)
_UNKNOWN = ("outcome_unknown_at = CASE WHEN %s THEN last_attempt_at"
            " ELSE outcome_unknown_at END")
# held by the relay, and (given the claim's attempt, its fencing token) not claimed since
_HELD = ("key = %s AND status = 'queued' AND lease_owner = %s"
         " AND (%s::integer IS NULL OR attempts = %s)")


def from_row(row: Sequence[Any]) -> Delivery:
    (key, run_id, purpose, topic, target, event_seq, created_at, queued_at, status, attempts,
     next_attempt_at, last_attempt_at, lease_owner, lease_expires_at, last_error, sent_at,
     receipt, outcome_unknown_at, maybe_delivered_to) = row
    return Delivery(
        key=key, run_id=run_id, purpose=Purpose(purpose), topic=topic, target=target,
        event_seq=event_seq, created_at=created_at, queued_at=queued_at,
        status=DeliveryStatus(status), attempts=attempts, next_attempt_at=next_attempt_at,
        last_attempt_at=last_attempt_at, lease_owner=lease_owner,
        lease_expires_at=lease_expires_at, last_error=last_error, sent_at=sent_at,
        receipt=receipt, outcome_unknown_at=outcome_unknown_at,
        maybe_delivered_to=tuple(maybe_delivered_to.split("\n")) if maybe_delivered_to else (),
    )


_INSERT = ("INSERT INTO outbox (key, run_id, purpose, topic, target, event_seq, created_at,"
           " queued_at, next_attempt_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
           " ON CONFLICT (key) DO NOTHING")


def lock_finals(cur: Cursor, items: Sequence[OutboxItem]) -> None:
    """Lock the existing rows of the final deliveries in `items` before the run is written:
    a relay settling one locks its row, then the run, so taking them in that order too
    means the two wait for each other instead of deadlocking."""
    keys = [o.key for o in items if o.purpose is Purpose.FINAL]
    if keys:
        cur.execute("SELECT key FROM outbox WHERE key = ANY(%s) ORDER BY key FOR UPDATE",
                    (keys,))


def queue(cur: Cursor, items: Sequence[OutboxItem]) -> None:
    """Insert new rows (a key that exists is kept); a final delivery planned again is
    decided against its row as it stands, locked (`lock_finals`), in this transaction
    (`settle_final`): a relay claiming it meanwhile waits, or skips it."""
    rows = [(o.key, o.run_id, o.purpose.value, o.topic, o.target, o.event_seq, o.created_at,
             o.created_at, o.created_at) for o in items if o.purpose is not Purpose.FINAL]
    if rows:
        cur.executemany(_INSERT, rows)
    for item in items:
        if item.purpose is Purpose.FINAL:
            _queue_final(cur, item)


def _queue_final(cur: Cursor, item: OutboxItem) -> None:
    row = cur.execute(f"SELECT {_COLUMNS} FROM outbox WHERE key = %s FOR UPDATE",
                      (item.key,)).fetchone()
    if row is None:
        at = item.created_at
        cur.execute(_INSERT, (item.key, item.run_id, item.purpose.value, item.topic,
                              item.target, item.event_seq, at, at, at))
        return
    changed = settle_final(from_row(row), item)
    if changed is not None:
        cur.execute(
            "UPDATE outbox SET target = %s, status = %s, next_attempt_at = %s, queued_at = %s,"
            " lease_owner = %s, lease_expires_at = %s, outcome_unknown_at = %s,"
            " maybe_delivered_to = %s WHERE key = %s",
            (changed.target, changed.status.value, changed.next_attempt_at, changed.queued_at,
             changed.lease_owner, changed.lease_expires_at, changed.outcome_unknown_at,
             "\n".join(changed.maybe_delivered_to) or None, changed.key))


def get(cur: Cursor, key: str) -> Delivery:
    row = cur.execute(f"SELECT {_COLUMNS} FROM outbox WHERE key = %s", (key,)).fetchone()
    if row is None:
        raise NotFound(f"no delivery {key}", hint="list a run's deliveries with: waypost show RUN")
    return from_row(row)


# the due rows a claim chooses from: the earliest `WINDOW` times its limit that no other
# claim has locked, none of a run with a row in flight (leased live); of those, each run's
# earliest. The rows looked at stay locked until the claim commits, so a concurrent claim
# skips them, and does not take a second row of a run this one is claiming.
_CLAIM = (
    "UPDATE outbox SET lease_owner = %(relay)s, lease_expires_at = %(until)s,"
    " last_attempt_at = %(at)s, attempts = attempts + 1 WHERE key IN ("
    " SELECT key FROM (SELECT key, next_attempt_at, row_number() OVER"
    "  (PARTITION BY run_id ORDER BY next_attempt_at, key) AS nth FROM ("
    "   SELECT key, run_id, next_attempt_at FROM outbox AS o WHERE status = 'queued'"
    "   AND next_attempt_at <= %(at)s"
    "   AND (lease_expires_at IS NULL OR lease_expires_at <= %(at)s)"
    "   AND NOT EXISTS (SELECT 1 FROM outbox AS b WHERE b.run_id = o.run_id"
    "    AND b.status = 'queued' AND b.lease_expires_at > %(at)s)"
    "   ORDER BY next_attempt_at, key LIMIT %(window)s FOR UPDATE SKIP LOCKED) AS due"
    "  ) AS ranked WHERE nth = 1 ORDER BY next_attempt_at, key LIMIT %(limit)s)"
    f" RETURNING {_COLUMNS}")


def claim(cur: Cursor, relay: str, *, now: datetime, lease_s: float,
          limit: int) -> list[Delivery]:
    most = max(0, int(limit))
    rows = cur.execute(_CLAIM, {"relay": relay, "until": now + timedelta(seconds=lease_s),
                                "at": now, "limit": most, "window": most * WINDOW}).fetchall()
    return sorted((from_row(r) for r in rows), key=lambda d: (d.next_attempt_at, d.key))


def retry(cur: Cursor, key: str, relay: str, *, error: str, retry_at: datetime,
          outcome_unknown: bool = False, attempt: int | None = None) -> Delivery:
    row = cur.execute(
        "UPDATE outbox SET next_attempt_at = %s, last_error = %s, lease_owner = NULL,"
        f" lease_expires_at = NULL, {_UNKNOWN} WHERE {_HELD} RETURNING {_COLUMNS}",
        (retry_at, error, outcome_unknown, key, relay, attempt, attempt)).fetchone()
    if row is None:
        raise lost_lease(get(cur, key), relay)
    return from_row(row)


def finish(cur: Cursor, key: str, relay: str, *, at: datetime, receipt: str | None,
           error: str | None, outcome_unknown: bool = False,
           attempt: int | None = None) -> Delivery:
    if receipt is not None:
        row = cur.execute(
            "UPDATE outbox SET status = 'sent', sent_at = %s, receipt = %s, lease_owner = NULL,"
            f" lease_expires_at = NULL WHERE {_HELD} RETURNING {_COLUMNS}",
            (at, receipt, key, relay, attempt, attempt)).fetchone()
    else:
        row = cur.execute(
            "UPDATE outbox SET status = 'failed', last_error = COALESCE(%s, last_error),"
            f" lease_owner = NULL, lease_expires_at = NULL, {_UNKNOWN} WHERE {_HELD}"
            f" RETURNING {_COLUMNS}",
            (error, outcome_unknown, key, relay, attempt, attempt)).fetchone()
    if row is None:
        raise lost_lease(get(cur, key), relay)
    return from_row(row)


def of_runs(cur: Cursor, run_ids: Collection[str]) -> list[Delivery]:
    ids = list(dict.fromkeys(run_ids))
    if not ids:
        return []
    rows = cur.execute(f"SELECT {_COLUMNS} FROM outbox WHERE run_id = ANY(%s)"
                       " ORDER BY run_id, event_seq, key", (ids,)).fetchall()
    return [from_row(r) for r in rows]


def next_due(cur: Cursor) -> datetime | None:
    # a row waits for its own lease, and for its run's other rows' (one in flight per run)
    row = cur.execute(
        "SELECT min(greatest(next_attempt_at, coalesce((SELECT max(b.lease_expires_at)"
        " FROM outbox AS b WHERE b.run_id = o.run_id AND b.status = 'queued'), '-infinity')))"
        " FROM outbox AS o WHERE status = 'queued'").fetchone()
    return None if row is None else row[0]


def beat_relay(cur: Cursor, relay: RelayInfo) -> None:
    cur.execute(
        "INSERT INTO relays (id, host, pid, started_at, last_beat, expires_at)"
        " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO UPDATE SET host = excluded.host,"
        " pid = excluded.pid, last_beat = excluded.last_beat, expires_at = excluded.expires_at",
        (relay.id, relay.host, relay.pid, relay.started_at, relay.last_beat, relay.expires_at))


def remove_relay(cur: Cursor, relay_id: str) -> None:
    cur.execute("DELETE FROM relays WHERE id = %s", (relay_id,))


def live_relays(cur: Cursor, now: datetime) -> list[RelayInfo]:
    rows = cur.execute(
        "SELECT id, host, pid, started_at, last_beat, expires_at FROM relays"
        " WHERE expires_at > %s ORDER BY last_beat DESC, id", (now,)).fetchall()
    return [RelayInfo(id=r[0], host=r[1], pid=r[2], started_at=r[3], last_beat=r[4],
                      expires_at=r[5]) for r in rows]
