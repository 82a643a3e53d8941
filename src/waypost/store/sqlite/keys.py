"""The SQLite store's signing keys (`store/keys.py`): SQL on one connection, called by
`SqliteSide` inside its transactions."""

from __future__ import annotations

import sqlite3
from datetime import datetime

from waypost.store.keys import PublicKey

_COLUMNS = "keyid, holder, public_key, valid_from, retired_at"


def _key(row: tuple[str, str, str, str, str | None]) -> PublicKey:
    keyid, holder, public_key, valid_from, retired_at = row
    return PublicKey(keyid=keyid, holder=holder, public_key=public_key,
                     valid_from=datetime.fromisoformat(valid_from),
                     retired_at=None if retired_at is None else datetime.fromisoformat(retired_at))


def put(db: sqlite3.Connection, key: PublicKey) -> bool:
    cur = db.execute(f"INSERT INTO signing_keys ({_COLUMNS}) VALUES (?, ?, ?, ?, NULL)"
                     " ON CONFLICT (keyid) DO NOTHING",
                     (key.keyid, key.holder, key.public_key, key.valid_from.isoformat()))
    return cur.rowcount == 1


def every(db: sqlite3.Connection) -> list[PublicKey]:
    return [_key(r) for r in db.execute(
        f"SELECT {_COLUMNS} FROM signing_keys ORDER BY valid_from, keyid")]


def retire(db: sqlite3.Connection, keyid: str, at: datetime) -> PublicKey | None:
    db.execute("UPDATE signing_keys SET retired_at = ? WHERE keyid = ? AND retired_at IS NULL",
               (at.isoformat(), keyid))
    row = db.execute(f"SELECT {_COLUMNS} FROM signing_keys WHERE keyid = ?",
                     (keyid,)).fetchone()
    return None if row is None else _key(row)
