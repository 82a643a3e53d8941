"""A damaged, foreign, newer, full or busy SQLite store: every verb fails naming what and
where, with its own exit code (never 1, "a bug"), and changes nothing it should not."""

from __future__ import annotations

import json
import os
import random
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from tests.helpers import Cli, FakeClock
from waypost.core.history import verify_run
from waypost.errors import DiskFull, StoreBusy
from waypost.model import Kind
from waypost.store import open_store
from waypost.store.shared import Skipped
from waypost.store.sqlite.setup import SCHEMA_VERSION
from waypost.store.sqlite.store import SqliteStore
from waypost.usecases import runs, starting
from waypost.usecases.watchdog import sweep


def _started(cli: Cli, count: int = 3) -> list[str]:
    assert cli("init").code == 0
    return [cli.ok("start", f"run {n}", "--target", "none:", "--kind", "long_running",
                   "--max-silence", "1h") for n in range(count)]


def _sql(path: Path, statement: str, *args: object) -> None:
    with closing(sqlite3.connect(path, isolation_level=None)) as db:
        db.execute(statement, args)


def _listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


# --- one bad row ----------------------------------------------------------------------


def test_a_malformed_packet_row_is_named_and_the_board_still_lists_the_others(
        cli: Cli) -> None:
    bad, *good = _started(cli)
    _sql(cli.store, "UPDATE runs SET packet = '{' WHERE id = ?", bad)

    board = cli("ls", "--json")
    assert board.code == 0, board.err
    assert {r["id"] for r in board.json()["runs"]} == set(good)
    assert [s["run_id"] for s in board.json()["skipped"]] == [bad]
    text = cli("ls")
    assert text.code == 0
    assert good[0] in text.out
    assert f"skipped run {bad}" in text.err

    for verb in (["show", bad], ["heartbeat", bad], ["verify"], ["verify", bad]):
        outcome = cli(*verb, "--json")
        assert outcome.code == 3, (verb, outcome.err)
        assert bad in outcome.error()["message"]
    assert "1 of 3 run(s) do not verify" in cli("verify").err  # the others were verified
    assert cli("show", good[0]).code == 0
    assert cli("heartbeat", good[0]).code == 0


def test_a_row_that_is_not_utf8_is_named_not_a_driver_error(cli: Cli) -> None:
    bad, good = _started(cli, 2)
    _sql(cli.store, "UPDATE runs SET packet = CAST(? AS TEXT) WHERE id = ?",
         b'{"id": "\xff\xfe"}', bad)
    outcome = cli("show", bad, "--json")
    assert outcome.code == 3
    assert bad in outcome.error()["message"]
    assert [r["id"] for r in cli("ls", "--json").json()["runs"]] == [good]


def test_the_watchdog_skips_and_names_a_bad_row_and_sweeps_the_rest(
        tmp_path: Path, clock: FakeClock) -> None:
    with SqliteStore(tmp_path / "w.db") as store:
        made = sorted(starting.start(store, f"r{n}", actor="alice", target="none:",
                                 kind=Kind.LONG_RUNNING, max_silence=60, clock=clock)[0].id
                      for n in range(5))  # all due at once: in id order
        _sql(tmp_path / "w.db", "UPDATE runs SET packet = '[]' WHERE id = ?", made[1])
        skipped: list[Skipped] = []
        due = store.due_runs(now=clock.advance(3600), limit=2, skipped=skipped)
        # the page is filled past the bad row: a short page still means the last one
        assert [d.packet.id for d in due] == [made[0], made[2]]
        assert [s.run_id for s in skipped] == [made[1]]
        report = sweep(store, watcher_id="w1", now=clock.now, batch=2)
    assert report.examined == 4
    assert [e.split(":")[0] for e in report.errors] == [made[1]]


# --- a damaged file -------------------------------------------------------------------


def _damage_page(path: Path, page: int) -> None:
    size = sqlite3.connect(path).execute("PRAGMA page_size").fetchone()[0]
    with path.open("r+b") as f:
        f.seek(page * size)
        f.write(random.Random(page).randbytes(size))


@pytest.fixture
def damaged(cli: Cli) -> tuple[Cli, list[str]]:
    """A store with random bytes over a page in the middle (a copy: the WAL checkpointed)."""
    made = _started(cli, 40)
    for run_id in made:
        cli.ok("heartbeat", run_id, "--note", "x" * 400)
    pages = sqlite3.connect(cli.store).execute("PRAGMA page_count").fetchone()[0]
    _damage_page(cli.store, pages // 2)
    return cli, made


def test_doctor_finds_a_damaged_page(damaged: tuple[Cli, list[str]]) -> None:
    cli, _ = damaged
    outcome = cli("doctor", "--json")
    assert outcome.code == 1
    checks = {c["name"]: c for c in outcome.json()["checks"]}
    assert checks["integrity"]["status"] == "fail"
    assert "damaged" in checks["integrity"]["detail"]


def test_reads_of_a_damaged_store_fail_as_damage_never_as_a_bug(
        damaged: tuple[Cli, list[str]]) -> None:
    cli, made = damaged
    codes = {cli(*verb, "--json").code for run_id in made[::5]
             for verb in (["show", run_id], ["verify", run_id], ["log", run_id])}
    codes |= {cli("verify", "--json").code, cli("ls", "--json").code}
    assert 3 in codes  # the damage was met, and reported as damage
    assert codes <= {0, 3}


def test_a_damaged_history_fails_verify_naming_the_run(cli: Cli) -> None:
    run_id, _ = _started(cli, 2)
    with closing(sqlite3.connect(cli.store)) as db:
        (root,) = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'events'"
                             ).fetchone()
    _damage_page(cli.store, root - 1)  # the events table's first page: every history read
    for verb in (["verify", run_id], ["log", run_id]):
        outcome = cli(*verb, "--json")
        assert outcome.code == 3, (verb, outcome.err)
        assert outcome.error()["code"] == "integrity"
        assert run_id in outcome.error()["message"]
        assert "damaged" in outcome.error()["message"]
    assert cli("verify", "--json").code == 3


def test_a_healthy_store_passes_doctor_with_its_rows(cli: Cli) -> None:
    _started(cli, 2)
    checks = {c["name"]: c for c in cli("doctor", "--json").json()["checks"]}
    assert checks["integrity"]["status"] == "ok"
    assert checks["runs"]["detail"] == "2 run(s) read"


def test_doctor_names_a_malformed_row(cli: Cli) -> None:
    bad, _ = _started(cli, 2)
    _sql(cli.store, "UPDATE runs SET packet = '{' WHERE id = ?", bad)
    outcome = cli("doctor", "--json")
    assert outcome.code == 1
    checks = {c["name"]: c for c in outcome.json()["checks"]}
    assert checks["runs"]["status"] == "fail"
    assert bad in checks["runs"]["detail"]


# --- what is not a store ----------------------------------------------------------------


@pytest.mark.parametrize("verb", [["ls"], ["show", "wp_x"], ["verify"], ["log", "wp_x"],
                                  ["heartbeat", "wp_x"], ["doctor"]])
def test_read_verbs_create_nothing(cli: Cli, tmp_path: Path, verb: list[str]) -> None:
    before = _listing(tmp_path)
    cli.store = tmp_path / "newdir" / "x.db"
    outcome = cli(*verb, "--json")
    assert outcome.code in (1, 4), outcome.err  # doctor: 1 (a failed check); else not found
    assert "newdir" in outcome.err + outcome.out
    assert _listing(tmp_path) == before


def test_an_empty_file_is_not_a_store(cli: Cli, tmp_path: Path) -> None:
    cli.store = tmp_path / "empty.db"
    cli.store.touch()
    for verb in (["show", "wp_x"], ["ls"], ["start", "t", "--target", "none:"], ["init"]):
        outcome = cli(*verb, "--json")
        assert outcome.code == 2, (verb, outcome.err)
        assert "empty file" in outcome.error()["message"]
    assert cli.store.stat().st_size == 0
    assert _listing(tmp_path) == ["empty.db"]


def test_a_device_or_a_folder_is_not_a_store(cli: Cli, tmp_path: Path) -> None:
    for path in (Path(os.devnull), tmp_path):
        cli.store = path
        for verb in (["ls"], ["start", "t", "--target", "none:"]):
            outcome = cli(*verb, "--json")
            assert outcome.code == 2, (path, verb, outcome.err)
            assert "not a regular file" in outcome.error()["message"]
    doctor = cli("doctor", "--json")
    assert doctor.code == 2  # the URL is unusable here: the caller's input, not the store's state
    assert "not a regular file" in doctor.json()["checks"][0]["detail"]
    assert not Path(f"{os.devnull}-journal").exists()
    assert not Path(f"{os.devnull}-wal").exists()


def test_a_file_that_is_not_sqlite_is_refused_and_left_alone(cli: Cli, tmp_path: Path) -> None:
    cli.store = tmp_path / "notes.txt"
    cli.store.write_text("my notes\n" * 200)
    outcome = cli("start", "t", "--target", "none:", "--json")
    assert outcome.code == 3, outcome.err
    assert str(cli.store) in outcome.error()["message"]
    assert cli.store.read_text() == "my notes\n" * 200


def test_another_programs_database_is_not_migrated(tmp_path: Path) -> None:
    _sql(tmp_path / "app.db", "CREATE TABLE users (id INTEGER PRIMARY KEY)")
    with pytest.raises(Exception, match="not a waypost store"):
        SqliteStore(tmp_path / "app.db")
    with closing(sqlite3.connect(tmp_path / "app.db")) as db:
        names = [r[0] for r in db.execute("SELECT name FROM sqlite_master")]
    assert names == ["users"]


def test_a_write_verb_creates_a_missing_store(cli: Cli, tmp_path: Path) -> None:
    cli.store = tmp_path / "new" / "w.db"
    run_id = cli.ok("start", "t", "--target", "none:")
    assert cli.ok("show", run_id, "--json")


# --- a newer schema -----------------------------------------------------------------------


def _stored(cli: Cli, run_id: str) -> dict[str, object]:
    """The packet `show` prints, without what it observes now."""
    document: dict[str, object] = json.loads(cli.ok("show", run_id, "--json"))
    document.pop("observed", None)
    return document


def _newer(path: Path, version: int, min_writer: str | None) -> None:
    _sql(path, f"PRAGMA user_version = {version}")
    if min_writer is None:
        _sql(path, "DELETE FROM meta")
    else:
        _sql(path, "UPDATE meta SET value = ? WHERE name = 'min_writer_version'", min_writer)


@pytest.mark.parametrize("min_writer", [None, "99", str(SCHEMA_VERSION + 1)])
def test_a_newer_schema_is_read_but_not_written(cli: Cli, min_writer: str | None) -> None:
    run_id, = _started(cli, 1)
    shown = _stored(cli, run_id)
    _newer(cli.store, 99, min_writer)
    size = cli.store.stat().st_size
    assert _stored(cli, run_id) == shown
    assert run_id in cli.ok("ls")
    for verb in (["heartbeat", run_id], ["start", "t", "--target", "none:"],
                 ["cancel", run_id, "--reason", "r"]):
        outcome = cli(*verb, "--json")
        assert outcome.code == 3, (verb, outcome.err)
        message = outcome.error()["message"]
        assert "schema version 99" in message
        assert f"knows schema {SCHEMA_VERSION}" in message
    assert _stored(cli, run_id) == shown
    assert cli.store.stat().st_size == size
    doctor = {c["name"]: c for c in cli("doctor", "--json").json()["checks"]}
    assert doctor["schema"]["status"] == "fail"


def test_a_newer_schema_that_takes_older_writers_is_written(cli: Cli) -> None:
    run_id, = _started(cli, 1)
    _newer(cli.store, SCHEMA_VERSION + 1, str(SCHEMA_VERSION))
    assert cli("heartbeat", run_id).code == 0
    doctor = {c["name"]: c for c in cli("doctor", "--json").json()["checks"]}
    assert doctor["schema"]["status"] == "warn"
    with closing(sqlite3.connect(cli.store)) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION + 1,)


# --- a full disk ----------------------------------------------------------------------------


def _fill(run: runs.Run) -> None:
    for _ in range(50):
        run.heartbeat(note="y" * 3000)


def test_a_full_disk_says_so_and_loses_nothing(tmp_path: Path, clock: FakeClock) -> None:
    with SqliteStore(tmp_path / "w.db") as store:
        run, _ = starting.start(store, "t", actor="alice", target="none:",
                            kind=Kind.LONG_RUNNING, max_silence=60, clock=clock)
        before = store.get(run.id)
        db = store._db
        assert db is not None
        (pages,) = db.execute("PRAGMA page_count").fetchone()
        db.execute(f"PRAGMA max_page_count = {pages}")  # as if the disk had filled up
        with pytest.raises(DiskFull, match="disk full") as caught:
            _fill(run)
        assert str(tmp_path / "w.db") in caught.value.message
        assert "rollback" not in caught.value.message
        with pytest.raises(DiskFull, match="disk full"):
            store.put_blob(os.urandom(20_000))
        kept = store.get(run.id)
        assert kept.version >= before.version
        verify_run(run.id, store.events(run.id), kept)
        db.execute("PRAGMA max_page_count = 1073741823")  # space again
        run.heartbeat(note="after")
        verify_run(run.id, store.events(run.id), store.get(run.id))


# --- a busy store -------------------------------------------------------------------------


@pytest.fixture
def locked(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A store whose write lock another connection holds until the test ends."""
    path = tmp_path / "w.db"
    with SqliteStore(path) as store:
        run, _ = starting.start(store, "t", actor="alice", target="none:",
                            kind=Kind.LONG_RUNNING, max_silence=60)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        yield path, run.id
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_a_write_to_a_locked_store_is_store_busy_after_the_configured_wait(
        locked: tuple[Path, str], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    path, run_id = locked
    monkeypatch.setenv("WAYPOST_BUSY_TIMEOUT", "300ms")
    cli = Cli(path, capsys)
    began = time.monotonic()
    outcome = cli("heartbeat", run_id, "--json")
    assert time.monotonic() - began < 20  # a hang guard: the wait is 0.3 s
    assert outcome.code == 75, outcome.err
    error = outcome.error()
    assert error["code"] == "store_busy"
    assert "store busy, try again" in error["message"]
    assert str(path) in error["message"]
    text = cli("heartbeat", run_id)
    assert text.code == 75
    assert "WAYPOST_BUSY_TIMEOUT" in text.err
    assert cli("show", run_id).code == 0  # a read does not wait for the writer (WAL)


def test_a_locked_store_in_another_process_gives_exit_75(locked: tuple[Path, str]) -> None:
    path, run_id = locked
    env = {**os.environ, "WAYPOST_URL": str(path), "WAYPOST_ACTOR": "alice",
           "WAYPOST_BUSY_TIMEOUT": "0.5"}
    proc = subprocess.run([sys.executable, "-m", "waypost", "heartbeat", run_id],
                          capture_output=True, text=True, env=env, timeout=60, check=False)
    assert proc.returncode == 75, proc.stderr
    assert "store busy" in proc.stderr


def test_the_library_raises_store_busy(locked: tuple[Path, str]) -> None:
    path, run_id = locked
    with SqliteStore(path, busy_timeout=0.2) as store:
        with pytest.raises(StoreBusy, match="store busy"):
            runs.Run(store, run_id, actor="alice").heartbeat(note="n")
        assert store.get(run_id).version == 1


@pytest.mark.parametrize("value", ["nan", "-1s", "soon", "2d"])
def test_a_bad_busy_timeout_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       value: str) -> None:
    monkeypatch.setenv("WAYPOST_BUSY_TIMEOUT", value)
    with pytest.raises(Exception, match="WAYPOST_BUSY_TIMEOUT") as caught:
        open_store(str(tmp_path / "w.db"))
    assert getattr(caught.value, "exit_code", None) == 2
    assert not (tmp_path / "w.db").exists()
