"""The events that build a packet: each is a frozen record tagged with its `type`, and
`Event` is one entry of a run's hash-chained history.
"""

# No `from __future__ import annotations`: msgspec reads these annotations (see waypost.model.base).

from datetime import datetime

from waypost.model import (
    Artifact,
    Authority,
    BlockerKind,
    DeliveryAssurance,
    Evidence,
    Gate,
    Kind,
    NudgeTopic,
    Record,
    StopRules,
    Waiver,
)


class EventData(Record, frozen=True, tag_field="type"):
    """Base of every event body; the class name (snake_case) is its `type`."""


class Started(EventData, tag="started", frozen=True, kw_only=True):
    title: str
    kind: Kind
    owner: str
    target: str
    notify: str | None = None
    worker: str | None = None
    lease_expires_at: datetime | None = None
    stop_rules: StopRules = StopRules()
    gates: tuple[Gate, ...] = ()
    idempotency_key: str | None = None


class Claimed(EventData, tag="claimed", frozen=True, kw_only=True):
    epoch: int
    lease_expires_at: datetime | None = None
    took_over_from: str | None = None


class Heartbeat(EventData, tag="heartbeat", frozen=True, kw_only=True):
    note: str | None = None
    fraction: float | None = None
    lease_expires_at: datetime | None = None


class BlockerOpened(EventData, tag="blocker_opened", frozen=True, kw_only=True):
    blocker_id: str
    kind: BlockerKind
    detail: str


class BlockerResolved(EventData, tag="blocker_resolved", frozen=True, kw_only=True):
    blocker_id: str
    resolution: str


class ArtifactRecorded(EventData, tag="artifact_recorded", frozen=True, kw_only=True):
    artifact: Artifact


class EvidenceRecorded(EventData, tag="evidence_recorded", frozen=True, kw_only=True):
    evidence: Evidence


class MarkedReady(EventData, tag="marked_ready", frozen=True, kw_only=True):
    summary: str
    public_summary: str | None = None
    artifacts: tuple[str, ...] = ()


class ChangesRequested(EventData, tag="changes_requested", frozen=True, kw_only=True):
    reason: str


class AuthorityTransferred(EventData, tag="authority_transferred", frozen=True, kw_only=True):
    authority: Authority
    to: str


class Approved(EventData, tag="approved", frozen=True, kw_only=True, omit_defaults=True):
    waivers: tuple[Waiver, ...]  # always written, as before `reviewed` existed
    reviewed: str | None = None  # the reviewed-result digest approved (`core.reviewed`)
    # the sha256 of the owner's signed approval statement (`approve --sign`), a stored blob
    statement: str | None = None


class Cancelled(EventData, tag="cancelled", frozen=True, kw_only=True):
    reason: str


class Reviewed(EventData, tag="reviewed", frozen=True, kw_only=True):
    review_id: str
    evidence: tuple[Evidence, ...] = ()  # one rechecked item per gate run


class Delivered(EventData, tag="delivered", frozen=True, kw_only=True, omit_defaults=True):
    key: str  # the final delivery's idempotency key
    detail: str  # the target's receipt
    attempts: int
    # omitted when None, so an event written before receipts said it hashes as it did then
    assurance: DeliveryAssurance | None = None


class DeliveryFailed(EventData, tag="delivery_failed", frozen=True, kw_only=True):
    key: str
    blocker_id: str  # the delivery_failed blocker this opens
    detail: str  # names the target and the last error
    attempts: int


class Retargeted(EventData, tag="retargeted", frozen=True, kw_only=True):
    """The owner changed where the result goes before it was delivered (None: unchanged)."""

    target: str | None = None
    notify: str | None = None
    # an earlier attempt's outcome was unknown: the old target may already have the result
    accept_duplicate: bool = False


class GateAdded(EventData, tag="gate_added", frozen=True, kw_only=True):
    """A gate declared after the start, by the event's actor (the owner, or the worker:
    a worker's gate waits for the owner to adopt it before review runs it)."""

    name: str
    check: str
    required: bool = True


class GateAdopted(EventData, tag="gate_adopted", frozen=True, kw_only=True):
    """The owner made a gate someone else declared its own: review runs it from now on."""

    name: str


class Nudged(EventData, tag="nudged", frozen=True, kw_only=True):
    topic: NudgeTopic
    detail: str


AnyEventData = (
    Started
    | Claimed
    | Heartbeat
    | BlockerOpened
    | BlockerResolved
    | ArtifactRecorded
    | EvidenceRecorded
    | MarkedReady
    | ChangesRequested
    | AuthorityTransferred
    | Approved
    | Cancelled
    | Reviewed
    | Nudged
    | Delivered
    | DeliveryFailed
    | Retargeted
    | GateAdded
    | GateAdopted
)


class Event(Record, frozen=True, kw_only=True):
    run_id: str
    seq: int
    at: datetime
    actor: str
    epoch: int | None = None  # the lease epoch the actor wrote under, when it is a worker
    data: AnyEventData
    prev_hash: str
    hash: str

    @property
    def type(self) -> str:
        return str(type(self.data).__struct_config__.tag)
