"""4. The board: `waypost ls` (active runs, the real CLI) with 100,000 runs stored.

The store is filled fast but validly: a few template runs are made through the library
(in progress, blocked, cancelled), then copied row for row under new run ids, each copy's
events re-chained (new run id → new hashes) so that `waypost verify` passes on every copy;
a sample of copies is verified before measuring. Nine in ten stored runs are finished
(cancelled), as on a board that has been used for a while.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec

import waypost
from bench import procs
from bench.harness import Section, figures, interleave
from waypost.core.history import GENESIS, event_hash, verify_run
from waypost.durations import new_run_id, utcnow
from waypost.events import Event
from waypost.model import Packet, to_json

BATCH = 5_000
CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"  # the run id alphabet


@dataclass(frozen=True)
class Template:
    run_columns: tuple[str, ...]
    run_row: tuple[Any, ...]
    event_columns: tuple[str, ...]
    event_rows: tuple[tuple[Any, ...], ...]
    packet: Packet
    events: tuple[Event, ...]

    def copy(self, run_id: str) -> tuple[list[Any], list[list[Any]]]:
        """The rows of a valid copy of this run under `run_id`."""
        prev, events = GENESIS, []
        run_at, body_at = self.event_columns.index("run_id"), self.event_columns.index("body")
        for event, stored in zip(self.events, self.event_rows, strict=True):
            digest = event_hash(prev_hash=prev, run_id=run_id, seq=event.seq, at=event.at,
                                actor=event.actor, epoch=event.epoch, data=event.data)
            row = list(stored)
            row[run_at], row[body_at] = run_id, to_json(msgspec.structs.replace(
                event, run_id=run_id, prev_hash=prev, hash=digest)).decode()
            events.append(row)
            prev = digest
        run = list(self.run_row)
        for column, value in (("id", run_id), ("head_hash", prev), ("packet", to_json(
                msgspec.structs.replace(self.packet, id=run_id)).decode())):
            run[self.run_columns.index(column)] = value
        return run, events


def template_runs(store: waypost.Store, at: datetime) -> dict[str, str]:
    """One run in each shape the board shows: in progress, blocked, cancelled."""
    ids = {}
    for shape in ("in_progress", "blocked", "cancelled"):
        run, _ = waypost.start(store, f"Board template: {shape}", actor="owner", owner="owner",
                               target="file:result.md", kind=waypost.Kind.LONG_RUNNING,
                               max_silence=1800, heartbeat_interval=300, clock=lambda: at)
        worker = waypost.Run(store, run.id, actor="worker-1", clock=lambda: at)
        worker.claim()
        if shape == "in_progress":
            worker.heartbeat(note="halfway through the migration", progress=0.5)
        elif shape == "blocked":
            worker.block(waypost.BlockerKind.MISSING_INPUT, "staging API key not in the vault")
        else:
            waypost.Run(store, run.id, actor="owner", clock=lambda: at).cancel("superseded")
        ids[shape] = run.id
    return ids


def _template(db: sqlite3.Connection, run_id: str) -> Template:
    cur = db.execute("SELECT * FROM runs WHERE id = ?", (run_id,))
    run_columns = tuple(d[0] for d in cur.description)
    run_row = cur.fetchone()
    cur = db.execute("SELECT * FROM events WHERE run_id = ? ORDER BY seq", (run_id,))
    event_columns = tuple(d[0] for d in cur.description)
    event_rows = tuple(cur.fetchall())
    body = event_columns.index("body")
    return Template(run_columns=run_columns, run_row=run_row, event_columns=event_columns,
                    event_rows=event_rows,
                    packet=msgspec.json.decode(run_row[run_columns.index("packet")],
                                               type=Packet),
                    events=tuple(msgspec.json.decode(r[body], type=Event)
                                 for r in event_rows))


def templates(path: Path, run_ids: Mapping[str, str]) -> dict[str, Template]:
    """The stored rows of `run_ids` (by shape name), ready to be copied."""
    db = sqlite3.connect(path)
    try:
        return {shape: _template(db, run_id) for shape, run_id in run_ids.items()}
    finally:
        db.close()


def insert_copies(path: Path, pick: Callable[[int], Template], count: int,
                  at: datetime, *, alone: bool = False) -> list[str]:
    """Insert `count` valid copies (copy n of `pick(n)`) in one transaction; their ids.
    `alone`: no other connection has the store open, so the bulk load may skip the WAL."""
    made: list[str] = []
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("PRAGMA synchronous = OFF")  # setup only; what is measured is untouched
        db.execute("PRAGMA cache_size = -262144")
        if alone:
            db.execute("PRAGMA journal_mode = MEMORY")
        db.execute("BEGIN")
        for runs, events in _batches(pick, count, at, made):
            db.executemany(_insert("runs", pick(0).run_columns), runs)
            db.executemany(_insert("events", pick(0).event_columns), events)
        db.execute("COMMIT")
        if alone:
            db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.close()
    return made


def fill(path: Path, count: int) -> list[str]:
    """A store at `path` holding `count` valid runs (1 in 10 active); returns some copy ids."""
    start = utcnow().replace(microsecond=0) - timedelta(hours=2)
    with waypost.open_store(str(path)) as store:
        ids = template_runs(store, start)
    shapes = templates(path, ids)
    made = insert_copies(path, lambda n: shapes[_shape(n)], count - len(ids), start,
                         alone=True)
    return made[:: max(1, len(made) // 5)]


def _shape(number: int) -> str:
    if number % 10:
        return "cancelled"
    return "blocked" if number % 50 == 0 else "in_progress"


def _batches(pick: Callable[[int], Template], count: int, start: datetime,
             made: list[str]) -> Iterator[tuple[list[list[Any]], list[list[Any]]]]:
    runs: list[list[Any]] = []
    events: list[list[Any]] = []
    for number, run_id in enumerate(_run_ids(start, count)):
        run, rows = pick(number).copy(run_id)
        runs.append(run)
        events.extend(rows)
        made.append(run_id)
        if len(runs) == BATCH:
            yield runs, events
            runs, events = [], []
    if runs:
        yield runs, events


_PAIRS = [a + b for a in CROCKFORD for b in CROCKFORD]


def _run_ids(start: datetime, count: int) -> Iterator[str]:
    """`count` distinct, well-formed run ids made at `start`: one real id's time and random
    head, with the last 8 characters counting up (new_run_id per copy costs more than the
    copy)."""
    head = new_run_id(start)[:-8]
    for n in range(count):
        yield (head + _PAIRS[(n >> 30) & 1023] + _PAIRS[(n >> 20) & 1023]
               + _PAIRS[(n >> 10) & 1023] + _PAIRS[n & 1023])


def _insert(table: str, columns: Sequence[str]) -> str:
    return (f"INSERT INTO {table} ({', '.join(columns)})"
            f" VALUES ({', '.join('?' * len(columns))})")


def check_copies(path: Path, run_ids: Sequence[str]) -> None:
    """Raise IntegrityError unless every sampled copy verifies (hash chain and fold)."""
    with waypost.open_store(str(path)) as store:
        for run_id in run_ids:
            verify_run(run_id, store.events(run_id), store.get(run_id))


def run(folder: Path, *, rounds: int, stored: int, small: int = 1_000) -> Section:
    section = Section(key="board", title=f"4. Board: `waypost ls` of active runs, {stored:,} "
                      "runs stored", unit="ms", higher_is_better=False)
    big_path, small_path = folder / "board-big.db", folder / "board-small.db"
    check_copies(big_path, fill(big_path, stored))
    check_copies(small_path, fill(small_path, small))
    script, pycache = procs.waypost_script(), folder / "pycache"
    big, small_name = f"waypost ls ({stored:,} stored)", f"waypost ls ({small:,} stored)"
    big_json = f"waypost ls --json ({stored:,} stored)"
    big_env = procs.environment(big_path, "owner", pycache)
    small_env = procs.environment(small_path, "owner", pycache)
    samples = interleave({
        procs.PYTHON_PASS: procs.timed(procs.python_pass(), big_env),
        small_name: procs.timed([script, "ls"], small_env),
        big: procs.timed([script, "ls"], big_env),
        big_json: procs.timed([script, "ls", "--json"], big_env),
    }, rounds + 1)
    section.figures = figures({name: values[1:] for name, values in samples.items()})
    section.add_ratio(f"ls at {stored:,} / ls at {small:,}", big, small_name)
    section.add_ratio("ls / python -c pass", big, procs.PYTHON_PASS)
    section.counts = {"stored runs": stored, "active runs": active_runs(stored)}
    section.notes.append(f"`ls` prints the 100 most recently updated of "
                         f"{active_runs(stored):,} active runs; {rounds} interleaved rounds")
    return section


def active_runs(count: int) -> int:
    """How many of `count` filled runs are active (the copies' share, plus two templates)."""
    return sum(1 for n in range(count - 3) if _shape(n) != "cancelled") + 2
