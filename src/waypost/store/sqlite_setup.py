"""Where a SQLite store lives and what its driver's errors mean.

A store is one regular, non-empty SQLite file. Opening one never creates anything: a path
with nothing there is a store not made yet (its first write makes it, `waypost init` at
once), and anything else at the path (a device, a directory, an empty file) is refused.
Driver errors become the errors a user can act on: a busy store (StoreBusy), a full disk,
a damaged file (IntegrityError), each naming the store.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import time

from waypost.errors import (
    IntegrityError,
    InvalidInput,
    StoreBusy,
    StoreError,
    WaypostError,
)
from waypost.store.base import BUSY_TIMEOUT_ENV, Diagnosis, Status

SCHEMA_VERSION = 7
MIGRATIONS = ("sqlite.sql", "sqlite_2_outbox.sql", "sqlite_3_delivery.sql",
              "sqlite_4_watchers.sql", "sqlite_5_watcher_role.sql", "sqlite_6_runs_rowid.sql",
              "sqlite_7_settings.sql")
_BUSY = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
_DAMAGED = (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)
MAX_INTEGRITY_ERRORS = 20  # what `doctor` lists of a damaged file


def migrations() -> list[str]:
    from importlib import resources  # only when migrating: it costs every CLI call ~5 ms

    folder = resources.files("waypost.store")
    return [folder.joinpath(name).read_text("utf-8") for name in MIGRATIONS]


def run_script(db: sqlite3.Connection, script: str) -> None:
    """Run a migration's statements in the caller's transaction (`executescript` would
    commit it first)."""
    code = "\n".join(line.split("--")[0] for line in script.splitlines())
    for statement in code.split(";"):
        if statement.strip():
            db.execute(statement)


def existing_store(path: str) -> bool:
    """Whether a store file is there to open; False when nothing is at `path` yet. What is
    there but cannot be a store is refused: reading it would make it one."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise StoreError(f"cannot open the SQLite store at {path}: {exc.strerror}",
                         hint="check the path and its permissions") from exc
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
    in a few cases) is tried again with what is left of the wait."""
    deadline = time.monotonic() + busy_s
    shortened = False
    try:
        while True:
            try:
                db.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                left = deadline - time.monotonic()
                if not is_busy(exc) or left <= 0.001:
                    raise
                time.sleep(min(0.01, left))
                db.execute(f"PRAGMA busy_timeout = {max(1, int((left - 0.01) * 1000))}")
                shortened = True
    finally:
        if shortened:
            db.execute(f"PRAGMA busy_timeout = {int(busy_s * 1000)}")


def is_busy(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in _BUSY
    return "locked" in str(exc) or "busy" in str(exc)


def driver_error(exc: sqlite3.Error, path: str, what: str, busy_s: float) -> WaypostError:
    """The error a user can act on for a driver error met while trying to `what`."""
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    if is_busy(exc):
        return StoreBusy(f"store busy, try again: another process kept the store at {path} "
                         f"locked for {busy_s:g} s, so this process could not {what}; "
                         "nothing was written",
                         hint=f"try again; to wait longer, set {BUSY_TIMEOUT_ENV} (e.g. 2m)")
    if code == sqlite3.SQLITE_FULL:
        return StoreError(f"disk full: cannot {what}: no room to grow the store at {path} "
                          "(SQLITE_FULL); nothing was written, and what was committed "
                          "before is intact",
                          hint=f"free space on the disk holding {os.path.dirname(path) or '.'}"
                          ", then try again")
    if code in _DAMAGED or "Could not decode" in str(exc):
        return IntegrityError(f"the store at {path} is damaged: cannot {what}: {exc}",
                              hint="see what is damaged with: waypost doctor; restore the "
                              "store from a backup")
    if code == sqlite3.SQLITE_READONLY:
        return StoreError(f"cannot {what}: the store at {path} is read-only here ({exc})",
                          hint="check the file's and its folder's permissions")
    return StoreError(f"the store at {path}: cannot {what}: {exc}")


def integrity_diagnosis(db: sqlite3.Connection) -> Diagnosis:
    """SQLite's own check of every page and index (`quick_check`): damage that reads may
    trip over later, or that writes may spread."""
    try:
        found = [row[0] for row in db.execute(f"PRAGMA quick_check({MAX_INTEGRITY_ERRORS})")]
    except sqlite3.Error as exc:
        found = [str(exc)]
    if found == ["ok"]:
        return Diagnosis(name="integrity", status=Status.OK, detail="quick_check: ok")
    return Diagnosis(name="integrity", status=Status.FAIL,
                     detail=f"the file is damaged ({'; '.join(found)[:500]}): restore it "
                     "from a backup; `waypost verify` names the runs it can still read")
