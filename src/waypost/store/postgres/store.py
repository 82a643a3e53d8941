"""The PostgreSQL store, for many hosts sharing one store: psycopg 3 and a connection pool.

Every write is one short transaction guarded in SQL (`UPDATE … WHERE id = %s AND version
= %s`): a miss becomes VersionConflict or NotFound, never a read-check-write in Python.
Packets and events are `jsonb`; a trigger announces each run starting or changing state
on `waypost_runs.<schema>` (see `listen`). Driver errors never leave this module unwrapped.
A write's first statement writes or locks a row of the store's tables: the transaction's id
is taken there, under that table's lock, which is how the change feed tells the store's
writers from the other transactions on the server (`api.HORIZON`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, LiteralString, NoReturn

import msgspec
import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from waypost.core.due import next_check_at
from waypost.core.writes import Deferral, Due, RunWrite, Snapshot, in_force
from waypost.durations import utcnow
from waypost.errors import (
    IdempotencyConflict,
    IntegrityError,
    NotFound,
    StoreBusy,
    StoreError,
    VersionConflict,
    step,
)
from waypost.events import Event
from waypost.model import Delivery, Packet, State, to_json
from waypost.store.postgres import outbox as outbox_sql
from waypost.store.postgres import watch as watch_sql
from waypost.store.postgres.live import AdvisoryLock, RunListener, driver_errors
from waypost.store.postgres.setup import (
    CONNECT_TIMEOUT,
    Database,
    latest_version,
    migrate,
    parse_url,
    schema_versions,
    skew_diagnosis,
    writer_refusal,
)
from waypost.store.postgres.side import PostgresSide
from waypost.store.records import Diagnosis, SchemaState, Status
from waypost.store.shared import (
    DueRow,
    Meanwhile,
    Skipped,
    check_setting,
    decode_packet,
    due_page,
    head_changed,
    origin_of,
    readable_packets,
)
from waypost.store.shared import busy_timeout as busy_timeout_setting

POOL_MAX_SIZE = 8
_packet_decoder = msgspec.json.Decoder(Packet)
_event_decoder = msgspec.json.Decoder(Event)
_NUL = b"\\u0000"


# The version-guarded update of a run's row. next_check_at is a lower bound (the rule of
# `check_moves`, stated again in SQL): left as it is, like every other indexed column a
# heartbeat leaves unchanged, the update stays HOT (no index entry written).
_UPDATE_RUN: LiteralString = (
    "UPDATE runs SET version = %s, state = %s, owner = %s, head_hash = %s,"
    " updated_at = %s, packet = %s, packet_text = %s, change_xid = pg_current_xact_id(),"
    " next_check_at = CASE WHEN next_check_at IS NULL OR %s::timestamptz IS NULL"
    " OR %s < next_check_at OR next_check_at <= %s THEN %s ELSE next_check_at END"
    " WHERE id = %s AND version = %s")
# ... and only if the run's head event is still stored as the write read it, or wrote it
# (`RunWrite.head`, as `_jsonb` stores it): a head edited since is not sealed under a new one
_HEAD_GUARD: LiteralString = (
    " AND EXISTS (SELECT 1 FROM events h WHERE h.run_id = runs.id AND h.seq = runs.version"
    " AND h.body = %s::jsonb AND h.body_text IS NOT DISTINCT FROM %s)")
_UPDATE_RUN_HEAD: LiteralString = _UPDATE_RUN + _HEAD_GUARD
_EVENT_COLUMNS: LiteralString = "run_id, seq, type, at, actor, body, body_text"
# a run's head event as stored, beside its row (what a write checks first,
# `history.check_head`)
_HEAD_EVENT: LiteralString = ("(SELECT coalesce(body_text, body::text) FROM events"
                              " WHERE run_id = runs.id AND seq = runs.version)")


def _jsonb(obj: object) -> tuple[str, str | None]:
    """(what the jsonb column gets, the exact JSON when jsonb would change it).

    jsonb cannot hold U+0000 and turns -0.0 into 0: such documents keep their exact text
    beside a jsonb copy (NUL shown as U+FFFD), so they read back identical and verify.
    """
    return _jsonb_text(to_json(obj))


def _jsonb_text(exact: bytes | str) -> tuple[str, str | None]:
    """`_jsonb` of a document already JSON: as written, or as read back (jsonb's own text
    holds neither a NUL nor -0.0, so a document read back is stored the way it reads)."""
    if isinstance(exact, str):
        exact = exact.encode()
    if _NUL not in exact and b"-0.0" not in exact:
        return exact.decode(), None
    return exact.replace(_NUL, b"\\ufffd").decode(), exact.decode()


class PostgresStore(PostgresSide):
    """A pool of connections in autocommit mode; each write opens its own transaction."""

    def __init__(self, url: str, *, migrate_schema: bool = True,
                 pool_size: int = POOL_MAX_SIZE, busy_timeout: float | None = None) -> None:
        self.target: Database = parse_url(url, busy_s=busy_timeout_setting(busy_timeout))
        self.url = self.target.display
        self.schema = self.target.schema
        self.migrated_now: list[int] = []
        with driver_errors(f"open the PostgreSQL store at {self.url}"), \
                self.target.connect() as conn:
            if migrate_schema:
                self.migrated_now = migrate(conn, self.schema)
            # a schema newer than this waypost knows may take no writes from it
            self._refusal = writer_refusal(conn, self.url)
        self._pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            self.target.conninfo, kwargs=self.target.connect_kwargs(), min_size=1,
            max_size=pool_size, open=False, name=f"waypost.{self.schema}")
        try:
            self._pool.open(wait=True, timeout=CONNECT_TIMEOUT)
        except PoolTimeout as exc:
            self._pool.close()
            raise StoreError(f"cannot open a connection pool to {self.url}: {exc}") from exc

    def __repr__(self) -> str:
        return f"PostgresStore({self.url!r}, schema={self.schema!r})"

    # --- plumbing ---------------------------------------------------------------------

    @contextmanager
    def _cursor(self, action: str, *, write: bool,
                one_statement: bool = False) -> Iterator[psycopg.Cursor[Any]]:
        """A cursor on a pooled connection; for a `write`, inside one transaction unless
        it is `one_statement` (a statement is a transaction of its own), and refused when
        the store takes no writes from this waypost."""
        if write and self._refusal is not None:
            raise self._refusal
        try:
            with driver_errors(action, self.url), self._pool.connection() as conn:
                if write and not one_statement:
                    with conn.transaction(), conn.cursor() as cur:
                        yield cur
                else:
                    with conn.cursor() as cur:
                        yield cur
        except PoolTimeout as exc:  # every pooled connection stayed in use: try again
            raise StoreBusy(f"store busy, try again: no connection to {self.url} came free, "
                            f"so this process could not {action} ({exc}); nothing was written",
                            hint="try again; if it persists, check the server with: "
                            "waypost doctor") from exc

    def _rows(self, action: str, query: LiteralString,
              params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        with self._cursor(action, write=False) as cur:
            return cur.execute(query, params).fetchall()

    # --- writes -----------------------------------------------------------------------

    def create(self, event: Event, packet: Packet, *, fingerprint: str,
               session_id: str | None = None) -> tuple[Packet, bool]:
        key = packet.idempotency_key
        with self._cursor(f"create run {packet.id}", write=True) as cur:
            cur.execute(
                "INSERT INTO runs (id, version, state, owner, head_hash, updated_at,"
                " next_check_at, packet, packet_text, idempotency_key, fingerprint, created_at,"
                " session_id, change_xid) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s,"
                " %s, %s, pg_current_xact_id())"
                " ON CONFLICT (idempotency_key) DO NOTHING RETURNING id",
                (packet.id, *self._columns(packet, event), key, fingerprint, packet.created_at,
                 session_id))
            if cur.fetchone() is not None:
                self._insert_events(cur, [event])
                return packet, True
            cur.execute("SELECT id, fingerprint FROM runs WHERE idempotency_key = %s", (key,))
            row = cur.fetchone()
        assert row is not None  # the conflict that stopped the insert is this key's run
        if row[1] != fingerprint:
            raise IdempotencyConflict(
                f"idempotency key {key!r} was used for run {row[0]} with other parameters",
                hint="use a new key", steps=[step("read", row[0], why="or inspect the first run")],
            )
        return self.load(row[0]).packet, False

    def commit_write(self, write: RunWrite) -> None:
        if len(write.events) == 1 and not write.outbox:
            # the common write (a heartbeat): one statement, its own transaction, one round
            # trip instead of four (BEGIN, UPDATE, INSERT, COMMIT)
            with self._cursor(f"write run {write.run_id}", write=True,
                              one_statement=True) as cur:
                update = _UPDATE_RUN if write.head is None else _UPDATE_RUN_HEAD
                cur.execute(f"WITH moved AS ({update} RETURNING id) INSERT INTO events"
                            f" ({_EVENT_COLUMNS}) SELECT id, %s, %s, %s, %s, %s, %s FROM moved",
                            (*self._update_params(write, guard=True),
                             *self._event_params(write.events[0])[1:]))
                if cur.rowcount != 1:
                    self._explain_miss(cur, write.run_id, write.expected_version)
            return
        with self._cursor(f"write run {write.run_id}", write=True) as cur:
            self._write_runs(cur, [write])

    def _write_runs(self, cur: psycopg.Cursor[Any], writes: Sequence[RunWrite]) -> None:
        """Write runs in order (a run's writes may chain), each kind of statement once, as
        one pipelined batch. One write's guard is checked here; a page's (several writes)
        were checked under row locks before, so every row must match."""
        items = [item for w in writes for item in w.outbox]
        outbox_sql.lock_finals(cur, items)
        if len(writes) == 1 and writes[0].head is not None:  # a page's heads were checked
            cur.execute(_UPDATE_RUN_HEAD, self._update_params(writes[0], guard=True))
        else:
            cur.executemany(_UPDATE_RUN, [self._update_params(w) for w in writes])
        if cur.rowcount != len(writes):
            if len(writes) == 1:
                self._explain_miss(cur, writes[0].run_id, writes[0].expected_version)
            raise StoreError(f"a batch of {len(writes)} guarded writes changed {cur.rowcount}"
                             " rows", hint="run the sweep again")
        self._insert_events(cur, [e for w in writes for e in w.events])
        outbox_sql.queue(cur, items)

    def _update_params(self, write: RunWrite, *, guard: bool = False) -> tuple[object, ...]:
        """`_UPDATE_RUN`'s parameters; with `guard`, `_HEAD_GUARD`'s too (of a write that
        names its head)."""
        version, state, owner, head, updated, due, *packet = self._columns(
            write.packet, write.events[-1])
        guards = _jsonb_text(write.head) if guard and write.head is not None else ()
        return (version, state, owner, head, updated, *packet, due, due, updated, due,
                write.run_id, write.expected_version, *guards)

    @staticmethod
    def _columns(packet: Packet, last: Event) -> tuple[object, ...]:
        return (packet.version, packet.state.value, packet.owner, last.hash,
                packet.updated_at, next_check_at(packet), *_jsonb(packet))

    @staticmethod
    def _explain_miss(cur: psycopg.Cursor[Any], run_id: str, expected: int) -> NoReturn:
        row = cur.execute("SELECT version FROM runs WHERE id = %s", (run_id,)).fetchone()
        if row is None:
            raise NotFound(f"no run {run_id}", steps=[step("list", why="list the runs")])
        if row[0] == expected:  # the version held: the head guard did not
            raise head_changed(run_id, expected)
        raise VersionConflict(
            f"run {run_id} is at version {row[0]}, not {expected}: another write came first",
            steps=[step("read", run_id, why="read it again")],
        )

    @staticmethod
    def _insert_events(cur: psycopg.Cursor[Any], events: Sequence[Event]) -> None:
        cur.executemany(f"INSERT INTO events ({_EVENT_COLUMNS})"
                        " VALUES (%s, %s, %s, %s, %s, %s, %s)",
                        [PostgresStore._event_params(e) for e in events])

    @staticmethod
    def _event_params(e: Event) -> tuple[object, ...]:
        return (e.run_id, e.seq, e.type, e.at, e.actor, *_jsonb(e))

    # --- reads ------------------------------------------------------------------------

    def load(self, run_id: str) -> Snapshot:
        rows = self._rows(f"read run {run_id}",
                          "SELECT coalesce(packet_text, packet::text), head_hash,"
                          f" {_HEAD_EVENT}, origin FROM runs WHERE id = %s", (run_id,))
        if not rows:
            raise NotFound(f"no run {run_id}", steps=[step("list", why="list the runs")])
        packet, head_hash, head, origin = rows[0]
        return Snapshot(decode_packet(_packet_decoder, run_id, packet), head_hash, head,
                        None if origin is None else origin_of(origin))

    def events(self, run_id: str) -> list[Event]:
        rows = self._rows(f"read the events of run {run_id}",
                          "SELECT seq, coalesce(body_text, body::text) FROM events"
                          " WHERE run_id = %s ORDER BY seq", (run_id,))
        if not rows:
            raise NotFound(f"no run {run_id}", steps=[step("list", why="list the runs")])
        events = []
        for seq, body in rows:
            try:
                events.append(_event_decoder.decode(body))
            except msgspec.MsgspecError as exc:
                raise IntegrityError(f"run {run_id} seq {seq}: unreadable event: {exc}") from exc
        return events

    def list_runs(self, *, states: Collection[State] | None = None, owner: str | None = None,
                  limit: int | None = None,
                  skipped: list[Skipped] | None = None) -> list[Packet]:
        query: LiteralString = "SELECT id, coalesce(packet_text, packet::text) FROM runs"
        where: list[LiteralString] = []
        params: list[object] = []
        if states:
            where.append("state = ANY(%s)")
            params.append([s.value for s in states])
        if owner is not None:
            where.append("owner = %s")
            params.append(owner)
        if where:
            query += " WHERE " + " AND ".join(where)
        query += " ORDER BY updated_at DESC, id DESC LIMIT %s"
        params.append(limit)
        rows = self._rows("list runs", query, params)
        return readable_packets(_packet_decoder, rows, skipped)

    def run_ids(self) -> list[str]:
        return [r[0] for r in self._rows("list run ids",
                                         "SELECT id FROM runs ORDER BY created_at, id")]

    # --- blobs ------------------------------------------------------------------------

    def put_blob(self, data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        with self._cursor("store a blob", write=True) as cur:
            cur.execute("INSERT INTO blobs (sha256, size, data, stored_at)"
                        " VALUES (%s, %s, %s, now()) ON CONFLICT (sha256)"
                        " DO UPDATE SET stored_at = excluded.stored_at",
                        (digest, len(data), data))
        return digest

    def get_blob(self, sha256: str) -> bytes:
        rows = self._rows(f"read blob {sha256}", "SELECT data FROM blobs WHERE sha256 = %s",
                          (sha256,))
        if not rows:
            raise NotFound(f"no blob {sha256}")
        return bytes(rows[0][0])

    # --- the outbox (the rest of it, and the relays: `PostgresSide`) -------------------

    def finish_delivery(self, key: str, relay: str, *, at: datetime,
                        receipt: str | None = None, error: str | None = None,
                        write: RunWrite | None = None, outcome_unknown: bool = False,
                        attempt: int | None = None) -> Delivery:
        with self._cursor(f"settle delivery {key}", write=True) as cur:
            settled = outbox_sql.finish(cur, key, relay, at=at, receipt=receipt, error=error,
                                        outcome_unknown=outcome_unknown, attempt=attempt)
            if write is not None:
                self._write_runs(cur, [write])
        return settled

    # --- the watchdog (its registrations: `PostgresSide`) -------------------------------

    def due_runs(self, *, now: datetime, owner: str | None = None,
                 after: tuple[datetime, str] | None = None, limit: int = 500,
                 skipped: list[Skipped] | None = None) -> list[Due]:
        def fetch(after: tuple[datetime, str] | None, limit: int) -> list[DueRow]:
            with self._cursor("list due runs", write=False) as cur:
                return watch_sql.due_rows(cur, now=now, owner=owner, after=after, limit=limit)

        return due_page(fetch, _packet_decoder, after=after, limit=limit, skipped=skipped)

    def commit_writes(self, writes: Sequence[RunWrite | Deferral], *,
                      meanwhile: Callable[[], None] | None = None) -> list[bool]:
        if not writes:
            return []
        with Meanwhile(meanwhile) as aside, \
                self._cursor(f"commit {len(writes)} writes", write=True) as cur:
            # the rows are locked: versions read now stay true until the commit
            applies = in_force(writes, watch_sql.lock_versions(cur, {w.run_id for w in writes}))
            runs = [w for w, a in zip(writes, applies, strict=True)
                    if a and isinstance(w, RunWrite)]
            later = [w for w, a in zip(writes, applies, strict=True)
                     if a and isinstance(w, Deferral)]
            # a run's deferral (always its last write) expects the version its writes leave
            if runs:
                self._write_runs(cur, runs)
            if later:
                watch_sql.defer_checks(cur, later)
                if cur.rowcount != len(later):
                    raise StoreError(f"{len(later)} guarded deferrals changed {cur.rowcount}"
                                     " rows", hint="run the sweep again")
            aside.start()  # until the COMMIT ends, and the connection is back in the pool
        return applies

    def _prune_runs(self, before: datetime, states: list[str]) -> tuple[int, int, int, int]:
        with self._cursor("prune runs", write=True) as cur:
            return watch_sql.prune_batch(cur, before, states)

    def _prune_blobs(self, blobs_before: datetime, watchers_before: datetime) -> tuple[int, int]:
        with self._cursor("prune blobs", write=True) as cur:
            found = watch_sql.prune_blobs(cur, blobs_before)
            watch_sql.prune_watchers(cur, watchers_before)
        return found

    # --- live coordination and operations ---------------------------------------------

    def listen(self) -> RunListener:
        """A listener for runs starting and changing state (close it, or use it in `with`)."""
        return RunListener(self.target)

    def advisory_lock(self, name: str) -> AdvisoryLock:
        """A named lock at most one session of this store holds (e.g. "sweeper")."""
        return AdvisoryLock(self.target, name)

    def sweeper_lock(self, owner: str | None = None) -> AdvisoryLock:
        """An advisory lock per scope: one active sweeper for every run, and one for each
        owner that `waypost watch --owner` watches on its own."""
        return self.advisory_lock("sweeper" if owner is None else f"sweeper:owner={owner}")

    def initialise(self) -> None:
        """Opening has done it, unless told not to migrate (`waypost doctor`)."""
        with driver_errors(f"create the PostgreSQL store at {self.url}", self.url), \
                self.target.connect() as conn:
            self.migrated_now = migrate(conn, self.schema) or self.migrated_now

    def settings(self) -> dict[str, str]:
        return dict(self._rows("read the settings", "SELECT name, value FROM settings"))

    def put_setting(self, name: str, value: str | None) -> None:
        check_setting(name, value)
        with self._cursor(f"set {name}", write=True, one_statement=True) as cur:
            if value is None:
                cur.execute("DELETE FROM settings WHERE name = %s", (name,))
            else:
                cur.execute("INSERT INTO settings (name, value) VALUES (%s, %s)"
                            " ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                            (name, value))

    def schema_state(self) -> SchemaState:
        with driver_errors("read the schema version", self.url), \
                self._pool.connection() as conn:
            version, min_writer = schema_versions(conn)
        return SchemaState(version=version, latest=latest_version(),
                           applied_now=tuple(self.migrated_now), min_writer=min_writer)

    def diagnose(self, *, opened_ms: float, max_skew: float) -> list[Diagnosis]:
        """How it connected, and the clock skew between this host and the database."""
        before = utcnow()
        rows = self._rows("read the server clock",
                          "SELECT clock_timestamp(), current_setting('server_version')")
        after = utcnow()
        server_now, version = rows[0][0], rows[0][1]
        return [Diagnosis(name="connect", status=Status.OK,
                          detail=f"PostgreSQL {version.split()[0]}, schema {self.schema}, "
                          f"opened in {opened_ms:.0f} ms"),
                skew_diagnosis(server_now - (before + (after - before) / 2), after - before,
                               max_skew)]

    def close(self) -> None:
        self._pool.close()
