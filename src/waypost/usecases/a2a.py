"""A packet as an A2A v1 Task, in ProtoJSON (the JSON form of the `a2a.v1.Task` message).

Pure: the packet (with its observed view, when it was read with one) in, a dict out; the
adapters print or serve it. The state map is a table (the README shows the same one). A2A's
FAILED is final and no waypost state is, so it is never used: a failed command is a blocker
the worker resolves, a failed delivery one the owner resolves.
"""

from __future__ import annotations

import shlex
from datetime import UTC, datetime
from typing import Any, Final

from waypost.core import gates
from waypost.model import Artifact, BlockerKind, Packet, State, to_builtins

STATES: Final[dict[State, str]] = {
    State.IN_PROGRESS: "TASK_STATE_WORKING",
    State.BLOCKED: "TASK_STATE_INPUT_REQUIRED",
    State.READY_FOR_REVIEW: "TASK_STATE_INPUT_REQUIRED",  # the parent's review is the input
    State.APPROVED: "TASK_STATE_WORKING",  # the final delivery is under way
    State.DELIVERED: "TASK_STATE_COMPLETED",
    State.CANCELLED: "TASK_STATE_CANCELED",
}
# open blocker kinds that change the A2A state of a blocked run (the first found wins)
BLOCKED_BY: Final[dict[BlockerKind, str]] = {
    BlockerKind.PERMISSION_BOUNDARY: "TASK_STATE_AUTH_REQUIRED",
}


def task_state(packet: Packet) -> str:
    """The A2A `TaskState` name of the packet's state (and open blockers)."""
    if packet.state is State.BLOCKED:
        kinds = {b.kind for b in packet.open_blockers}
        for kind, state in BLOCKED_BY.items():
            if kind in kinds:
                return state
    return STATES[packet.state]


def task(packet: Packet) -> dict[str, Any]:
    """The packet as an A2A Task (ProtoJSON field names)."""
    return {
        "id": packet.id,
        "contextId": packet.id,
        "status": {
            "state": task_state(packet),
            "message": {
                "messageId": f"{packet.id}-v{packet.version}",
                "contextId": packet.id,
                "taskId": packet.id,
                "role": "ROLE_AGENT",
                "parts": [{"text": status_text(packet)}],
            },
            "timestamp": _timestamp(packet.updated_at),
        },
        "artifacts": [_artifact(packet, a) for a in latest_artifacts(packet)],
        "metadata": {"waypost": metadata(packet)},
    }


def status_text(packet: Packet) -> str:
    """One paragraph: where the run stands and who moves it next."""
    run = packet.id
    if packet.state is State.BLOCKED:
        listed = "; ".join(f"{b.id} {b.kind}: {b.detail}" for b in packet.open_blockers)
        return f"{packet.title}: blocked by {listed or 'an open blocker'}"
    if packet.state is State.READY_FOR_REVIEW and packet.result is not None:
        return (f"{packet.title}: result submitted ({packet.result.summary}); waiting for "
                f"{packet.owner} to review: waypost review {run}")
    if packet.state is State.APPROVED:
        return f"{packet.title}: approved; the final delivery to {packet.target} is queued"
    if packet.state is State.DELIVERED and packet.receipt is not None:
        return f"{packet.title}: delivered to {packet.receipt.target} ({packet.receipt.detail})"
    if packet.state is State.CANCELLED:
        return f"{packet.title}: cancelled ({packet.cancel_reason or 'no reason given'})"
    note = packet.progress.note
    return f"{packet.title}: {packet.state}" + (f" ({note})" if note else "")


def latest_artifacts(packet: Packet) -> list[Artifact]:
    """Each artifact name once, as last recorded (a name recorded again replaces it)."""
    latest = {a.name: a for a in packet.artifacts}
    return list(latest.values())


def download(packet: Packet, artifact: Artifact) -> str:
    """How to fetch it: its URL, else the command that copies it out of the store."""
    if artifact.url and not artifact.stored:
        return artifact.url
    return f"waypost artifact get {packet.id} {shlex.quote(artifact.name)}"


def _artifact(packet: Packet, artifact: Artifact) -> dict[str, Any]:
    where = download(packet, artifact)
    part: dict[str, Any] = ({"url": where, "filename": artifact.name,
                             "mediaType": artifact.media_type}
                            if where == artifact.url else {"text": where})
    return {
        "artifactId": artifact.name,
        "name": artifact.name,
        "description": f"{artifact.role} artifact; fetch with: {where}",
        "parts": [part],
        "metadata": {"role": str(artifact.role), "sha256": artifact.sha256,
                     "bytes": artifact.bytes, "mediaType": artifact.media_type,
                     "stored": artifact.stored, "download": where,
                     "recordedAt": _timestamp(artifact.recorded_at)},
    }


def metadata(packet: Packet) -> dict[str, Any]:
    """What A2A has no field for: owner, target, gates, evidence, blockers, watch."""
    observed = packet.observed
    review = gates.current_review(packet)
    waivers = packet.approval.waivers if packet.approval else ()
    return {
        "state": str(packet.state),
        "kind": str(packet.kind),
        "version": packet.version,
        "owner": packet.owner,
        "worker": packet.worker.actor if packet.worker else None,
        "target": packet.target,
        "notify": packet.notify,
        "summary": packet.result.summary if packet.result else None,
        "publicSummary": packet.result.public_summary if packet.result else None,
        "blockers": [to_builtins(b) for b in packet.blockers],
        "gates": [to_builtins(v) for v in gates.verdicts(packet, review, waivers)],
        "evidence": [_evidence(packet, i) for i in range(len(packet.evidence))],
        "watch": observed.watch if observed else None,
        "watchedBy": observed.watched_by if observed else None,
        "liveness": str(observed.liveness) if observed and observed.liveness else None,
        "delivery": observed.delivery if observed else None,
    }


def _evidence(packet: Packet, index: int) -> dict[str, Any]:
    item = packet.evidence[index]
    return {"id": item.id, "kind": str(item.kind), "verdict": str(item.verdict),
            "assurance": str(item.assurance), "summary": item.summary,
            "command": item.command, "exitCode": item.exit_code, "reason": item.reason,
            "gate": item.gate, "recordedAt": _timestamp(item.recorded_at)}


def _timestamp(at: datetime) -> str:
    """RFC 3339 in UTC with a `Z`, as ProtoJSON writes a Timestamp."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
