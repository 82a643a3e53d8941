"""3. Concurrency on SQLite: 1, 4 and 16 writer processes on one store file.

Each writer is its own process holding the lease of its own run and heartbeating it as fast
as it can for a fixed window; the figure is the aggregate rate (all writers' committed
heartbeats / the window from the first start to the last finish) and every exception is
counted as an error. The same pool of processes serves every round, and the rounds
alternate between the writer counts so drift hits each count alike. The PostgreSQL item
uses the same pool against a server URL.
"""

from __future__ import annotations

import multiprocessing
import time
from collections import Counter
from collections.abc import Callable, Sequence
from multiprocessing.queues import Queue
from pathlib import Path
from typing import Any

import waypost
from bench.harness import Figure, Section, interleave

COUNTS = (1, 4, 16)
Beat = Callable[[int], object]


def name(count: int, noun: str = "writer") -> str:
    return f"{count} {noun}" + ("s" if count > 1 else "")


def ratio_label(count: int, noun: str = "writer") -> str:
    return f"{name(count, noun)} / {name(1, noun)}"


def _waypost_beat(url: str, run_id: str, actor: str, epoch: int) -> tuple[Beat, Any]:
    store = waypost.open_store(url)
    worker = waypost.Run(store, run_id, actor=actor, epoch=epoch)
    return (lambda n: worker.heartbeat(note=f"beat {n}")), store.close


def _raw_pg_beat(url: str, run_id: str, actor: str, epoch: int) -> tuple[Beat, Any]:
    """Raw psycopg: insert a 1 KB event row and upsert a 2 KB packet row, in one statement
    and its own transaction: one round trip, as waypost's heartbeat makes (a transaction of
    two statements would take four: BEGIN, INSERT, INSERT, COMMIT)."""
    import psycopg

    conn = psycopg.connect(url, autocommit=True)
    event, packet = '{"e":"' + "e" * 1016 + '"}', '{"p":"' + "p" * 2040 + '"}'

    def beat(n: int) -> object:
        conn.execute("WITH moved AS (INSERT INTO packets (id, version, body) VALUES (%s, %s, %s)"
                     " ON CONFLICT (id) DO UPDATE SET version = excluded.version,"
                     " body = excluded.body RETURNING id)"
                     " INSERT INTO events (run_id, seq, body) SELECT id, %s, %s FROM moved",
                     (run_id, n, packet, n, event))
        return n

    return beat, conn.close


OPENERS = {"waypost": _waypost_beat, "raw-pg": _raw_pg_beat}


def _writer(kind: str, url: str, run_id: str, actor: str, epoch: int,
            commands: Queue[Any], results: Queue[Any]) -> None:
    beat, close = OPENERS[kind](url, run_id, actor, epoch)
    results.put("ready")
    done = 0
    while (command := commands.get()) is not None:
        start_at, seconds = command
        time.sleep(max(0.0, start_at - time.time()))
        ops, errors, first = 0, Counter[str](), time.time()
        while time.time() < start_at + seconds:
            try:
                beat(done)
                ops, done = ops + 1, done + 1
            except Exception as exc:
                errors[f"{type(exc).__name__}: {exc}"[:160]] += 1
        results.put((ops, dict(errors), first, time.time()))
    close()


class Pool:
    """Writer processes, each with its own run, waiting for a window to write in."""

    def __init__(self, url: str, runs: Sequence[tuple[str, str, int]], kind: str) -> None:
        context = multiprocessing.get_context("spawn")
        self.results: Queue[Any] = context.Queue()
        self.commands: list[Queue[Any]] = []
        self.processes: list[multiprocessing.process.BaseProcess] = []
        self.errors: Counter[str] = Counter()
        for run_id, actor, epoch in runs:
            commands: Queue[Any] = context.Queue()
            process = context.Process(target=_writer, daemon=True, args=(
                kind, url, run_id, actor, epoch, commands, self.results))
            process.start()
            self.commands.append(commands)
            self.processes.append(process)
        for _ in runs:
            self.results.get(timeout=120)

    def window(self, count: int, seconds: float, label: str) -> float:
        """Let `count` writers write for `seconds`; the aggregate committed rate."""
        start_at = time.time() + 0.05
        for commands in self.commands[:count]:
            commands.put((start_at, seconds))
        reports = [self.results.get(timeout=seconds + 300) for _ in range(count)]
        for _ops, errors, _first, _last in reports:
            self.errors.update({f"{label}: {k}": v for k, v in errors.items()})
        span: float = max(r[3] for r in reports) - min(r[2] for r in reports)
        committed: int = sum(r[0] for r in reports)
        return committed / span

    def close(self) -> None:
        for commands in self.commands:
            commands.put(None)
        for process in self.processes:
            process.join(timeout=30)


def claimed_runs(url: str, count: int) -> list[tuple[str, str, int]]:
    """`count` runs, each claimed by its own worker: (run id, worker, epoch)."""
    made = []
    with waypost.open_store(url) as store:
        for number in range(count):
            run, _ = waypost.start(store, f"writer {number}", actor="owner", owner="owner",
                                   target="none:", kind=waypost.Kind.LONG_RUNNING,
                                   max_silence=1800)
            worker = waypost.Run(store, run.id, actor=f"writer-{number}")
            worker.claim()
            assert worker.epoch is not None
            made.append((run.id, worker.actor, worker.epoch))
    return made


def windows(pool: Pool, counts: Sequence[int], seconds: float, rounds: int,
            noun: str = "writer") -> dict[str, list[float]]:
    def window(count: int) -> Callable[[], float]:
        return lambda: pool.window(count, seconds, name(count, noun))

    return interleave({name(c, noun): window(c) for c in counts}, rounds)


def errors_of(label: str, errors: Counter[str]) -> int:
    return sum(n for message, n in errors.items() if message.startswith(f"{label}: "))


def with_errors(label: str, values: Sequence[float], errors: Counter[str]) -> Figure:
    return Figure(name=label, samples=tuple(values), note=f"errors: {errors_of(label, errors)}")


def run(folder: Path, *, rounds: int, seconds: float) -> Section:
    section = Section(key="writers", title="3. Concurrency on SQLite: writer processes, "
                      "aggregate heartbeats", unit="ops/s", higher_is_better=True)
    url = str(folder / "writers.db")
    pool = Pool(url, claimed_runs(url, max(COUNTS)), "waypost")
    try:
        samples = windows(pool, COUNTS, seconds, rounds)
    finally:
        pool.close()
    section.figures = [with_errors(name(c), samples[name(c)], pool.errors) for c in COUNTS]
    for count in COUNTS[1:]:
        section.add_ratio(ratio_label(count), name(count), name(1))
    section.counts = {f"errors, {name(c)}": errors_of(name(c), pool.errors) for c in COUNTS}
    section.notes.append(f"{seconds:g} s window per sample, {rounds} interleaved rounds; each "
                         "writer heartbeats its own run")
    section.notes.extend(f"error: {message} (x{n})" for message, n in pool.errors.most_common(5))
    return section
