"""The embedded SQLite store: WAL, synchronous=FULL, BEGIN IMMEDIATE, short transactions."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Collection, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

import msgspec

from waypost.core.writes import Deferral, Due, RunWrite, Snapshot, in_force
from waypost.errors import (
    IdempotencyConflict,
    IntegrityError,
    NotFound,
    step,
)
from waypost.model import (
    Delivery,
    Packet,
    State,
    json_decoder,
)
from waypost.store.shared import (
    MIN_WRITER,
    DueRow,
    Meanwhile,
    Skipped,
    check_setting,
    decode_packet,
    due_page,
    origin_of,
    readable_packets,
    stop_turn_setting,
)
from waypost.store.shared import busy_timeout as busy_timeout_setting
from waypost.store.sqlite.setup import SCHEMA_VERSION, StoreFile
from waypost.store.sqlite.side import SqliteSide

if TYPE_CHECKING:  # made where they are used: a heartbeat makes none
    from waypost.events import Event
    from waypost.store.records import Diagnosis, SchemaState
    from waypost.store.sqlite.outbox import Settle
    from waypost.store.sqlite.write import GroupCommit

_packet_decoder = json_decoder(Packet)
# a run's packet, its head hash and its head event as stored (what a write checks first,
# `history.check_head`): one lookup by the events' primary key beside the row
LOAD = ("SELECT CAST(packet AS BLOB), head_hash, (SELECT CAST(body AS BLOB) FROM events"
        " WHERE run_id = runs.id AND seq = runs.version), origin FROM runs WHERE id = ?")

class SqliteStore(SqliteSide):
    """One connection, guarded by a lock so threads may share the store (`StoreFile`).

    A path with nothing there is given a new store, or without `create` (the CLI's way) is
    left alone: reads find no store (NotFound), and the first write creates the file and
    its folder. Anything else at the path that is not a store is refused. A store whose
    schema is newer than this waypost knows is read, and written only if it says older
    writers may."""

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True,
                 busy_timeout: float | None = None, group_commit: bool = True) -> None:
        # a str (pathlib costs every hot CLI call ~3 ms), tidied as Path() would: no trailing
        # slash, and "" is "." (which SQLite refuses) rather than a throwaway database
        self.path = os.path.normpath(os.fspath(path))
        self.url = f"sqlite:///{self.path}"
        self._file = StoreFile(self.path, create=create,
                               busy_s=busy_timeout_setting(busy_timeout))
        self._reading, self._writing = self._file.reading, self._file.writing
        self._group: GroupCommit[RunWrite, None] | None = None  # made on the first write
        self._settles: GroupCommit[Settle, Delivery] | None = None  # and the first settle
        self._group_most = None if group_commit else 1  # 1: every write commits on its own

    @property
    def _db(self) -> sqlite3.Connection | None:
        """The connection (None until the store exists), for tests that tune it."""
        db: sqlite3.Connection | None = self._file.db
        return db

    def pragmas(self) -> dict[str, object]:
        with self._reading("read its settings") as db:
            journal = db.execute("PRAGMA journal_mode").fetchone()[0]
            sync = db.execute("PRAGMA synchronous").fetchone()[0]
            (version,) = db.execute("PRAGMA user_version").fetchone()
        return {"journal_mode": journal, "synchronous": {2: "full"}.get(sync, sync),
                "schema_version": version}

    # --- writes -----------------------------------------------------------------------

    def create(self, event: Event, packet: Packet, *, fingerprint: str,
               session_id: str | None = None) -> tuple[Packet, bool]:
        from waypost.store.sqlite import (
            write as sqlite_write,  # here: reads never load the write path
        )

        key = packet.idempotency_key
        with self._writing(f"create run {packet.id}") as db:
            if key is not None:
                row = db.execute("SELECT id, fingerprint FROM runs WHERE idempotency_key = ?",
                                 (key,)).fetchone()
                if row is not None:
                    return self._existing(row[0], row[1], key, fingerprint), False
            db.execute(
                "INSERT INTO runs (id, version, state, owner, head_hash, updated_at,"
                " next_check_at, packet, idempotency_key, fingerprint, created_at, session_id,"
                " change_pos) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
                f" {sqlite_write.NEXT_CHANGE})",
                (packet.id, *sqlite_write.columns(packet, event), key, fingerprint,
                 packet.created_at.isoformat(), session_id),
            )
            sqlite_write.insert_events(db, [event])
        return packet, True

    def session_run(self, session_id: str) -> str | None:
        with self._reading(f"find the run of session {session_id[:80]!r}") as db:
            row = db.execute("SELECT id FROM runs WHERE session_id = ?"
                             " ORDER BY created_at DESC, id DESC LIMIT 1",
                             (session_id,)).fetchone()
        return None if row is None else str(row[0])

    def count_stop_block(self, run_id: str, *, reset: bool = False,
                         turn: str | None = None) -> int:
        marker = stop_turn_setting(run_id)
        with self._writing(f"count a stop of run {run_id}") as db:
            if turn is not None and not reset and db.execute(
                    "SELECT 1 FROM settings WHERE name = ? AND value = ?",
                    (marker, turn)).fetchone() is not None:
                rows = db.execute("SELECT stop_blocks FROM runs WHERE id = ?",
                                  (run_id,)).fetchall()
            else:
                rows = db.execute("UPDATE runs SET stop_blocks = CASE WHEN ? THEN 0"
                                  " ELSE stop_blocks + 1 END WHERE id = ? RETURNING stop_blocks",
                                  (reset, run_id)).fetchall()  # to the end: the statement is done
                if rows and (reset or turn is not None):
                    self._mark_turn(db, marker, None if reset else turn)
        if not rows:
            raise NotFound(f"no run {run_id}", steps=[step("list", why="list the runs")])
        return int(rows[0][0])

    @staticmethod
    def _mark_turn(db: sqlite3.Connection, marker: str, turn: str | None) -> None:
        if turn is None:
            db.execute("DELETE FROM settings WHERE name = ?", (marker,))
        else:
            db.execute("INSERT INTO settings (name, value) VALUES (?, ?)"
                       " ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                       (marker, turn))

    def _existing(self, run_id: str, stored: str, key: str, fingerprint: str) -> Packet:
        if stored != fingerprint:
            raise IdempotencyConflict(
                f"idempotency key {key!r} was used for run {run_id} with other parameters",
                hint="use a new key", steps=[step("read", run_id, why="or inspect the first run")],
            )
        return self.load(run_id).packet

    @property
    def group(self) -> GroupCommit[RunWrite, None]:
        """Where writes of this process's threads are committed together."""
        if self._group is None:
            from waypost.store.sqlite import write as sqlite_write

            with self._file.held("set up group commit"):
                if self._group is None:
                    self._group = sqlite_write.GroupCommit(
                        self._writing, sqlite_write.commit_one,
                        lambda write: f"write run {write.run_id}", most=self._group_most)
        return self._group

    def commit_write(self, write: RunWrite) -> None:
        """Committed with the writes other threads hand in meanwhile (`GroupCommit`)."""
        self.group.commit(write)

    # --- reads ------------------------------------------------------------------------

    def load(self, run_id: str) -> Snapshot:
        # the JSON as bytes: text SQLite cannot hand over as UTF-8 fails in the decoder,
        # which names the run, not in the driver
        with self._reading(f"read run {run_id}") as db:
            row = db.execute(LOAD, (run_id,)).fetchone()
        if row is None:
            raise NotFound(f"no run {run_id}", steps=[step("list", why="list the runs")])
        return Snapshot(decode_packet(_packet_decoder, run_id, row[0]), row[1], row[2],
                        None if row[3] is None else origin_of(row[3]))

    def events(self, run_id: str) -> list[Event]:
        with self._reading(f"read the events of run {run_id}") as db:
            rows = db.execute("SELECT seq, CAST(body AS BLOB) FROM events WHERE run_id = ?"
                              " ORDER BY seq", (run_id,)).fetchall()
        if not rows:
            raise NotFound(f"no run {run_id}", steps=[step("list", why="list the runs")])
        from waypost.events import Event  # here: no hot verb reads events

        events, decoder = [], json_decoder(Event)  # built on first use
        for seq, body in rows:
            try:
                events.append(decoder.decode(body))
            except msgspec.MsgspecError as exc:
                raise IntegrityError(f"run {run_id} seq {seq}: unreadable event: {exc}") from exc
        return events

    def list_runs(self, *, states: Collection[State] | None = None, owner: str | None = None,
                  limit: int | None = None,
                  skipped: list[Skipped] | None = None) -> list[Packet]:
        wanted = tuple(states) if states else tuple(State)
        if limit is not None and owner is None and len(wanted) > 1:
            return self._newest_by_state(wanted, limit, skipped)
        sql, args = "SELECT id, CAST(packet AS BLOB) FROM runs", list[object]()
        where = []
        if states:
            where.append(f"state IN ({', '.join('?' * len(states))})")
            args.extend(s.value for s in states)
        if owner is not None:
            where.append("owner = ?")
            args.append(owner)
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY updated_at DESC"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        with self._reading("list runs") as db:
            rows = db.execute(sql, args).fetchall()
        return readable_packets(_packet_decoder, rows, skipped)

    def _newest_by_state(self, states: Sequence[State], limit: int,
                         skipped: list[Skipped] | None) -> list[Packet]:
        """`list_runs` of several states with a limit, as one sorted scan would give them,
        read from the (state, updated_at) index a state at a time: each state's newest
        `limit` rows, merged, and the newest `limit` of those kept. A page costs its own
        rows, however many runs are stored (a scan sorted them all: 75-100 ms for the
        board's 1,000 of 100,000 stored, 6 ms so)."""
        # the index alone gives each state's newest (rowid and time); only the kept rows'
        # packets are read
        newest = ("SELECT * FROM (SELECT rowid AS row, updated_at FROM runs WHERE state = ?"
                  f" ORDER BY updated_at DESC LIMIT {int(limit)})")
        sql = ("SELECT id, CAST(packet AS BLOB) FROM runs WHERE rowid IN (SELECT row FROM"
               f" ({' UNION ALL '.join([newest] * len(states))}) ORDER BY updated_at DESC"
               f" LIMIT {int(limit)}) ORDER BY updated_at DESC")
        with self._reading("list runs") as db:
            rows = db.execute(sql, [s.value for s in states]).fetchall()
        return readable_packets(_packet_decoder, rows, skipped)

    def run_ids(self) -> list[str]:
        with self._reading("list run ids") as db:
            return [r[0] for r in db.execute("SELECT id FROM runs ORDER BY created_at, id")]

    # --- blobs ------------------------------------------------------------------------

    def put_blob(self, data: bytes) -> str:
        import hashlib  # only here: show and ls skip loading OpenSSL (~2.5 ms a call)

        digest = hashlib.sha256(data).hexdigest()
        with self._writing(f"store a blob of {len(data)} bytes") as db:
            db.execute("INSERT INTO blobs (sha256, size, data, stored_at) VALUES (?, ?, ?, ?)"
                       " ON CONFLICT (sha256) DO UPDATE SET stored_at = excluded.stored_at",
                       (digest, len(data), data, time.time()))
        return digest

    def get_blob(self, sha256: str) -> bytes:
        with self._reading(f"read blob {sha256}") as db:
            row = db.execute("SELECT data FROM blobs WHERE sha256 = ?", (sha256,)).fetchone()
        if row is None:
            raise NotFound(f"no blob {sha256}")
        return bytes(row[0])

    # --- the outbox (the rest of it, and the relays: `SqliteSide`) ---------------------

    @property
    def settles(self) -> GroupCommit[Settle, Delivery]:
        """Where a relay's threads record their attempts together (one fsync for all the
        settles waiting, each under its own lease, fence and version guard)."""
        if self._settles is None:
            from waypost.store.sqlite.write import GroupCommit

            with self._file.held("set up group commit"):
                if self._settles is None:
                    self._settles = GroupCommit(self._writing, _settle,
                                                lambda settle: f"settle delivery {settle.key}")
        return self._settles

    def retry_delivery(self, key: str, relay: str, *, error: str, retry_at: datetime,
                       outcome_unknown: bool = False, attempt: int | None = None
                       ) -> Delivery:
        from waypost.store.sqlite.outbox import Settle

        return self.settles.commit(Settle(key, relay, retry_at, error=error,
                                          outcome_unknown=outcome_unknown, attempt=attempt,
                                          retry_at=retry_at))

    def finish_delivery(self, key: str, relay: str, *, at: datetime,
                        receipt: str | None = None, error: str | None = None,
                        write: RunWrite | None = None, outcome_unknown: bool = False,
                        attempt: int | None = None) -> Delivery:
        from waypost.store.sqlite.outbox import Settle

        return self.settles.commit(Settle(key, relay, at, receipt=receipt, error=error,
                                          write=write, outcome_unknown=outcome_unknown,
                                          attempt=attempt))

    # --- the watchdog (its registrations: `SqliteSide`) ---------------------------------

    def due_runs(self, *, now: datetime, owner: str | None = None,
                 after: tuple[datetime, str] | None = None, limit: int = 500,
                 skipped: list[Skipped] | None = None) -> list[Due]:
        from waypost.store.sqlite import watch as sqlite_watch
        def fetch(after: tuple[datetime, str] | None, limit: int) -> list[DueRow]:
            with self._reading("list due runs") as db:
                return sqlite_watch.due_rows(db, now=now, owner=owner, after=after,
                                             limit=limit)

        return due_page(fetch, _packet_decoder, after=after, limit=limit, skipped=skipped)

    def commit_writes(self, writes: Sequence[RunWrite | Deferral], *,
                      meanwhile: Callable[[], None] | None = None) -> list[bool]:
        from waypost.store.sqlite import watch as sqlite_watch
        from waypost.store.sqlite import write as sqlite_write
        if not writes:
            return []
        with Meanwhile(meanwhile) as aside, self._writing(f"commit {len(writes)} writes") as db:
            # the write lock is held: rows read now stay true until the commit
            stored = sqlite_watch.stored_runs(db, {w.run_id for w in writes})
            applies = in_force(writes, {run_id: row[0] for run_id, row in stored.items()})
            applied = [w for w, a in zip(writes, applies, strict=True) if a]
            # each kind of statement once for the page, in page order: a run's writes chain,
            # and its deferral (always its last) expects the version they leave
            sqlite_write.write_runs(db, [w for w in applied if isinstance(w, RunWrite)],
                                    stored)
            sqlite_watch.defer_checks(db, [w for w in applied if isinstance(w, Deferral)])
            aside.start()  # until the COMMIT's flush ends, and the store's lock is let go
        return applies

    def _prune_runs(self, before: datetime, states: list[str]) -> tuple[int, int, int, int]:
        from waypost.store.sqlite import watch as sqlite_watch
        with self._writing("prune runs") as db:
            return sqlite_watch.prune_batch(db, before, states)

    def _prune_blobs(self, blobs_before: datetime, watchers_before: datetime) -> tuple[int, int]:
        from waypost.store.sqlite import watch as sqlite_watch
        with self._writing("prune blobs") as db:
            found = sqlite_watch.prune_blobs(db, blobs_before)
            sqlite_watch.prune_watchers(db, watchers_before)
        return found

    # --- settings and operations ------------------------------------------------------

    def initialise(self) -> None:
        self._file.create()

    def settings(self) -> dict[str, str]:
        if self._db is None:
            return {}  # no store yet, so nothing set
        with self._reading("read the settings") as db:
            return dict(db.execute("SELECT name, value FROM settings ORDER BY name"))

    def put_setting(self, name: str, value: str | None) -> None:
        check_setting(name, value)
        with self._writing(f"set {name}") as db:
            if value is None:
                db.execute("DELETE FROM settings WHERE name = ?", (name,))
            else:
                db.execute("INSERT INTO settings (name, value) VALUES (?, ?)"
                           " ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                           (name, value))

    def schema_state(self) -> SchemaState:
        """SQLite upgrades itself whenever it is opened: nothing is applied on request."""
        from waypost.store.records import SchemaState

        with self._reading("read its schema") as db:
            (version,) = db.execute("PRAGMA user_version").fetchone()
            min_writer = StoreFile.meta(db, MIN_WRITER)
        return SchemaState(version=version, latest=SCHEMA_VERSION,
                           min_writer=int(min_writer) if min_writer and min_writer.isdigit()
                           else None)

    def diagnose(self, *, opened_ms: float, max_skew: float) -> list[Diagnosis]:
        """How it opened, the durability settings every guarantee rests on, and whether
        the file is whole (SQLite's quick_check)."""
        from waypost.store.records import Diagnosis, Status
        from waypost.store.sqlite.checks import disk_diagnosis, integrity_diagnosis

        with self._reading("check the file") as db:
            integrity = integrity_diagnosis(db)
        pragmas = self.pragmas()
        journal, sync = str(pragmas["journal_mode"]), str(pragmas["synchronous"])
        return [
            Diagnosis(name="connect", status=Status.OK,
                      detail=f"SQLite, opened in {opened_ms:.0f} ms"),
            Diagnosis(name="journal_mode", status=Status.OK if journal == "wal" else Status.FAIL,
                      detail=journal if journal == "wal" else f"{journal}, not wal: writers "
                      "block readers (the file system may not support WAL; keep the store on "
                      "a local disk)"),
            Diagnosis(name="synchronous", status=Status.OK if sync == "full" else Status.FAIL,
                      detail=sync if sync == "full" else f"{sync}, not full: a power cut may "
                      "lose acknowledged writes"),
            integrity,
            disk_diagnosis(self.path),
        ]

    def close(self) -> None:
        self._file.close()


def _settle(db: sqlite3.Connection, settle: Settle) -> Delivery:
    """Record one attempt inside the caller's transaction: a retry, or the row settled
    for good with the run's write (both refused, leaving nothing, by a lost lease)."""
    from waypost.store.sqlite import outbox as sqlite_outbox
    from waypost.store.sqlite import write as sqlite_write

    if settle.retry_at is not None:
        return sqlite_outbox.retry(db, settle.key, settle.relay, error=settle.error or "",
                                   retry_at=settle.retry_at,
                                   outcome_unknown=settle.outcome_unknown,
                                   attempt=settle.attempt)
    sqlite_outbox.finish(db, settle.key, settle.relay, at=settle.at, receipt=settle.receipt,
                         error=settle.error, outcome_unknown=settle.outcome_unknown,
                         attempt=settle.attempt)
    if settle.write is not None:
        sqlite_write.commit_one(db, settle.write)
    return sqlite_outbox.get(db, settle.key)
