"""The state machine: a pure `apply(packet, event) -> packet` over the transition table
(`moves`) and the authority rules (`authority`).

No I/O and no clock: everything `apply` needs is in the packet and the event, so replaying
a run's events (`fold`) always rebuilds the stored packet exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Final

import msgspec
from msgspec import UNSET

from waypost.core import outbox
from waypost.core.authority import authorize
from waypost.core.growing import appended, growing, settled
from waypost.core.moves import MOVE_OF, destination
from waypost.errors import IllegalTransition, InvalidInput, NotFound, RuleViolation, step
from waypost.events import (
    Approved,
    ArtifactRecorded,
    AuthorityTransferred,
    BlockerOpened,
    BlockerResolved,
    Cancelled,
    ChangesRequested,
    Claimed,
    Delivered,
    DeliveryFailed,
    Event,
    EventData,
    EvidenceRecorded,
    GateAdded,
    GateAdopted,
    Heartbeat,
    MarkedReady,
    Nudged,
    Retargeted,
    Reviewed,
    Started,
)
from waypost.model import (
    Approval,
    Blocker,
    BlockerKind,
    ChangeRequest,
    Gate,
    Kind,
    Lease,
    Nudge,
    Packet,
    Progress,
    Receipt,
    Result,
    Review,
    State,
    Transfer,
    Verdict,
)

VAGUE_DETAILS: Final = frozenset({"waiting", "blocked", "stuck", "pending", "todo", "tbd", "?"})


def apply(packet: Packet | None, event: Event) -> Packet:
    """Validate `event` against `packet` and return the next packet, or raise."""
    if isinstance(event.data, Started):
        if packet is not None:
            raise IllegalTransition(f"run {event.run_id} already exists")
        return _start(event, event.data)
    if packet is None:
        raise NotFound(f"run {event.run_id} has no `started` event")
    if event.seq != packet.version + 1:
        raise InvalidInput(f"event seq {event.seq} does not follow version {packet.version}")
    move = MOVE_OF[type(event.data)]
    target = destination(packet, move)
    authorize(packet, event, move)
    changed = _HANDLERS[type(event.data)](packet, event)
    if isinstance(target, State):  # one copy of the packet for the state and the version
        return msgspec.structs.replace(changed, state=target,
                                       resume_state=_resume_state(changed, packet, target),
                                       version=packet.version + 1, updated_at=event.at)
    return msgspec.structs.replace(changed, version=packet.version + 1, updated_at=event.at)


def fold(events: Iterable[Event]) -> Packet:
    """The packet `events` build (appending evidence in constant time: `core/growing`)."""
    packet: Packet | None = None
    for event in events:
        packet = apply(packet, event)
        if isinstance(event.data, Started):
            packet = growing(packet)
    if packet is None:
        raise NotFound("no events to fold")
    return settled(packet)


def next_blocker_id(packet: Packet) -> str:
    return f"b{len(packet.blockers) + 1}"


def next_evidence_id(packet: Packet) -> str:
    return f"e{len(packet.evidence) + 1}"


def _require_text(value: str, what: str) -> str:
    if not value.strip():
        raise InvalidInput(f"{what} must not be empty")
    return value


# --- handlers: each returns the packet with the event's own changes --------------------


def _start(event: Event, data: Started) -> Packet:
    _require_text(data.title, "title")
    if data.kind is Kind.LONG_RUNNING:
        missing = []
        if not data.owner.strip():
            missing.append("an owner (--owner)")
        if not data.target.strip():
            missing.append("a target (--target)")
        if data.stop_rules.max_silence is None and data.stop_rules.deadline is None:
            missing.append("a stop rule (--max-silence or --deadline)")
        if missing:
            raise RuleViolation(
                "a long_running run must record before it starts: " + ", ".join(missing),
                hint="add them to `waypost start`, or use --kind bounded for inline work",
            )
    _check_started_gates(data.gates, event.actor)
    lease = None
    if data.worker:
        lease = Lease(actor=data.worker, epoch=1, acquired_at=event.at,
                      expires_at=data.lease_expires_at)
    return Packet(
        id=event.run_id,
        title=data.title,
        kind=data.kind,
        state=State.IN_PROGRESS,
        version=1,
        owner=data.owner,
        created_by=event.actor,
        worker=lease,
        target=data.target,
        notify=data.notify,
        stop_rules=data.stop_rules,
        gates=data.gates,
        idempotency_key=data.idempotency_key,
        created_at=event.at,
        updated_at=event.at,
    )


def _check_started_gates(gates: tuple[Gate, ...], actor: str) -> None:
    """A run's first gates are declared by whoever starts it (said, or left unsaid as
    before declarers were recorded); none is adopted yet."""
    for gate in gates:
        if gate.declared_by not in (UNSET, actor) or gate.adopted_by is not UNSET:
            raise InvalidInput(f"gate {gate.name!r} of a new run is declared by its starter "
                               f"{actor}, and adopted by nobody yet")


def _resume_state(packet: Packet, before: Packet, state: State) -> State | None:
    """Where a packet entering `state` returns once unblocked: the state `blocked` came
    from, kept while blocked, cleared by any other state."""
    if state is State.BLOCKED:
        return before.state if before.state is not State.BLOCKED else packet.resume_state
    return None


def _claimed(packet: Packet, event: Event) -> Packet:
    data = event.data
    assert isinstance(data, Claimed)
    expected = (packet.worker.epoch if packet.worker else 0) + 1
    if data.epoch != expected:
        raise InvalidInput(f"claim epoch {data.epoch} is not the next epoch {expected}")
    lease = Lease(actor=event.actor, epoch=data.epoch, acquired_at=event.at,
                  expires_at=data.lease_expires_at)
    return msgspec.structs.replace(packet, worker=lease)


def _heartbeat(packet: Packet, event: Event) -> Packet:
    data = event.data
    assert isinstance(data, Heartbeat)
    if data.fraction is not None and not 0.0 <= data.fraction <= 1.0:
        raise InvalidInput(f"progress must be between 0 and 1, not {data.fraction}")
    old = packet.progress
    progress = Progress(
        note=data.note if data.note is not None else old.note,
        fraction=data.fraction if data.fraction is not None else old.fraction,
        last_heartbeat=event.at,
        heartbeats=old.heartbeats + 1,
    )
    worker = packet.worker
    if worker is not None and worker.actor == event.actor and data.lease_expires_at:
        worker = msgspec.structs.replace(worker, expires_at=data.lease_expires_at)
    return msgspec.structs.replace(packet, progress=progress, worker=worker)


def _blocker_opened(packet: Packet, event: Event) -> Packet:
    data = event.data
    assert isinstance(data, BlockerOpened)
    if data.blocker_id != next_blocker_id(packet):
        raise InvalidInput(f"blocker id {data.blocker_id} is not {next_blocker_id(packet)}")
    detail = _require_text(data.detail, "a blocker's detail").strip()
    if detail.lower().rstrip(".!") in VAGUE_DETAILS:
        raise InvalidInput(
            f'blocker detail "{detail}" says nothing: name what is missing or failing',
            hint='e.g. --detail "API key for staging not in the vault"',
        )
    blocker = Blocker(id=data.blocker_id, kind=data.kind, detail=data.detail,
                      opened_at=event.at, opened_by=event.actor)
    return msgspec.structs.replace(packet, blockers=(*packet.blockers, blocker))


def _blocker_resolved(packet: Packet, event: Event) -> Packet:
    data = event.data
    assert isinstance(data, BlockerResolved)
    _require_text(data.resolution, "a resolution")
    found = next((b for b in packet.blockers if b.id == data.blocker_id), None)
    if found is None:
        known = ", ".join(b.id for b in packet.open_blockers) or "none"
        raise NotFound(f"run {packet.id} has no blocker {data.blocker_id} (open: {known})")
    if not found.is_open:
        raise RuleViolation(f"blocker {found.id} of {packet.id} is already resolved")
    resolved = msgspec.structs.replace(found, resolved_at=event.at, resolved_by=event.actor,
                                       resolution=data.resolution)
    blockers = tuple(resolved if b.id == found.id else b for b in packet.blockers)
    changed = msgspec.structs.replace(packet, blockers=blockers)
    if changed.open_blockers:
        return changed
    back = packet.resume_state or State.IN_PROGRESS
    return msgspec.structs.replace(changed, state=back, resume_state=None)


def _artifact_recorded(packet: Packet, event: Event) -> Packet:
    data = event.data
    assert isinstance(data, ArtifactRecorded)
    name = data.artifact.name
    kept = tuple(a for a in packet.artifacts if a.name != name)
    return msgspec.structs.replace(packet, artifacts=(*kept, data.artifact))


def _evidence_recorded(packet: Packet, event: Event) -> Packet:
    data = event.data
    assert isinstance(data, EvidenceRecorded)
    evidence = data.evidence
    if evidence.id != next_evidence_id(packet):
        raise InvalidInput(f"evidence id {evidence.id} is not {next_evidence_id(packet)}")
    if evidence.verdict is Verdict.SKIPPED and not (evidence.reason or "").strip():
        raise InvalidInput(
            "skipped evidence needs a named reason",
            hint='e.g. --reason "credential STAGING_KEY unavailable to the worker"',
        )
    return msgspec.structs.replace(packet, evidence=appended(packet.evidence, evidence))


def _marked_ready(packet: Packet, event: Event) -> Packet:
    data = event.data
    assert isinstance(data, MarkedReady)
    _require_text(data.summary, "the summary")
    if not packet.evidence:
        raise RuleViolation(
            f"run {packet.id} has no evidence: record what was checked before review",
            steps=[step("evidence", packet.id, why="run the check"),
                   step("evidence", packet.id, kind="test", fill=("reason",),
                        why="or say why it cannot run")],
        )
    missing = [n for n in data.artifacts if packet.artifact(n) is None]
    if missing:
        raise RuleViolation(
            f"the result of {packet.id} names artifacts that were never recorded: "
            + ", ".join(missing),
            steps=[step("artifact", packet.id, role="result", name=name,
                        why=f"record {name}") for name in missing],
        )
    result = Result(summary=data.summary, public_summary=data.public_summary,
                    artifacts=data.artifacts, submitted_at=event.at, submitted_by=event.actor)
    return msgspec.structs.replace(packet, result=result)


def _changes_requested(packet: Packet, event: Event) -> Packet:
    data = event.data
    assert isinstance(data, ChangesRequested)
    _require_text(data.reason, "the reason")
    request = ChangeRequest(reason=data.reason, by=event.actor, at=event.at)
    return msgspec.structs.replace(
        packet, result=None, change_requests=(*packet.change_requests, request)
    )


def _authority_transferred(packet: Packet, event: Event) -> Packet:
    data = event.data
    assert isinstance(data, AuthorityTransferred)
    _require_text(data.to, "the receiving actor")
    transfer = Transfer(authority=data.authority, to=data.to, by=event.actor, at=event.at)
    return msgspec.structs.replace(packet, transfers=(*packet.transfers, transfer))


def _approved(packet: Packet, event: Event) -> Packet:
    data = event.data
    assert isinstance(data, Approved)
    from waypost.core import gates  # here: only approve and review need it (start-up cost)

    gates.check_approval(packet, event.actor, data.waivers)
    approval = Approval(by=event.actor, at=event.at, waivers=data.waivers,
                        reviewed=data.reviewed, statement=data.statement)
    return msgspec.structs.replace(packet, approval=approval)


def _reviewed(packet: Packet, event: Event) -> Packet:
    data = event.data
    assert isinstance(data, Reviewed)
    from waypost.core import gates

    gates.check_review_evidence(packet, data.review_id, data.evidence)
    review = Review(id=data.review_id, by=event.actor, at=event.at,
                    submitted_at=packet.result.submitted_at if packet.result else None,
                    evidence=tuple(e.id for e in data.evidence))
    return msgspec.structs.replace(packet, evidence=appended(packet.evidence, *data.evidence),
                                   reviews=(*packet.reviews, review))


def _cancelled(packet: Packet, event: Event) -> Packet:
    data = event.data
    assert isinstance(data, Cancelled)
    _require_text(data.reason, "the reason")
    return msgspec.structs.replace(packet, cancel_reason=data.reason)


def _check_final_key(packet: Packet, key: str) -> None:
    if key != outbox.final_key(packet.id):
        raise InvalidInput(f"{key} is not the final delivery of {packet.id}")


def _delivered(packet: Packet, event: Event) -> Packet:
    data = event.data
    assert isinstance(data, Delivered)
    _check_final_key(packet, data.key)
    receipt = Receipt(key=data.key, target=packet.target, detail=data.detail,
                      attempts=data.attempts, relay=event.actor, delivered_at=event.at,
                      assurance=data.assurance)
    return msgspec.structs.replace(packet, receipt=receipt)


def _delivery_failed(packet: Packet, event: Event) -> Packet:
    data = event.data
    assert isinstance(data, DeliveryFailed)
    _check_final_key(packet, data.key)
    if data.blocker_id != next_blocker_id(packet):
        raise InvalidInput(f"blocker id {data.blocker_id} is not {next_blocker_id(packet)}")
    blocker = Blocker(id=data.blocker_id, kind=BlockerKind.DELIVERY_FAILED,
                      detail=_require_text(data.detail, "a blocker's detail"),
                      opened_at=event.at, opened_by=event.actor)
    return msgspec.structs.replace(packet, blockers=(*packet.blockers, blocker))


def _retargeted(packet: Packet, event: Event) -> Packet:
    """A new target and/or notify (their syntax is decided by the use case, where the
    delivery root is known); a retarget that changes nothing is refused."""
    data = event.data
    assert isinstance(data, Retargeted)
    if data.target is None and data.notify is None:
        raise InvalidInput("retarget names neither a target nor a notify",
                           steps=[step("retarget", packet.id, why="name where it goes")])
    target = packet.target if data.target is None else _require_text(data.target, "target")
    notify = packet.notify if data.notify is None else _require_text(data.notify, "notify")
    if (target, notify) == (packet.target, packet.notify):
        raise InvalidInput(
            f"retarget changes nothing: {packet.id} already goes to {packet.target}"
            + (f" (notify {packet.notify})" if packet.notify else ""),
            steps=[step("unblock", packet.id, why="to send the same delivery again")])
    return msgspec.structs.replace(packet, target=target, notify=notify)


def _check_not_approved(packet: Packet, what: str) -> None:
    """Gates are settled once approved (a run blocked by its delivery was approved)."""
    if packet.approval is not None:
        raise RuleViolation(f"run {packet.id} is approved: too late to {what}",
                            steps=[step("read", packet.id, why="see its gates")])


def _gate_added(packet: Packet, event: Event) -> Packet:
    """Another gate, declared by the event's actor; a gate is never replaced, so nobody
    weakens a gate the owner relies on by declaring one of the same name."""
    from waypost.core.gates import HASHES_GATE

    data = event.data
    assert isinstance(data, GateAdded)
    _check_not_approved(packet, "add a gate")
    _require_text(data.name, "a gate's name")
    _require_text(data.check, "a gate's check")
    taken = next((g for g in packet.gates if g.name == data.name), None)
    if taken is not None or data.name == HASHES_GATE:
        raise RuleViolation(
            f"run {packet.id} already has a gate named {data.name!r}"
            + (f" ({taken.check})" if taken else " (built in)") + ": a gate is never replaced",
            steps=[step("add_gate", packet.id, check=data.check, why="give it another name")])
    gate = Gate(name=data.name, check=data.check, required=data.required,
                declared_by=event.actor)
    return msgspec.structs.replace(packet, gates=(*packet.gates, gate))


def _gate_adopted(packet: Packet, event: Event) -> Packet:
    data = event.data
    assert isinstance(data, GateAdopted)
    _check_not_approved(packet, "adopt a gate")
    found = next((g for g in packet.gates if g.name == data.name), None)
    if found is None:
        known = ", ".join(g.name for g in packet.gates) or "none"
        raise NotFound(f"run {packet.id} has no gate {data.name!r} (gates: {known})")
    if found.adopted_by is not UNSET:
        raise RuleViolation(f"gate {data.name!r} of {packet.id} was already adopted by "
                            f"{found.adopted_by}")
    adopted = msgspec.structs.replace(found, adopted_by=event.actor)
    return msgspec.structs.replace(
        packet, gates=tuple(adopted if g.name == data.name else g for g in packet.gates))


def _nudged(packet: Packet, event: Event) -> Packet:
    data = event.data
    assert isinstance(data, Nudged)
    nudge = Nudge(topic=data.topic, detail=_require_text(data.detail, "a nudge's detail"),
                  at=event.at, by=event.actor)
    return msgspec.structs.replace(packet, nudges=(*packet.nudges, nudge))


_HANDLERS: Final[Mapping[type[EventData], Callable[[Packet, Event], Packet]]] = {
    Claimed: _claimed,
    Heartbeat: _heartbeat,
    BlockerOpened: _blocker_opened,
    BlockerResolved: _blocker_resolved,
    ArtifactRecorded: _artifact_recorded,
    EvidenceRecorded: _evidence_recorded,
    MarkedReady: _marked_ready,
    ChangesRequested: _changes_requested,
    AuthorityTransferred: _authority_transferred,
    Approved: _approved,
    Reviewed: _reviewed,
    Cancelled: _cancelled,
    Nudged: _nudged,
    Delivered: _delivered,
    DeliveryFailed: _delivery_failed,
    Retargeted: _retargeted,
    GateAdded: _gate_added,
    GateAdopted: _gate_adopted,
}
