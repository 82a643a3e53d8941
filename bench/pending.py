"""5-7. Items that depend on features of their own: the watchdog sweep, PostgreSQL, delivery.

Each first checks that its feature exists; where it does not, the row says "not built yet"
and no number is printed. A feature that exists but cannot be measured here (no server)
says why instead.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from bench.harness import NOT_BUILT, NOT_MEASURED, Section, absent

SWEEP_RATIO_TARGET = "sweep: 1M stored/10k due <= 15x the 10k stored/1k due time"
SWEEP_TIME_TARGET = "sweep: 1M stored/10k due <= 50 ms"
SWEEP_FLOOR_TARGET = "sweep: 1M stored/10k due <= 2.0x its raw sqlite3 floor"
PG_TARGET = ("PostgreSQL: 8 clients / 1 client >= 0.9 of raw psycopg's own 8 / 1"
             " (the same writes, one round trip each)")

SWEEP_TITLE = "5. Watchdog sweep: due runs among stored runs"
PG_TITLE = "6. PostgreSQL: durable transitions (heartbeats), client processes"
DELIVERY_TITLE = "7. Delivery: approved -> delivered to a local webhook receiver"


def exists(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def unavailable(key: str, title: str, unit: str, higher: bool, status: str,
                targets: tuple[str, ...] = (), why: str = "") -> Section:
    """A section with no numbers: the feature is not built, or cannot be measured here."""
    section = Section(key=key, title=title, unit=unit, higher_is_better=higher, status=status)
    section.targets = [absent(text, status, why) for text in targets]
    if why:
        section.notes.append(why)
    return section


def sweep(folder: Path, *, rounds: int, stored: int) -> Section:
    if not exists("waypost.usecases.watchdog"):
        return unavailable("sweep", SWEEP_TITLE, "ms", False, NOT_BUILT,
                           (SWEEP_RATIO_TARGET, SWEEP_TIME_TARGET, SWEEP_FLOOR_TARGET))
    import bench.sweep as measured

    return measured.run(folder, rounds=rounds, stored=stored)


def postgres(folder: Path, *, rounds: int, seconds: float) -> Section:
    if not exists("waypost.store.postgres.store"):
        return unavailable("postgres", PG_TITLE, "ops/s", True, NOT_BUILT, (PG_TARGET,))
    import bench.postgres as measured

    why = measured.unreachable()
    if why is not None:
        return unavailable("postgres", PG_TITLE, "ops/s", True, NOT_MEASURED, (PG_TARGET,),
                           why)
    return measured.run(rounds=rounds, seconds=seconds)


def delivery(folder: Path, *, rounds: int, batch: int) -> Section:
    if not exists("waypost.delivery.relay"):
        return unavailable("delivery", DELIVERY_TITLE, "ops/s", True, NOT_BUILT)
    import bench.delivery as measured

    return measured.run(folder, rounds=rounds, batch=batch)
