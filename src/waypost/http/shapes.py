"""The API's request bodies and answers, as msgspec types: Litestar validates every body
against them (an unknown field, a wrong type, a string past its limit: 400 before any
handler runs) and writes the OpenAPI document from them. The packet, its events and the
review report are the library's own types."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from waypost.core.gates import GateVerdict
from waypost.events import Event
from waypost.model import (
    ArtifactRole,
    Authority,
    BlockerKind,
    EvidenceKind,
    Kind,
    Packet,
    State,
    Verdict,
)
from waypost.usecases.handoff import Brief

# Ceilings the schema states; the library's own limits (`waypost.inputs`, which a store
# may raise) still decide, so a body under a ceiling may be refused with a clear 422.
Text = Annotated[str, msgspec.Meta(max_length=100_000)]
Name = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
Uri = Annotated[str, msgspec.Meta(max_length=2_048)]
Short = Annotated[str, msgspec.Meta(max_length=64)]
Epoch = Annotated[int, msgspec.Meta(ge=1, le=2**62,
                                    description="The lease epoch `claim` returned: a worker's "
                                    "writes carry it, so a taken-over worker is fenced.")]


class Body(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    pass


class WorkerBody(Body, frozen=True, kw_only=True):
    epoch: Epoch | None = None


class StartBody(Body, frozen=True, kw_only=True):
    title: Text
    owner: Name | None = None  # default: the token's holder (an owner token's only choice)
    target: Uri | None = None
    notify: Uri | None = None
    kind: Kind | None = None
    expect: Short | None = None  # a duration: 90s, 30m, 4h, 2d
    deadline: Short | None = None  # +4h or an ISO 8601 time
    heartbeat_interval: Short | None = None
    max_silence: Short | None = None
    review_within: Short | None = None
    gates: Annotated[list[Annotated[str, msgspec.Meta(max_length=2_000)]],
                     msgspec.Meta(max_length=50)] = []
    worker: Name | None = None
    session: Name | None = None  # an agent host's session id, for its hooks


class HeartbeatBody(WorkerBody, frozen=True, kw_only=True):
    note: Text | None = None
    progress: Annotated[float, msgspec.Meta(ge=0.0, le=1.0)] | None = None


class BlockBody(WorkerBody, frozen=True, kw_only=True):
    kind: BlockerKind
    detail: Text


class UnblockBody(WorkerBody, frozen=True, kw_only=True):
    blocker: Short
    resolution: Text


class EvidenceBody(WorkerBody, frozen=True, kw_only=True):
    """One of: `check` (KIND:ARG, run by the server), `argv` (a command the server runs:
    only with --allow-exec), `reason` (a check that could not run: skipped), or `verdict`
    with `summary` (a claim typed by hand: reported)."""

    kind: EvidenceKind = EvidenceKind.COMMAND
    check: Annotated[str, msgspec.Meta(max_length=2_000)] | None = None
    argv: Annotated[list[Annotated[str, msgspec.Meta(max_length=16_000)]],
                    msgspec.Meta(max_length=500)] | None = None
    reason: Text | None = None
    verdict: Verdict | None = None
    summary: Text | None = None


class ReadyBody(WorkerBody, frozen=True, kw_only=True):
    summary: Text
    public_summary: Text | None = None
    artifacts: Annotated[list[Annotated[str, msgspec.Meta(max_length=255)]],
                         msgspec.Meta(max_length=100)] = []


class GateBody(WorkerBody, frozen=True, kw_only=True):
    """Another gate. The owner's runs at review; anyone else's (a worker's, before ready)
    is shown as theirs and runs at the owner's review only once the owner adopts it."""

    name: Name
    check: Annotated[str, msgspec.Meta(min_length=1, max_length=2_000)]
    required: bool = True


class AdoptBody(Body, frozen=True, kw_only=True):
    name: Name  # the gate the owner makes its own


# the reviewed-result digest an answer names (sha256:… or its first 12 or more hex digits):
# refused (409 result_changed, saying what changed) when the result has changed since
Digest = Annotated[str, msgspec.Meta(max_length=80, description=(
    "The reviewed-result digest of the result answered, as the review's answer names it "
    "(`reviewed`: sha256:… or its first 12 hex digits); refused (409 result_changed, "
    "saying what changed) when the result has changed since. Without it, the result as it "
    "stands is answered."))]


class ApproveBody(Body, frozen=True, kw_only=True):
    waivers: Annotated[dict[Annotated[str, msgspec.Meta(max_length=200)], Text],
                       msgspec.Meta(max_length=50)] = {}
    reviewed: Digest | None = None


class ReasonBody(Body, frozen=True, kw_only=True):
    reason: Text


class ChangesBody(ReasonBody, frozen=True, kw_only=True):
    reviewed: Digest | None = None


class TransferBody(Body, frozen=True, kw_only=True):
    authority: Authority
    to: Name


class RetargetBody(Body, frozen=True, kw_only=True):
    target: Uri | None = None
    notify: Uri | None = None
    accept_duplicate: bool = False


# --- answers ---------------------------------------------------------------------------


class RunPage(msgspec.Struct, frozen=True, kw_only=True):
    runs: list[Packet]  # newest first, each with its observed view
    next_cursor: str | None  # pass as ?cursor= for the next page; null: no more


class EventPage(msgspec.Struct, frozen=True, kw_only=True):
    events: list[Event]  # in order
    next_cursor: int | None  # pass as ?after= for the next page; null: no more


class Started(msgspec.Struct, frozen=True, kw_only=True):
    run: str
    created: bool  # false: the Idempotency-Key found the run an earlier request started
    packet: Packet


class Moved(msgspec.Struct, frozen=True, kw_only=True):
    run: str
    state: State
    version: int
    epoch: int | None = None  # the lease epoch, after claim or resume
    blocker: str | None = None  # the blocker's id, after block
    packet: Packet


class Resumed(msgspec.Struct, frozen=True, kw_only=True):
    run: str
    epoch: int
    brief: Brief


class Reviewed(msgspec.Struct, frozen=True, kw_only=True):
    run: str
    review: str
    approvable: bool
    gates: list[GateVerdict]
    packet: Packet
    reviewed: str | None = None  # the reviewed-result digest approve and changes name


class Verified(msgspec.Struct, frozen=True, kw_only=True):
    run: str
    ok: bool
    problem: str | None = None  # what does not verify


class Artifacted(msgspec.Struct, frozen=True, kw_only=True):
    run: str
    name: str
    role: ArtifactRole
    sha256: str
    bytes: int
    version: int


A2ATask = dict[str, Any]  # the A2A Task message (waypost.usecases.a2a.task)
HookAnswer = dict[str, Any]  # the host's own answer format
