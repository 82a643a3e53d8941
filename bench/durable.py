"""1. Durable transition: one event + packet committed with synchronous=FULL, per second.

Subject: `waypost.Run(...).heartbeat()` on a SQLite store (decide, hash-chain, commit event +
packet under the version guard); and the same through a new `Run` each time, which reads
the run and checks its head event's hash first (a one-shot CLI write's path). Beside
them, `Store.commit` alone (the same heartbeats built before the clock starts): the
store's share of a transition; and waypost's SQL alone: the statements a heartbeat's
commit runs (BEGIN IMMEDIATE, the guarded UPDATE, the event INSERT,
COMMIT) on waypost's own schema, every parameter made before the clock starts, on a bare
`sqlite3` connection: the floor of this schema and these statements, which no Python around
them can beat. Baselines, in the same rounds:
(a) raw `sqlite3`: insert a 1 KB event row and upsert a 2 KB packet row in one
    BEGIN IMMEDIATE transaction, WAL, synchronous=FULL, into the plain tables anyone would
    write by hand (keyed by run id and seq; no other index);
(b) LangGraph's `SqliteSaver.put` of a small (~1 KB) checkpoint, same pragmas;
(c) append 1 KB to a file and fsync it: the disk's limit.
"""

from __future__ import annotations

import importlib.util
import os
import sqlite3
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import waypost
from bench.harness import Section, figures, interleave, rate
from waypost.core.due import lease_until
from waypost.core.history import make_event
from waypost.core.machine import apply
from waypost.core.writes import Snapshot
from waypost.durations import utcnow
from waypost.events import Event, Heartbeat
from waypost.model import Packet, to_json
from waypost.store.sqlite.write import INSERT_EVENT, STEADY_UPDATE, columns, event_row

WAYPOST = "waypost Run.heartbeat()"
FRESH = "waypost heartbeat from a fresh read (a new Run each)"
COMMIT_ONLY = "waypost Store.commit alone (event pre-built)"
SQL_ONLY = "waypost's SQL alone (parameters pre-built; the floor)"
RAW = "raw sqlite3: insert 1 KB event + upsert 2 KB packet"
LANGGRAPH = "LangGraph SqliteSaver.put (~1 KB checkpoint)"
FSYNC = "append 1 KB + fsync (disk limit)"

VS_RAW = "waypost / raw sqlite3"
VS_LANGGRAPH = "waypost / LangGraph put"
VS_FSYNC = "waypost / fsync"
FRESH_VS_REUSED = "heartbeat from a fresh read / Run.heartbeat()"
COMMIT_VS_RAW = "Store.commit alone / raw sqlite3"
SQL_VS_RAW = "waypost's SQL alone / raw sqlite3"
SQL_VS_LANGGRAPH = "waypost's SQL alone / LangGraph put"

Operation = Callable[[], object]


def _claimed_run(store: waypost.Store) -> waypost.Run:
    """A claimed run whose packet is about 2 KB (three gates, three evidence items)."""
    gates = [waypost.Gate(name=f"gate-{n}", check=f"command:pytest -q tests/part_{n}")
             for n in range(3)]
    run, _ = waypost.start(store, "Benchmark: keep the packet current", actor="owner",
                           owner="owner", target="file:result.md", gates=gates,
                           kind=waypost.Kind.LONG_RUNNING, max_silence=1800,
                           heartbeat_interval=300)
    worker = waypost.Run(store, run.id, actor="worker-1")
    worker.claim()
    for n in range(3):
        worker.report_evidence(waypost.EvidenceKind.TEST, waypost.Verdict.PASSED,
                               f"suite part {n}: 412 passed, 0 failed in 38 s")
    return worker


def waypost_heartbeat(folder: Path, stack: ExitStack) -> tuple[Operation, int]:
    """`Run.heartbeat()` on a claimed run; returns (op, packet bytes)."""
    store = stack.enter_context(waypost.open_store(str(folder / "waypost.db")))
    worker = _claimed_run(store)
    counter = iter(range(10**9))

    def heartbeat() -> object:
        step = next(counter)
        return worker.heartbeat(note=f"step {step}: still reproducing the race", progress=0.5)

    heartbeat()
    return heartbeat, len(to_json(worker.packet))


def waypost_fresh_heartbeat(folder: Path, stack: ExitStack) -> Operation:
    """A heartbeat through a new `Run` handle each time: it reads the run (its packet and
    head event), checks the head event's hash, decides and commits, as every one-shot CLI
    write does, and every write after another writer moved the run. `Run.heartbeat()`
    above reuses the packet its handle wrote last, so skips that read and that check."""
    store = stack.enter_context(waypost.open_store(str(folder / "fresh.db")))
    worker = _claimed_run(store)
    counter = iter(range(10**9))

    def heartbeat() -> object:
        step = next(counter)
        handle = waypost.Run(store, worker.id, actor=worker.actor, epoch=worker.epoch)
        return handle.heartbeat(note=f"step {step}: still reproducing the race", progress=0.5)

    heartbeat()
    return heartbeat


def waypost_commit_only(folder: Path, stack: ExitStack) -> Callable[[int], float]:
    """`Store.commit` alone: `count` heartbeats built and applied before the clock starts."""
    store = stack.enter_context(waypost.open_store(str(folder / "commit-only.db")))
    worker = _claimed_run(store)
    snap = store.load(worker.id)

    def sample(count: int) -> float:
        nonlocal snap
        planned, snap = _planned(worker, snap, count)
        start = time.perf_counter()
        for version, event, after in planned:
            store.commit(worker.id, version, [event], after)
        elapsed = time.perf_counter() - start
        return count / elapsed

    sample(2)
    return sample


def _planned(worker: waypost.Run, snap: Snapshot,
             count: int) -> tuple[list[tuple[int, Event, Packet]], Snapshot]:
    """`count` heartbeats of `worker`'s run decided one after another from `snap`, as
    (expected version, event, packet after), and the snapshot the last leaves."""
    packet, head, planned = snap.packet, snap.head_hash, []
    for step in range(count):
        data = Heartbeat(note=f"step {step}: still reproducing the race", fraction=0.5,
                         lease_expires_at=lease_until(packet.stop_rules, utcnow()))
        event = make_event(packet, worker.id, data, actor=worker.actor, at=utcnow(),
                           epoch=worker.epoch, prev_hash=head)
        planned.append((packet.version, event, apply(packet, event)))
        packet, head = planned[-1][2], event.hash
    return planned, Snapshot(packet, head)


def waypost_sql_only(folder: Path, stack: ExitStack) -> Callable[[int], float]:
    """waypost's statements alone: `count` heartbeats' parameters made before the clock
    starts (as `commit_one` makes them), then each committed as `commit_one` commits a
    heartbeat, on a bare connection to a store waypost made (its schema, its pragmas)."""
    path = folder / "sql-only.db"
    with waypost.open_store(str(path)) as store:
        worker = _claimed_run(store)
        snap = store.load(worker.id)
        run_id = worker.id
    db = sqlite3.connect(path, isolation_level=None)
    stack.callback(db.close)
    db.execute("PRAGMA synchronous = FULL")  # the file is in WAL mode: waypost made it

    def sample(count: int) -> float:
        nonlocal snap
        planned, snap = _planned(worker, snap, count)
        statements = []
        for expected, event, after in planned:
            version, state, owner, head, updated, due, body = columns(after, event)
            guarded = (version, state, head, updated, body, run_id, expected)
            now = after.updated_at.timestamp()
            statements.append(((*guarded, owner, due, now, due), event_row(event, updated)))
        start = time.perf_counter()
        for steady, row in statements:
            db.execute("BEGIN IMMEDIATE")
            if db.execute(STEADY_UPDATE, steady).rowcount != 1:
                raise RuntimeError("the steady UPDATE changed no row: the floor is not "
                                   "the heartbeat's path")
            db.execute(INSERT_EVENT, row)
            db.execute("COMMIT")
        elapsed = time.perf_counter() - start
        return count / elapsed

    sample(2)
    return sample


def raw_sqlite(folder: Path, stack: ExitStack) -> Operation:
    db = sqlite3.connect(folder / "raw.db", isolation_level=None)
    stack.callback(db.close)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = FULL")
    db.execute("CREATE TABLE events (run_id TEXT NOT NULL, seq INTEGER NOT NULL,"
               " body TEXT NOT NULL, PRIMARY KEY (run_id, seq))")
    db.execute("CREATE TABLE packets (id TEXT PRIMARY KEY, version INTEGER NOT NULL,"
               " body TEXT NOT NULL)")
    event, packet = '{"e":"' + "e" * 1016 + '"}', '{"p":"' + "p" * 2040 + '"}'
    counter = iter(range(1, 10**9))

    def transaction() -> object:
        seq = next(counter)
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO events (run_id, seq, body) VALUES (?, ?, ?)",
                   ("run-1", seq, event))
        db.execute("INSERT INTO packets (id, version, body) VALUES (?, ?, ?) ON CONFLICT (id)"
                   " DO UPDATE SET version = excluded.version, body = excluded.body",
                   ("run-1", seq, packet))
        db.execute("COMMIT")
        return seq

    return transaction


def langgraph_available() -> bool:
    try:
        return importlib.util.find_spec("langgraph.checkpoint.sqlite") is not None
    except ModuleNotFoundError:
        return False


def langgraph_put(folder: Path, stack: ExitStack) -> Operation:
    from langgraph.checkpoint.base import Checkpoint, empty_checkpoint
    from langgraph.checkpoint.base.id import uuid6
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(folder / "langgraph.db", check_same_thread=False)
    stack.callback(conn.close)
    saver = SqliteSaver(conn)
    saver.setup()  # journal_mode=WAL
    conn.execute("PRAGMA synchronous = FULL")
    config: Any = {"configurable": {"thread_id": "bench", "checkpoint_ns": ""}}
    base = empty_checkpoint()
    note = "n" * 1000
    counter = iter(range(1, 10**9))

    def put() -> object:
        nonlocal config
        step = next(counter)
        checkpoint: Checkpoint = {
            **base, "id": str(uuid6(clock_seq=step)),
            "channel_values": {"note": note, "step": step},
            "channel_versions": {"note": step, "step": step},
        }
        config = saver.put(config, checkpoint, {"source": "loop", "step": step}, {"note": step})
        return config

    return put


def append_fsync(folder: Path, stack: ExitStack) -> Operation:
    fd = os.open(folder / "append.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    stack.callback(os.close, fd)
    block = b"x" * 1023 + b"\n"

    def append() -> object:
        os.write(fd, block)
        os.fsync(fd)
        return None

    return append


def run(folder: Path, *, rounds: int, batch: int) -> Section:
    section = Section(key="durable", title="1. Durable transition: one event + packet, "
                      "synchronous=FULL", unit="ops/s", higher_is_better=True)
    with ExitStack() as stack:
        heartbeat, packet_bytes = waypost_heartbeat(folder, stack)
        ops: dict[str, Operation] = {WAYPOST: heartbeat,
                                     FRESH: waypost_fresh_heartbeat(folder, stack),
                                     RAW: raw_sqlite(folder, stack)}
        if langgraph_available():
            ops[LANGGRAPH] = langgraph_put(folder, stack)
        else:
            section.notes.append("LangGraph not measured: install the bench extra "
                                 "(pip install -e '.[bench]')")
        ops[FSYNC] = append_fsync(folder, stack)
        for op in ops.values():  # warm caches and page in the files before timing
            rate(op, max(2, batch // 4))
        subjects = {name: _batch(op, batch) for name, op in ops.items()}
        commit_only = waypost_commit_only(folder, stack)
        subjects[COMMIT_ONLY] = lambda: commit_only(batch)
        sql_only = waypost_sql_only(folder, stack)
        subjects[SQL_ONLY] = lambda: sql_only(batch)
        samples = interleave(subjects, rounds)
    order = (WAYPOST, FRESH, COMMIT_ONLY, SQL_ONLY, *ops)
    section.figures = figures({name: samples[name] for name in dict.fromkeys(order)})
    section.add_ratio(VS_RAW, WAYPOST, RAW)
    if LANGGRAPH in ops:
        section.add_ratio(VS_LANGGRAPH, WAYPOST, LANGGRAPH)
    section.add_ratio(VS_FSYNC, WAYPOST, FSYNC)
    section.add_ratio(FRESH_VS_REUSED, FRESH, WAYPOST)
    section.add_ratio(COMMIT_VS_RAW, COMMIT_ONLY, RAW)
    section.add_ratio(SQL_VS_RAW, SQL_ONLY, RAW)
    if LANGGRAPH in ops:
        section.add_ratio(SQL_VS_LANGGRAPH, SQL_ONLY, LANGGRAPH)
    section.notes.append(f"waypost packet {packet_bytes / 1024:.1f} KB; {batch} operations "
                         f"per sample, {rounds} interleaved rounds")
    return section


def _batch(op: Operation, count: int) -> Callable[[], float]:
    return lambda: rate(op, count)
