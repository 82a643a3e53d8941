"""The transition table: which move each state allows, and where it leads.

Pure data and one lookup; `machine.apply` and the authority rules read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from waypost.errors import IllegalTransition
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
    EventData,
    EvidenceRecorded,
    GateAdded,
    GateAdopted,
    Heartbeat,
    MarkedReady,
    Nudged,
    Retargeted,
    Reviewed,
)
from waypost.model import Packet, QuickStrEnum, State, quick


@quick
class Move(QuickStrEnum):
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
    RETARGET = "retarget"  # the owner changes the target or notify before delivery
    ADD_GATE = "add_gate"  # declare another gate (the owner; the worker before ready)
    ADOPT_GATE = "adopt_gate"  # the owner makes a gate someone else declared its own


class _Return:
    """Marker: the move returns to the state `blocked` came from (once no blocker is open)."""


RETURN: Final = _Return()
Destination = State | None | _Return  # None: the state does not change

S = State
TABLE: Final[Mapping[State, Mapping[Move, Destination]]] = {
    S.IN_PROGRESS: {
        Move.CLAIM: None,
        Move.HEARTBEAT: None,
        Move.BLOCK: S.BLOCKED,
        Move.ARTIFACT: None,
        Move.EVIDENCE: None,
        Move.READY: S.READY_FOR_REVIEW,
        Move.TRANSFER: None,
        Move.CANCEL: S.CANCELLED,
        Move.RETARGET: None,
        Move.ADD_GATE: None,
        Move.ADOPT_GATE: None,
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
        Move.RETARGET: None,
        Move.ADD_GATE: None,
        Move.ADOPT_GATE: None,
    },
    S.READY_FOR_REVIEW: {
        Move.EVIDENCE: None,
        Move.REVIEW: None,
        Move.CHANGES: S.IN_PROGRESS,
        Move.APPROVE: S.APPROVED,
        Move.TRANSFER: None,
        Move.NUDGE: None,
        Move.CANCEL: S.CANCELLED,
        Move.RETARGET: None,
        Move.ADD_GATE: None,
        Move.ADOPT_GATE: None,
    },
    S.APPROVED: {
        Move.TRANSFER: None,
        Move.DELIVER: S.DELIVERED,
        Move.DELIVERY_FAIL: S.BLOCKED,
        Move.NUDGE: None,
        Move.CANCEL: S.CANCELLED,
        Move.RETARGET: None,
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
    Retargeted: Move.RETARGET,
    GateAdded: Move.ADD_GATE,
    GateAdopted: Move.ADOPT_GATE,
}


def allowed_moves(state: State) -> list[str]:
    return sorted(TABLE[state])


def destination(packet: Packet, move: Move) -> Destination:
    """Where `move` takes `packet`; an IllegalTransition naming the allowed moves if nowhere."""
    moves = TABLE[packet.state]
    if move in moves:
        return moves[move]
    allowed = ", ".join(allowed_moves(packet.state)) or "none (terminal)"
    hint = _next_command(packet)
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


def _next_command(packet: Packet) -> str:
    """What moves a run on from its state: the command to type next."""
    run, owner = packet.id, packet.owner
    worker = packet.worker.actor if packet.worker else "WORKER"
    return {
        State.IN_PROGRESS: f"when the work is done: waypost ready {run} --summary TEXT "
                           f"--as {worker}",
        State.READY_FOR_REVIEW: f"the owner reviews it: waypost review {run} --as {owner}, "
                                f"then approve it or send it back with waypost changes",
        State.APPROVED: "the relay delivers it: waypost deliver --once",
        State.DELIVERED: f"it is final; see where it went: waypost show {run}",
        State.CANCELLED: f"it is final; see why: waypost show {run}",
    }.get(packet.state, "")
