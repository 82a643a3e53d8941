"""5. Watchdog sweep: `waypost.usecases.watchdog.sweep` over a store where a few runs are due.

Two stores, measured in alternating rounds: one with 1,000,000 runs stored of which 10,000
are due, one with 10,000 stored of which 1,000 are due. The stored runs are long-running
runs whose next check is a day or more away (spread over a week); the due runs are
workers silent for two hours. Before each round, fresh due runs are copied in (outside the
clock); the sweep then finds them through the index and records `worker_silent` on each,
one durable write per page of due runs (`watchdog.BATCH`). If the cost follows due runs
and not stored runs, the big store's sweep takes about 10x the small one's (ten times the
due runs). Where PostgreSQL is reachable (as for section 6), a third store there has the
small one's shape, its runs made through the library: its ratio to the small SQLite store
is what the shared backend costs a sweep.

Beside the big store's sweep, in the same rounds and on the same file, its floor: raw
`sqlite3` doing only the durable writes that sweep makes, for as many fresh due runs. It
reads them through the same index a page of `BATCH` at a time (id, version and packet),
then in one transaction a page inserts one event row each and rewrites each run's row
(version, state, head hash, updated at, packet, next check), with the bytes of a real
`worker_silent` event and swept packet: no deciding, hashing or JSON. What the sweep takes
beyond it is waypost's own work; the floor itself is what this disk and SQLite cost.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import time
from contextlib import ExitStack
from datetime import datetime, timedelta
from pathlib import Path

import waypost
from bench import board, pending
from bench.harness import NOT_MEASURED, Section, absent, check, figures, interleave
from waypost.durations import utcnow
from waypost.usecases.watchdog import BATCH, sweep

QUIET_SHAPES = 28  # quiet templates, next checks spread over a week


def _start(store: waypost.Store, at: datetime, *, silence: float, title: str) -> str:
    run, _ = waypost.start(store, title, actor="owner", owner="owner", target="none:",
                           kind=waypost.Kind.LONG_RUNNING, max_silence=silence,
                           worker="worker-1", clock=lambda: at)
    return run.id


class Swept:
    """A store the bench sweeps: `due` fresh due runs are added before every sweep."""

    store: waypost.Store
    due: int
    examined: int = 0
    recorded: int = 0

    def add_due(self) -> None:
        raise NotImplementedError

    def sweep_once(self) -> float:
        """Add `due` fresh due runs, then sweep; milliseconds for the sweep alone."""
        self.add_due()
        start = time.perf_counter()
        report = sweep(self.store, watcher_id="bench", now=utcnow())
        elapsed = (time.perf_counter() - start) * 1000
        self.examined, self.recorded = report.examined, len(report.actions)
        if report.errors:
            raise SystemExit(f"bench: the sweep reported errors: {report.errors[:3]}")
        return elapsed


class SweptStore(Swept):
    """A SQLite store of `stored` runs, filled by copying template rows; the due runs are
    copied in too."""

    def __init__(self, path: Path, stored: int, due: int, stack: ExitStack) -> None:
        now = utcnow()
        with waypost.open_store(str(path)) as store:
            ids = {f"quiet-{n}": _start(store, now - timedelta(hours=6 * n),
                                        silence=86400.0 * (1 + n / 4), title="quiet")
                   for n in range(QUIET_SHAPES)}
            ids["due"] = _start(store, now - timedelta(hours=2), silence=1800.0, title="due")
        self.shapes = board.templates(path, ids)
        self.path, self.due = path, due
        quiet = stored - due - len(ids)
        board.insert_copies(path, lambda n: self.shapes[f"quiet-{n % QUIET_SHAPES}"], quiet,
                            now, alone=True)
        self.store = stack.enter_context(waypost.open_store(str(path)))
        self.sweep_once()  # the template due run; warms the caches

    def add_due(self) -> None:
        board.insert_copies(self.path, lambda n: self.shapes["due"], self.due, utcnow())


class RawFloor(Swept):
    """The durable writes of a sweep of `swept`'s due runs, in raw sqlite3 on its file.

    Its rows end out of the sweeps' way (their next check a year ahead): the events it
    writes are bytes copied from a real one, not a chain a sweep could extend."""

    _EVENT = ("INSERT INTO events (run_id, seq, type, at, actor, body)"
              " VALUES (?, ?, 'blocker_opened', ?, ?, ?)")
    _RUN = ("UPDATE runs SET version = ?, state = 'blocked', head_hash = ?, updated_at = ?,"
            " packet = ?, next_check_at = ? WHERE id = ? AND version = ?")

    def __init__(self, swept: SweptStore, stack: ExitStack) -> None:
        self.swept, self.due = swept, swept.due
        self.db = sqlite3.connect(swept.path, isolation_level=None, timeout=60)
        stack.callback(self.db.close)
        self.db.execute("PRAGMA synchronous = FULL")  # as the store's own connection
        row = self.db.execute("SELECT run_id, actor, body FROM events"
                              " WHERE type = 'blocker_opened' LIMIT 1").fetchone()
        if row is None:
            raise SystemExit("bench: the big store holds no swept run to copy")
        run_id, self.actor, self.body = row
        (self.packet,) = self.db.execute("SELECT packet FROM runs WHERE id = ?",
                                         (run_id,)).fetchone()

    def add_due(self) -> None:
        self.swept.add_due()

    def sweep_once(self) -> float:
        self.add_due()
        now = utcnow()
        at, later = now.isoformat(), (now + timedelta(days=365)).timestamp()
        head = "0" * 64
        start = time.perf_counter()
        written, after = 0, (0.0, "")
        while True:
            page = self.db.execute(
                "SELECT id, version, packet, next_check_at FROM runs"
                " WHERE next_check_at <= ? AND (next_check_at, id) > (?, ?)"
                " ORDER BY next_check_at, id LIMIT ?", (now.timestamp(), *after, BATCH)).fetchall()
            self.db.execute("BEGIN IMMEDIATE")
            self.db.executemany(self._EVENT, [(run_id, version + 1, at, self.actor, self.body)
                                              for run_id, version, _, _ in page])
            changed = self.db.executemany(self._RUN, [
                (version + 1, head, at, self.packet, later, run_id, version)
                for run_id, version, _, _ in page]).rowcount
            self.db.execute("COMMIT")
            written += changed
            if len(page) < BATCH:
                break
            after = (page[-1][3], page[-1][0])
        elapsed = (time.perf_counter() - start) * 1000
        self.examined = self.recorded = written
        return elapsed


class PostgresSweptStore(Swept):
    """The same shape on PostgreSQL, in a schema of its own (dropped with `stack`), every
    run made through the library."""

    def __init__(self, stored: int, due: int, stack: ExitStack) -> None:
        from bench import postgres

        schema = f"waypost_bench_sweep_{os.getpid()}_{secrets.token_hex(3)}"
        stack.callback(postgres.drop_schemas, schema)
        self.store = stack.enter_context(waypost.open_store(postgres.in_schema(schema)))
        self.due = due
        now = utcnow()
        for n in range(stored - due):
            shape = n % QUIET_SHAPES
            _start(self.store, now - timedelta(hours=6 * shape),
                   silence=86400.0 * (1 + shape / 4), title="quiet")
        self.sweep_once()  # warms the pool and the server's caches, as for SQLite

    def add_due(self) -> None:
        now = utcnow()
        for _ in range(self.due):
            _start(self.store, now - timedelta(hours=2), silence=1800.0, title="due")


def _postgres_unreachable() -> str | None:
    from bench import pending, postgres

    if not pending.exists("waypost.store.postgres.store"):
        return "this waypost has no PostgreSQL store"
    return postgres.unreachable()


def run(folder: Path, *, rounds: int, stored: int) -> Section:
    small_stored, small_due = 10_000, 1_000
    big_due = max(small_due, stored // 100)
    big = f"{stored:,} stored, {big_due:,} due"
    small = f"{small_stored:,} stored, {small_due:,} due"
    section = Section(key="sweep", title=pending.SWEEP_TITLE, unit="ms",
                      higher_is_better=False)
    on_postgres = f"PostgreSQL: {small}"
    floor = f"raw sqlite3, the same writes alone: {big}"
    with ExitStack() as stack:
        began = time.perf_counter()
        big_store = SweptStore(folder / "big.db", stored, big_due, stack)
        stores: dict[str, Swept] = {
            big: big_store, floor: RawFloor(big_store, stack),
            small: SweptStore(folder / "small.db", small_stored, small_due, stack)}
        why_not = _postgres_unreachable()
        if why_not is None:
            stores[on_postgres] = PostgresSweptStore(small_stored, small_due, stack)
        filled = time.perf_counter() - began
        samples = interleave({name: s.sweep_once for name, s in stores.items()}, rounds)
    section.figures = figures(samples, notes={
        name: f"{s.recorded:,} recorded, {s.examined:,} examined in the last sweep"
        for name, s in stores.items()})
    ratio = section.add_ratio(f"({big}) / ({small})", big, small)
    over_floor = section.add_ratio(f"waypost / raw sqlite3 floor ({big})", big, floor)
    if why_not is None:
        section.add_ratio(f"PostgreSQL / SQLite ({small})", on_postgres, small)
    else:
        section.notes.append(f"PostgreSQL not measured: {why_not}")
    section.counts = {"stored (big)": stored, "due (big)": big_due}
    section.notes.append(f"{rounds} interleaved rounds; filling the stores took {filled:.0f} s "
                         "(not measured)")
    full_size = stored >= 1_000_000
    if full_size:
        section.targets = [
            check(pending.SWEEP_RATIO_TARGET, ratio.median, 15.0, at_least=False),
            check(pending.SWEEP_TIME_TARGET, section.figure(big).median, 50.0,
                  at_least=False, unit="ms",
                  detail=f"{section.figure(big).median / big_due * 1000:.0f} us per due run, "
                  f"one durable write per {BATCH} runs; the raw sqlite3 floor of the same "
                  f"writes: {section.figure(floor).median:.0f} ms"),
            check(pending.SWEEP_FLOOR_TARGET, over_floor.median, 2.0, at_least=False)]
    else:
        section.targets = [absent(t, NOT_MEASURED, "a full run measures it")
                           for t in (pending.SWEEP_RATIO_TARGET, pending.SWEEP_TIME_TARGET,
                                     pending.SWEEP_FLOOR_TARGET)]
    return section
