"""What a parent waits for (`core.waiting`) and the bounds of a wait (`usecases.waiting`)."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
import pytest

from waypost.core.authority import OWNER_RESOLVES
from waypost.core.waiting import Outcome, needs_parent, outcome
from waypost.errors import InvalidInput
from waypost.model import Blocker, BlockerKind, Packet, State
from waypost.usecases import waiting

AT = datetime(2026, 1, 1, tzinfo=UTC)


def _packet(state: State, *kinds: BlockerKind) -> Packet:
    blockers = tuple(Blocker(id=f"b{i}", kind=k, detail="d", opened_at=AT, opened_by="w1")
                     for i, k in enumerate(kinds, 1))
    base = msgspec.json.decode(msgspec.json.encode({
        "schema": "waypost.packet/v1", "id": "wp_x", "title": "t", "kind": "bounded",
        "state": "in_progress", "version": 1, "owner": "alice", "created_by": "alice",
        "target": "none:", "created_at": AT.isoformat(), "updated_at": AT.isoformat()}),
        type=Packet)
    return msgspec.structs.replace(base, state=state, blockers=blockers)


@pytest.mark.parametrize("state", list(State))
def test_the_states_that_need_the_parent(state: State) -> None:
    expected = state in (State.READY_FOR_REVIEW, State.DELIVERED, State.CANCELLED)
    assert needs_parent(_packet(state)) is expected


@pytest.mark.parametrize("kind", list(BlockerKind))
def test_a_blocked_run_needs_the_parent_only_on_an_owners_blocker(kind: BlockerKind) -> None:
    assert needs_parent(_packet(State.BLOCKED, kind)) is (kind in OWNER_RESOLVES)
    assert needs_parent(_packet(State.BLOCKED, BlockerKind.OTHER, kind)) is (
        kind in OWNER_RESOLVES)


def test_a_wait_for_named_states_reaches_them_or_ends_otherwise() -> None:
    review = frozenset({State.READY_FOR_REVIEW})
    assert outcome(_packet(State.READY_FOR_REVIEW), review) is Outcome.REACHED
    assert outcome(_packet(State.CANCELLED), review) is Outcome.ENDED
    assert outcome(_packet(State.BLOCKED, BlockerKind.MISSING_INPUT), review) is Outcome.WAITING
    assert outcome(_packet(State.CANCELLED), None) is Outcome.REACHED


def test_a_wait_is_bounded() -> None:
    assert waiting.wait_seconds("2h", "t", default=1.0, cap=waiting.TOOL_WAIT_S,
                                clamp=True) == waiting.TOOL_WAIT_S
    assert waiting.wait_seconds(None, "t", default=7.0) == 7.0
    with pytest.raises(InvalidInput):
        waiting.wait_seconds("61s", "wait", default=0.0, cap=waiting.HTTP_WAIT_S)
    with pytest.raises(InvalidInput):
        waiting.wait_seconds("2d", "--timeout", default=0.0)
    with pytest.raises(InvalidInput):
        waiting.run_ids([f"wp_{i}" for i in range(waiting.MAX_RUNS + 1)])
    with pytest.raises(InvalidInput):
        waiting.run_ids([])
    assert waiting.run_ids(["a", "b", "a"]) == ["a", "b"]
