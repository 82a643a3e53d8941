"""A sweep that commits a page at a time leaves the store exactly as one that commits one
run at a time: the same report, the same events, packets, notices and next checks. Two
copies of one store are swept at the same instant, one of them with its page commits
refused (the sweep then goes run by run, the way a sweep always did)."""

from __future__ import annotations

import shutil
import sqlite3
import threading
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import FakeClock
from waypost.core import watching
from waypost.core.history import prepare, verify_run
from waypost.core.writes import Deferral, RunWrite
from waypost.errors import StoreError
from waypost.events import AnyEventData, BlockerOpened
from waypost.model import BlockerKind, EvidenceKind, Kind, Packet, Verdict
from waypost.store import Store, open_store
from waypost.store.sqlite.store import SqliteStore
from waypost.usecases import runs, starting, watchdog


def _start(store: Store, clock: FakeClock, **rules: object) -> runs.Run:
    params: dict[str, Any] = {"max_silence": 60.0, **rules}
    run, _ = starting.start(store, "t", actor="alice", owner="alice", target="file:result.md",
                        notify="file:notices.jsonl", kind=Kind.LONG_RUNNING, clock=clock,
                        **params)
    worker = runs.Run(store, run.id, actor="w1", clock=clock)
    worker.claim()
    return worker


def _fill(store: Store, clock: FakeClock) -> str:
    """Runs with every kind of due condition; returns the one the rules will refuse."""
    for _ in range(4):
        _start(store, clock)  # silent
    _start(store, clock, deadline=clock() + timedelta(seconds=30))  # silent, then deadline
    _start(store, clock, max_silence=None, deadline=clock() + timedelta(seconds=45))
    ready = _start(store, clock, review_within=50.0)
    ready.report_evidence(EvidenceKind.TEST, Verdict.PASSED, "42 passed")
    ready.ready("done")
    calm = _start(store, clock, max_silence=3600.0)
    assert store.defer_check(calm.id, expected_version=2, at=clock())  # due, needs nothing
    return _start(store, clock).id


def _state(store: Store, now: datetime) -> dict[str, object]:
    """Everything a sweep may change, run by run."""
    later = store.due_runs(now=now + timedelta(days=3650))
    return {"runs": {rid: (store.get(rid), store.events(rid)) for rid in store.run_ids()},
            "deliveries": store.deliveries(store.run_ids()),
            "due": [(d.packet.id, d.due_at) for d in later]}


def test_a_page_at_a_time_records_what_one_run_at_a_time_does(
        tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    batched, single = tmp_path / "batched.db", tmp_path / "single.db"
    with open_store(str(batched)) as store:
        refused = _fill(store, clock)
    shutil.copy(batched, single)
    decide = watching.decide

    def deciding(packet: Packet, now: datetime, *, relay_running: bool) -> AnyEventData | None:
        if packet.id == refused:  # something the rules refuse a watchdog
            return BlockerOpened(blocker_id="b1", kind=BlockerKind.MISSING_INPUT, detail="?")
        return decide(packet, now, relay_running=relay_running)

    monkeypatch.setattr(watchdog, "decide", deciding)
    now = clock.advance(61)
    with open_store(str(batched)) as store:
        paged = watchdog.sweep(store, watcher_id="t", now=now, batch=3)
        after_paged = _state(store, now)
    with open_store(str(single)) as store:

        def broken(writes: Sequence[RunWrite | Deferral], *,
                   meanwhile: Callable[[], None] | None = None) -> list[bool]:
            raise StoreError("cannot commit writes")

        monkeypatch.setattr(store, "commit_writes", broken)
        one_by_one = watchdog.sweep(store, watcher_id="t", now=now, batch=3)
        after_single = _state(store, now)
    assert paged == one_by_one
    assert after_paged == after_single
    assert (paged.examined, paged.deferred, len(paged.actions)) == (9, 1, 8)
    assert [e.split(":")[0] for e in paged.errors] == [refused]
    assert {a.recorded for a in paged.actions} == {
        "worker_silent (b1)", "deadline_passed (b2)", "deadline_passed (b1)",
        "review_overdue"}
    with open_store(str(batched)) as store:
        for run_id in store.run_ids():
            verify_run(run_id, store.events(run_id), store.get(run_id))


# --- SQLite: the next page is decided while the COMMIT flushes ----------------------------


class _HeldCommit:
    """The store's connection, with its COMMIT held until `ready` is set (or it fails
    with `error`): whatever the store set going before its COMMIT has started by then."""

    def __init__(self, db: sqlite3.Connection, ready: threading.Event,
                 error: sqlite3.Error | None = None) -> None:
        self._db, self._ready, self._error = db, ready, error

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        if sql == "COMMIT":
            assert self._ready.wait(10), "the COMMIT came before meanwhile started"
            if self._error is not None:
                raise self._error
        return self._db.execute(sql, *args)


def _one_silent_write(store: SqliteStore, clock: FakeClock) -> RunWrite:
    run = _start(store, clock)
    now = clock.advance(61)
    snap = store.load(run.id)
    data = watching.decide(snap.packet, now, relay_running=False)
    assert data is not None
    return prepare(snap, [(data, None)], actor="watchdog:t", at=now)


def test_meanwhile_starts_before_the_commit_flushes(tmp_path: Path, clock: FakeClock) -> None:
    with SqliteStore(str(tmp_path / "w.db")) as store:
        write = _one_silent_write(store, clock)
        started, db = threading.Event(), store._file.db
        assert db is not None
        store._file.db = _HeldCommit(db, started)  # type: ignore[assignment]
        try:
            assert store.commit_writes([write], meanwhile=started.set) == [True]
        finally:
            store._file.db = db
        assert store.load(write.run_id).packet == write.packet


def test_a_commit_that_fails_at_its_flush_raises_its_own_error_not_meanwhiles(
        tmp_path: Path, clock: FakeClock) -> None:
    with SqliteStore(str(tmp_path / "w.db")) as store:
        write = _one_silent_write(store, clock)
        started, db = threading.Event(), store._file.db
        assert db is not None

        def meanwhile() -> None:
            started.set()
            raise RuntimeError("deciding the next page failed")

        store._file.db = _HeldCommit(  # type: ignore[assignment]
            db, started, sqlite3.OperationalError("disk I/O error"))
        try:
            with pytest.raises(StoreError, match="disk I/O error"):
                store.commit_writes([write], meanwhile=meanwhile)
        finally:
            store._file.db = db
        assert store.load(write.run_id).packet.version == write.expected_version
