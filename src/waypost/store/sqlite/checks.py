"""What `waypost doctor` checks of a SQLite store's file: SQLite's own check of its pages
and indexes, and the space left on the disk that holds it."""

from __future__ import annotations

import os
import sqlite3

from waypost.store.records import Diagnosis, Status

MAX_INTEGRITY_ERRORS = 20  # what `doctor` lists of a damaged file


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


LOW_DISK = 4 << 20  # bytes free below which doctor fails: the WAL alone may grow ~4 MiB
LOW_DISK_WARN = 64 << 20  # ... and below which it warns
LOW_FILES = 3  # free file entries below which doctor fails: the -wal, -shm and -journal files


def disk_diagnosis(path: str) -> Diagnosis:
    """The space left on the disk holding the store (a write that finds none: exit 75)."""
    folder = os.path.dirname(os.path.abspath(path))
    try:
        found = os.statvfs(folder)
    except OSError as exc:
        return Diagnosis(name="disk", status=Status.WARN,
                         detail=f"cannot tell the space left in {folder}: {exc}")
    free, size = found.f_bavail * found.f_frsize, found.f_blocks * found.f_frsize
    said = f"{_size(free)} free of {_size(size)} on the disk holding {folder}"
    if found.f_files and found.f_favail < LOW_FILES:  # bytes to spare, but no file entry
        return Diagnosis(name="disk", status=Status.FAIL, detail=(
            f"{said}, but {found.f_favail} free file entries (inodes): SQLite's journal "
            "files cannot be made, so writes fail with exit 75 (disk full); remove files "
            "there"))
    status = Status.FAIL if free < LOW_DISK else Status.WARN if free < LOW_DISK_WARN else Status.OK
    return Diagnosis(name="disk", status=status, detail=said + {
        Status.FAIL: ": the disk is full or nearly, so writes fail with exit 75 (disk full);"
        " free some space there", Status.WARN: ": free space is low"}.get(status, ""))


def _size(count: int) -> str:
    amount, unit = float(count), "bytes"
    for larger in ("KiB", "MiB", "GiB", "TiB"):
        if amount < 1024:
            break
        amount, unit = amount / 1024, larger
    return f"{count} bytes" if unit == "bytes" else f"{amount:.1f} {unit}"
