"""Whose gate is whose, pure: an old `started` event (its gates saying nobody declared
them) hashes and decodes as it did; which checks are active; the owner's and another's
gates at review; the moves that add and adopt gates."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

import msgspec
import pytest
from msgspec import UNSET, UnsetType

from waypost.core import gates, outbox
from waypost.core.history import event_hash, make_event
from waypost.core.machine import apply
from waypost.errors import IllegalTransition, NotAuthorized, RuleViolation
from waypost.events import DeliveryFailed, Event, GateAdded, GateAdopted, Started
from waypost.model import (
    Approval,
    Artifact,
    ArtifactRole,
    Gate,
    Kind,
    Packet,
    Result,
    State,
    from_json,
    to_json,
)

AT = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
OLD_STARTED = (b'{"type":"started","title":"t","kind":"bounded","owner":"alice",'
               b'"target":"none:","notify":null,"worker":null,"lease_expires_at":null,'
               b'"stop_rules":{"deadline":null,"heartbeat_interval":null,"max_silence":null,'
               b'"max_attempts":null,"budget":null,"review_within":null},'
               b'"gates":[{"name":"tests","check":"command:pytest -q","required":true},'
               b'{"name":"docs","check":"artifact:d.md","required":false}],'
               b'"idempotency_key":null}')


def test_an_old_started_event_hashes_and_reads_as_it_did_before_gates_said_who() -> None:
    old = from_json(OLD_STARTED, Started)
    assert [(g.declared_by, g.adopted_by) for g in old.gates] == [(UNSET, UNSET)] * 2
    assert to_json(old) == OLD_STARTED
    before = msgspec.json.encode(["0" * 64, "wp_1", 1, AT, "bob", None,
                                  msgspec.json.decode(OLD_STARTED)])
    assert event_hash(prev_hash="0" * 64, run_id="wp_1", seq=1, at=AT, actor="bob",
                      epoch=None, data=old) == hashlib.sha256(before).hexdigest()
    said = msgspec.structs.replace(old.gates[0], declared_by="bob")
    assert b'"declared_by":"bob"' in to_json(said)
    assert from_json(to_json(said), Gate) == said


def test_a_declarer_is_never_null() -> None:
    with pytest.raises(Exception, match=r"declared_by"):
        from_json(b'{"name":"t","check":"command:true","declared_by":null}', Gate)


def _started(actor: str, *declared: Gate) -> Packet:
    data = Started(title="t", kind=Kind.BOUNDED, owner="alice", target="none:",
                   worker="w1", gates=declared)
    return apply(None, make_event(None, "wp_1", data, actor=actor, at=AT))


def _step(packet: Packet, data: object, actor: str) -> Packet:
    return apply(packet, make_event(packet, packet.id, data, actor=actor, at=AT))  # type: ignore[arg-type]


@pytest.mark.parametrize(("check", "active"), [
    ("command:pytest -q", True), ("http:https://example.org ok", True),
    ("grep:TODO:src", True), ("grep!:TODO:notes.md", True),
    ("grep!:TODO:report.md", False),  # report.md is a stored artifact: its copy is read
    ("grep:x:linked.md", True),  # a URL artifact: nothing stored, the path is read
    ("artifact:report.md", False), ("no-private", False), ("no-private:a.md", False),
    ("someday:new", True),  # a kind this release does not know counts as active
])
def test_which_checks_are_active(check: str, active: bool) -> None:
    packet = msgspec.structs.replace(_started("alice"), artifacts=(
        Artifact(name="report.md", role=ArtifactRole.REPORT, sha256="0" * 64, stored=True,
                 recorded_at=AT, recorded_by="w1"),
        Artifact(name="linked.md", role=ArtifactRole.OTHER, url="https://example.org/l",
                 recorded_at=AT, recorded_by="w1")))
    gate = Gate(name="g", check=check, declared_by="w1")
    assert gates.is_active(packet, gate) is active
    assert gates.runs_at_review(packet, gate) is not active


@pytest.mark.parametrize(("starter", "declared", "adopted", "owners"), [
    ("alice", UNSET, UNSET, True),  # older than the record: its starter's, the owner
    ("w1", UNSET, UNSET, False),  # older than the record: its starter's, the worker
    ("w1", "alice", UNSET, True),  # added by the owner since
    ("alice", "w1", UNSET, False),  # added by the worker since
    ("alice", "w1", "alice", True),  # adopted
])
def test_whose_gate_it_is(starter: str, declared: str | UnsetType, adopted: str | UnsetType,
                          owners: bool) -> None:
    packet = _started(starter)
    gate = Gate(name="g", check="command:true", declared_by=declared, adopted_by=adopted)
    assert gates.is_owners(packet, gate) is owners
    assert gates.runs_at_review(packet, gate) is owners
    assert gates.declared_by(packet, gate) == (starter if declared is UNSET else declared)


def test_a_gate_is_added_as_its_declarers_and_adopted_once() -> None:
    packet = _step(_started("alice"), GateAdded(name="lint", check="command:ruff ."), "w1")
    assert packet.gates[-1] == Gate(name="lint", check="command:ruff .", declared_by="w1")
    with pytest.raises(NotAuthorized, match="only its owner alice"):
        _step(packet, GateAdopted(name="lint"), "w1")
    adopted = _step(packet, GateAdopted(name="lint"), "alice")
    assert adopted.gates[-1].adopted_by == "alice"
    with pytest.raises(RuleViolation, match="already adopted by alice"):
        _step(adopted, GateAdopted(name="lint"), "alice")
    with pytest.raises(RuleViolation, match="never replaced"):
        _step(adopted, GateAdded(name="lint", check="command:true"), "alice")


def _approved_then_blocked() -> Packet:
    """An approved run whose delivery failed for good: blocked, but its gates settled."""
    packet = msgspec.structs.replace(
        _started("alice"), state=State.APPROVED,
        result=Result(summary="s", submitted_at=AT, submitted_by="w1"),
        approval=Approval(by="alice", at=AT))
    return _step(packet, DeliveryFailed(key=outbox.final_key(packet.id), blocker_id="b1",
                                        detail="the target refused it", attempts=5),
                 "relay:r1")


def test_no_gate_is_added_or_adopted_after_approval() -> None:
    blocked = _approved_then_blocked()
    assert blocked.state is State.BLOCKED
    with pytest.raises(RuleViolation, match="approved: too late to add a gate"):
        _step(blocked, GateAdded(name="late", check="command:true"), "alice")
    with pytest.raises(IllegalTransition):
        _step(msgspec.structs.replace(blocked, state=State.APPROVED),
              GateAdded(name="late", check="command:true"), "alice")


def test_the_gate_events_read_back_as_written() -> None:
    for data in (GateAdded(name="t", check="command:true", required=False),
                 GateAdopted(name="t")):
        event = make_event(_started("alice"), "wp_1", data, actor="alice", at=AT)
        assert from_json(to_json(event), Event) == event
