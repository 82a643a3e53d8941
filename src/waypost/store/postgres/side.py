"""The PostgreSQL store's operations whose SQL lives in modules of its own: the change feed
and bearer tokens (`api`), the answers queue (`answers`), the signing keys (`keys`),
imported runs (`imports`), the outbox's claims and the relays (`outbox`), the watchdog's
registrations and deferred checks (`watch`). `PostgresStore` is built on this."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, LiteralString

import psycopg

from waypost.errors import NotFound, step
from waypost.events import Event
from waypost.model import (
    Delivery,
    Grant,
    Origin,
    Packet,
    RelayInfo,
    State,
    Watcher,
    json_decoder,
)
from waypost.store.answers import AnswerRow
from waypost.store.base import Store
from waypost.store.cursors import SCAN_RUNS, InboxScan
from waypost.store.keys import PublicKey
from waypost.store.postgres import answers as answers_sql
from waypost.store.postgres import api as api_sql
from waypost.store.postgres import imports as imports_sql
from waypost.store.postgres import keys as keys_sql
from waypost.store.postgres import outbox as outbox_sql
from waypost.store.postgres import watch as watch_sql
from waypost.store.shared import Skipped, inbox_rows, readable_packets, stop_turn_setting
from waypost.store.windows import NEWEST, decoded


class PostgresSide(Store):
    """Operations through the store's pooled cursors (`_cursor`, `_rows`: PostgresStore)."""

    @abstractmethod
    def _cursor(self, action: str, *, write: bool,
                one_statement: bool = False) -> AbstractContextManager[psycopg.Cursor[Any]]:
        """A cursor on a pooled connection (see PostgresStore)."""

    @abstractmethod
    def _rows(self, action: str, query: LiteralString,
              params: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
        """The rows of one read."""

    # --- agent-host sessions ------------------------------------------------------

    def session_run(self, session_id: str) -> str | None:
        rows = self._rows(f"find the run of session {session_id[:80]!r}",
                          "SELECT id FROM runs WHERE session_id = %s"
                          " ORDER BY created_at DESC, id DESC LIMIT 1", (session_id,))
        return str(rows[0][0]) if rows else None

    def attach_session(self, run_id: str, session_id: str) -> None:
        with self._cursor(f"attach session {session_id[:80]!r} to run {run_id}", write=True,
                          one_statement=True) as cur:
            if cur.execute("UPDATE runs SET session_id = %s WHERE id = %s",
                           (session_id, run_id)).rowcount != 1:
                raise NotFound(f"no run {run_id}", steps=[step("list", why="list the runs")])

    def count_stop_block(self, run_id: str, *, reset: bool = False,
                         turn: str | None = None) -> int:
        marker = stop_turn_setting(run_id)
        with self._cursor(f"count a stop of run {run_id}", write=True) as cur:
            # the run's row locked first: two deliveries of one stop are decided in turn
            row = cur.execute("SELECT stop_blocks FROM runs WHERE id = %s FOR UPDATE",
                              (run_id,)).fetchone()
            if row is None:
                raise NotFound(f"no run {run_id}", steps=[step("list", why="list the runs")])
            if turn is not None and not reset and cur.execute(
                    "SELECT 1 FROM settings WHERE name = %s AND value = %s",
                    (marker, turn)).fetchone() is not None:
                return int(row[0])
            blocks = 0 if reset else int(row[0]) + 1
            cur.execute("UPDATE runs SET stop_blocks = %s WHERE id = %s", (blocks, run_id))
            if reset:
                cur.execute("DELETE FROM settings WHERE name = %s", (marker,))
            elif turn is not None:
                cur.execute("INSERT INTO settings (name, value) VALUES (%s, %s)"
                            " ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                            (marker, turn))
        return blocks

    # --- pages of runs, the change feed and bearer tokens ------------------------------

    def runs_page(self, *, before: str | None, limit: int,
                  states: Collection[State] | None = None, owner: str | None = None,
                  skipped: list[Skipped] | None = None) -> list[Packet]:
        rows = self._rows(
            "read a page of runs",
            "SELECT id, coalesce(packet_text, packet::text) FROM runs"
            " WHERE (%s::text IS NULL OR id < %s) AND (%s::text[] IS NULL OR state = ANY(%s))"
            " AND (%s::text IS NULL OR owner = %s) ORDER BY id DESC LIMIT %s",
            (before, before, *([[s.value for s in states]] * 2 if states else [None, None]),
             owner, owner, limit))
        return readable_packets(json_decoder(Packet), rows, skipped)

    def change_cursor(self) -> int:
        return int(self._rows("read the change cursor", api_sql.HORIZON)[0][0])

    def changes_since(self, cursor: int, *, limit: int = 500) -> tuple[list[Packet], int]:
        with self._cursor("read the changes", write=False) as cur:
            rows, following = api_sql.changes_since(cur, cursor, limit)
        return readable_packets(json_decoder(Packet), rows, None), following

    def put_token(self, grant: Grant, token_hash: str) -> None:
        with self._cursor(f"store token {grant.id}", write=True, one_statement=True) as cur:
            api_sql.put_token(cur, grant, token_hash)

    def token_grant(self, token_hash: str) -> Grant | None:
        with self._cursor("look a token up", write=False) as cur:
            return api_sql.token_grant(cur, token_hash)

    def grants(self) -> list[Grant]:
        with self._cursor("list tokens", write=False) as cur:
            return api_sql.grants(cur)

    def revoke_token(self, token_id: str, *, at: datetime) -> Grant | None:
        with self._cursor(f"revoke token {token_id}", write=True, one_statement=True) as cur:
            return api_sql.revoke_token(cur, token_id, at)

    # --- the signing keys ---------------------------------------------------------------

    def put_key(self, key: PublicKey) -> bool:
        with self._cursor(f"record key {key.keyid[:16]}", write=True,
                          one_statement=True) as cur:
            return keys_sql.put(cur, key)

    def signing_keys(self) -> list[PublicKey]:
        with self._cursor("list signing keys", write=False) as cur:
            return keys_sql.every(cur)

    def retire_key(self, keyid: str, *, at: datetime) -> PublicKey | None:
        with self._cursor(f"retire key {keyid[:16]}", write=True, one_statement=True) as cur:
            return keys_sql.retire(cur, keyid, at)

    # --- imported runs ------------------------------------------------------------------

    @staticmethod
    @abstractmethod
    def _columns(packet: Packet, last: Event) -> tuple[object, ...]:
        """The write path's columns of a packet whose last event is `last`."""

    @staticmethod
    @abstractmethod
    def _insert_events(cur: psycopg.Cursor[Any], events: Sequence[Event]) -> None:
        """Insert `events` as the write path does."""

    def import_run(self, events: Sequence[Event], packet: Packet, origin: Origin) -> bool:
        with self._cursor(f"import run {packet.id}", write=True) as cur:
            put = imports_sql.put(cur, (packet.id, packet.created_at),
                                  self._columns(packet, events[-1]), origin)
            if put:
                self._insert_events(cur, events)
            return put

    def origins(self, run_ids: Collection[str]) -> dict[str, Origin]:
        if not run_ids:
            return {}
        with self._cursor("read where runs came from", write=False) as cur:
            return imports_sql.origins(cur, run_ids)

    def events_window(self, run_id: str, *, before: int | None = None, limit: int,
                      types: Collection[str] = ()) -> list[Event]:
        kinds = list(types)
        with self._cursor(f"read the events of run {run_id}", write=False) as cur:
            cur.execute("SELECT seq, coalesce(body_text, body::text) FROM events"
                        " WHERE run_id = %s AND seq < %s AND (%s OR type = ANY(%s))"
                        " ORDER BY seq DESC LIMIT %s",
                        (run_id, before or NEWEST, not kinds, kinds, limit))
            rows = cur.fetchall()
        return decoded(run_id, reversed(rows))

    # --- the answers queue ----------------------------------------------------------------

    def accept_answer(self, key: str, *, source: str, run_id: str, body: bytes,
                      at: datetime) -> bool:
        with self._cursor(f"store answer {key[:80]}", write=True, one_statement=True) as cur:
            return answers_sql.accept(cur, key, source, run_id, body, at)

    def claim_answers(self, worker: str, *, now: datetime, lease_s: float,
                      limit: int) -> list[AnswerRow]:
        with self._cursor("claim answers", write=True, one_statement=True) as cur:
            return answers_sql.claim(cur, worker, now, lease_s, limit)

    def finish_answer(self, key: str, worker: str, *, outcome: bytes, at: datetime) -> bool:
        with self._cursor(f"finish answer {key[:80]}", write=True, one_statement=True) as cur:
            return answers_sql.finish(cur, key, worker, outcome, at)

    def answer_row(self, key: str) -> AnswerRow | None:
        with self._cursor(f"read answer {key[:80]}", write=False) as cur:
            return answers_sql.get(cur, key)

    # --- the inbox's marks ---------------------------------------------------------------

    def inbox_events(self, reader: str, *, types: Collection[str], limit: int) -> InboxScan:
        if not types:
            return InboxScan(events=[], versions={})
        with self._cursor(f"read the inbox of {reader[:80]}", write=False) as cur:
            versions = api_sql.inbox_versions(cur, reader, SCAN_RUNS)
            rows = api_sql.inbox_events(cur, reader, tuple(types), limit)
        return InboxScan(events=inbox_rows(rows), versions=versions)

    def mark_inbox(self, reader: str, marks: Mapping[str, int], *, acked: bool) -> None:
        if not marks:
            return
        with self._cursor(f"mark the inbox of {reader[:80]}", write=True) as cur:
            api_sql.mark_inbox(cur, reader, marks, acked)

    # --- the outbox's claims and the relays ---------------------------------------

    def claim_deliveries(self, relay: str, *, now: datetime, lease_s: float,
                         limit: int = 1) -> list[Delivery]:
        with self._cursor("claim deliveries", write=True) as cur:
            return outbox_sql.claim(cur, relay, now=now, lease_s=lease_s, limit=limit)

    def retry_delivery(self, key: str, relay: str, *, error: str, retry_at: datetime,
                       outcome_unknown: bool = False, attempt: int | None = None
                       ) -> Delivery:
        with self._cursor(f"reschedule delivery {key}", write=True) as cur:
            return outbox_sql.retry(cur, key, relay, error=error, retry_at=retry_at,
                                    outcome_unknown=outcome_unknown, attempt=attempt)

    def deliveries(self, run_ids: Collection[str]) -> list[Delivery]:
        with self._cursor("read deliveries", write=False) as cur:
            return outbox_sql.of_runs(cur, run_ids)

    def next_delivery_due(self) -> datetime | None:
        with self._cursor("read the next delivery due", write=False) as cur:
            return outbox_sql.next_due(cur)

    def beat_relay(self, relay: RelayInfo) -> None:
        with self._cursor(f"register relay {relay.id}", write=True) as cur:
            outbox_sql.beat_relay(cur, relay)

    def remove_relay(self, relay_id: str) -> None:
        with self._cursor(f"remove relay {relay_id}", write=True) as cur:
            outbox_sql.remove_relay(cur, relay_id)

    def relays(self, *, now: datetime) -> list[RelayInfo]:
        with self._cursor("list relays", write=False) as cur:
            return outbox_sql.live_relays(cur, now)

    # --- the watchdog's registrations ---------------------------------------------

    def beat_watcher(self, watcher: Watcher) -> None:
        with self._cursor(f"register watcher {watcher.id}", write=True) as cur:
            watch_sql.beat_watcher(cur, watcher)

    def remove_watcher(self, watcher_id: str) -> None:
        with self._cursor(f"remove watcher {watcher_id}", write=True) as cur:
            watch_sql.remove_watcher(cur, watcher_id)

    def watchers(self, *, now: datetime) -> list[Watcher]:
        with self._cursor("list watchers", write=False) as cur:
            return watch_sql.live_watchers(cur, now)

    def defer_check(self, run_id: str, *, expected_version: int, at: datetime | None) -> bool:
        with self._cursor(f"defer the next check of {run_id}", write=True) as cur:
            return watch_sql.defer_check(cur, run_id, expected_version, at)
