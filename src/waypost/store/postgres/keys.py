"""The PostgreSQL store's signing keys (`store/keys.py`): SQL on one cursor, called by
`PostgresSide`."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg

from waypost.store.keys import PublicKey

_COLUMNS = "keyid, holder, public_key, valid_from, retired_at"


def _key(row: tuple[Any, ...]) -> PublicKey:
    keyid, holder, public_key, valid_from, retired_at = row
    return PublicKey(keyid=str(keyid), holder=str(holder), public_key=str(public_key),
                     valid_from=valid_from, retired_at=retired_at)


def put(cur: psycopg.Cursor[Any], key: PublicKey) -> bool:
    cur.execute(f"INSERT INTO signing_keys ({_COLUMNS}) VALUES (%s, %s, %s, %s, NULL)"
                " ON CONFLICT (keyid) DO NOTHING",
                (key.keyid, key.holder, key.public_key, key.valid_from))
    return cur.rowcount == 1


def every(cur: psycopg.Cursor[Any]) -> list[PublicKey]:
    cur.execute(f"SELECT {_COLUMNS} FROM signing_keys ORDER BY valid_from, keyid")
    return [_key(r) for r in cur.fetchall()]


def retire(cur: psycopg.Cursor[Any], keyid: str, at: datetime) -> PublicKey | None:
    cur.execute("UPDATE signing_keys SET retired_at = coalesce(retired_at, %s)"
                f" WHERE keyid = %s RETURNING {_COLUMNS}", (at, keyid))
    row = cur.fetchone()
    return None if row is None else _key(row)
