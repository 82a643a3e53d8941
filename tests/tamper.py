"""For the history tests: rewrite stored rows behind the store's back, as someone with write
access to the database would, on either backend."""

from __future__ import annotations

import contextlib
import sqlite3

from waypost.events import Event
from waypost.model import Packet, to_json
from waypost.store import Store
from waypost.store.postgres.store import PostgresStore
from waypost.store.sqlite.store import SqliteStore


def overwrite_event(store: Store, event: Event) -> None:
    """Replace the stored event (run_id, seq) with `event`, exactly as given."""
    body = to_json(event).decode()
    if isinstance(store, SqliteStore):
        with contextlib.closing(sqlite3.connect(store.path)) as db:
            db.execute("UPDATE events SET actor = ?, body = ? WHERE run_id = ? AND seq = ?",
                       (event.actor, body, event.run_id, event.seq))
            db.commit()
        return
    assert isinstance(store, PostgresStore)
    with store.target.connect() as conn:
        conn.execute("UPDATE events SET actor = %s, body = %s::jsonb, body_text = NULL"
                     " WHERE run_id = %s AND seq = %s",
                     (event.actor, body, event.run_id, event.seq))


def overwrite_packet(store: Store, packet: Packet) -> None:
    """Replace the stored packet of `packet.id` (the columns beside it are left alone)."""
    body = to_json(packet).decode()
    if isinstance(store, SqliteStore):
        with contextlib.closing(sqlite3.connect(store.path)) as db:
            db.execute("UPDATE runs SET packet = ? WHERE id = ?", (body, packet.id))
            db.commit()
        return
    assert isinstance(store, PostgresStore)
    with store.target.connect() as conn:
        conn.execute("UPDATE runs SET packet = %s::jsonb, packet_text = NULL WHERE id = %s",
                     (body, packet.id))
