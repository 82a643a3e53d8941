"""The stop hook's decisions, pure: who may stop, and the next command when not."""

from __future__ import annotations

import pytest

from tests.unit.test_a2a import RESULT, blocker, packet
from waypost.core.authority import OWNER_RESOLVES, RESUME_RESOLVES
from waypost.hooks import decide as hooks
from waypost.model import BlockerKind, Gate, State


@pytest.mark.parametrize("kind", list(BlockerKind))
def test_blocked_stops_only_when_the_owner_must_act(kind: BlockerKind) -> None:
    """The agent goes on while a blocker it can resolve is open: its own kinds, and a
    silent worker's with `resume`; it stops on what only the owner resolves."""
    decision = hooks.decide_stop(packet(State.BLOCKED, blockers=(blocker(kind),)), "s")
    assert decision.block is (kind not in OWNER_RESOLVES)
    if kind in OWNER_RESOLVES:
        assert "only its owner alice can resolve" in decision.reason
    elif kind in RESUME_RESOLVES:
        assert "waypost resume wp_01TEST" in decision.reason
    else:
        assert "waypost unblock wp_01TEST b1" in decision.reason


@pytest.mark.parametrize("state", [State.READY_FOR_REVIEW, State.APPROVED, State.DELIVERED,
                                   State.CANCELLED])
def test_ready_and_later_may_stop(state: State) -> None:
    assert not hooks.decide_stop(packet(state, result=RESULT), "s").block


def test_in_progress_names_the_missing_gate_evidence_then_ready() -> None:
    gated = packet(State.IN_PROGRESS, gates=(Gate(name="t", check="command:pytest  -q"),
                                             Gate(name="l", check="command:ruff check ."),
                                             Gate(name="d", check="artifact:draft.md")))
    assert hooks.missing_gate_evidence(gated) == ["command:ruff check .", "artifact:draft.md"]
    first = hooks.decide_stop(gated, "s")
    assert first.block
    assert "waypost evidence run wp_01TEST -- ruff check ." in first.reason
    assert hooks.missing_gate_evidence(packet(State.IN_PROGRESS)) == []  # e1 ran pytest -q
    assert "waypost ready wp_01TEST --summary TEXT --artifact report.md --artifact site" in (
        hooks.decide_stop(packet(State.IN_PROGRESS), "s").reason)


def test_no_run_may_stop() -> None:
    assert not hooks.decide_stop(None, "s").block
