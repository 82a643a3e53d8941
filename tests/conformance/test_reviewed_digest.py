"""Conformance: the reviewed-result digest names exactly what the owner reviewed. Each part
of the result (summary, public summary, every artifact's sha256, the evidence, the review
and each gate's verdict in it) changes it; what the owner did not review (the version, the
target, the notify URI) does not. What changed since a digest lists only the events that
changed the result."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest

from tests.delivery_support import PRIVATE, PUBLIC
from tests.helpers import FakeClock
from waypost.config import Config
from waypost.core.reviewed import changes_since, result_digest, shown
from waypost.core.sanitize import public_packet
from waypost.model import Artifact, ArtifactRole, EvidenceKind, Kind, Packet, Verdict
from waypost.store import Store
from waypost.usecases import runs, starting

REPORT = b"the report the owner reads, long enough to count"


@pytest.fixture(autouse=True)
def _here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def _reviewed(store: Store, clock: FakeClock) -> Packet:
    """A run ready for review with an artifact and a gate over it, reviewed by alice."""
    run, _ = starting.start(store, "Fix the login test", actor="alice", owner="alice",
                            target="none:", kind=Kind.LONG_RUNNING, max_silence=3600,
                            clock=clock)
    worker = runs.Run(store, run.id, actor="w1", clock=clock)
    worker.claim()
    worker.add_gate("report", "artifact:report.md")
    worker.record_artifact(Artifact(
        name="report.md", role=ArtifactRole.REPORT, sha256=store.put_blob(REPORT),
        bytes=len(REPORT), stored=True, recorded_at=clock(), recorded_by="w1"))
    worker.report_evidence(EvidenceKind.TEST, Verdict.PASSED, "pytest -q: 42 passed")
    worker.ready(PRIVATE, public_summary=PUBLIC, artifacts=["report.md"])
    runs.Run(store, run.id, actor="alice", clock=clock).review(config=Config())
    return store.get(run.id)


def _gate_failed(p: Packet) -> Packet:
    review = p.reviews[-1].id
    return msgspec.structs.replace(p, evidence=tuple(
        msgspec.structs.replace(e, verdict=Verdict.FAILED)
        if e.review == review and e.gate == "report" else e for e in p.evidence))


def _result(p: Packet, **changed: str) -> Packet:
    assert p.result is not None
    return msgspec.structs.replace(p, result=msgspec.structs.replace(p.result, **changed))


CHANGED: dict[str, Callable[[Packet], Packet]] = {
    "summary": lambda p: _result(p, summary=PRIVATE + " (edited)"),
    "public summary": lambda p: _result(p, public_summary=PUBLIC + " (edited)"),
    "artifact sha256": lambda p: msgspec.structs.replace(p, artifacts=tuple(
        msgspec.structs.replace(a, sha256="0" * 64) for a in p.artifacts)),
    "evidence id": lambda p: msgspec.structs.replace(p, evidence=tuple(
        msgspec.structs.replace(e, id=e.id + "x") if e.review is None else e
        for e in p.evidence)),
    "gate verdict": _gate_failed,
}


@pytest.mark.parametrize("part", sorted(CHANGED))
def test_each_part_of_the_reviewed_result_changes_the_digest(
        store: Store, clock: FakeClock, part: str) -> None:
    packet = _reviewed(store, clock)
    assert any(e.review == packet.reviews[-1].id and e.gate == "report"
               for e in packet.evidence), "the review judged the gate"
    before = result_digest(packet)
    assert before is not None
    assert result_digest(CHANGED[part](packet)) != before


def test_what_the_owner_did_not_review_leaves_the_digest_as_it_was(
        store: Store, clock: FakeClock) -> None:
    packet = _reviewed(store, clock)
    before = result_digest(packet)
    bumped = msgspec.structs.replace(packet, version=packet.version + 7,
                                     target="file:elsewhere.json", notify="none:")
    assert result_digest(bumped) == before
    owner = runs.Run(store, packet.id, actor="alice", clock=clock)
    assert result_digest(owner.retarget("file:second.json")) == before


def test_what_changed_since_names_only_the_events_that_changed_the_result(
        store: Store, clock: FakeClock) -> None:
    packet = _reviewed(store, clock)
    before = result_digest(packet)
    assert before is not None
    owner = runs.Run(store, packet.id, actor="alice", clock=clock)
    clock.advance(60)
    owner.review(config=Config())  # a new review: the result the owner answers moved
    owner.retarget("file:second.json")  # then the version moves; the result does not
    lines = changes_since(store.events(packet.id), before)
    assert lines is not None
    assert len(lines) == 1, lines
    assert "ran a review" in lines[0]


def test_a_reader_the_summary_is_withheld_from_is_shown_no_digest(
        store: Store, clock: FakeClock) -> None:
    """A digest of the public view names no result anyone answered: a reader shown only
    the public packet is shown no digest (and its pages carry none to answer with)."""
    packet = _reviewed(store, clock)
    assert shown(packet) == result_digest(packet)
    assert shown(public_packet(packet)) is None
