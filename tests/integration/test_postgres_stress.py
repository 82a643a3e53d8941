"""Eight processes, five hundred acknowledged writes each, on one PostgreSQL store: no
acknowledged write is lost, every writer sees its versions strictly increase, and every run
verifies (hash chain and fold)."""

from __future__ import annotations

import multiprocessing
from typing import Any

import pytest

from waypost.core.history import verify_run
from waypost.model import Kind
from waypost.store import Store, open_store
from waypost.usecases import runs, starting

PROCESSES = 8
WRITES = 500
Report = tuple[str, dict[str, list[int]], str | None]


def writer(url: str, own: str, shared: str, name: str, results: Any) -> None:
    """Heartbeat `own` and `shared` in turn; report the versions each write was acked at."""
    acked: dict[str, list[int]] = {own: [], shared: []}
    error = None
    try:
        with open_store(url) as store:
            for index in range(WRITES):
                run_id = own if index % 2 else shared
                packet = runs.Run(store, run_id, actor="alice").heartbeat(
                    note=f"{name}:{index}")
                acked[run_id].append(packet.version)
    except Exception as exc:  # reported to the test, which fails on it
        error = f"{type(exc).__name__}: {exc}"
    results.put((name, acked, error))


def _start_runs(store: Store, count: int) -> list[str]:
    return [starting.start(store, f"run {i}", actor="alice", kind=Kind.BOUNDED)[0].id
            for i in range(count)]


@pytest.mark.slow
def test_eight_processes_lose_no_write(pg_url: str) -> None:
    with open_store(pg_url) as store:
        own = _start_runs(store, PROCESSES)
        shared = _start_runs(store, 2)
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=writer, args=(pg_url, own[i], shared[i % 2], f"w{i}", results))
             for i in range(PROCESSES)]
    for proc in procs:
        proc.start()
    reports: list[Report] = [results.get(timeout=300) for _ in procs]
    for proc in procs:
        proc.join(timeout=30)
    assert [f"{name}: {error}" for name, _, error in reports if error] == []
    with open_store(pg_url) as store:
        for run_id in own + shared:
            _check_run(store, run_id, reports)


def _check_run(store: Store, run_id: str, reports: list[Report]) -> None:
    events = store.events(run_id)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    notes = [getattr(e.data, "note", None) for e in events[1:]]
    assert len(notes) == len(set(notes)), "a write was applied twice"
    acked = 0
    for name, by_run, _ in reports:
        versions = by_run.get(run_id, [])
        assert versions == sorted(set(versions)), f"{name}: versions did not strictly increase"
        for version in versions:
            note = events[version - 1].data
            assert getattr(note, "note", "").startswith(f"{name}:"), "acked write was lost"
        acked += len(versions)
    assert len(events) == 1 + acked
    verify_run(run_id, events, store.get(run_id))
