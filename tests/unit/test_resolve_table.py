"""Who resolves which blocker (DESIGN §1), the table and its check, pure."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from waypost import errors
from waypost.core import authority
from waypost.core.authority import (
    OWNER_RESOLVES,
    RESUME_RESOLVES,
    WORKER_RESOLVES,
    check_may_resolve,
)
from waypost.core.history import make_event
from waypost.core.machine import apply
from waypost.errors import IllegalTransition, NotAuthorized, RuleViolation, StaleLease
from waypost.events import (
    AnyEventData,
    AuthorityTransferred,
    BlockerOpened,
    BlockerResolved,
    Cancelled,
    Started,
)
from waypost.model import Authority, BlockerKind, Kind, Packet
from waypost.usecases.commands import command

AT = datetime(2026, 1, 1, tzinfo=UTC)
K = BlockerKind


def step(packet: Packet | None, data: AnyEventData, actor: str = "alice") -> Packet:
    return apply(packet, make_event(packet, "wp_test", data, actor=actor, at=AT))


def blocked(kind: BlockerKind) -> Packet:
    """alice's run, worker-1 holding the lease, blocked by b1 of `kind`."""
    packet = step(None, Started(title="t", kind=Kind.BOUNDED, owner="alice", target="none:",
                                worker="worker-1"))
    return step(packet, BlockerOpened(blocker_id="b1", kind=kind, detail="a real obstacle"),
                actor="worker-1")


def test_the_table_is_designs() -> None:
    design = {"worker": {K.FAILED_COMMAND, K.UNAVAILABLE_RESOURCE, K.OTHER},
              "owner": {K.MISSING_INPUT, K.PERMISSION_BOUNDARY, K.DEADLINE_PASSED,
                        K.DELIVERY_FAILED},
              "resume": {K.WORKER_SILENT}}
    table = {"worker": WORKER_RESOLVES, "owner": OWNER_RESOLVES, "resume": RESUME_RESOLVES}
    assert table == design


def test_every_kind_has_exactly_one_resolver() -> None:
    tables = (WORKER_RESOLVES, OWNER_RESOLVES, RESUME_RESOLVES)
    for kind in BlockerKind:
        assert sum(kind in table for table in tables) == 1, kind


@pytest.mark.parametrize("kind", list(BlockerKind))
def test_the_owner_resolves_any(kind: BlockerKind) -> None:
    packet = blocked(kind)
    check_may_resolve(packet, "alice", packet.blockers[0])
    assert authority.may_resolve(packet, "alice", kind)


@pytest.mark.parametrize("kind", list(BlockerKind))
def test_the_worker_resolves_its_own_kinds_alone(kind: BlockerKind) -> None:
    packet = blocked(kind)
    b1 = packet.blockers[0]
    if kind in WORKER_RESOLVES:
        check_may_resolve(packet, "worker-1", b1)
        return
    with pytest.raises(NotAuthorized) as info:
        check_may_resolve(packet, "worker-1", b1)
    said = info.value.message
    assert f"worker-1 (the run's worker) may not resolve b1 ({kind}) of run wp_test" in said
    if kind in RESUME_RESOLVES:
        assert "resolved by resume" in said
        assert info.value.hint_with(command) == (
            "take the run over: waypost resume wp_test --as worker-1")
    else:
        assert f"only the owner resolves {kind} (here alice)" in said
        assert info.value.steps == (errors.step("unblock", "wp_test", blocker="b1",
                                                actor="alice", why="ask the owner alice"),)
        assert info.value.hint_with(command) == (
            "ask the owner alice: waypost unblock wp_test b1 --resolution TEXT --as alice")


def test_a_stranger_is_refused_the_owners_kinds_and_left_to_the_lease_rule_for_others(
        ) -> None:
    with pytest.raises(NotAuthorized, match=r"^mallory may not resolve b1 \(missing_input\)"):
        check_may_resolve(blocked(K.MISSING_INPUT), "mallory",
                          blocked(K.MISSING_INPUT).blockers[0])
    other = blocked(K.OTHER)
    check_may_resolve(other, "mallory", other.blockers[0])  # the table lets it through …
    with pytest.raises(StaleLease, match="does not hold the lease"):  # … apply does not
        step(other, BlockerResolved(blocker_id="b1", resolution="x"), actor="mallory")


@pytest.mark.parametrize(("authority_given", "kind", "may"), [
    (Authority.DELIVER, K.DELIVERY_FAILED, True),
    (Authority.APPROVE, K.DELIVERY_FAILED, False),
    (Authority.TAKEOVER, K.DELIVERY_FAILED, False),
    (Authority.DELIVER, K.MISSING_INPUT, False),
    (Authority.DELIVER, K.WORKER_SILENT, False),
])
def test_a_transfer_gives_only_the_kind_it_names(authority_given: Authority, kind: BlockerKind,
                                                 may: bool) -> None:
    packet = step(blocked(kind), AuthorityTransferred(authority=authority_given, to="worker-1"))
    assert authority.may_resolve(packet, "worker-1", kind) is may
    if may:
        check_may_resolve(packet, "worker-1", packet.blockers[0])
    else:
        with pytest.raises(NotAuthorized):
            check_may_resolve(packet, "worker-1", packet.blockers[0])


def test_the_state_and_a_resolved_blocker_are_left_for_apply_to_name() -> None:
    packet = step(blocked(K.MISSING_INPUT), BlockerOpened(
        blocker_id="b2", kind=K.OTHER, detail="the test database is down"), actor="worker-1")
    packet = step(packet, BlockerResolved(blocker_id="b1", resolution="given"))
    check_may_resolve(packet, "worker-1", packet.blockers[0])  # not open: apply names it
    with pytest.raises(RuleViolation, match="blocker b1 of wp_test is already resolved"):
        step(packet, BlockerResolved(blocker_id="b1", resolution="again"), actor="worker-1")
    cancelled = step(blocked(K.MISSING_INPUT), Cancelled(reason="no longer needed"))
    with pytest.raises(IllegalTransition, match="cancelled: cannot unblock"):
        check_may_resolve(cancelled, "worker-1", cancelled.blockers[0])


def test_apply_itself_keeps_replaying_a_worker_resolving_the_owners_kind() -> None:
    """The rule is the use case's: an event written before it held still applies."""
    packet = step(blocked(K.MISSING_INPUT), BlockerResolved(blocker_id="b1", resolution="x"),
                  actor="worker-1")
    assert packet.blockers[0].resolved_by == "worker-1"
