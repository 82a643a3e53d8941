"""A sweep's cost grows with the due runs, not the stored runs: over 200,000 stored runs with
1,000 due, it reads exactly the 1,000 (the others hold packets that would not even decode),
through the `next_check_at` index. The timing itself lives in bench/."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import msgspec
import pytest

from tests.helpers import FakeClock
from waypost.core.history import event_hash
from waypost.core.writes import Due
from waypost.durations import new_run_id
from waypost.events import Event
from waypost.model import Kind, State, from_json, to_json
from waypost.store import open_store
from waypost.store.sqlite.watch import due_sql
from waypost.usecases import starting, watchdog

STORED = 200_000
DUE = 1_000


def _fill(path: Path, clock: FakeClock) -> None:
    """One real run as a template, 1,000 due copies of it, and 199,000 runs that are not
    due (their next check is later, or never), inserted in bulk."""
    with open_store(str(path)) as store:
        template, _ = starting.start(store, "due", actor="alice", owner="alice", target="none:",
                                 kind=Kind.LONG_RUNNING, max_silence=60, clock=clock)
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("BEGIN")
    run_row = db.execute("SELECT version, state, owner, head_hash, fingerprint, created_at,"
                         " updated_at, next_check_at, packet FROM runs WHERE id = ?",
                         (template.id,)).fetchone()
    event_row = db.execute("SELECT seq, type, at, actor, body FROM events WHERE run_id = ?",
                           (template.id,)).fetchone()
    due_ids = [new_run_id(clock()) for _ in range(DUE - 1)]
    events = {rid: _rechained(event_row[4], template.id, rid) for rid in due_ids}
    db.executemany(
        "INSERT INTO runs (id, version, state, owner, head_hash, fingerprint, created_at,"
        " updated_at, next_check_at, packet) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(rid, *run_row[:3], events[rid].hash, *run_row[4:8],
          run_row[8].replace(template.id, rid)) for rid in due_ids])
    db.executemany(
        "INSERT INTO events (run_id, seq, type, at, actor, body) VALUES (?, ?, ?, ?, ?, ?)",
        [(rid, *event_row[:4], to_json(events[rid]).decode()) for rid in due_ids])
    later = run_row[7] + 86400.0
    db.executemany(
        "INSERT INTO runs (id, version, state, owner, head_hash, fingerprint, created_at,"
        " updated_at, next_check_at, packet) VALUES (?, 1, 'in_progress', 'alice', '', '',"
        " '', '', ?, '{}')",
        ((f"wp_not_due_{i:07d}", later if i % 2 else None) for i in range(STORED - DUE)))
    db.execute("COMMIT")
    db.close()


def _rechained(body: str, template: str, run_id: str) -> Event:
    """The template's first event as the first event of `run_id`, hashed as its own (a
    write checks the head event it chains onto)."""
    event = from_json(body.replace(template, run_id), Event)
    return msgspec.structs.replace(event, hash=event_hash(
        prev_hash=event.prev_hash, run_id=run_id, seq=event.seq, at=event.at,
        actor=event.actor, epoch=event.epoch, data=event.data))


@pytest.mark.slow
def test_a_sweep_over_200k_runs_touches_only_the_1000_due(tmp_path: Path) -> None:
    path, clock = tmp_path / "big.db", FakeClock()
    _fill(path, clock)
    now = clock.advance(61)
    with closing(sqlite3.connect(path)) as db:
        for owner in (False, True):
            plan = [row[3] for row in db.execute(
                "EXPLAIN QUERY PLAN " + due_sql(owner=owner, after=True),
                {"now": now.timestamp(), "limit": 500, "after_at": 0.0, "after_id": "",
                 "owner": "alice"})]
            assert plan == ["SEARCH runs USING INDEX runs_next_check "
                            "(next_check_at>? AND next_check_at<?)",
                            "CORRELATED SCALAR SUBQUERY 1",  # each due run's head event
                            "SEARCH events USING PRIMARY KEY (run_id=? AND seq=?)"]
    db.close()
    with open_store(str(path)) as store:
        read: list[Due] = []
        paged = store.due_runs

        def counting(**kwargs: object) -> list[Due]:
            page = paged(**kwargs)  # type: ignore[arg-type]
            read.extend(page)
            return page

        store.due_runs = counting  # type: ignore[method-assign]
        report = watchdog.sweep(store, watcher_id="a", now=now)
        assert report.errors == ()
        assert report.examined == len(read) == DUE
        assert len(report.actions) == DUE
        assert {a.state for a in report.actions} == {State.BLOCKED.value}
        assert paged(now=now) == []  # each due run's next check moved on
