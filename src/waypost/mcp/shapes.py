"""What the tools take and return, as the SDK reads them: the output schemas are these
TypedDicts (plain JSON; waypost's msgspec records are converted at the edge, since the
SDK's schema builder cannot read them), and the enumerations are Literals equal to the
model's (a test holds them equal)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired

from pydantic import Field
from typing_extensions import TypedDict

# Free text is held to its limit by the use case (a limit the store's owner may raise, so
# only the use case knows it), refused in the CLI's words; the schema bounds what one call
# may carry.
TEXT_CEILING = 1_000_000
RunId = Annotated[str, Field(min_length=1, max_length=64,
                             description="The run id (wp_…) from checkpoint_start or "
                             "checkpoint_status.")]

BlockerKindName = Literal["missing_input", "failed_command", "permission_boundary",
                          "unavailable_resource", "worker_silent", "deadline_passed",
                          "delivery_failed", "other"]
ArtifactRoleName = Literal["draft", "report", "result", "log", "review", "other"]
EvidenceKindName = Literal["build", "test", "lint", "grep", "inspect", "live_check",
                           "command"]
SkippedKindName = Literal["build", "test", "lint", "grep", "inspect", "live_check",
                          "command", "skipped"]
KindName = Literal["bounded", "long_running"]
StateName = Literal["in_progress", "blocked", "ready_for_review", "approved", "delivered",
                    "cancelled"]
AuthorityName = Literal["approve", "deliver", "takeover"]
# `next_call`: the next call as data, as a refusal's `next` is ({"tool", "verb",
# "arguments", "fill", "actor"}); present when the answer knows what its reader (or, after
# mark_ready, the owner) calls next
# an actor's name, as every door bounds it (`waypost.inputs.name` decides the rest)
ActorName = Annotated[str, Field(min_length=1, max_length=200)]


class Started(TypedDict):
    """A run recorded (or found again by its idempotency key); `epoch` is the lease this
    server holds for you on it (None: another worker holds it)."""

    run: str
    created: bool
    state: str
    epoch: int | None
    packet: dict[str, Any]
    next: str


class Status(TypedDict):
    """Packets with their observed view (liveness, watch, deliveries)."""

    runs: list[dict[str, Any]]
    next: str
    next_call: NotRequired[dict[str, Any]]


class Moved(TypedDict):
    """A write made: the run's state and version after it."""

    run: str
    state: str
    version: int
    next: str
    next_call: NotRequired[dict[str, Any]]


class Blocked(TypedDict):
    run: str
    blocker: str
    state: str
    next: str


class Unblocked(TypedDict):
    run: str
    state: str
    open_blockers: list[str]
    next: str
    next_call: NotRequired[dict[str, Any]]


class ArtifactAdded(TypedDict):
    run: str
    artifact: dict[str, Any]
    next: str
    next_call: NotRequired[dict[str, Any]]


class EvidenceAdded(TypedDict):
    """The evidence record: verdict (passed, failed, skipped), summary, exit code …"""

    run: str
    evidence: dict[str, Any]
    next: str
    next_call: NotRequired[dict[str, Any]]


class Claimed(TypedDict):
    """The lease taken: the epoch this server now holds for you on the run."""

    run: str
    state: str
    version: int
    epoch: int
    next: str
    next_call: NotRequired[dict[str, Any]]


class Resumed(TypedDict):
    """The handoff brief: what the run is, what happened, what is left."""

    run: str
    epoch: int
    brief: dict[str, Any]
    text: str
    next: str


class Reviewed(TypedDict):
    run: str
    approvable: bool
    report: dict[str, Any]
    reviewed: str | None  # the reviewed-result digest approve and request_changes name
    next: str
    next_call: NotRequired[dict[str, Any]]


class Approved(TypedDict):
    run: str
    state: str
    approval: dict[str, Any] | None
    next: str
    next_call: NotRequired[dict[str, Any]]


class GateMoved(TypedDict):
    """A gate added or adopted: the gate (who declared it, who adopted it) and whether the
    owner's review runs it."""

    run: str
    state: str
    gate: dict[str, Any]
    next: str


class Inboxed(TypedDict):
    """An owner's inbox: the news of its runs, oldest first, and whether this call
    acknowledged it."""

    reader: str
    items: list[dict[str, Any]]
    acknowledged: bool
    more: bool
    next: str
    next_call: NotRequired[dict[str, Any]]


class Retargeted(TypedDict):
    run: str
    state: str
    target: str
    notify: str | None
    next: str


class Waited(TypedDict):
    """How a wait ended: reached, timed_out (call again) or ended; each run's outcome, and
    the packets as they stand."""

    outcome: str
    outcomes: dict[str, str]
    runs: list[dict[str, Any]]
    next: str
