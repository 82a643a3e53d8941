"""The pure state machine: the table, the rules, and refusals that change nothing."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
import pytest

from waypost import errors
from waypost.core.history import make_event
from waypost.core.machine import apply, fold
from waypost.core.moves import TABLE, Move, allowed_moves
from waypost.errors import (
    IllegalTransition,
    InvalidInput,
    NotAuthorized,
    RuleViolation,
    StaleLease,
)
from waypost.events import (
    AnyEventData,
    ArtifactRecorded,
    BlockerOpened,
    BlockerResolved,
    Cancelled,
    ChangesRequested,
    Claimed,
    Event,
    EvidenceRecorded,
    Heartbeat,
    MarkedReady,
    Started,
)
from waypost.model import (
    TERMINAL,
    Artifact,
    ArtifactRole,
    Assurance,
    Evidence,
    EvidenceKind,
    Kind,
    Packet,
    State,
    StopRules,
    Verdict,
)

AT = datetime(2026, 1, 1, tzinfo=UTC)


def ev(packet: Packet | None, data: AnyEventData, actor: str = "alice",
       epoch: int | None = None) -> Event:
    return make_event(packet, "wp_test", data, actor=actor, at=AT, epoch=epoch)


def started(**overrides: object) -> Packet:
    fields: dict[str, object] = {"title": "t", "kind": Kind.BOUNDED, "owner": "alice",
                                 "target": "none:"}
    fields.update(overrides)
    return apply(None, ev(None, Started(**fields)))  # type: ignore[arg-type]


def evidence(packet: Packet) -> Evidence:
    return Evidence(id=f"e{len(packet.evidence) + 1}", kind=EvidenceKind.TEST,
                    verdict=Verdict.PASSED, assurance=Assurance.RECORDED, summary="ok",
                    recorded_at=AT, recorded_by="alice")


def step(packet: Packet, data: AnyEventData, actor: str = "alice",
         epoch: int | None = None) -> Packet:
    return apply(packet, ev(packet, data, actor, epoch))


def in_state(state: State) -> Packet:
    p = started()
    if state is State.IN_PROGRESS:
        return p
    if state is State.BLOCKED:
        return step(p, BlockerOpened(blocker_id="b1", kind="missing_input", detail="API key"))  # type: ignore[arg-type]
    if state is State.CANCELLED:
        return step(p, Cancelled(reason="no longer needed"))
    p = step(p, EvidenceRecorded(evidence=evidence(p)))
    p = step(p, MarkedReady(summary="done"))
    if state is State.READY_FOR_REVIEW:
        return p
    return msgspec.structs.replace(p, state=state)  # APPROVED / DELIVERED have no events yet


SAMPLE_MOVES: dict[Move, AnyEventData] = {
    Move.HEARTBEAT: Heartbeat(note="x"),
    Move.BLOCK: BlockerOpened(blocker_id="b9", kind="other", detail="a real detail"),  # type: ignore[arg-type]
    Move.READY: MarkedReady(summary="done"),
    Move.CHANGES: ChangesRequested(reason="more tests"),
    Move.CANCEL: Cancelled(reason="stop"),
}


@pytest.mark.parametrize("state", list(State))
@pytest.mark.parametrize("move", list(SAMPLE_MOVES))
def test_every_move_outside_the_table_is_an_illegal_transition(state: State, move: Move) -> None:
    if move in TABLE[state]:
        return
    packet = in_state(state)
    with pytest.raises(IllegalTransition) as info:
        step(packet, SAMPLE_MOVES[move])
    message = info.value.message
    assert str(state) in message or "blocked by" in message
    assert str(move) in message
    for allowed in allowed_moves(state):
        assert allowed in message


@pytest.mark.parametrize("state", sorted(TERMINAL))
def test_terminal_states_allow_nothing(state: State) -> None:
    assert TABLE[state] == {}
    assert allowed_moves(state) == []


def test_blocked_returns_to_where_it_came_from() -> None:
    p = in_state(State.BLOCKED)
    assert p.resume_state is State.IN_PROGRESS
    p = step(p, BlockerOpened(blocker_id="b2", kind="other", detail="second thing"))  # type: ignore[arg-type]
    p = step(p, BlockerResolved(blocker_id="b1", resolution="given"))
    assert p.state is State.BLOCKED
    p = step(p, BlockerResolved(blocker_id="b2", resolution="fixed"))
    assert p.state is State.IN_PROGRESS
    assert p.resume_state is None


def test_ready_while_blocked_names_the_blocker_and_the_unblock_command() -> None:
    p = in_state(State.BLOCKED)
    with pytest.raises(IllegalTransition) as info:
        step(p, MarkedReady(summary="done"))
    assert 'b1 (missing_input: "API key")' in info.value.message
    assert info.value.steps == (errors.step("unblock", "wp_test", blocker="b1",
                                            why="resolve b1 with"),)


def test_ready_needs_evidence() -> None:
    with pytest.raises(RuleViolation, match="no evidence"):
        step(started(), MarkedReady(summary="done"))


def test_ready_needs_the_named_artifacts() -> None:
    p = started()
    p = step(p, EvidenceRecorded(evidence=evidence(p)))
    with pytest.raises(RuleViolation, match=r"never recorded: report\.md"):
        step(p, MarkedReady(summary="done", artifacts=("report.md",)))
    p = step(p, ArtifactRecorded(artifact=Artifact(
        name="report.md", role=ArtifactRole.REPORT, recorded_at=AT, recorded_by="alice")))
    assert step(p, MarkedReady(summary="d", artifacts=("report.md",))).state is \
        State.READY_FOR_REVIEW


def test_long_running_start_names_what_is_missing() -> None:
    with pytest.raises(RuleViolation) as info:
        started(kind=Kind.LONG_RUNNING, target="")
    assert "a target (--target)" in info.value.message
    assert "a stop rule (--max-silence or --deadline)" in info.value.message
    assert "owner" not in info.value.message
    assert started(kind=Kind.LONG_RUNNING, stop_rules=StopRules(max_silence=60)).kind is \
        Kind.LONG_RUNNING


def test_vague_blocker_detail_is_refused() -> None:
    with pytest.raises(InvalidInput, match="says nothing"):
        step(started(), BlockerOpened(blocker_id="b1", kind="other", detail="waiting"))  # type: ignore[arg-type]


def test_claim_bumps_the_epoch_and_fences_the_old_holder() -> None:
    p = step(started(), Claimed(epoch=1), actor="w1")
    p = step(p, Heartbeat(), actor="w1", epoch=1)
    p = step(p, Claimed(epoch=2, took_over_from="w1"), actor="w2")
    assert p.worker is not None
    assert (p.worker.actor, p.worker.epoch) == ("w2", 2)
    with pytest.raises(StaleLease, match="w2"):
        step(p, Heartbeat(), actor="w1", epoch=1)
    with pytest.raises(StaleLease, match=r"newer process of w2 took the lease \(epoch 2\)"):
        step(p, Heartbeat(), actor="w2", epoch=1)


def test_only_the_owner_may_cancel_or_request_changes() -> None:
    with pytest.raises(NotAuthorized, match="only its owner alice"):
        step(started(), Cancelled(reason="x"), actor="mallory")
    with pytest.raises(NotAuthorized):
        step(in_state(State.READY_FOR_REVIEW), ChangesRequested(reason="x"), actor="w1")


def test_a_stranger_may_not_write_without_a_lease() -> None:
    with pytest.raises(NotAuthorized, match="neither the owner") as info:
        step(started(), Heartbeat(), actor="stranger")
    assert info.value.steps == (errors.step("claim", "wp_test", actor="stranger",
                                            why="claim it first"),)


def test_skipped_evidence_needs_a_reason() -> None:
    p = started()
    skipped = msgspec.structs.replace(evidence(p), verdict=Verdict.SKIPPED, reason=" ")
    with pytest.raises(InvalidInput, match="named reason"):
        step(p, EvidenceRecorded(evidence=skipped))


def test_changes_send_the_run_back_and_clear_the_result() -> None:
    p = step(in_state(State.READY_FOR_REVIEW), ChangesRequested(reason="add tests"))
    assert p.state is State.IN_PROGRESS
    assert p.result is None
    assert p.change_requests[0].reason == "add tests"


def test_fold_rebuilds_the_packet() -> None:
    events: list[Event] = []
    p: Packet | None = None
    for data in (Started(title="t", kind=Kind.BOUNDED, owner="alice", target="none:"),
                 Heartbeat(note="a"), Cancelled(reason="done")):
        events.append(ev(p, data))
        p = apply(p, events[-1])
    assert fold(events) == p


@pytest.mark.parametrize("fraction", [-0.01, 1.01, 7.0])
def test_the_machine_itself_refuses_progress_outside_0_to_1(fraction: float) -> None:
    """The edges refuse it first; the rule still holds for an event that reaches apply()
    another way (a library caller, a replayed history)."""
    with pytest.raises(InvalidInput, match="progress must be between 0 and 1"):
        step(started(), Heartbeat(fraction=fraction))
    assert step(started(), Heartbeat(fraction=1.0)).progress.fraction == 1.0
