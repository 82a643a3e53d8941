"""SQLite's one guarded write (`commit_one`): a write that leaves the owner and the next
check alone takes the steady UPDATE, which reads nothing back; every other write, and
every refusal, takes the general one. Both leave exactly the same rows."""

from __future__ import annotations

import shutil
import sqlite3
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import msgspec
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tests.helpers import FakeClock
from waypost.core.due import lease_until
from waypost.core.history import prepare, verify_run
from waypost.core.writes import RunWrite, Snapshot
from waypost.errors import VersionConflict
from waypost.events import AnyEventData, BlockerOpened, BlockerResolved, Heartbeat
from waypost.model import BlockerKind, Kind
from waypost.store.base import check_moves
from waypost.store.sqlite import write as sqlite_write
from waypost.store.sqlite.setup import begin_immediate
from waypost.store.sqlite.store import SqliteStore
from waypost.usecases import runs, starting

Row = tuple[object, ...]


def _general(db: sqlite3.Connection, write: RunWrite) -> None:
    """The write as the general path makes it, whatever it moves: the UPDATE that reads
    back the owner and next check, then the events."""
    version, state, owner, head, updated, due, body = sqlite_write.columns(
        write.packet, write.events[-1])
    guarded = (version, state, head, updated, body, write.run_id, write.expected_version)
    sqlite_write._update_moving(db, write, guarded, owner, due,
                                write.packet.updated_at.timestamp())
    sqlite_write.insert_events(db, write.events)


def _rows(path: Path) -> tuple[list[Row], list[Row]]:
    with sqlite3.connect(path) as db:
        return (db.execute("SELECT * FROM runs ORDER BY id").fetchall(),
                db.execute("SELECT * FROM events ORDER BY run_id, seq").fetchall())


def _claimed(path: Path, clock: FakeClock) -> str:
    with SqliteStore(path) as store:
        run, _ = starting.start(store, "t", actor="alice", target="none:",
                                kind=Kind.LONG_RUNNING, max_silence=10,
                                clock=clock)
        runs.Run(store, run.id, actor="w", clock=clock).claim()
    return run.id


def test_the_steady_update_writes_what_the_general_one_writes(
        tmp_path: Path, clock: FakeClock) -> None:
    """The same writes, one copy of a store through `commit_one`, the other through the
    general path: heartbeats that leave the check (steady), one after the stored check
    came (it moves), a blocker (the check cleared) and its resolution (set again)."""
    fast, general = tmp_path / "fast.db", tmp_path / "general.db"
    run_id = _claimed(fast, clock)
    shutil.copy(fast, general)
    steps: list[tuple[float, AnyEventData]] = [
        (5, Heartbeat(note="steady")), (12, Heartbeat(note="the check came: it moves")),
        (1, Heartbeat(fraction=0.5)),
        (1, BlockerOpened(blocker_id="b1", kind=BlockerKind.MISSING_INPUT, detail="the key")),
        (1, BlockerResolved(blocker_id="b1", resolution="given")),
        (1, Heartbeat(note="steady again"))]
    with SqliteStore(fast) as one, SqliteStore(general) as other:
        for seconds, step in steps:
            snap = one.load(run_id)
            at = clock.advance(seconds)
            data = step
            if isinstance(data, Heartbeat):  # its lease renewed, as a worker's is
                data = msgspec.structs.replace(
                    data, lease_expires_at=lease_until(snap.packet.stop_rules, at))
            write = prepare(snap, [(data, 1)], actor="w", at=at)
            with one._writing("commit") as db:
                sqlite_write.commit_one(db, write)
            with other._writing("commit") as db:
                _general(db, write)
            assert _rows(fast) == _rows(general)
        verify_run(run_id, one.events(run_id), one.get(run_id))
    assert [row[1] for row in _rows(fast)[1]] == list(range(1, len(steps) + 3))


def test_a_steady_heartbeat_reads_nothing_back(tmp_path: Path, clock: FakeClock) -> None:
    run_id = _claimed(tmp_path / "store.db", clock)
    with SqliteStore(tmp_path / "store.db") as store:
        worker = runs.Run(store, run_id, actor="w", epoch=1, clock=clock)
        worker.heartbeat(note="first")
        assert store._db is not None
        seen: list[str] = []
        store._db.set_trace_callback(seen.append)
        clock.advance(1)
        worker.heartbeat(note="second")
        store._db.set_trace_callback(None)
    assert [s.split(" ")[0] for s in seen] == ["BEGIN", "UPDATE", "INSERT", "COMMIT"]
    assert "RETURNING" not in seen[1]


def test_a_stale_write_is_refused_by_either_update(tmp_path: Path, clock: FakeClock) -> None:
    run_id = _claimed(tmp_path / "store.db", clock)
    with SqliteStore(tmp_path / "store.db") as store:
        snap = store.load(run_id)
        clock.advance(1)
        write = prepare(snap, [(Heartbeat(note="late"), 1)], actor="w", at=clock())
        stale = prepare(Snapshot.chained(write.packet, write.events[-1].hash),
                        [(Heartbeat(note="later"), 1)], actor="w", at=clock())
        with pytest.raises(VersionConflict), store._writing("commit") as db:
            sqlite_write.commit_one(db, stale)  # decided from a version not yet written
        assert store.load(run_id).packet == snap.packet


@pytest.fixture(scope="module")
def steady_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[sqlite3.Connection,
                                                                             str, int]]:
    path = tmp_path_factory.mktemp("steady") / "store.db"
    run_id = _claimed(path, FakeClock())
    db = sqlite3.connect(path, isolation_level=None)
    (version,) = db.execute("SELECT version FROM runs WHERE id = ?", (run_id,)).fetchone()
    yield db, run_id, version
    db.close()


# whole seconds, so that a stored check often equals the new one, or the commit's time
moments = st.one_of(st.none(), st.integers(min_value=0, max_value=6).map(float))


@given(stored=moments, due=moments, now=st.integers(min_value=0, max_value=6).map(float),
       same_owner=st.booleans())
@example(stored=3.0, due=3.0, now=3.0, same_owner=True)  # the same check, come: steady
@example(stored=3.0, due=4.0, now=3.0, same_owner=True)  # a later one, the check come: moves
@example(stored=4.0, due=4.0, now=3.0, same_owner=False)  # a new owner: not steady
def test_the_steady_update_matches_when_the_general_one_would_move_nothing(
        steady_db: tuple[sqlite3.Connection, str, int], stored: float | None,
        due: float | None, now: float, same_owner: bool) -> None:
    """The steady UPDATE's WHERE clause is `check_moves` written out in SQL, and the owner:
    it changes the row exactly when the general path would leave both where they are."""
    db, run_id, version = steady_db
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute("UPDATE runs SET next_check_at = ?, owner = 'alice' WHERE id = ?",
                   (stored, run_id))
        guarded = (version + 1, "in_progress", "h" * 64, str(timedelta(seconds=now)), "{}",
                   run_id, version)
        changed = db.execute(sqlite_write.STEADY_UPDATE,
                             (*guarded, "alice" if same_owner else "bob", due, now, due)
                             ).rowcount
    finally:
        db.execute("ROLLBACK")
    assert changed == (same_owner and not check_moves(stored, due, now=now))


def test_a_busy_error_that_came_early_is_tried_again_within_the_wait(tmp_path: Path) -> None:
    """The driver gives up at once here (its busy timeout 0), while another connection
    holds the write lock for a moment: `begin_immediate` waits on with what is left of
    its own wait, takes the lock, and sets the driver's timeout back."""
    path = tmp_path / "store.db"
    _claimed(path, FakeClock())
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db = sqlite3.connect(path, isolation_level=None, timeout=0)
    holder.execute("BEGIN IMMEDIATE")
    release = threading.Timer(0.05, holder.execute, ("COMMIT",))
    release.start()
    try:
        begin_immediate(db, 5.0)
        db.execute("COMMIT")
    finally:
        release.join()
        holder.close()
    assert db.execute("PRAGMA busy_timeout").fetchone() == (5000,)
    db.execute("PRAGMA busy_timeout = 0")
    holder_again = sqlite3.connect(path, isolation_level=None)
    holder_again.execute("BEGIN IMMEDIATE")
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        begin_immediate(db, 0.05)  # its wait runs out: the busy error is raised
    holder_again.close()
    assert db.execute("PRAGMA busy_timeout").fetchone() == (50,)
    db.close()
