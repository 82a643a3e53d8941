"""Where a SQLite store lives, its file and connection, and what its driver's errors mean.

A store is one regular, non-empty SQLite file. Opening one never creates anything: a path
with nothing there is a store not made yet (its first write makes it, `waypost init` at
once), and anything else at the path (a device, a directory, an empty file) is refused.
Driver errors become the errors a user can act on: a busy store (StoreBusy), a full disk,
a damaged file (IntegrityError), each naming the store.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import stat
import time
from _thread import RLock  # what threading.RLock is, without importing threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from waypost.config import unreadable
from waypost.errors import (
    DiskFull,
    IntegrityError,
    InvalidInput,
    NotFound,
    Refused,
    StoreBusy,
    StoreError,
    WaypostError,
)
from waypost.store.shared import BUSY_TIMEOUT_ENV, MIN_WRITER, write_refusal

SCHEMA_VERSION = 15
MIGRATIONS = ("sqlite.sql", "sqlite_2_outbox.sql", "sqlite_3_delivery.sql",
              "sqlite_4_watchers.sql", "sqlite_5_watcher_role.sql", "sqlite_6_runs_rowid.sql",
              "sqlite_7_settings.sql", "sqlite_8_outcome_unknown.sql",
              "sqlite_9_session.sql", "sqlite_10_tokens.sql", "sqlite_11_rules_in_writers.sql",
              "sqlite_12_inbox.sql", "sqlite_13_answers.sql", "sqlite_14_keys.sql",
              "sqlite_15_imports.sql")
_BUSY = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
_DAMAGED = (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)
# what the driver raises: its errors, and text it cannot decode (a damaged schema's, whose
# bytes the driver puts in its error message)
DRIVER_ERRORS = (sqlite3.Error, UnicodeDecodeError)
DriverError = sqlite3.Error | UnicodeDecodeError
# what a waypost schema lacks only when its definition was damaged or altered
_SCHEMA_GONE = ("no such table", "no such column", "no such index")


def migrations() -> list[str]:
    from importlib import resources  # only when migrating: it costs every CLI call ~5 ms

    folder = resources.files("waypost.store.sqlite")
    return [folder.joinpath(name).read_text("utf-8") for name in MIGRATIONS]


def run_script(db: sqlite3.Connection, script: str) -> None:
    """Run a migration's statements in the caller's transaction (`executescript` would
    commit it first)."""
    code = "\n".join(line.split("--")[0] for line in script.splitlines())
    for statement in code.split(";"):
        if statement.strip():
            db.execute(statement)


def unopenable(path: str, why: str) -> InvalidInput:
    """A store path that cannot be opened here (a folder that cannot be read or written, a
    path through something that is not a folder): the caller's to fix, exit 2, not a bug."""
    return InvalidInput(f"cannot open the SQLite store at {path}: {why}",
                        hint="check the path and its folder's permissions, or point --store "
                        "/ WAYPOST_URL elsewhere")


def os_refusal(path: str, exc: OSError) -> WaypostError:
    """An OS error on a store's path: a full disk (75), a file this user may not read (4),
    else a path the caller must fix (`unopenable`, 2)."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return disk_full(path, "create the store")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return unreadable(path)
    return unopenable(path, exc.strerror or str(exc))


def open_refusal(path: str, exc: OSError | sqlite3.Error) -> WaypostError:
    """Why a store could not be opened, as the OS says it (SQLite says "unable to open")."""
    if isinstance(exc, OSError):
        return os_refusal(path, exc)
    for file in (path, f"{path}-wal", f"{path}-shm"):
        try:
            os.close(os.open(file, os.O_RDONLY))
        except FileNotFoundError:
            pass
        except OSError as why:
            return os_refusal(file, why)
    if _no_room(path):  # SQLite hides the ENOSPC of a file it could not make
        return disk_full(path, "create the store")
    return unopenable(path, str(exc))


def _no_room(path: str) -> bool:
    """Whether the disk holding `path`'s folder has no block or no file entry (inode) left
    for this user: a new file cannot be made there (0 counts mean "no limit")."""
    try:
        room = os.statvfs(os.path.dirname(os.path.abspath(path)))
    except OSError:
        return False
    return bool((room.f_blocks and not room.f_bavail) or (room.f_files and not room.f_favail))


def disk_full(path: str, what: str) -> DiskFull:
    folder = os.path.dirname(os.path.abspath(path))
    return DiskFull(f"disk full: cannot {what}: the disk holding {folder} has no room to "
                    f"grow the store at {path}; nothing was written, and what was committed "
                    "before is intact", hint=f"free space on the disk holding {folder}, then "
                    "try again (waypost doctor shows the space left)")


def existing_store(path: str) -> bool:
    """Whether a store file is there to open; False when nothing is at `path` yet. What is
    there but cannot be a store is refused: reading it would make it one."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise os_refusal(path, exc) from exc
    if not stat.S_ISREG(found.st_mode):
        raise InvalidInput(f"{path} is not a regular file, so it is not a waypost store",
                           hint="point --store / WAYPOST_URL at a store file, e.g. "
                           ".waypost/waypost.db")
    if found.st_size == 0:
        raise InvalidInput(f"{path} is an empty file, not a waypost store",
                           hint=f"remove it, then create the store: waypost init --store {path}")
    return True


def connect(path: str, *, create: bool, busy_s: float) -> sqlite3.Connection:
    """A connection to the file at `path`; with `create`, its folder and the file are made
    when missing. Without it, nothing is (`mode=rw`), whatever happened since `existing_store`
    looked."""
    if create:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    quoted = path.replace("%", "%25").replace("?", "%3f").replace("#", "%23")
    return sqlite3.connect(f"file:{quoted}?mode={'rwc' if create else 'rw'}", uri=True,
                           isolation_level=None, check_same_thread=False,
                           timeout=busy_s)  # the busy timeout


def begin_immediate(db: sqlite3.Connection, busy_s: float) -> None:
    """Take the write lock, waiting `busy_s` in all for the writer holding it (the driver's
    busy timeout does the waiting). A busy error that came early (SQLite gives up at once
    in a few cases) is tried again with what is left of the wait (`_begin_again`)."""
    started = time.monotonic()
    try:
        db.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if not is_busy(exc):
            raise
        _begin_again(db, busy_s, started + busy_s, exc)


def _begin_again(db: sqlite3.Connection, busy_s: float, deadline: float,
                 busy: sqlite3.OperationalError) -> None:
    """`begin_immediate` after a busy error, until `deadline`: the busy timeout shortened
    to what is left, and set back after."""
    shortened = False
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0.001:
                raise busy
            time.sleep(min(0.01, left))
            db.execute(f"PRAGMA busy_timeout = {max(1, int((left - 0.01) * 1000))}")
            shortened = True
            try:
                db.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if not is_busy(exc):
                    raise
                busy = exc
    finally:
        if shortened:
            db.execute(f"PRAGMA busy_timeout = {int(busy_s * 1000)}")


def is_busy(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in _BUSY
    return "locked" in str(exc) or "busy" in str(exc)


def driver_error(exc: DriverError, path: str, what: str, busy_s: float) -> WaypostError:
    """The error a user can act on for a driver error met while trying to `what`."""
    if isinstance(exc, UnicodeDecodeError):
        exc = sqlite3.DatabaseError(f"Could not decode its text as UTF-8 ({exc})")
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    if is_busy(exc):
        return StoreBusy(f"store busy, try again: another process kept the store at {path} "
                         f"locked for {busy_s:g} s, so this process could not {what}; "
                         "nothing was written",
                         hint=f"try again; to wait longer, set {BUSY_TIMEOUT_ENV} (e.g. 2m)")
    if code == sqlite3.SQLITE_FULL or "database or disk is full" in str(exc):
        return disk_full(path, what)
    if code == sqlite3.SQLITE_CANTOPEN:
        refusal = open_refusal(path, exc)
        if not isinstance(refusal, InvalidInput):  # the OS said why: a permission, a full disk
            return refusal
    if code == sqlite3.SQLITE_NOTADB:
        return IntegrityError(f"{path} is not a SQLite database, or its first page is "
                              f"damaged: cannot {what} ({exc})",
                              hint="point --store / WAYPOST_URL at a waypost store; if this "
                              "was one, restore it from a backup")
    said = str(exc)
    if code in _DAMAGED or "Could not decode" in said or said.startswith(_SCHEMA_GONE):
        return IntegrityError(f"the store at {path} is damaged: cannot {what}: {exc}",
                              hint="see what is damaged with: waypost doctor; restore the "
                              "store from a backup")
    if code == sqlite3.SQLITE_READONLY:
        return StoreError(f"cannot {what}: the store at {path} is read-only here ({exc})",
                          hint="check the file's and its folder's permissions")
    return StoreError(f"the store at {path}: cannot {what}: {exc}")


class Transaction:
    """A write transaction on a store's connection, under the store's lock: BEGIN IMMEDIATE
    on entry, COMMIT on a clean exit, ROLLBACK on any other; with `what`, driver errors are
    made the errors a user can act on, naming it (`driver_error`).

    A class rather than a generator: entering and leaving it is most of the Python a
    heartbeat's commit runs around SQLite, and nested generator-based context managers cost
    several times as much."""

    __slots__ = ("_db", "_file", "_what")

    def __init__(self, file: StoreFile, what: str | None) -> None:
        self._file = file
        self._what = what
        self._db: sqlite3.Connection | None = None

    def __enter__(self) -> sqlite3.Connection:
        file = self._file
        file.hold("write")
        try:
            if file.refusal is not None:
                raise file.refusal
            db = file.db if file.db is not None else file.open(create=True)
            begin_immediate(db, file.busy_s)
        except BaseException as exc:
            file.let_go()
            if self._what is None or not isinstance(exc, DRIVER_ERRORS):
                raise
            raise file.error(exc, self._what) from exc
        self._db = db
        return db

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: object) -> None:
        db, what = self._db, self._what
        assert db is not None
        try:
            if exc is None:
                try:
                    db.execute("COMMIT")
                    return
                except BaseException as failed:
                    self._roll_back(db)
                    if what is None or not isinstance(failed, DRIVER_ERRORS):
                        raise
                    raise self._file.error(failed, what) from failed
            self._roll_back(db)
            if what is not None and isinstance(exc, DRIVER_ERRORS):
                raise self._file.error(exc, what) from exc
        finally:
            self._file.let_go()

    @staticmethod
    def _roll_back(db: sqlite3.Connection) -> None:
        # SQLite may have rolled back already (a full disk does): a failing ROLLBACK must
        # not hide why
        if db.in_transaction:
            with suppress(sqlite3.Error):
                db.execute("ROLLBACK")


class StoreFile:
    """A store's file and its one connection, guarded by a lock so threads may share it:
    opened, created and migrated here, and every driver error made the error a user can
    act on (`driver_error`).

    A path with nothing there is given a new store at once with `create`, else by its first
    write (reads find no store: NotFound). A store whose schema is newer than this waypost
    knows is read, and written only if it says older writers may (`refusal`)."""

    def __init__(self, path: str, *, create: bool, busy_s: float) -> None:
        self.path = path
        self._lock = RLock()
        self.busy_s = busy_s
        self.db: sqlite3.Connection | None = None
        self.refusal: Refused | None = None  # why writes are refused, when they are
        if existing_store(path):
            self.open(create=False)
        elif create:
            self.open(create=True)

    def open(self, *, create: bool) -> sqlite3.Connection:
        """Connect, and bring the schema up to date (or note why writes are refused)."""
        try:
            db = connect(self.path, create=create, busy_s=self.busy_s)
        except (OSError, sqlite3.Error) as exc:
            raise open_refusal(self.path, exc) from exc
        self.db = db
        try:
            db.execute("PRAGMA synchronous = FULL")
            (version,) = db.execute("PRAGMA user_version").fetchone()
            if version < SCHEMA_VERSION:
                self._migrate()
            elif version > SCHEMA_VERSION:
                self.refusal = write_refusal(self.path, version, SCHEMA_VERSION,
                                             self.meta(db, MIN_WRITER))
        except DRIVER_ERRORS as exc:
            self.db = None
            db.close()
            raise self.error(exc, "open it") from exc
        except BaseException:
            self.db = None
            db.close()
            raise
        return db

    def _migrate(self) -> None:
        db = self.connection()
        if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            db.execute("PRAGMA journal_mode = WAL")
        with self._write() as db:
            (current,) = db.execute("PRAGMA user_version").fetchone()
            if current == 0 and db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                raise InvalidInput(f"{self.path} is a SQLite database, but not a waypost "
                                   "store: it has tables of its own",
                                   hint="point --store / WAYPOST_URL at a waypost store")
            for number, script in enumerate(migrations(), start=1):
                if number > current:
                    run_script(db, script)
            if current < SCHEMA_VERSION:
                db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    @staticmethod
    def meta(db: sqlite3.Connection, name: str) -> str | None:
        try:
            row = db.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
        except sqlite3.OperationalError:  # no meta table: a schema that says nothing
            return None
        return None if row is None else str(row[0])

    def connection(self) -> sqlite3.Connection:
        """The open connection; NotFound while no store file exists (reads create none)."""
        if self.db is None:
            raise NotFound(f"no waypost store at {self.path}",
                           hint=f"create it with: waypost init --store {self.path}")
        return self.db

    def error(self, exc: DriverError, what: str) -> WaypostError:
        return driver_error(exc, self.path, what, self.busy_s)

    def hold(self, what: str) -> None:
        """Take the store's lock. Another thread of this process may hold it through its
        own wait for the file's lock: it is waited for as long as that (a second at least),
        then StoreBusy."""
        if not self._lock.acquire(timeout=max(self.busy_s, 1.0)):
            raise StoreBusy(f"store busy, try again: other threads of this process kept the "
                            f"store at {self.path} busy, so this one could not {what}; "
                            "nothing was written",
                            hint=f"try again; to wait longer, set {BUSY_TIMEOUT_ENV}")

    def let_go(self) -> None:
        self._lock.release()

    @contextmanager
    def held(self, what: str) -> Iterator[None]:
        """The store's lock (`hold`), for as long as the block runs."""
        self.hold(what)
        try:
            yield
        finally:
            self._lock.release()

    def _write(self) -> Transaction:
        """One short BEGIN IMMEDIATE transaction, the first of a new store creating it; a
        busy store is waited for (`begin_immediate`), then it is StoreBusy."""
        return Transaction(self, None)

    def writing(self, what: str) -> Transaction:
        """`_write`, with driver errors made the errors a user can act on, naming what
        was attempted."""
        return Transaction(self, what)

    @contextmanager
    def reading(self, what: str) -> Iterator[sqlite3.Connection]:
        """The connection under the lock, driver errors made the errors a user can act on."""
        with self.held(what):
            db = self.connection()
            try:
                yield db
            except DRIVER_ERRORS as exc:
                raise self.error(exc, what) from exc

    def create(self) -> None:
        """Create the store now if it does not exist yet."""
        with self.held("create the store"):
            if self.db is None:
                self.open(create=True)

    def close(self) -> None:
        with self._lock:  # whatever holds it ends: a close never fails
            if self.db is not None:
                self.db.close()
