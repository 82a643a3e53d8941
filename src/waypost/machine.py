"""The state machine: one transition table and a pure `apply(packet, event) -> packet`.

No I/O and no clock: everything `apply` needs is in the packet and the event, so replaying
a run's events (`fold`) always rebuilds the stored packet exactly.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Final

import msgspec

from waypost import gates, outbox
from waypost.errors import (
    IllegalTransition,
    InvalidInput,
    NotAuthorized,
    NotFound,
    RuleViolation,
    StaleLease,
)
from waypost.liveness import (
    deadline_due,
    delivery_stall_due,
    is_due,
    review_due,
    silent_due,
)
from waypost.model import (
    Approval,
    Approved,
    ArtifactRecorded,
    Authority,
    AuthorityTransferred,
    Blocker,
    BlockerKind,
    BlockerOpened,
    BlockerResolved,
    Cancelled,
    ChangeRequest,
    ChangesRequested,
    Claimed,
    Delivered,
    DeliveryFailed,
    Event,
    EventData,
    EvidenceRecorded,
    Heartbeat,
    Kind,
    Lease,
    MarkedReady,
    Nudge,
    Nudged,
    NudgeTopic,
    Packet,
    Progress,
    Receipt,
    Result,
    Review,
    Reviewed,
    Started,
    State,
    Transfer,
    Verdict,
)


class Move(enum.StrEnum):
    CLAIM = "claim"  # take or take over the worker's lease
    HEARTBEAT = "heartbeat"  # the worker says it is alive
    BLOCK = "block"  # open a blocker
    UNBLOCK = "unblock"  # resolve a blocker
    ARTIFACT = "artifact"  # record an artifact
    EVIDENCE = "evidence"  # record evidence
    READY = "ready"  # submit the result packet for review
    CHANGES = "changes"  # the owner sends the work back
    APPROVE = "approve"  # the owner (or a transferee) accepts the result; delivery is queued
    REVIEW = "review"  # the owner (or a transferee) re-runs the gates and records the verdicts
    TRANSFER = "transfer"  # the owner hands over an authority
    CANCEL = "cancel"  # the owner stops the run
    NUDGE = "nudge"  # the watchdog tells the owner that something waits on them
    DELIVER = "deliver"  # the relay records the target's receipt for the final delivery
    DELIVERY_FAIL = "delivery_fail"  # the relay gives up on the final delivery: blocked


class _Return:
    """Marker: the move returns to the state `blocked` came from (once no blocker is open)."""


RETURN: Final = _Return()
Target = State | None | _Return  # None: the state does not change

S = State
TABLE: Final[Mapping[State, Mapping[Move, Target]]] = {
    S.IN_PROGRESS: {
        Move.CLAIM: None,
        Move.HEARTBEAT: None,
        Move.BLOCK: S.BLOCKED,
        Move.ARTIFACT: None,
        Move.EVIDENCE: None,
        Move.READY: S.READY_FOR_REVIEW,
        Move.TRANSFER: None,
        Move.CANCEL: S.CANCELLED,
    },
    S.BLOCKED: {
        Move.CLAIM: None,
        Move.HEARTBEAT: None,
        Move.BLOCK: S.BLOCKED,
        Move.UNBLOCK: RETURN,
        Move.ARTIFACT: None,
        Move.EVIDENCE: None,
        Move.TRANSFER: None,
        Move.CANCEL: S.CANCELLED,
    },
    S.READY_FOR_REVIEW: {
        Move.EVIDENCE: None,
        Move.REVIEW: None,
        Move.CHANGES: S.IN_PROGRESS,
        Move.APPROVE: S.APPROVED,
        Move.TRANSFER: None,
        Move.NUDGE: None,
        Move.CANCEL: S.CANCELLED,
    },
    S.APPROVED: {
        Move.TRANSFER: None,
        Move.DELIVER: S.DELIVERED,
        Move.DELIVERY_FAIL: S.BLOCKED,
        Move.NUDGE: None,
        Move.CANCEL: S.CANCELLED,
    },
    S.DELIVERED: {},
    S.CANCELLED: {},
}

MOVE_OF: Final[Mapping[type[EventData], Move]] = {
    Claimed: Move.CLAIM,
    Heartbeat: Move.HEARTBEAT,
    BlockerOpened: Move.BLOCK,
    BlockerResolved: Move.UNBLOCK,
    ArtifactRecorded: Move.ARTIFACT,
    EvidenceRecorded: Move.EVIDENCE,
    MarkedReady: Move.READY,
    ChangesRequested: Move.CHANGES,
    AuthorityTransferred: Move.TRANSFER,
    Approved: Move.APPROVE,
    Reviewed: Move.REVIEW,
    Cancelled: Move.CANCEL,
    Nudged: Move.NUDGE,
    Delivered: Move.DELIVER,
    DeliveryFailed: Move.DELIVERY_FAIL,
}

OWNER_MOVES: Final = frozenset({Move.CHANGES, Move.TRANSFER, Move.CANCEL})
WATCHDOG_PREFIX: Final = "watchdog:"
RELAY_PREFIX: Final = "relay:"
# what a watchdog may record, each with the moment it falls due (liveness.py)
WATCHED: Final[Mapping[str, Callable[[Packet], datetime | None]]] = {
    BlockerKind.WORKER_SILENT: silent_due,
    BlockerKind.DEADLINE_PASSED: deadline_due,
    NudgeTopic.REVIEW_OVERDUE: review_due,
    NudgeTopic.DELIVERY_STALLED: delivery_stall_due,
}
VAGUE_DETAILS: Final = frozenset({"waiting", "blocked", "stuck", "pending", "todo", "tbd", "?"})


def allowed_moves(state: State) -> list[str]:
    return sorted(TABLE[state])


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
    target = _target(packet, move)
    _authorize(packet, event, move)
    changed = _HANDLERS[type(event.data)](packet, event)
    if isinstance(target, State):
        changed = _enter(changed, packet, target)
    return msgspec.structs.replace(changed, version=packet.version + 1, updated_at=event.at)


def fold(events: Iterable[Event]) -> Packet:
    packet: Packet | None = None
    for event in events:
        packet = apply(packet, event)
    if packet is None:
        raise NotFound("no events to fold")
    return packet


def next_blocker_id(packet: Packet) -> str:
    return f"b{len(packet.blockers) + 1}"


def next_evidence_id(packet: Packet) -> str:
    return f"e{len(packet.evidence) + 1}"


# --- checks ---------------------------------------------------------------------------


def _target(packet: Packet, move: Move) -> Target:
    moves = TABLE[packet.state]
    if move in moves:
        return moves[move]
    allowed = ", ".join(allowed_moves(packet.state)) or "none (terminal)"
    hint = ""
    if packet.state is State.BLOCKED:
        hint = "; ".join(
            f"resolve {b.id} with: waypost unblock {packet.id} {b.id} --resolution TEXT"
            for b in packet.open_blockers
        )
        blockers = ", ".join(f'{b.id} ({b.kind}: "{b.detail}")' for b in packet.open_blockers)
        message = f"run {packet.id} is blocked by {blockers}: cannot {move}"
    else:
        message = f"run {packet.id} is {packet.state}: cannot {move}"
    raise IllegalTransition(f"{message} (allowed from {packet.state}: {allowed})", hint=hint)


def is_watchdog(actor: str) -> bool:
    return actor.startswith(WATCHDOG_PREFIX)


def _authorize(packet: Packet, event: Event, move: Move) -> None:
    if is_watchdog(event.actor) or move is Move.NUDGE:
        _check_watchdog(packet, event)
        return
    if move is Move.CLAIM:
        return
    if move in (Move.DELIVER, Move.DELIVERY_FAIL):
        _check_relay(packet, event, move)
        return
    if move in (Move.APPROVE, Move.REVIEW):
        _check_authority(packet, event.actor, Authority.APPROVE, move)
        return
    if move in OWNER_MOVES:
        if event.actor != packet.owner:
            raise NotAuthorized(
                f"{event.actor} may not {move} run {packet.id}: only its owner {packet.owner} may",
                hint=f"run it as the owner: --as {packet.owner}",
            )
        return
    _check_worker(packet, event, move)


def _watched_condition(data: EventData) -> Callable[[Packet], datetime | None] | None:
    if isinstance(data, BlockerOpened):
        return WATCHED.get(data.kind)
    if isinstance(data, Nudged):
        return WATCHED.get(data.topic)
    return None


def _check_watchdog(packet: Packet, event: Event) -> None:
    """A watchdog records only the conditions it watches for, and only once they hold."""
    condition = _watched_condition(event.data)
    if condition is None or not is_watchdog(event.actor):
        raise NotAuthorized(
            f"{event.actor} may not record {event.type} on {packet.id}: a watchdog "
            f"({WATCHDOG_PREFIX}ID) records only " + ", ".join(WATCHED) + " (and nothing else)",
            hint=f"see the run with: waypost show {packet.id}",
        )
    due = condition(packet)
    if not is_due(due, event.at):
        what = getattr(event.data, "kind", None) or getattr(event.data, "topic", "")
        why = (f"due {due:%Y-%m-%d %H:%M:%S}Z" if due
               else f"already recorded, or nothing to watch for in {packet.state}")
        raise RuleViolation(
            f"{event.actor} may not record {what} on {packet.id} at "
            f"{event.at:%Y-%m-%d %H:%M:%S}Z: it is not due ({why})",
            hint=f"nothing to do; see the run with: waypost show {packet.id}",
        )


def _check_worker(packet: Packet, event: Event, move: Move) -> None:
    lease = packet.worker
    if lease is not None and event.actor == lease.actor:
        if event.epoch is not None and event.epoch != lease.epoch:
            raise StaleLease(
                f"{event.actor} wrote to {packet.id} with lease epoch {event.epoch}, "
                f"but the current epoch is {lease.epoch}",
                hint=f"claim it again: waypost claim {packet.id} --as {event.actor}",
            )
        return
    if event.actor == packet.owner and (move is not Move.HEARTBEAT or lease is None):
        return  # the owner is never fenced, but only a lease holder's heartbeat counts
    if lease is not None:
        raise StaleLease(
            f"{event.actor} does not hold the lease on {packet.id}: {lease.actor} took it "
            f"(epoch {lease.epoch}) at {lease.acquired_at:%Y-%m-%d %H:%M:%S}Z",
            hint=f"ask {lease.actor} or the owner {packet.owner}; to take it over: "
            f"waypost claim {packet.id} --as {event.actor}",
        )
    raise NotAuthorized(
        f"{event.actor} may not {move} run {packet.id}: it is neither the owner "
        f"({packet.owner}) nor the worker (nobody holds the lease)",
        hint=f"claim it first: waypost claim {packet.id} --as {event.actor}",
    )


def holds_authority(packet: Packet, actor: str, authority: Authority) -> bool:
    """The owner holds every authority; others only by an explicit transfer."""
    return actor == packet.owner or any(
        t.authority is authority and t.to == actor for t in packet.transfers)


def check_may_review(packet: Packet, actor: str) -> None:
    """Raise unless `actor` may review `packet` now (asked before any gate is run)."""
    _target(packet, Move.REVIEW)
    _check_authority(packet, actor, Authority.APPROVE, Move.REVIEW)


def _check_authority(packet: Packet, actor: str, authority: Authority,
                     move: Move | None = None) -> None:
    if holds_authority(packet, actor, authority):
        return
    holders = [packet.owner, *(t.to for t in packet.transfers if t.authority is authority)]
    role = " (the run's own worker)" if packet.worker and packet.worker.actor == actor else ""
    raise NotAuthorized(
        f"{actor}{role} may not {move or authority} run {packet.id}: only "
        + ", ".join(dict.fromkeys(holders)) + " may",
        hint=f"the owner can hand it over: waypost transfer {packet.id} "
        f"--authority {authority} --to {actor} --as {packet.owner}",
    )


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


def _enter(packet: Packet, before: Packet, state: State) -> Packet:
    resume = packet.resume_state
    if state is State.BLOCKED and before.state is not State.BLOCKED:
        resume = before.state
    elif state is not State.BLOCKED:
        resume = None
    return msgspec.structs.replace(packet, state=state, resume_state=resume)


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
    return msgspec.structs.replace(packet, evidence=(*packet.evidence, evidence))


def _marked_ready(packet: Packet, event: Event) -> Packet:
    data = event.data
    assert isinstance(data, MarkedReady)
    _require_text(data.summary, "the summary")
    if not packet.evidence:
        raise RuleViolation(
            f"run {packet.id} has no evidence: record what was checked before review",
            hint=f"waypost evidence run {packet.id} -- CMD, or waypost evidence skip "
            f"{packet.id} --kind test --reason WHY",
        )
    missing = [n for n in data.artifacts if packet.artifact(n) is None]
    if missing:
        raise RuleViolation(
            f"the result of {packet.id} names artifacts that were never recorded: "
            + ", ".join(missing),
            hint=f"waypost artifact add {packet.id} PATH --role result --name NAME",
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
    gates.check_approval(packet, event.actor, data.waivers)
    approval = Approval(by=event.actor, at=event.at, waivers=data.waivers)
    return msgspec.structs.replace(packet, approval=approval)


def _reviewed(packet: Packet, event: Event) -> Packet:
    data = event.data
    assert isinstance(data, Reviewed)
    gates.check_review_evidence(packet, data.review_id, data.evidence)
    review = Review(id=data.review_id, by=event.actor, at=event.at,
                    submitted_at=packet.result.submitted_at if packet.result else None,
                    evidence=tuple(e.id for e in data.evidence))
    return msgspec.structs.replace(packet, evidence=(*packet.evidence, *data.evidence),
                                   reviews=(*packet.reviews, review))


def _cancelled(packet: Packet, event: Event) -> Packet:
    data = event.data
    assert isinstance(data, Cancelled)
    _require_text(data.reason, "the reason")
    return msgspec.structs.replace(packet, cancel_reason=data.reason)


def _check_relay(packet: Packet, event: Event, move: Move) -> None:
    """Only a delivery relay records the final delivery's outcome; its further authority is
    its lease on the outbox row, which the store checks in the same transaction."""
    if not event.actor.startswith(RELAY_PREFIX):
        raise NotAuthorized(
            f"{event.actor} may not record {move} on {packet.id}: only a delivery relay "
            f"({RELAY_PREFIX}ID) records the final delivery",
            hint="run the relay: waypost deliver --once",
        )


def _check_final_key(packet: Packet, key: str) -> None:
    if key != outbox.final_key(packet.id):
        raise InvalidInput(f"{key} is not the final delivery of {packet.id}")


def _delivered(packet: Packet, event: Event) -> Packet:
    data = event.data
    assert isinstance(data, Delivered)
    _check_final_key(packet, data.key)
    receipt = Receipt(key=data.key, target=packet.target, detail=data.detail,
                      attempts=data.attempts, relay=event.actor, delivered_at=event.at)
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
}
