"""The SQLite store's operations whose SQL lives in modules of its own: the change feed and
bearer tokens (`api`), the answers queue (`answers`), the signing keys (`keys`), imported
runs (`imports`), the outbox's claims and the relays (`outbox`), the watchdog's
registrations and deferred checks (`watch`). Each module is imported where it is used, so
a heartbeat loads none of them. `SqliteStore` is built on this."""

from __future__ import annotations

import sqlite3
from abc import abstractmethod
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING

from waypost.errors import NotFound, step
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
from waypost.store.base import Store
from waypost.store.cursors import SCAN_RUNS, InboxScan
from waypost.store.shared import Skipped, inbox_rows, readable_packets
from waypost.store.windows import NEWEST, decoded

if TYPE_CHECKING:  # made where they are used: a heartbeat makes none
    from waypost.events import Event
    from waypost.store.answers import AnswerRow
    from waypost.store.keys import PublicKey
    from waypost.store.records import AlwaysHeld

_Transaction = Callable[[str], AbstractContextManager[sqlite3.Connection]]


class SqliteSide(Store):
    """Operations on the store's one connection, through the store's own lock and
    transactions (`_reading`, `_writing`, set by `SqliteStore`)."""

    _reading: _Transaction
    _writing: _Transaction

    @property
    @abstractmethod
    def _db(self) -> sqlite3.Connection | None:
        """The connection; None while no store file exists (reads create none)."""

    # --- agent-host sessions ------------------------------------------------------------

    def attach_session(self, run_id: str, session_id: str) -> None:
        with self._writing(f"attach session {session_id[:80]!r} to run {run_id}") as db:
            if db.execute("UPDATE runs SET session_id = ? WHERE id = ?",
                          (session_id, run_id)).rowcount != 1:
                raise NotFound(f"no run {run_id}", steps=[step("list", why="list the runs")])

    # --- pages of runs, the change feed and bearer tokens ------------------------------

    def runs_page(self, *, before: str | None, limit: int,
                  states: Collection[State] | None = None, owner: str | None = None,
                  skipped: list[Skipped] | None = None) -> list[Packet]:
        sql, args = "SELECT id, CAST(packet AS BLOB) FROM runs WHERE 1", list[object]()
        if before is not None:
            sql += " AND id < ?"
            args.append(before)
        if states:
            sql += f" AND state IN ({', '.join('?' * len(states))})"
            args.extend(s.value for s in states)
        if owner is not None:
            sql += " AND owner = ?"
            args.append(owner)
        with self._reading("read a page of runs") as db:
            rows = db.execute(sql + " ORDER BY id DESC LIMIT ?", (*args, limit)).fetchall()
        return readable_packets(json_decoder(Packet), rows, skipped)

    def change_cursor(self) -> int:
        from waypost.store.sqlite import api as sqlite_api

        with self._reading("read the change cursor") as db:
            return sqlite_api.change_cursor(db)

    def changes_since(self, cursor: int, *, limit: int = 500) -> tuple[list[Packet], int]:
        from waypost.store.sqlite import api as sqlite_api

        with self._reading("read the changes") as db:
            rows, following = sqlite_api.changes_since(db, cursor, limit)
        return readable_packets(json_decoder(Packet), rows, None), following

    def put_token(self, grant: Grant, token_hash: str) -> None:
        from waypost.store.sqlite import api as sqlite_api

        with self._writing(f"store token {grant.id}") as db:
            sqlite_api.put_token(db, grant, token_hash)

    def token_grant(self, token_hash: str) -> Grant | None:
        from waypost.store.sqlite import api as sqlite_api

        if self._db is None:
            return None  # no store yet, so no tokens
        with self._reading("look a token up") as db:
            return sqlite_api.token_grant(db, token_hash)

    def grants(self) -> list[Grant]:
        from waypost.store.sqlite import api as sqlite_api

        if self._db is None:
            return []
        with self._reading("list tokens") as db:
            return sqlite_api.grants(db)

    def revoke_token(self, token_id: str, *, at: datetime) -> Grant | None:
        from waypost.store.sqlite import api as sqlite_api

        with self._writing(f"revoke token {token_id}") as db:
            return sqlite_api.revoke_token(db, token_id, at)

    # --- the signing keys ---------------------------------------------------------------

    def put_key(self, key: PublicKey) -> bool:
        from waypost.store.sqlite import keys

        with self._writing(f"record key {key.keyid[:16]}") as db:
            return keys.put(db, key)

    def signing_keys(self) -> list[PublicKey]:
        from waypost.store.sqlite import keys

        if self._db is None:
            return []  # no store yet, so no keys
        with self._reading("list signing keys") as db:
            return keys.every(db)

    def retire_key(self, keyid: str, *, at: datetime) -> PublicKey | None:
        from waypost.store.sqlite import keys

        with self._writing(f"retire key {keyid[:16]}") as db:
            return keys.retire(db, keyid, at)

    # --- imported runs ------------------------------------------------------------------

    def import_run(self, events: Sequence[Event], packet: Packet, origin: Origin) -> bool:
        from waypost.store.sqlite import imports

        with self._writing(f"import run {packet.id}") as db:
            return imports.put(db, events, packet, origin)

    def origins(self, run_ids: Collection[str]) -> dict[str, Origin]:
        from waypost.store.sqlite import imports

        if self._db is None or not run_ids:
            return {}
        with self._reading("read where runs came from") as db:
            return imports.origins(db, run_ids)

    def events_window(self, run_id: str, *, before: int | None = None, limit: int,
                      types: Collection[str] = ()) -> list[Event]:
        kinds = tuple(types)
        if self._db is None:
            return []
        query = ("SELECT seq, CAST(body AS BLOB) FROM events WHERE run_id = ? AND seq < ?"
                 + (f" AND type IN ({', '.join('?' * len(kinds))})" if kinds else "")
                 + " ORDER BY seq DESC LIMIT ?")
        with self._reading(f"read the events of run {run_id}") as db:
            rows = db.execute(query, (run_id, before or NEWEST, *kinds, limit)).fetchall()
        return decoded(run_id, reversed(rows))

    # --- the answers queue ----------------------------------------------------------------

    def accept_answer(self, key: str, *, source: str, run_id: str, body: bytes,
                      at: datetime) -> bool:
        from waypost.store.sqlite import answers

        with self._writing(f"store answer {key[:80]}") as db:
            return answers.accept(db, key, source, run_id, body, at)

    def claim_answers(self, worker: str, *, now: datetime, lease_s: float,
                      limit: int) -> list[AnswerRow]:
        from waypost.store.sqlite import answers

        with self._writing("claim answers") as db:
            return answers.claim(db, worker, now, lease_s, limit)

    def finish_answer(self, key: str, worker: str, *, outcome: bytes, at: datetime) -> bool:
        from waypost.store.sqlite import answers

        with self._writing(f"finish answer {key[:80]}") as db:
            return answers.finish(db, key, worker, outcome, at)

    def answer_row(self, key: str) -> AnswerRow | None:
        from waypost.store.sqlite import answers

        if self._db is None:
            return None
        with self._reading(f"read answer {key[:80]}") as db:
            return answers.get(db, key)

    # --- the outbox's claims and the relays --------------------------------------------

    def claim_deliveries(self, relay: str, *, now: datetime, lease_s: float,
                         limit: int = 1) -> list[Delivery]:
        from waypost.store.sqlite import outbox as sqlite_outbox

        with self._writing("claim deliveries") as db:
            return sqlite_outbox.claim(db, relay, now=now, lease_s=lease_s, limit=limit)

    def deliveries(self, run_ids: Collection[str]) -> list[Delivery]:
        from waypost.store.sqlite import outbox as sqlite_outbox

        with self._reading("read deliveries") as db:
            return sqlite_outbox.of_runs(db, run_ids)

    def next_delivery_due(self) -> datetime | None:
        from waypost.store.sqlite import outbox as sqlite_outbox

        with self._reading("read the next delivery due") as db:
            return sqlite_outbox.next_due(db)

    def beat_relay(self, relay: RelayInfo) -> None:
        from waypost.store.sqlite import outbox as sqlite_outbox

        with self._writing(f"register relay {relay.id}") as db:
            sqlite_outbox.beat_relay(db, relay)

    def remove_relay(self, relay_id: str) -> None:
        from waypost.store.sqlite import outbox as sqlite_outbox

        with self._writing(f"remove relay {relay_id}") as db:
            sqlite_outbox.remove_relay(db, relay_id)

    def relays(self, *, now: datetime) -> list[RelayInfo]:
        from waypost.store.sqlite import outbox as sqlite_outbox

        with self._reading("list relays") as db:
            return sqlite_outbox.live_relays(db, now)

    # --- the inbox's marks ---------------------------------------------------------------

    def inbox_events(self, reader: str, *, types: Collection[str], limit: int) -> InboxScan:
        from waypost.store.sqlite import api as sqlite_api

        if self._db is None or not types:
            return InboxScan(events=[], versions={})  # no store yet, so no runs
        with self._reading(f"read the inbox of {reader[:80]}") as db:
            versions = sqlite_api.inbox_versions(db, reader, SCAN_RUNS)
            rows = sqlite_api.inbox_events(db, reader, tuple(types), limit)
        return InboxScan(events=inbox_rows(rows), versions=versions)

    def mark_inbox(self, reader: str, marks: Mapping[str, int], *, acked: bool) -> None:
        from waypost.store.sqlite import api as sqlite_api

        if self._db is None or not marks:
            return
        with self._writing(f"mark the inbox of {reader[:80]}") as db:
            sqlite_api.mark_inbox(db, reader, marks, acked)

    # --- the watchdog's registrations ---------------------------------------------------

    def beat_watcher(self, watcher: Watcher) -> None:
        from waypost.store.sqlite import watch as sqlite_watch

        with self._writing(f"register watcher {watcher.id}") as db:
            sqlite_watch.beat_watcher(db, watcher)

    def remove_watcher(self, watcher_id: str) -> None:
        from waypost.store.sqlite import watch as sqlite_watch

        with self._writing(f"remove watcher {watcher_id}") as db:
            sqlite_watch.remove_watcher(db, watcher_id)

    def watchers(self, *, now: datetime) -> list[Watcher]:
        from waypost.store.sqlite import watch as sqlite_watch

        with self._reading("list watchers") as db:
            return sqlite_watch.live_watchers(db, now)

    def sweeper_lock(self, owner: str | None = None) -> AlwaysHeld:
        """Every watcher sweeps: one machine's writes serialise (see `AlwaysHeld`)."""
        from waypost.store.records import AlwaysHeld

        return AlwaysHeld()

    def defer_check(self, run_id: str, *, expected_version: int, at: datetime | None) -> bool:
        from waypost.store.sqlite import watch as sqlite_watch

        with self._writing(f"defer the next check of {run_id}") as db:
            return sqlite_watch.defer_check(db, run_id, expected_version, at)
