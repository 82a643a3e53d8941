"""`waypost serve` on a store it cannot serve (a truncated, zeroed or non-SQLite file, a
PostgreSQL database that does not exist, a port nobody listens on) never says it serves:
it prints one line naming the cause and `waypost doctor`, and exits with the code the same
store gets from any other verb (`waypost ls`), without a traceback, changing nothing."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

import waypost
from tests import pg
from waypost.store import open_store

HANG_GUARD = 60.0  # seconds: a refusal must not wait for anything
DOCUMENTED = {1, 2, 3, 4, 5, 75}


def _waypost(*args: str, store: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WAYPOST_URL": store}
    env.pop("WAYPOST_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "waypost", *args], env=env, text=True,
                          capture_output=True, timeout=HANG_GUARD, check=False)


def _store_file(tmp_path: Path) -> Path:
    path = tmp_path / "store.db"
    with open_store(str(path)) as store:
        for n in range(20):
            waypost.start(store, f"run {n}", actor="alice", owner="alice", target="none:")
    return path


def truncated(tmp_path: Path) -> str:
    path = _store_file(tmp_path)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    return str(path)


def damaged_page(tmp_path: Path) -> str:
    """The page after the header overwritten: the file opens, its runs do not list."""
    path = _store_file(tmp_path)
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    data[page:2 * page] = b"\xff" * page
    path.write_bytes(bytes(data))
    return str(path)


def zeroed(tmp_path: Path) -> str:
    path = _store_file(tmp_path)
    path.write_bytes(bytes(path.stat().st_size))
    return str(path)


def not_sqlite(tmp_path: Path) -> str:
    path = tmp_path / "notes.db"
    path.write_text("these are my notes, not a database\n" * 200)
    return str(path)


def empty_file(tmp_path: Path) -> str:
    path = tmp_path / "empty.db"
    path.touch()
    return str(path)


def missing_database(tmp_path: Path) -> str:
    parts = urlsplit(pg.require_postgres())
    return urlunsplit(parts._replace(path=f"/waypost_missing_{uuid.uuid4().hex[:12]}"))


def missing_role(tmp_path: Path) -> str:
    parts = urlsplit(pg.require_postgres())
    netloc = f"waypost_nobody_{uuid.uuid4().hex[:12]}@{parts.hostname}:{parts.port or 5432}"
    return urlunsplit(parts._replace(netloc=netloc))


def closed_port(tmp_path: Path) -> str:
    parts = urlsplit(pg.require_postgres())
    with socket.socket() as sock:  # a port just free: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return urlunsplit(parts._replace(netloc=f"{parts.username or 'postgres'}@127.0.0.1:{port}"))


@pytest.mark.parametrize("make", [truncated, damaged_page, zeroed, not_sqlite, empty_file,
                                  missing_database, closed_port], ids=lambda f: f.__name__)
def test_serve_refuses_a_store_it_cannot_serve_in_one_line(
        tmp_path: Path, make: Callable[[Path], str]) -> None:
    store = make(tmp_path)
    before = Path(store).read_bytes() if "://" not in store else None
    served = _waypost("serve", "--port", "0", store=store)
    listed = _waypost("ls", store=store)
    lines = served.stderr.splitlines()
    assert "serving on" not in served.stderr
    assert "Traceback" not in served.stderr
    assert len(lines) == 1, served.stderr
    assert "waypost doctor" in lines[0], lines[0]
    assert served.stdout == ""
    # the code this store gets from every verb: damaged or not a store, or unreachable
    assert served.returncode == listed.returncode, (served.stderr, listed.stderr)
    assert served.returncode in DOCUMENTED - {0}
    if before is not None:
        assert Path(store).read_bytes() == before


def test_serve_names_the_store_the_doctor_should_look_at(tmp_path: Path) -> None:
    """The command in the line diagnoses the same store: run as printed, it fails a check."""
    store = truncated(tmp_path)
    served = _waypost("serve", "--port", "0", "--store", store, store=str(tmp_path / "other"))
    assert f"waypost doctor --store {store}" in served.stderr, served.stderr
    doctor = _waypost("doctor", "--store", store, store=str(tmp_path / "other"))
    assert doctor.returncode != 0


@pytest.mark.parametrize(("make", "code", "exit_code"), [
    (missing_database, "not_found", 4),  # the server answered: it has no such database
    (missing_role, "not_authorized", 3),  # the server refused the login: no such user
    (closed_port, "store_unreachable", 75),  # nobody answered: start it, then try again
], ids=["missing_database", "missing_role", "closed_port"])
def test_a_postgres_store_that_cannot_be_reached_says_which_and_is_no_bug(
        tmp_path: Path, make: Callable[[Path], str], code: str, exit_code: int) -> None:
    """Exit 1 is a bug's code: a database that is not there is not found (4), a login the
    server refuses is refused (3), a server that does not answer is a temporary failure
    (75), each one line naming the fix."""
    store = make(tmp_path)
    listed = _waypost("ls", "--json", store=store)
    assert listed.returncode == exit_code, listed.stderr
    error = json.loads(listed.stdout or listed.stderr)["error"]
    assert error["code"] == code
    assert "\n" not in error["message"]
    assert "waypost doctor" in error["hint"]
    assert ("createdb" in error["hint"]) == (code == "not_found")  # the fix of this cause
    served = _waypost("serve", "--port", "0", store=store)
    assert served.returncode == exit_code, served.stderr
