"""The A2A projection: every waypost state (and blocked with each blocker kind) is an A2A v1
Task that the a2a-sdk's own protobuf message accepts, with the fields A2A requires."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest
from a2a.types import Role, Task, TaskState
from google.protobuf.json_format import MessageToDict, ParseDict

from waypost.model import (
    Approval,
    Artifact,
    ArtifactRole,
    Assurance,
    Blocker,
    BlockerKind,
    Evidence,
    EvidenceKind,
    Gate,
    Kind,
    Observed,
    Packet,
    Receipt,
    Result,
    State,
    Verdict,
)
from waypost.usecases import a2a

AT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def packet(state: State, **fields: Any) -> Packet:
    base = Packet(
        id="wp_01TEST", title="Fix the flaky test", kind=Kind.LONG_RUNNING, state=state,
        version=7, owner="alice", created_by="alice", target="file:result.md",
        gates=(Gate(name="tests", check="command:pytest -q"),),
        artifacts=(
            Artifact(name="report.md", role=ArtifactRole.REPORT, path="report.md",
                     sha256="ab" * 32, bytes=120, media_type="text/markdown", stored=True,
                     recorded_at=AT, recorded_by="w1"),
            Artifact(name="site", role=ArtifactRole.RESULT, url="https://example.org/r",
                     recorded_at=AT, recorded_by="w1"),
        ),
        evidence=(Evidence(id="e1", kind=EvidenceKind.TEST, verdict=Verdict.PASSED,
                           assurance=Assurance.RECORDED, summary="12 passed",
                           command="pytest -q", exit_code=0, recorded_at=AT,
                           recorded_by="w1"),),
        created_at=AT, updated_at=AT,
        observed=Observed(as_of=AT, watch="watched by w (last sweep 3 s ago)",
                          watched_by="w", delivery="not yet"))
    return msgspec.structs.replace(base, **fields)


def blocker(kind: BlockerKind) -> Blocker:
    return Blocker(id="b1", kind=kind, detail=f"a {kind} obstacle", opened_at=AT,
                   opened_by="w1")


RESULT = Result(summary="fixed the race", artifacts=("report.md",), submitted_at=AT,
                submitted_by="w1")
CASES: list[tuple[Packet, str]] = [
    (packet(State.IN_PROGRESS), "TASK_STATE_WORKING"),
    *[(packet(State.BLOCKED, blockers=(blocker(kind),), resume_state=State.IN_PROGRESS),
       "TASK_STATE_AUTH_REQUIRED" if kind is BlockerKind.PERMISSION_BOUNDARY
       else "TASK_STATE_INPUT_REQUIRED") for kind in BlockerKind],
    (packet(State.READY_FOR_REVIEW, result=RESULT), "TASK_STATE_INPUT_REQUIRED"),
    (packet(State.APPROVED, result=RESULT, approval=Approval(by="alice", at=AT)),
     "TASK_STATE_WORKING"),
    (packet(State.DELIVERED, result=RESULT, approval=Approval(by="alice", at=AT),
            receipt=Receipt(key="k", target="file:result.md", detail="wrote it", attempts=1,
                            relay="r", delivered_at=AT)), "TASK_STATE_COMPLETED"),
    (packet(State.CANCELLED, cancel_reason="not needed"), "TASK_STATE_CANCELED"),
]


def test_every_state_and_blocker_kind_is_covered() -> None:
    assert {p.state for p, _ in CASES} == set(State)
    assert {p.blockers[0].kind for p, _ in CASES if p.blockers} == set(BlockerKind)


@pytest.mark.parametrize(("run", "expected"), CASES,
                         ids=[f"{p.state}-{p.blockers[0].kind if p.blockers else ''}"
                              for p, _ in CASES])
def test_the_projection_is_an_a2a_task(run: Packet, expected: str) -> None:
    projected = a2a.task(run)
    parsed = ParseDict(projected, Task())  # refuses an unknown field or a wrong type
    assert parsed.id == run.id
    assert parsed.context_id
    assert parsed.status.state == TaskState.Value(expected)
    assert parsed.status.state != TaskState.TASK_STATE_FAILED
    assert parsed.status.message.message_id
    assert parsed.status.message.role == Role.ROLE_AGENT
    assert parsed.status.message.parts[0].text.startswith(run.title)
    assert [a.artifact_id for a in parsed.artifacts] == ["report.md", "site"]
    stored, linked = parsed.artifacts
    assert stored.parts[0].text == "waypost artifact get wp_01TEST report.md"
    assert linked.parts[0].url == "https://example.org/r"
    meta = projected["metadata"]["waypost"]
    assert (meta["owner"], meta["target"], meta["state"]) == ("alice", "file:result.md",
                                                              str(run.state))
    assert meta["watch"] == "watched by w (last sweep 3 s ago)"
    assert [g["gate"] for g in meta["gates"]] == ["tests"]
    assert [e["id"] for e in meta["evidence"]] == ["e1"]


def test_a_resolved_permission_blocker_no_longer_asks_for_authority() -> None:
    resolved = msgspec.structs.replace(blocker(BlockerKind.PERMISSION_BOUNDARY),
                                       resolved_at=AT, resolved_by="alice", resolution="ok")
    run = packet(State.BLOCKED, blockers=(resolved, blocker(BlockerKind.MISSING_INPUT)))
    assert a2a.task_state(run) == "TASK_STATE_INPUT_REQUIRED"


def test_an_artifact_recorded_again_is_one_a2a_artifact() -> None:
    again = msgspec.structs.replace(packet(State.IN_PROGRESS).artifacts[0], bytes=999)
    run = packet(State.IN_PROGRESS, artifacts=(*packet(State.IN_PROGRESS).artifacts, again))
    projected = a2a.task(run)["artifacts"]
    assert [a["artifactId"] for a in projected] == ["report.md", "site"]
    assert projected[0]["metadata"]["bytes"] == 999


def test_a_packet_read_without_its_observed_view_still_projects() -> None:
    parsed = ParseDict(a2a.task(packet(State.IN_PROGRESS, observed=None)), Task())
    assert MessageToDict(parsed)["metadata"]["waypost"]["watch"] is None
