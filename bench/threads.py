"""3b. Group commit in one process: 1 and 16 writer threads, each heartbeating its own run
through one `SqliteStore`, for a fixed window; and the 16 threads again with grouping off
(every group one write), so the gain is measured against the same process without it.

The figure is the aggregate rate of committed heartbeats; every exception is an error.
Rounds alternate between the three subjects so drift hits each alike."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from bench.harness import Figure, Section, check, interleave
from waypost.runs import Run
from waypost.starting import start
from waypost.store import sqlite_write
from waypost.store.sqlite import SqliteStore

THREADS = 16
ONE, MANY, UNGROUPED = "1 thread", f"{THREADS} threads", f"{THREADS} threads, no grouping"
GAIN = f"{MANY} / {ONE}"
OVER_UNGROUPED = f"{MANY} / {UNGROUPED}"


def _window(store: SqliteStore, handles: list[Run], seconds: float,
            errors: Counter[str]) -> float:
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
    store = SqliteStore(folder / "threads.db")
    errors: Counter[str] = Counter()
    handles = []
    for i in range(THREADS):
        packet, _ = start(store, f"thread {i}", actor="alice", target="none:")
        handle = Run(store, packet.id, actor=f"w{i}")
        handle.claim()
        handles.append(handle)

    def ungrouped() -> float:
        most, sqlite_write.MOST = sqlite_write.MOST, 1
        try:
            return _window(store, handles, seconds, errors)
        finally:
            sqlite_write.MOST = most

    subjects: dict[str, Callable[[], float]] = {
        ONE: lambda: _window(store, handles[:1], seconds, errors),
        MANY: lambda: _window(store, handles, seconds, errors),
        UNGROUPED: ungrouped,
    }
    try:
        samples = interleave(subjects, rounds)
        groups, writes = store.group.groups, store.group.writes
    finally:
        store.close()
    section.figures = [Figure(name=n, samples=tuple(v)) for n, v in samples.items()]
    gain = section.add_ratio(GAIN, MANY, ONE)
    section.add_ratio(OVER_UNGROUPED, MANY, UNGROUPED)
    total = sum(errors.values())
    section.counts = {"errors": total, "groups": groups, "writes": writes}
    section.targets.append(check(f"group commit: {MANY} >= 1.8x {ONE}, zero errors",
                                 gain.median, 1.8, at_least=True, also=total == 0,
                                 detail=f"{total} errors"))
    section.notes.append(f"{seconds:g} s window per sample, {rounds} interleaved rounds; one "
                         "SqliteStore shared by the threads, synchronous=FULL")
    section.notes.extend(f"error: {m} (x{n})" for m, n in errors.most_common(5))
    return section
