"""Conformance: the guarantees of the write path, checked through each real store (history
tampered with in the database, blockers resolved, expected versions, the owner's heartbeat,
transferred authority, the substance floor). Each fails when the line it guards is changed."""

from __future__ import annotations

import msgspec
import pytest

from tests.delivery_support import approved_run
from tests.helpers import FakeClock
from tests.tamper import overwrite_event, overwrite_packet
from waypost.config import Config
from waypost.core import outbox
from waypost.core.history import make_event, verify_run
from waypost.core.machine import apply, next_blocker_id
from waypost.core.writes import RunWrite
from waypost.errors import IntegrityError, NotAuthorized, RuleViolation, StaleLease, VersionConflict
from waypost.events import DeliveryFailed, Heartbeat
from waypost.model import (
    Artifact,
    ArtifactRole,
    Authority,
    BlockerKind,
    DeliveryStatus,
    EvidenceKind,
    Kind,
    Purpose,
    State,
    Verdict,
)
from waypost.store import Store
from waypost.usecases import runs, starting


def _start(store: Store, clock: FakeClock) -> runs.Run:
    run, _ = starting.start(store, "t", actor="alice", owner="alice", target="none:",
                        kind=Kind.LONG_RUNNING, max_silence=600, clock=clock)
    return run


def _worker(store: Store, run_id: str, clock: FakeClock) -> runs.Run:
    worker = runs.Run(store, run_id, actor="w1", clock=clock)
    worker.claim()
    return worker


def _verify(store: Store, run_id: str) -> None:
    verify_run(run_id, store.events(run_id), store.get(run_id))


# --- history ---------------------------------------------------------------------------


def test_verify_refuses_a_stored_event_whose_actor_was_rewritten(
        store: Store, clock: FakeClock) -> None:
    run = _start(store, clock)
    _worker(store, run.id, clock)
    _verify(store, run.id)
    # the claim is credited to someone else, and the packet is edited to match the fold
    claim = store.events(run.id)[1]
    overwrite_event(store, msgspec.structs.replace(claim, actor="mallory"))
    packet = store.get(run.id)
    assert packet.worker is not None
    overwrite_packet(store, msgspec.structs.replace(
        packet, worker=msgspec.structs.replace(packet.worker, actor="mallory")))
    assert store.events(run.id)[1].actor == "mallory"
    with pytest.raises(IntegrityError, match=f"run {run.id} seq 2: hash mismatch"):
        _verify(store, run.id)


def test_verify_refuses_a_stored_event_rehashed_over_a_broken_link(
        store: Store, clock: FakeClock) -> None:
    run = _start(store, clock)
    run.heartbeat(note="first")
    run.heartbeat(note="second")
    first_event, old = store.events(run.id)[:2]
    # seq 2 forged and hashed again by someone who cannot rewrite the rest of the chain
    forged = make_event(apply(None, first_event), run.id, Heartbeat(note="forged"),
                        actor=old.actor, at=old.at, prev_hash=old.prev_hash)
    assert forged.seq == 2
    overwrite_event(store, forged)
    with pytest.raises(IntegrityError, match=f"run {run.id} seq 3: prev_hash does not match"):
        _verify(store, run.id)


# --- the outbox: resolving a blocker re-queues the final delivery only after a failure --


@pytest.mark.parametrize("kind", [BlockerKind.MISSING_INPUT, BlockerKind.FAILED_COMMAND,
                                  BlockerKind.PERMISSION_BOUNDARY,
                                  BlockerKind.UNAVAILABLE_RESOURCE, BlockerKind.OTHER])
def test_resolving_a_blocker_of_in_progress_work_queues_nothing(
        store: Store, clock: FakeClock, kind: BlockerKind) -> None:
    run = _start(store, clock)
    worker = _worker(store, run.id, clock)
    _, blocker = worker.block(kind, "the staging API key is not in the vault")
    runs.Run(store, run.id, actor="alice", clock=clock).unblock(blocker, "given")
    assert store.get(run.id).state is State.IN_PROGRESS
    assert store.deliveries([run.id]) == []
    _verify(store, run.id)


def _failed_delivery(store: Store, clock: FakeClock) -> tuple[str, str]:
    """An approved run whose final delivery failed for good: (run id, its blocker)."""
    run_id = approved_run(store, clock)
    key = outbox.final_key(run_id)
    store.claim_deliveries("relay:1", now=clock(), lease_s=60)
    snap = store.load(run_id)
    failed = DeliveryFailed(key=key, blocker_id=next_blocker_id(snap.packet),
                            detail="final delivery failed: HTTP 410 Gone", attempts=1)
    event = make_event(snap.packet, run_id, failed, actor="relay:1", at=clock(),
                       prev_hash=snap.head_hash)
    write = RunWrite(run_id=run_id, expected_version=snap.packet.version, events=(event,),
                     packet=apply(snap.packet, event))
    store.finish_delivery(key, "relay:1", at=clock(), error="HTTP 410 Gone", write=write)
    return run_id, failed.blocker_id


def test_a_failed_delivery_is_queued_again_only_when_its_last_blocker_is_resolved(
        store: Store, clock: FakeClock) -> None:
    run_id, failed = _failed_delivery(store, clock)
    owner = runs.Run(store, run_id, actor="alice", clock=clock)
    _, second = owner.block(BlockerKind.MISSING_INPUT, "the new webhook URL")
    clock.advance(10)
    owner.unblock(failed, "the receiver is back")
    [row] = [d for d in store.deliveries([run_id]) if d.purpose is Purpose.FINAL]
    assert (store.get(run_id).state, row.status) == (State.BLOCKED, DeliveryStatus.FAILED)
    clock.advance(10)
    owner.unblock(second, "URL given")
    [row] = [d for d in store.deliveries([run_id]) if d.purpose is Purpose.FINAL]
    assert (store.get(run_id).state, row.status) == (State.APPROVED, DeliveryStatus.QUEUED)
    assert row.queued_at == clock()
    _verify(store, run_id)


# --- the write path: an expected version is honoured -----------------------------------


def test_a_write_expecting_an_old_version_is_a_conflict_and_writes_nothing(
        store: Store, clock: FakeClock) -> None:
    run = _start(store, clock)
    stale = runs.Run(store, run.id, actor="alice", clock=clock, expected_version=1)
    run.heartbeat(note="someone else first")
    with pytest.raises(VersionConflict, match=f"run {run.id} is at version 2, not 1"):
        stale.heartbeat(note="decided on version 1")
    packet = store.get(run.id)
    assert (packet.version, packet.progress.note) == (2, "someone else first")
    assert len(store.events(run.id)) == 2


def test_a_write_expecting_the_current_version_commits_once(
        store: Store, clock: FakeClock) -> None:
    run = _start(store, clock)
    current = runs.Run(store, run.id, actor="alice", clock=clock, expected_version=1)
    assert current.heartbeat(note="on version 1").version == 2
    with pytest.raises(VersionConflict, match="at version 2, not 1"):
        current.heartbeat(note="still expects version 1")
    assert store.get(run.id).version == 2


# --- the owner's heartbeat while a worker holds the lease ------------------------------


def test_the_owners_heartbeat_does_not_reset_a_workers_silence(
        store: Store, clock: FakeClock) -> None:
    run = _start(store, clock)
    _worker(store, run.id, clock)
    before = store.get(run.id)
    clock.advance(900)  # past max_silence: the worker is silent
    with pytest.raises(StaleLease, match="w1 holds the lease") as info:
        run.heartbeat(note="I am sure it is fine")
    assert [(s.verb, s.run, s.actor) for s in info.value.steps] == [
        ("read", run.id, None), ("claim", run.id, "alice")]
    after = store.get(run.id)
    assert after == before
    assert after.progress.last_heartbeat is None


# --- authority: a transfer gives what it names ----------------------------------------


def _ready(store: Store, clock: FakeClock) -> str:
    run = _start(store, clock)
    worker = _worker(store, run.id, clock)
    worker.report_evidence(EvidenceKind.TEST, Verdict.PASSED, "pytest -q: 42 passed")
    worker.ready("done")
    return run.id


def test_a_transferred_deliver_authority_neither_reviews_nor_approves(
        store: Store, clock: FakeClock) -> None:
    run_id = _ready(store, clock)
    owner = runs.Run(store, run_id, actor="alice", clock=clock)
    owner.transfer(Authority.DELIVER, "bob")
    bob = runs.Run(store, run_id, actor="bob", clock=clock)
    with pytest.raises(NotAuthorized, match="bob may not review"):
        bob.review(config=Config())
    owner.review(config=Config())
    with pytest.raises(NotAuthorized, match="bob may not approve"):
        bob.approve()
    assert store.get(run_id).state is State.READY_FOR_REVIEW
    owner.transfer(Authority.APPROVE, "bob")
    assert bob.approve().state is State.APPROVED
    assert store.get(run_id).approval is not None
    _verify(store, run_id)


# --- substance: an artifact of exactly the minimum size is enough ---------------------


@pytest.mark.parametrize(("content", "accepted"), [
    (b"alpha beta gamma", True),  # 16 bytes: exactly the default minimum
    (b"alpha beta gamm", False),  # 15
])
def test_ready_accepts_an_artifact_of_exactly_the_minimum_size(
        store: Store, clock: FakeClock, content: bytes, accepted: bool) -> None:
    assert Config().min_artifact_bytes == 16
    run = _start(store, clock)
    worker = _worker(store, run.id, clock)
    digest = store.put_blob(content)
    worker.record_artifact(Artifact(name="report.md", role=ArtifactRole.REPORT, sha256=digest,
                                    bytes=len(content), stored=True, recorded_at=clock(),
                                    recorded_by="w1"))
    worker.report_evidence(EvidenceKind.TEST, Verdict.PASSED, "pytest -q: 42 passed")
    if accepted:
        assert worker.ready("done", artifacts=["report.md"]).state is State.READY_FOR_REVIEW
        return
    with pytest.raises(RuleViolation, match="only 15 bytes"):
        worker.ready("done", artifacts=["report.md"])
    assert store.get(run.id).state is State.IN_PROGRESS
