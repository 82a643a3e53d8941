"""Opening a store from a URL: `sqlite:///rel.db`, `sqlite:////abs.db`, a plain path, or
`postgresql://…`. With no URL, `WAYPOST_URL`, then `.waypost/waypost.db` found by walking
up from the current directory (like `.git`)."""

from __future__ import annotations

import os
from pathlib import Path

from waypost.errors import InvalidInput, NotFound
from waypost.store.base import Snapshot, Store

STORE_DIR = ".waypost"
STORE_FILE = "waypost.db"

__all__ = ["STORE_DIR", "STORE_FILE", "Snapshot", "Store", "find_default", "open_store"]


def find_default(start: Path | None = None) -> Path | None:
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / STORE_DIR / STORE_FILE
        if candidate.is_file():
            return candidate
    return None


def open_store(url: str | None = None) -> Store:
    """Open (creating and migrating if needed) the store at `url`."""
    url = url or os.environ.get("WAYPOST_URL") or None
    if url is None:
        found = find_default()
        if found is None:
            raise NotFound(
                "no waypost store here or in any parent directory",
                hint="create one with: waypost init  (or set WAYPOST_URL / pass --store)",
            )
        url = str(found)
    if url.startswith(("postgresql://", "postgres://")):
        raise InvalidInput(
            "this version of waypost stores runs in SQLite only",
            hint="use sqlite:///path/to/waypost.db or a plain path",
        )
    if url.startswith("sqlite:"):
        rest = url.removeprefix("sqlite:")
        if not rest.startswith("///"):
            raise InvalidInput(f"bad SQLite URL {url!r}: write sqlite:///relative.db or "
                               "sqlite:////absolute.db")
        url = rest[3:]
    elif "://" in url:
        raise InvalidInput(f"unknown store URL scheme in {url!r}",
                           hint="use sqlite:///path.db, a plain path, or postgresql://…")
    from waypost.store.sqlite import SqliteStore

    return SqliteStore(url)
