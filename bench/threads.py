"""3b. Group commit in one process: 1 and 16 writer threads, each heartbeating its own run
through one `SqliteStore`, for a fixed window; and the 16 threads again with grouping off
(every group one write), so the gain is measured against the same process without it; and
the 16 threads with grouping off on a store whose commits are not flushed (synchronous=OFF,
set by the bench; waypost has no such setting): commits that cost nothing to make durable,
the most any grouping of them could give these threads.

Where PostgreSQL is reachable (as for section 6), 1 and 16 threads again through one
`PostgresStore`, which groups nothing in the client: each write is its own one-statement
transaction on a pooled connection, and the server flushes the WAL of the commits that
wait at one moment together. Its gain says whether grouping in the client would pay there.

The figure is the aggregate rate of committed heartbeats; every exception is an error.
Rounds alternate between the subjects so drift hits each alike."""

from __future__ import annotations

import os
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

from bench import pending, postgres
from bench.harness import Figure, Section, check, interleave
from waypost.store import Store, open_store
from waypost.store.sqlite import write as sqlite_write
from waypost.store.sqlite.store import SqliteStore
from waypost.usecases.runs import Run
from waypost.usecases.starting import start

THREADS = 16
ONE, MANY, UNGROUPED = "1 thread", f"{THREADS} threads", f"{THREADS} threads, no grouping"
UNFLUSHED = f"{UNGROUPED}, no flush (synchronous=OFF)"
GAIN = f"{MANY} / {ONE}"
CEILING = f"{THREADS} threads, no flush / {ONE} (the ceiling of any grouping)"
OVER_UNGROUPED = f"{MANY} / {UNGROUPED}"
PG_ONE, PG_MANY = f"PostgreSQL: {ONE}", f"PostgreSQL: {MANY}, no grouping in the client"
PG_GAIN = f"PostgreSQL: {MANY} / {ONE}"


def _claimed(store: Store) -> list[Run]:
    """`THREADS` runs, each claimed by a worker of its own."""
    handles = []
    for i in range(THREADS):
        packet, _ = start(store, f"thread {i}", actor="alice", target="none:")
        handle = Run(store, packet.id, actor=f"w{i}")
        handle.claim()
        handles.append(handle)
    return handles


def _postgres(stack: ExitStack) -> tuple[list[Run] | None, str]:
    """Claimed runs in a private schema on the bench's PostgreSQL server (dropped when
    `stack` closes), or None and why PostgreSQL is not measured."""
    why = ("this waypost has no PostgreSQL store"
           if not pending.exists("waypost.store.postgres.store") else postgres.unreachable())
    if why is not None:
        return None, why
    schema = f"waypost_bench_threads_{os.getpid()}_{secrets.token_hex(3)}"
    stack.callback(postgres.drop_schemas, schema)
    store = stack.enter_context(open_store(postgres.in_schema(schema)))
    return _claimed(store), ""


def _window(handles: list[Run], seconds: float, errors: Counter[str]) -> float:
    done = [0] * len(handles)
    stop = time.monotonic() + seconds

    def work(index: int) -> None:
        run = handles[index]
        while time.monotonic() < stop:
            try:
                run.heartbeat()
                done[index] += 1
            except Exception as exc:  # counted: the target is zero
                errors[f"{type(exc).__name__}: {exc}"[:160]] += 1

    began = time.monotonic()
    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(handles))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(done) / (time.monotonic() - began)


def run(folder: Path, *, rounds: int, seconds: float) -> Section:
    section = Section(key="threads", title="3b. Group commit: writer threads in one process, "
                      "aggregate heartbeats", unit="ops/s", higher_is_better=True)
    errors: Counter[str] = Counter()
    with ExitStack() as stack:
        store = SqliteStore(folder / "threads.db")
        stack.callback(store.close)
        handles = _claimed(store)
        unflushed_store = SqliteStore(folder / "threads-unflushed.db")
        stack.callback(unflushed_store.close)
        unflushed = _claimed(unflushed_store)
        assert unflushed_store._db is not None
        unflushed_store._db.execute("PRAGMA synchronous = OFF")

        def ungrouped(handles: list[Run]) -> float:
            most, sqlite_write.MOST = sqlite_write.MOST, 1
            try:
                return _window(handles, seconds, errors)
            finally:
                sqlite_write.MOST = most

        subjects: dict[str, Callable[[], float]] = {
            ONE: lambda: _window(handles[:1], seconds, errors),
            MANY: lambda: _window(handles, seconds, errors),
            UNGROUPED: lambda: ungrouped(handles),
            UNFLUSHED: lambda: ungrouped(unflushed),
        }
        shared, why = _postgres(stack)
        if shared is not None:
            subjects[PG_ONE] = lambda: _window(shared[:1], seconds, errors)
            subjects[PG_MANY] = lambda: _window(shared, seconds, errors)
        samples = interleave(subjects, rounds)
        groups, writes = store.group.groups, store.group.writes
    section.figures = [Figure(name=n, samples=tuple(v)) for n, v in samples.items()]
    gain = section.add_ratio(GAIN, MANY, ONE)
    section.add_ratio(OVER_UNGROUPED, MANY, UNGROUPED)
    ceiling = section.add_ratio(CEILING, UNFLUSHED, ONE)
    if shared is not None:
        section.add_ratio(PG_GAIN, PG_MANY, PG_ONE)
    total = sum(errors.values())
    section.counts = {"errors": total, "groups": groups, "writes": writes}
    section.targets.append(check(f"group commit: {MANY} >= 1.8x {ONE}, zero errors",
                                 gain.median, 1.8, at_least=True, also=total == 0,
                                 detail=f"{total} errors; the ceiling, no flush at all: "
                                 f"{ceiling.median:.2f}x"))
    section.notes.append(f"{seconds:g} s window per sample, {rounds} interleaved rounds; one "
                         "SqliteStore shared by the threads, synchronous=FULL")
    section.notes.append(
        "PostgreSQL: one PostgresStore shared by the threads (a pool of 8 connections), each "
        "write one statement; the server shares the 2 cores" if shared is not None
        else f"PostgreSQL not measured: {why}")
    section.notes.extend(f"error: {m} (x{n})" for m, n in errors.most_common(5))
    return section
