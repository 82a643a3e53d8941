"""Many processes writing at once: nothing locked reaches a caller, nothing acknowledged is
lost, versions only go up."""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path

import pytest

from waypost.core.history import verify_run
from waypost.model import Kind
from waypost.store import open_store
from waypost.usecases import runs, starting

SECONDS = float(os.environ.get("WAYPOST_STRESS_SECONDS", "10"))


def hammer(path: str, run_id: str, name: str, seconds: float,
           results: multiprocessing.Queue[tuple[str, list[int], str | None]]) -> None:
    """Heartbeat `run_id` until the time is up; report acknowledged versions and any error."""
    acked: list[int] = []
    error = None
    try:
        with open_store(path) as store:
            run = runs.Run(store, run_id, actor="alice")
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                packet = run.heartbeat(note=f"{name}:{len(acked)}")
                acked.append(packet.version)
    except Exception as exc:  # reported to the test, which fails on it
        error = f"{type(exc).__name__}: {exc}"
    results.put((name, acked, error))


@pytest.mark.slow
def test_sixteen_runs_and_four_writers_on_one_run(tmp_path: Path) -> None:
    path = str(tmp_path / "stress.db")
    with open_store(path) as store:
        ids = [starting.start(store, f"run {i}", actor="alice", kind=Kind.BOUNDED)[0].id
               for i in range(17)]
    ctx = multiprocessing.get_context("spawn")
    results: multiprocessing.Queue[tuple[str, list[int], str | None]] = ctx.Queue()
    plan = [(ids[i], f"solo{i}") for i in range(16)] + [(ids[16], f"shared{i}")
                                                         for i in range(4)]
    procs = [ctx.Process(target=hammer, args=(path, rid, name, SECONDS, results))
             for rid, name in plan]
    for proc in procs:
        proc.start()
    reports = [results.get(timeout=SECONDS + 120) for _ in procs]
    for proc in procs:
        proc.join(timeout=30)
    errors = [f"{name}: {error}" for name, _, error in reports if error]
    assert errors == []
    acked = {name: versions for name, versions, _ in reports}
    for versions in acked.values():
        assert versions, "a writer got nothing done"
        assert versions == sorted(set(versions)), "versions went backwards for one writer"
    with open_store(path) as store:
        for rid, name in plan:
            events = store.events(rid)
            notes = {getattr(e.data, "note", None) for e in events}
            for index in range(len(acked[name])):
                assert f"{name}:{index}" in notes, f"acknowledged write {name}:{index} lost"
            assert [e.seq for e in events] == list(range(1, len(events) + 1))
            verify_run(rid, events, store.get(rid))
        shared = store.events(ids[16])
        assert len(shared) == 1 + sum(len(acked[f"shared{i}"]) for i in range(4))
