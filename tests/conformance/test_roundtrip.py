"""Conformance: whatever a packet holds reads back identical and verifies, on every backend
(PostgreSQL's jsonb, for one, cannot hold U+0000 and drops the sign of -0.0)."""

from __future__ import annotations

import pytest

from tests.helpers import FakeClock
from waypost.core.history import verify_run
from waypost.model import Assurance, EvidenceKind, Kind, Verdict
from waypost.store import Store
from waypost.usecases import starting


@pytest.mark.parametrize(("note", "fraction"), [
    ("a NUL \x00 inside", 0.5),
    ("negative zero", -0.0),
    ("unicode: ünïcödé, 日本語, 🚀, \u200b, \\u0000 as text", 1e-07),
    ('quotes " and \\ and \n newlines', 0.30000000000000004),
])
def test_a_heartbeat_reads_back_identical_and_verifies(
        store: Store, clock: FakeClock, note: str, fraction: float) -> None:
    run, _ = starting.start(store, note, actor="alice", target="none:", kind=Kind.LONG_RUNNING,
                        max_silence=60, clock=clock)
    written = run.heartbeat(note=note, progress=fraction)
    read = store.get(run.id)
    assert read == written
    assert read.progress.note == note
    assert str(read.progress.fraction) == str(fraction)
    verify_run(run.id, store.events(run.id), read)
    assert [p.id for p in store.list_runs()] == [run.id]


def test_binary_command_output_survives(store: Store, clock: FakeClock) -> None:
    run, _ = starting.start(store, "t", actor="alice", target="none:", kind=Kind.BOUNDED,
                        clock=clock)
    tail = "\x00\x01\x02 binary \x7f\x00 \ufffd"
    written = run.record_evidence(kind=EvidenceKind.COMMAND, verdict=Verdict.FAILED,
                                  assurance=Assurance.RECORDED, summary="exited 1",
                                  output_tail=tail, exit_code=1, duration_s=-0.0)
    assert store.get(run.id) == written
    assert store.get(run.id).evidence[-1].output_tail == tail
    verify_run(run.id, store.events(run.id), store.get(run.id))
