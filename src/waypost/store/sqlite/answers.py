"""The SQLite store's answers queue (`store/answers.py`): SQL on one connection, called by
`SqliteSide` inside its transactions."""

from __future__ import annotations

import sqlite3
from datetime import datetime

from waypost.store.answers import AnswerRow

_COLUMNS = "key, CAST(body AS BLOB), attempts, done, CAST(outcome AS BLOB)"


def _row(row: tuple[object, ...]) -> AnswerRow:
    key, body, attempts, done, outcome = row
    return AnswerRow(key=str(key), body=bytes(body),  # type: ignore[call-overload]
                     attempts=int(attempts), done=bool(done),  # type: ignore[call-overload]
                     outcome=None if outcome is None else bytes(outcome))  # type: ignore[call-overload]


def accept(db: sqlite3.Connection, key: str, source: str, run_id: str, body: bytes,
           at: datetime) -> bool:
    cur = db.execute("INSERT INTO answers (key, source, run_id, body, received_at)"
                     " VALUES (?, ?, ?, ?, ?) ON CONFLICT (key) DO NOTHING",
                     (key, source, run_id, body.decode(), at.isoformat()))
    return cur.rowcount == 1


def claim(db: sqlite3.Connection, worker: str, now: datetime, lease_s: float,
          limit: int) -> list[AnswerRow]:
    at = now.timestamp()
    keys = [str(r[0]) for r in db.execute(
        "SELECT key FROM answers WHERE done = 0 AND (claim_until IS NULL OR claim_until <= ?)"
        " ORDER BY received_at, key LIMIT ?", (at, max(0, int(limit))))]
    db.executemany("UPDATE answers SET claimed_by = ?, claim_until = ?, attempts = attempts + 1"
                   " WHERE key = ?", [(worker, at + lease_s, key) for key in keys])
    rows = {str(r[0]): r for r in db.execute(
        f"SELECT {_COLUMNS} FROM answers WHERE key IN ({', '.join('?' * len(keys))})", keys)}
    return [_row(rows[key]) for key in keys]


def finish(db: sqlite3.Connection, key: str, worker: str, outcome: bytes,
           at: datetime) -> bool:
    cur = db.execute("UPDATE answers SET done = 1, outcome = ?, done_at = ?, claim_until = NULL"
                     " WHERE key = ? AND claimed_by = ? AND done = 0",
                     (outcome.decode(), at.isoformat(), key, worker))
    return cur.rowcount == 1


def get(db: sqlite3.Connection, key: str) -> AnswerRow | None:
    row = db.execute(f"SELECT {_COLUMNS} FROM answers WHERE key = ?", (key,)).fetchone()
    return None if row is None else _row(row)
