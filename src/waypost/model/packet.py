"""The checkpoint packet (`waypost.packet/v1`) and its parts: kinds, states, blockers,
artifacts, evidence, gates, the result, reviews and approval (the events that build it are
in `waypost.events`)."""

# No `from __future__ import annotations` here: msgspec reads these annotations when it
# builds a decoder, and resolving them from strings would cost every command that reads a
# packet a millisecond or two; every name they use is defined above its first use.

from collections.abc import Iterable
from datetime import datetime
from typing import Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

from waypost.errors import InvalidInput
from waypost.model.base import QuickStrEnum, Record, quick
from waypost.model.delivery import Delivery, Receipt

SCHEMA = "waypost.packet/v1"


@quick
class Kind(QuickStrEnum):
    BOUNDED = "bounded"  # finishes inline: no detach, no watcher
    LONG_RUNNING = "long_running"  # detached: owner, target and stop rules recorded first


@quick
class State(QuickStrEnum):
    IN_PROGRESS = "in_progress"  # a worker holds the lease and is working
    BLOCKED = "blocked"  # one or more open blockers; nothing proceeds
    READY_FOR_REVIEW = "ready_for_review"  # a result packet exists; waiting for the owner
    APPROVED = "approved"  # gates passed; final delivery queued
    DELIVERED = "delivered"  # final completion reached the target (terminal)
    CANCELLED = "cancelled"  # stopped by the owner with a reason (terminal)


TERMINAL = frozenset({State.DELIVERED, State.CANCELLED})


def parse_states(values: Iterable[str]) -> list[State]:
    """States named in `values`, each one name or several comma-separated (`--state`)."""
    names = [v.strip() for value in values for v in value.split(",") if v.strip()]
    try:
        return [State(n) for n in names]
    except ValueError:
        known = ", ".join(s.value for s in State)
        raise InvalidInput(f"unknown state in {', '.join(names)} (known: {known})") from None


@quick
class BlockerKind(QuickStrEnum):
    MISSING_INPUT = "missing_input"  # an input the work needs was not given
    FAILED_COMMAND = "failed_command"  # a command the work depends on failed
    PERMISSION_BOUNDARY = "permission_boundary"  # the next step needs authority the worker lacks
    UNAVAILABLE_RESOURCE = "unavailable_resource"  # a service, machine or credential is down
    WORKER_SILENT = "worker_silent"  # the watchdog saw no heartbeat past max_silence
    DEADLINE_PASSED = "deadline_passed"  # the stop rules' deadline passed
    DELIVERY_FAILED = "delivery_failed"  # the final delivery failed for good
    OTHER = "other"  # anything else, named in the detail


@quick
class ArtifactRole(QuickStrEnum):
    DRAFT = "draft"  # work in progress
    REPORT = "report"  # a write-up for people
    RESULT = "result"  # the deliverable itself
    LOG = "log"  # output of a command
    REVIEW = "review"  # the reviewer's notes
    OTHER = "other"  # anything else


@quick
class EvidenceKind(QuickStrEnum):
    BUILD = "build"  # a build ran
    TEST = "test"  # tests ran
    LINT = "lint"  # a linter or type checker ran
    GREP = "grep"  # a pattern was searched for
    INSPECT = "inspect"  # an artifact was inspected
    LIVE_CHECK = "live_check"  # a live endpoint was checked
    COMMAND = "command"  # any other command
    SKIPPED = "skipped"  # a check that could not run, with the reason


@quick
class Verdict(QuickStrEnum):
    PASSED = "passed"  # the check ran and passed
    FAILED = "failed"  # the check ran and failed
    SKIPPED = "skipped"  # the check could not run; the reason is named


@quick
class Assurance(QuickStrEnum):
    REPORTED = "reported"  # a claim typed by hand
    RECORDED = "recorded"  # waypost ran the command itself and recorded what happened
    RECHECKED = "rechecked"  # the owner re-ran it at review, in the owner's environment


@quick
class Liveness(QuickStrEnum):
    FRESH = "fresh"  # heard from within the heartbeat interval
    LATE = "late"  # past the heartbeat interval
    SILENT = "silent"  # past max_silence: the watchdog acts


@quick
class Authority(QuickStrEnum):
    APPROVE = "approve"  # may approve the run
    DELIVER = "deliver"  # may deliver the result
    TAKEOVER = "takeover"  # may take over a worker's live lease (claim or resume)


class StopRules(Record, frozen=True, kw_only=True):
    deadline: datetime | None = None
    heartbeat_interval: float | None = None  # seconds
    max_silence: float | None = None  # seconds
    max_attempts: int | None = None
    budget: str | None = None
    review_within: float | None = None  # seconds


class Lease(Record, frozen=True, kw_only=True):
    actor: str
    epoch: int  # fencing token: writes from an older epoch are refused
    acquired_at: datetime
    expires_at: datetime | None = None


class Blocker(Record, frozen=True, kw_only=True):
    id: str
    kind: BlockerKind
    detail: str
    opened_at: datetime
    opened_by: str
    resolved_at: datetime | None = None
    resolved_by: str | None = None
    resolution: str | None = None

    @property
    def is_open(self) -> bool:
        return self.resolved_at is None


class Artifact(Record, frozen=True, kw_only=True):
    name: str
    role: ArtifactRole
    path: str | None = None
    url: str | None = None
    sha256: str | None = None
    bytes: int | None = None
    media_type: str = "application/octet-stream"
    stored: bool = False  # a copy lives in the store's blob area
    recorded_at: datetime
    recorded_by: str


class Evidence(Record, frozen=True, kw_only=True):
    id: str
    kind: EvidenceKind
    verdict: Verdict
    assurance: Assurance
    summary: str
    command: str | None = None
    cwd: str | None = None
    exit_code: int | None = None
    duration_s: float | None = None
    output_tail: str | None = None
    log_sha256: str | None = None
    reason: str | None = None  # required when the verdict is skipped
    artifacts: tuple[str, ...] = ()
    gate: str | None = None
    review: str | None = None  # the review that rechecked it (assurance `rechecked`)
    recorded_at: datetime
    recorded_by: str


class Gate(Record, frozen=True, kw_only=True):
    """A check the owner requires before delivery. Review runs it only if it is the owner's
    (declared or adopted by the owner; `waypost.core.gates.is_owners`), unless it reads
    nothing but the store (`is_active`)."""

    name: str
    check: str  # KIND:ARG, e.g. "command:pytest -q", "artifact:draft.md"
    required: bool = True
    # Who declared it, and the owner who adopted it. Never null: absent until said (UNSET
    # is left out of the JSON), so a gate recorded before they existed encodes, and the
    # event that holds it hashes, exactly as it did then.
    declared_by: str | UnsetType = UNSET
    adopted_by: str | UnsetType = UNSET


# what the private summary reads as in the public view (`core.readers`, `core.sanitize`)
WITHHELD = "[withheld: the private summary is not part of the public packet]"


class Result(Record, frozen=True, kw_only=True):
    summary: str
    public_summary: str | None = None
    artifacts: tuple[str, ...] = ()
    submitted_at: datetime
    submitted_by: str


class Progress(Record, frozen=True, kw_only=True):
    note: str | None = None
    fraction: float | None = None
    last_heartbeat: datetime | None = None
    heartbeats: int = 0


class Transfer(Record, frozen=True, kw_only=True):
    authority: Authority
    to: str
    by: str
    at: datetime


class ChangeRequest(Record, frozen=True, kw_only=True):
    reason: str
    by: str
    at: datetime


class Waiver(Record, frozen=True, kw_only=True):
    gate: str
    reason: str
    by: str
    at: datetime


class Approval(Record, frozen=True, kw_only=True):
    by: str
    at: datetime
    waivers: tuple[Waiver, ...] = ()  # shown forever
    reviewed: str | None = None  # the reviewed-result digest approved (`core.reviewed`)
    # the sha256 of the owner's signed approval statement (`approve --sign`), a stored blob
    statement: str | None = None


class Review(Record, frozen=True, kw_only=True):
    """The owner's re-run of the gates; approval looks at the latest one only."""

    id: str
    by: str
    at: datetime
    submitted_at: datetime | None = None  # the result it reviewed (a resubmission needs another)
    evidence: tuple[str, ...] = ()  # ids of the rechecked evidence it recorded


@quick
class NudgeTopic(QuickStrEnum):
    REVIEW_OVERDUE = "review_overdue"  # ready_for_review past review_within: nobody answered
    DELIVERY_STALLED = "delivery_stalled"  # the final delivery sits queued, no relay running


class Nudge(Record, frozen=True, kw_only=True):
    """The watchdog told the owner that something waits on them (once per condition)."""

    topic: NudgeTopic
    detail: str
    at: datetime
    by: str


class Origin(Record, frozen=True, kw_only=True):
    """Where an imported run came from: the bundle that brought it (`waypost import`).
    Kept beside the packet, never in it; an imported run is read-only in its new store."""

    source: str  # the bundle's file name as it was imported
    holder: str  # who the bundle says wrote it (its statement's `by`)
    signer: str  # the keyid of the key whose signature verified
    pinned: bool  # whether that key was pinned by whoever imported it
    exported_at: datetime
    imported_at: datetime

    def said(self) -> str:
        """One line for people: whose bundle, signed by which key, from which file."""
        pin = "" if self.pinned else ", not pinned"
        return f"{self.holder} (key {self.signer[:16]}{pin}; {self.source})"


class Observed(Record, frozen=True, kw_only=True):
    """Derived when the packet is read; never stored and never part of the fold."""

    as_of: datetime
    liveness: Liveness | None = None
    silent_for_s: float | None = None
    watch: str
    watched_by: str | None = None  # the live watcher covering the run, if any
    delivery: str
    deliveries: tuple[Delivery, ...] = ()  # the run's outbox rows (final and notices)
    imported: Origin | None = None  # where the run came from; read-only here (None: local)


class Packet(Record, frozen=True, kw_only=True):
    schema: Literal["waypost.packet/v1"] = "waypost.packet/v1"
    id: str
    title: str
    kind: Kind
    state: State
    resume_state: State | None = None  # where `blocked` returns once its last blocker is resolved
    version: int
    owner: str
    created_by: str
    worker: Lease | None = None
    target: str
    notify: str | None = None
    stop_rules: StopRules = StopRules()
    gates: tuple[Gate, ...] = ()
    blockers: tuple[Blocker, ...] = ()
    artifacts: tuple[Artifact, ...] = ()
    evidence: tuple[Evidence, ...] = ()
    result: Result | None = None
    progress: Progress = Progress()
    transfers: tuple[Transfer, ...] = ()
    change_requests: tuple[ChangeRequest, ...] = ()
    approval: Approval | None = None
    reviews: tuple[Review, ...] = ()
    nudges: tuple[Nudge, ...] = ()  # what the watchdog told the owner
    receipt: Receipt | None = None  # set when the final delivery reached the target
    cancel_reason: str | None = None
    idempotency_key: str | None = None
    created_at: datetime
    updated_at: datetime
    observed: Observed | None = None

    @property
    def open_blockers(self) -> tuple[Blocker, ...]:
        return tuple(b for b in self.blockers if b.is_open)

    def artifact(self, name: str) -> Artifact | None:
        return next((a for a in reversed(self.artifacts) if a.name == name), None)


def packet_schema() -> dict[str, Any]:
    """The JSON Schema of the packet as `show --json` prints it."""
    schema: dict[str, Any] = msgspec.json.schema(Packet)
    schema["$id"] = SCHEMA
    return schema
