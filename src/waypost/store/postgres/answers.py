"""The PostgreSQL store's answers queue (`store/answers.py`): SQL on one cursor, called by
`PostgresSide`."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg

from waypost.store.answers import AnswerRow

_COLUMNS = "key, body, attempts, done, outcome"


def _row(row: tuple[Any, ...]) -> AnswerRow:
    key, body, attempts, done, outcome = row
    return AnswerRow(key=str(key), body=str(body).encode(), attempts=int(attempts),
                     done=bool(done), outcome=None if outcome is None else str(outcome).encode())


def accept(cur: psycopg.Cursor[Any], key: str, source: str, run_id: str, body: bytes,
           at: datetime) -> bool:
    cur.execute("INSERT INTO answers (key, source, run_id, body, received_at)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (key) DO NOTHING",
                (key, source, run_id, body.decode(), at))
    return cur.rowcount == 1


def claim(cur: psycopg.Cursor[Any], worker: str, now: datetime, lease_s: float,
          limit: int) -> list[AnswerRow]:
    at = now.timestamp()
    rows = cur.execute(
        "UPDATE answers SET claimed_by = %s, claim_until = %s, attempts = attempts + 1"
        " WHERE key IN (SELECT key FROM answers WHERE NOT done"
        " AND (claim_until IS NULL OR claim_until <= %s) ORDER BY received_at, key"
        " LIMIT %s FOR UPDATE SKIP LOCKED)"
        f" RETURNING {_COLUMNS}, received_at",
        (worker, at + lease_s, at, max(0, int(limit)))).fetchall()
    rows.sort(key=lambda r: (r[-1], r[0]))
    return [_row(r[:-1]) for r in rows]


def finish(cur: psycopg.Cursor[Any], key: str, worker: str, outcome: bytes,
           at: datetime) -> bool:
    cur.execute("UPDATE answers SET done = true, outcome = %s, done_at = %s, claim_until = NULL"
                " WHERE key = %s AND claimed_by = %s AND NOT done",
                (outcome.decode(), at, key, worker))
    return cur.rowcount == 1


def get(cur: psycopg.Cursor[Any], key: str) -> AnswerRow | None:
    row = cur.execute(f"SELECT {_COLUMNS} FROM answers WHERE key = %s", (key,)).fetchone()
    return None if row is None else _row(row)
