"""The checkpoint packet (`waypost.packet/v1`) and its parts (the events that build it are
in `waypost.events`).

Everything here is a frozen, keyword-only msgspec record: decoding validates types and
refuses unknown fields, naming the offending path (`$.stop_rules.max_silence`).
"""

# No `from __future__ import annotations` here: msgspec reads these annotations when it
# builds a decoder, and resolving them from strings would cost every command that reads a
# packet a millisecond or two; every name they use is defined above its first use.

import enum
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import msgspec

from waypost.errors import InvalidInput

SCHEMA = "waypost.packet/v1"
E = TypeVar("E", bound=enum.StrEnum)

# The packet's enums are made by `@quick` from a plain class body: the same `StrEnum`
# (members, values, lookups, pickling, msgspec), made in half the time. `enum`'s class
# machinery costs ~0.45M instructions an enum and ~75k a member on 3.11, ~13M for the 16 a
# heartbeat loads: a tenth of its work above the dependency floor. The standard library
# makes its own start-up enums (`re`, `http`, `uuid`) the same way.
if TYPE_CHECKING:
    QuickStrEnum = enum.StrEnum
else:
    class QuickStrEnum:
        """The base of an enum made by `@quick`: at run time a plain class body."""


_simple_enum = getattr(enum, "_simple_enum", None)


def quick(body: type[E]) -> type[E]:
    """The `StrEnum` whose members are `body`'s names and values, made without `enum`'s
    checks (that no name or value repeats is held by a test over every enum made so)."""
    if _simple_enum is not None:
        made: type[E] = _simple_enum(enum.StrEnum)(body)
    else:
        namespace = enum.EnumType.__prepare__(body.__name__, (enum.StrEnum,))
        for name, value in vars(body).items():
            if name not in ("__dict__", "__weakref__"):
                namespace[name] = value
        made = enum.EnumType(body.__name__, (enum.StrEnum,), namespace)  # type: ignore[assignment]
    _members_in_class(made)
    return made


def _members_in_class(made: type[E]) -> None:
    """Keep each member itself in its class, as 3.12 does: 3.11 keeps a descriptor that
    hands it out, so every `State.IN_PROGRESS` was a Python call (nine a heartbeat)."""
    own = made.__dict__
    for name, member in made._member_map_.items():
        if own.get(name) is not member:
            type.__setattr__(made, name, member)  # EnumType's own refuses any member


class Record(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, gc=False):
    """Base for every stored shape. Records are trees of plain values (decoded JSON, or
    built from it: scalars, times, enums, records and tuples of them) and never part of a
    reference cycle, so the cyclic garbage collector does not track them (`gc=False`): a
    sweep or a server makes them by the thousand, and each one tracked brought the next
    collection nearer and made it longer. (A record built with a list where its shape says
    tuple, and that list then made to hold the record, would never be freed: build them
    as the shapes say.)"""


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
    name: str
    check: str  # KIND:ARG, e.g. "command:pytest -q", "artifact:draft.md"
    required: bool = True


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


class Review(Record, frozen=True, kw_only=True):
    """The owner's re-run of the gates; approval looks at the latest one only."""

    id: str
    by: str
    at: datetime
    submitted_at: datetime | None = None  # the result it reviewed (a resubmission needs another)
    evidence: tuple[str, ...] = ()  # ids of the rechecked evidence it recorded


@quick
class Purpose(QuickStrEnum):
    FINAL = "final"  # the one visible completion, to the run's target
    NOTICE = "notice"  # a non-final notice (blocked, ready, silent…), to the notify target


class OutboxItem(Record, frozen=True, kw_only=True):
    """A delivery queued in the same transaction as the event that caused it."""

    key: str  # idempotency key: stable across retries (the webhook-id)
    run_id: str
    purpose: Purpose
    topic: str  # what happened: approved, blocked, ready_for_review, …
    target: str
    event_seq: int
    created_at: datetime
    # planned by a retarget whose owner accepted that the old target may already have it:
    # the store then moves a final delivery whose earlier attempt's outcome is unknown
    accept_duplicate: bool = False


@quick
class DeliveryStatus(QuickStrEnum):
    QUEUED = "queued"  # waiting for its next attempt, or being attempted under a relay's lease
    SENT = "sent"  # the target accepted it; the receipt is stored
    FAILED = "failed"  # failed for good; a final one is queued again when its blocker is resolved


class Delivery(Record, frozen=True, kw_only=True):
    """An outbox row as the relay and `show` see it."""

    key: str  # idempotency key: stable across retries (the webhook-id)
    run_id: str
    purpose: Purpose
    topic: str
    target: str
    event_seq: int
    created_at: datetime
    queued_at: datetime  # when it was (last) queued: the retry horizon runs from here
    status: DeliveryStatus
    attempts: int  # attempts started (a claim counts, even if its relay died mid-send)
    next_attempt_at: datetime
    last_attempt_at: datetime | None = None
    lease_owner: str | None = None  # the relay attempting it now
    lease_expires_at: datetime | None = None
    last_error: str | None = None
    sent_at: datetime | None = None
    receipt: str | None = None  # what the target said when it accepted
    # when an attempt whose outcome is unknown started (a timeout or a dropped connection
    # after the request went out): the current target may already have it
    outcome_unknown_at: datetime | None = None
    # earlier targets it was moved away from while an attempt's outcome there was unknown
    # (the owner accepted a duplicate): they may already have it too
    maybe_delivered_to: tuple[str, ...] = ()


@quick
class DeliveryAssurance(QuickStrEnum):
    """How strong "once" was for a sent delivery: only what waypost itself can know."""

    KEYED = "keyed"  # the receiver got a stable key to dedupe on (webhook-id, exec:'s env)
    IDEMPOTENT = "idempotent"  # writing it again changes nothing (file:, content-addressed)
    UPSERT = "upsert"  # found and updated in place (Slack ts/metadata, GitHub comment, status)
    AT_LEAST_ONCE = "at_least_once"  # no way to check: a retry may have made a duplicate
    NONE = "none"  # nothing was sent (none:)


class Receipt(Record, frozen=True, kw_only=True):
    """Proof that the final delivery reached the run's target."""

    key: str  # the delivery's idempotency key
    target: str
    detail: str  # what the target said, e.g. "HTTP 204" or "wrote /srv/result.md (…)"
    attempts: int
    relay: str
    delivered_at: datetime
    assurance: DeliveryAssurance | None = None  # None: recorded before receipts said it


class RelayInfo(Record, frozen=True, kw_only=True):
    """A running delivery relay's registration, renewed by its beat."""

    id: str
    host: str
    pid: int
    started_at: datetime
    last_beat: datetime
    expires_at: datetime  # past this without a beat, the relay counts as gone


@quick
class WatcherRole(QuickStrEnum):
    ACTIVE = "active"  # holds its scope's sweeper lock and sweeps (on SQLite: every watcher)
    STANDBY = "standby"  # registered and retrying the lock: takes over when the holder goes


class Watcher(Record, frozen=True, kw_only=True):
    """A running watchdog's registration: it covers runs only while its lease is live."""

    id: str
    host: str
    pid: int
    interval_s: float  # how often it sweeps
    owner: str | None = None  # scope: only this owner's runs; None: every run
    started_at: datetime
    last_beat: datetime
    last_sweep: datetime | None = None
    expires_at: datetime  # past this without a beat, the watcher counts as gone
    role: WatcherRole = WatcherRole.ACTIVE


@quick
class Role(QuickStrEnum):
    """What a bearer token lets its holder do (the holder is still the actor the rules see)."""

    WORKER = "worker"  # claim or resume its run, heartbeat, block, artifacts, evidence, ready
    OWNER = "owner"  # what a worker may, and review, approve, changes, transfer, cancel, retarget
    WATCHER = "watcher"  # read, and what a watchdog records
    VIEWER = "viewer"  # read only


class Grant(Record, frozen=True, kw_only=True):
    """A bearer token as stored (its secret never is): who holds it and what it lets them do."""

    id: str  # public: `waypost token ls` and `token revoke` name it
    holder: str  # the actor every write made with it is recorded as
    role: Role
    run_id: str | None = None  # the one run it acts on; None: every run
    created_at: datetime
    created_by: str
    expires_at: datetime | None = None
    revoked_at: datetime | None = None


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


class Observed(Record, frozen=True, kw_only=True):
    """Derived when the packet is read; never stored and never part of the fold."""

    as_of: datetime
    liveness: Liveness | None = None
    silent_for_s: float | None = None
    watch: str
    watched_by: str | None = None  # the live watcher covering the run, if any
    delivery: str
    deliveries: tuple[Delivery, ...] = ()  # the run's outbox rows (final and notices)


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


# --- JSON ---------------------------------------------------------------------------------

_encoder = msgspec.json.Encoder()
T = TypeVar("T")


def to_json(obj: Any) -> bytes:
    return _encoder.encode(obj)


def to_builtins(obj: Any) -> Any:
    return msgspec.to_builtins(obj)


_decoders: dict[Any, msgspec.json.Decoder[Any]] = {}


def json_decoder(type_: type[T]) -> msgspec.json.Decoder[T]:
    """The one decoder of `type_`, made on first use: building a decoder costs more than
    using it. Its errors are msgspec's own (`from_json` turns them into InvalidInput)."""
    decoder = _decoders.get(type_)
    if decoder is None:
        decoder = _decoders.setdefault(type_, msgspec.json.Decoder(type_))
    return decoder


def from_json(data: bytes | str, type_: type[T]) -> T:
    """Decode and validate; a bad document raises InvalidInput naming the field."""
    decoder = json_decoder(type_)
    try:
        result: T = decoder.decode(data)
        return result
    except msgspec.ValidationError as exc:
        raise InvalidInput(
            f"invalid {type_.__name__}: {exc}",
            hint="compare the document with `waypost schema`",
        ) from exc
    except msgspec.DecodeError as exc:
        raise InvalidInput(f"malformed JSON: {exc}") from exc


def packet_schema() -> dict[str, Any]:
    """The JSON Schema of the packet as `show --json` prints it."""
    schema: dict[str, Any] = msgspec.json.schema(Packet)
    schema["$id"] = SCHEMA
    return schema
