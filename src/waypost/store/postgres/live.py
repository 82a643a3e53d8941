"""What several hosts sharing one PostgreSQL store coordinate with: live change
notifications (LISTEN/NOTIFY) and session advisory locks ("one active sweeper").

Both hold a connection of their own, outside the pool: a LISTEN and a session lock belong
to the connection that made them, and must not leak to whoever borrows it next.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from types import TracebackType
from typing import Any, LiteralString, Self

import msgspec
import psycopg
from psycopg import sql

from waypost.errors import (
    DiskFull,
    IntegrityError,
    NotAuthorized,
    NotFound,
    StoreBusy,
    StoreError,
    StoreUnreachable,
    WaypostError,
)
from waypost.model import State
from waypost.store.postgres.setup import Database, lock_key
from waypost.store.records import SweeperLock

# how soon the server gives up on a silent lock holder: 10 s idle, then 3 probes 5 s apart
KEEPALIVES = (("tcp_keepalives_idle", "10"), ("tcp_keepalives_interval", "5"),
              ("tcp_keepalives_count", "3"))


class RunChange(msgspec.Struct, frozen=True, kw_only=True):
    """A committed change to a run, as announced to listeners."""

    run_id: str = msgspec.field(name="run")
    version: int
    state: State


_change_decoder = msgspec.json.Decoder(RunChange)
TERMINATE_WAIT_MS = 5000  # how long `take_over` waits for the ended session to go
# the session holding a bigint advisory lock: its high and low 32 bits are classid and objid
_TERMINATE_HOLDER: LiteralString = (
    "SELECT pg_terminate_backend(pid, %s) FROM pg_locks WHERE locktype = 'advisory'"
    " AND granted AND objsubid = 1 AND classid::int8 = %s AND objid::int8 = %s"
    " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    " AND pid <> pg_backend_pid()")


@contextmanager
def driver_errors(action: str, where: str = "the PostgreSQL store") -> Iterator[None]:
    """Wrap the driver's errors at the backend boundary, keeping them as the cause: a lock
    waited for past `lock_timeout` is StoreBusy, a full disk and damaged data say so."""
    try:
        yield
    except psycopg.Error as exc:
        raise wrapped(exc, action, where) from exc


def wrapped(exc: psycopg.Error, action: str, where: str) -> WaypostError:
    said = " ".join(str(exc).split())  # libpq's text spans lines; an error is one
    if isinstance(exc, psycopg.OperationalError) and said.startswith(CONNECT_FAILED):
        return _not_connected(said, action, where)
    if isinstance(exc, psycopg.errors.LockNotAvailable):
        return StoreBusy(f"store busy, try again: another session kept what this one needed "
                         f"locked in {where} past the lock timeout, so it could not {action};"
                         " nothing was written",
                         hint="try again; to wait longer, set WAYPOST_BUSY_TIMEOUT (e.g. 2m)")
    if isinstance(exc, psycopg.errors.DiskFull):
        return DiskFull(f"disk full: cannot {action}: the database server of {where} has "
                          f"no room ({said}); nothing was written, and what was committed "
                          "before is intact", hint="free space on the database server's disk,"
                          " then try again")
    if isinstance(exc, psycopg.errors.DataCorrupted | psycopg.errors.IndexCorrupted):
        return IntegrityError(f"{where} is damaged: cannot {action}: {said}",
                              hint="ask the database's administrator to check it")
    return StoreError(f"cannot {action}: {said}",
                      hint="check the server and the URL with: waypost doctor")


CONNECT_FAILED = "connection failed:"  # how psycopg words a connection it could not open
NO_ROLE = re.compile(r'FATAL: +role ".*" does not exist')  # the login names no role


def _not_connected(said: str, action: str, where: str) -> WaypostError:
    """A connection that could not be opened: a database the server does not have (4), a
    login it refuses (3: a wrong password, or a user it has no role for), or a server that
    did not answer (75: nothing happened, retry)."""
    if "authentication failed" in said or "pg_hba.conf" in said or NO_ROLE.search(said):
        return NotAuthorized(f"cannot {action}: {said}",
                             hint="fix the user or password in the URL (or PGPASSWORD); "
                             "check with: waypost doctor")
    if "does not exist" in said:
        return NotFound(f"cannot {action}: {said}",
                        hint="create the database (createdb NAME) or fix the URL; "
                        "check with: waypost doctor")
    return StoreUnreachable(f"cannot {action}: {said}; nothing was read or written",
                            hint="start the database server or fix the URL, then try "
                            "again; check with: waypost doctor")


class _Session:
    """A dedicated connection, closed with the object."""

    def __init__(self, target: Database, action: str) -> None:
        with driver_errors(action):
            self._conn: psycopg.Connection[Any] = target.connect()

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


class RunListener(_Session):
    """Every run of one store starting or changing state, from any host, in commit order
    (other writes, a heartbeat, are in the change cursor alone: `Store.changes_since`).

    Changes that arrive between two `poll` calls wait on the connection; none are lost
    while the listener is open.
    """

    def __init__(self, target: Database) -> None:
        super().__init__(target, "listen for run changes")
        with driver_errors("listen for run changes"):
            self._conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(target.channel)))

    def poll(self, timeout: float) -> list[RunChange]:
        """The changes committed since the last poll, waiting up to `timeout` seconds for
        the first one ([] when none came)."""
        with driver_errors("receive run changes"):
            received = list(self._conn.notifies(timeout=timeout, stop_after=1))
        return [_change_decoder.decode(n.payload) for n in received]


class AdvisoryLock(_Session, SweeperLock):
    """A named session-level advisory lock: at most one holder per store at a time.

    It is held until `release()`, `close()`, or the end of the holder's connection: a
    killed holder frees it at once, a vanished host once the server's TCP keepalives give
    up on it (set to about half a minute on this session), a stuck one when another session
    ends it (`take_over`, PostgreSQL 14 or later). A lock whose connection was ended
    reconnects when it next tries to take the lock.
    """

    def __init__(self, target: Database, name: str) -> None:
        super().__init__(target, f"open the advisory lock {name!r}")
        self.name = name
        self._target = target
        self._key = lock_key(target.schema, name)
        self._held = False
        self._keep_alive()

    def _keep_alive(self) -> None:
        with driver_errors(f"open the advisory lock {self.name!r}"):
            for setting, value in KEEPALIVES:
                self._conn.execute("SELECT set_config(%s, %s, false)", (setting, value))

    def _reconnect_if_lost(self) -> None:
        if self._conn.closed:  # ended by the server, or by another session's take_over
            with driver_errors(f"reconnect the advisory lock {self.name!r}"):
                self._conn = self._target.connect()
            self._keep_alive()

    def try_acquire(self) -> bool:
        """Take the lock if nobody holds it; never waits. True while this session holds it."""
        if self._held and self.is_held():
            return True
        self._reconnect_if_lost()
        with driver_errors(f"take the advisory lock {self.name!r}"):
            row = self._conn.execute("SELECT pg_try_advisory_lock(%s)", (self._key,)).fetchone()
        self._held = bool(row and row[0])
        return self._held

    def is_held(self) -> bool:
        """Whether this session still holds the lock (False once its connection is gone)."""
        if not self._held:
            return False
        try:
            self._conn.execute("SELECT 1")
        except psycopg.Error:
            self._held = False
        return self._held

    def take_over(self) -> bool:
        """End the session that holds the lock, waiting up to TERMINATE_WAIT for it to go,
        then take the lock. Ending another session takes the same database role, or
        membership in pg_signal_backend."""
        if self.try_acquire():
            return True
        high, low = (self._key >> 32) & 0xFFFFFFFF, self._key & 0xFFFFFFFF
        action = f"end the session holding the advisory lock {self.name!r}"
        with driver_errors(action):
            try:
                self._conn.execute(_TERMINATE_HOLDER, (TERMINATE_WAIT_MS, high, low))
            except psycopg.errors.InsufficientPrivilege as exc:
                raise StoreError(f"cannot {action}: {str(exc).strip()}",
                                 hint="run every watcher as the same database role, or "
                                 "grant this one pg_signal_backend") from exc
        return self.try_acquire()

    def release(self) -> None:
        if self._held and not self._conn.closed:
            with driver_errors(f"release the advisory lock {self.name!r}"):
                self._conn.execute("SELECT pg_advisory_unlock(%s)", (self._key,))
        self._held = False

    def close(self) -> None:
        # unlock first: the server frees a closed session's locks only as its backend exits
        with suppress(StoreError):
            self.release()
        self._held = False
        super().close()

