"""5. Watchdog sweep: `waypost.watchdog.sweep` over a store where a few runs are due.

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
"""

from __future__ import annotations

import os
import secrets
import time
from contextlib import ExitStack
from datetime import datetime, timedelta
from pathlib import Path

import waypost
from bench import board, pending
from bench.harness import NOT_MEASURED, Section, absent, check, figures, interleave
from waypost.durations import utcnow
from waypost.watchdog import BATCH, sweep

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

    if not pending.exists("waypost.store.postgres"):
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
    with ExitStack() as stack:
        began = time.perf_counter()
        stores: dict[str, Swept] = {
            big: SweptStore(folder / "big.db", stored, big_due, stack),
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
                  f"one durable write per {BATCH} runs")]
    else:
        section.targets = [absent(t, NOT_MEASURED, "a full run measures it")
                           for t in (pending.SWEEP_RATIO_TARGET, pending.SWEEP_TIME_TARGET)]
    return section
