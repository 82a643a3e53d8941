"""The SQLite store's imported runs (`store/imports.py`): SQL on one connection, called by
`SqliteSide` inside its transactions."""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Sequence

from waypost.events import Event
from waypost.model import Origin, Packet, json_decoder, to_json
from waypost.store.imports import another_chain
from waypost.store.sqlite import write as sqlite_write

# an imported run: no idempotency key (a start here never finds it), no session, no next
# check (the watchdog never sees it), its origin beside it
INSERT = ("INSERT INTO runs (id, version, state, owner, head_hash, updated_at, next_check_at,"
          " packet, idempotency_key, fingerprint, created_at, change_pos, origin)"
          " VALUES (?, ?, ?, ?, ?, ?, NULL, ?, NULL, 'imported', ?,"
          f" {sqlite_write.NEXT_CHANGE}, ?) ON CONFLICT (id) DO NOTHING")


def put(db: sqlite3.Connection, events: Sequence[Event], packet: Packet,
        origin: Origin) -> bool:
    version, state, owner, head, updated, _, body = sqlite_write.columns(packet, events[-1])
    cur = db.execute(INSERT, (packet.id, version, state, owner, head, updated, body,
                              packet.created_at.isoformat(), to_json(origin).decode()))
    if cur.rowcount == 1:
        sqlite_write.insert_events(db, events)
        return True
    stored = db.execute("SELECT version, head_hash FROM runs WHERE id = ?",
                        (packet.id,)).fetchone()
    if tuple(stored) == (version, head):
        return False
    raise another_chain(packet.id, (stored[0], stored[1]), (version, head))


def origins(db: sqlite3.Connection, run_ids: Collection[str]) -> dict[str, Origin]:
    ids = list(run_ids)
    decoder = json_decoder(Origin)
    found: dict[str, Origin] = {}
    for start in range(0, len(ids), 500):  # bounded by SQLite's host parameters
        page = ids[start:start + 500]
        found.update((run_id, decoder.decode(text)) for run_id, text in db.execute(
            f"SELECT id, origin FROM runs WHERE origin IS NOT NULL AND id IN"
            f" ({', '.join('?' * len(page))})", page))
    return found
