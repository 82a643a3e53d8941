"""Stored shapes are left out of the cyclic garbage collector (`model.Record`): the watchdog
decodes and builds a packet and an event for every due run, and a tracked record counted
towards every collection and was walked by each."""

from __future__ import annotations

import gc
from pathlib import Path

import waypost
from waypost import events, model


def _records(base: type[model.Record]) -> list[type[model.Record]]:
    found: list[type[model.Record]] = []
    for sub in base.__subclasses__():
        found += [sub, *_records(sub)]
    return found


def test_every_stored_shape_is_untracked() -> None:
    shapes = _records(model.Record)
    assert {model.Packet, events.Event, events.Heartbeat} <= set(shapes)
    assert [s.__name__ for s in shapes if s.__struct_config__.gc] == []


def test_packets_and_events_read_from_a_store_are_untracked(tmp_path: Path) -> None:
    with waypost.open_store(str(tmp_path / "w.db")) as store:
        run, _ = waypost.start(store, "untracked", actor="owner", owner="owner",
                               target="none:", kind=waypost.Kind.LONG_RUNNING, worker="w1",
                               max_silence=600)
        worker = waypost.Run(store, run.id, actor="w1")
        worker.claim()
        written = worker.heartbeat(note="on it", progress=0.5)
        read = store.get(run.id)
        history = store.events(run.id)
    assert read == written
    assert read.worker is not None
    assert len(history) == 3
    untracked = [read, read.worker, read.stop_rules, *history, *(e.data for e in history)]
    assert [type(r).__name__ for r in untracked if gc.is_tracked(r)] == []
