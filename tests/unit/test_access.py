"""The role rules of the authenticated doors (`core.access`), pure."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from waypost.core import access
from waypost.core.access import Operation
from waypost.core.history import make_event
from waypost.core.machine import apply
from waypost.errors import NotAuthorized
from waypost.events import BlockerOpened, Started
from waypost.model import BlockerKind, Kind, Packet

AT = datetime(2026, 1, 1, tzinfo=UTC)


def packet_of(owner: str) -> Packet:
    started = Started(title="t", kind=Kind.BOUNDED, owner=owner, target="none:",
                      worker="worker-1")
    return apply(None, make_event(None, "wp_test", started, actor=owner, at=AT))


def blocked_packet(kind: BlockerKind) -> Packet:
    packet = packet_of("alice")
    opened = BlockerOpened(blocker_id="b1", kind=kind, detail="a specific obstacle")
    return apply(packet, make_event(packet, packet.id, opened, actor="alice", at=AT))


@dataclass(frozen=True)
class Caller:
    holder: str
    role: str
    run_id: str | None = None


def allowed(caller: Caller, operation: Operation, packet: Packet | None, **kw: str) -> bool:
    try:
        access.check_operation(caller, operation, packet, **kw)
    except NotAuthorized:
        return False
    return True


@given(role=st.sampled_from(["viewer", "watcher", "worker", "owner", "admin", ""]),
       operation=st.sampled_from(list(Operation)),
       holder=st.sampled_from(["alice", "bob"]),
       scoped=st.sampled_from([None, "this", "other"]))
def test_the_role_table(role: str, operation: Operation, holder: str, scoped: str | None) -> None:
    packet = packet_of(owner="alice")
    run_id = {"this": packet.id, "other": "wp_other"}.get(scoped or "")
    caller = Caller(holder, role, run_id)
    target = None if operation in (Operation.LIST, Operation.START) else packet
    expected = (
        operation in access.ROLE_OPERATIONS.get(role, frozenset())
        and (target is None or scoped != "other")
        and not (role == "owner" and target is not None and operation not in access.READS
                 and holder != "alice")
        and not (operation is Operation.START and scoped is not None))
    if operation is Operation.UNBLOCK and expected:
        return  # decided by the blocker's kind: test_a_worker_resolves_its_own_kinds
    assert allowed(caller, operation, target) is expected


def test_viewers_and_watchers_only_read() -> None:
    for role in ("viewer", "watcher"):
        assert access.ROLE_OPERATIONS[role] == access.READS


@pytest.mark.parametrize(("kind", "worker_may"), [
    (BlockerKind.FAILED_COMMAND, True), (BlockerKind.UNAVAILABLE_RESOURCE, True),
    (BlockerKind.OTHER, True), (BlockerKind.MISSING_INPUT, False),
    (BlockerKind.PERMISSION_BOUNDARY, False), (BlockerKind.DEADLINE_PASSED, False),
    (BlockerKind.DELIVERY_FAILED, False), (BlockerKind.WORKER_SILENT, False)])
def test_a_worker_resolves_its_own_kinds(kind: BlockerKind, worker_may: bool) -> None:
    packet = blocked_packet(kind)
    worker = Caller("worker-1", "worker")
    assert allowed(worker, Operation.UNBLOCK, packet, blocker="b1") is worker_may
    assert allowed(Caller("alice", "owner"), Operation.UNBLOCK, packet, blocker="b1")
    # a worker token is a worker's, whoever holds it: the owner's own resolves as a worker
    assert allowed(Caller("alice", "worker"), Operation.UNBLOCK, packet,
                   blocker="b1") is worker_may


def test_an_owner_token_starts_runs_for_its_holder_alone() -> None:
    owner = Caller("alice", "owner")
    assert allowed(owner, Operation.START, None)
    assert allowed(owner, Operation.START, None, owner="alice")
    assert not allowed(owner, Operation.START, None, owner="bob")
    assert not allowed(Caller("alice", "owner", "wp_x"), Operation.START, None)
