"""The PostgreSQL store's imported runs (`store/imports.py`): SQL on one cursor, called by
`PostgresSide` inside one transaction."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import psycopg

from waypost.model import Origin, to_json
from waypost.store.imports import another_chain
from waypost.store.shared import origin_of

# an imported run: no idempotency key (a start here never finds it), no session, no next
# check (the watchdog never sees it), its origin beside it
INSERT = ("INSERT INTO runs (id, version, state, owner, head_hash, updated_at, next_check_at,"
          " packet, packet_text, idempotency_key, fingerprint, created_at, change_xid,"
          " origin) VALUES (%s, %s, %s, %s, %s, %s, NULL, %s, %s, NULL, 'imported', %s,"
          " pg_current_xact_id(), %s) ON CONFLICT (id) DO NOTHING")


def put(cur: psycopg.Cursor[Any], run: tuple[Any, ...], columns: Sequence[Any],
        origin: Origin) -> bool:
    """Insert the run's row (`run`: its id and created_at; `columns`: the write path's
    columns of its packet); False when a run of that id is stored, with this chain."""
    run_id, created_at = run
    version, state, owner, head, updated, _, body, text = columns
    cur.execute(INSERT, (run_id, version, state, owner, head, updated, body, text,
                         created_at, to_json(origin).decode()))
    if cur.rowcount == 1:
        return True
    stored = cur.execute("SELECT version, head_hash FROM runs WHERE id = %s",
                         (run_id,)).fetchone()
    assert stored is not None  # the conflict that stopped the insert is this run's
    if (stored[0], stored[1]) == (version, head):
        return False
    raise another_chain(run_id, (stored[0], stored[1]), (version, head))


def origins(cur: psycopg.Cursor[Any], run_ids: Collection[str]) -> dict[str, Origin]:
    cur.execute("SELECT id, origin FROM runs WHERE origin IS NOT NULL AND id = ANY(%s)",
                (list(run_ids),))
    return {str(run_id): origin_of(text) for run_id, text in cur.fetchall()}
