"""The role rules and what a remote caller may make the server do (`core.access`), pure."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from waypost.core import access
from waypost.core.access import Operation
from waypost.core.history import make_event
from waypost.core.machine import apply
from waypost.errors import NotAuthorized, Refused
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


@pytest.mark.parametrize("spec", ["command:true", "http:https://example.org/ ok",
                                  "grep:x:/etc/passwd", "grep!:x:notes.md"])
def test_checks_that_run_or_read_here_need_allow_exec(spec: str) -> None:
    packet = packet_of(owner="alice")
    with pytest.raises(Refused, match="nothing runs on this server"):
        access.check_remote_check(spec, packet, allow_exec=False)
    access.check_remote_check(spec, packet, allow_exec=True, outbound=("example.org",))


@pytest.mark.parametrize("spec", ["artifact:report.md", "no-private", "no-private:a,b"])
def test_checks_over_stored_artifacts_always_work(spec: str) -> None:
    access.check_remote_check(spec, packet_of(owner="alice"), allow_exec=False)


def test_exec_targets_need_allow_exec_and_urls_a_listed_host() -> None:
    with pytest.raises(Refused):
        access.check_remote_uri("exec:rm -rf /", "target", outbound=(), allow_exec=False)
    access.check_remote_uri("exec:true", "target", outbound=(), allow_exec=True)
    access.check_remote_uri("file:out.md", "target", outbound=(), allow_exec=False)
    with pytest.raises(NotAuthorized):
        access.check_remote_uri("http://127.0.0.1/x", "target", outbound=(), allow_exec=True)
    access.check_remote_uri("http://127.0.0.1:9/x", "target", outbound=("127.0.0.1",),
                            allow_exec=False)
    access.check_remote_uri("https://[::1]/x", "notify", outbound=("::1",), allow_exec=False)


PIECES = ["allowed.example", "evil.example", "@", "#", "?", "/", ":", "\\", "[", "]", "[::1]",
          "%2e", ".", "80", "::1", " ", "\t", "allowed.example.evil.example"]


@settings(max_examples=500)
@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=8),
       st.sampled_from(["http://", "https://", "HTTP://"]))
def test_an_allowed_url_is_one_an_http_client_sends_to_the_allowed_host(
        pieces: list[str], scheme: str) -> None:
    url = scheme + "".join(pieces)
    for allowed in ("allowed.example", "::1"):
        try:
            access.check_outbound(url, "target", (allowed,))
        except NotAuthorized:
            continue
        try:
            parsed = httpx.URL(url)
        except httpx.InvalidURL:
            continue  # no client sends it anywhere
        assert parsed.host == allowed, url
