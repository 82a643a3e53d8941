"""What a remote caller may make the server run, read or reach (`core.exposure`), pure: one
policy for the HTTP API and MCP over HTTP; a local door's `LOCAL` allows everything."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.test_access import AT, packet_of
from waypost.core.exposure import LOCAL, Exposure, check_outbound, facing_network
from waypost.core.history import make_event
from waypost.core.machine import apply
from waypost.errors import NotAuthorized, Refused, WaypostError, step
from waypost.events import ArtifactRecorded
from waypost.model import Artifact, ArtifactRole, Gate, Packet

CLOSED = facing_network(allow_exec=False, outbound=())
OPEN = facing_network(allow_exec=True, outbound=("example.org",))


@pytest.mark.parametrize("spec", ["command:true", "http:https://example.org/ ok",
                                  "grep:x:/etc/passwd", "grep!:x:notes.md"])
def test_checks_that_run_or_read_here_need_allow_exec(spec: str) -> None:
    packet = packet_of(owner="alice")
    with pytest.raises(Refused, match="nothing runs on this server"):
        CLOSED.check_check(spec, packet)
    OPEN.check_check(spec, packet)
    LOCAL.check_check(spec, packet)


@pytest.mark.parametrize("spec", ["artifact:report.md", "no-private", "no-private:a,b"])
def test_checks_over_stored_artifacts_always_work(spec: str) -> None:
    CLOSED.check_check(spec, packet_of(owner="alice"))


def test_an_http_check_reaches_only_a_listed_host_even_with_allow_exec() -> None:
    with pytest.raises(NotAuthorized, match="outbound allow-list"):
        OPEN.check_check("http:https://evil.example/ ok", packet_of(owner="alice"))


def test_exec_targets_need_allow_exec_and_urls_a_listed_host() -> None:
    with pytest.raises(Refused):
        CLOSED.check_targets(target="exec:rm -rf /", notify=None)
    facing_network(allow_exec=True, outbound=()).check_targets(target="exec:true", notify=None)
    CLOSED.check_targets(target="file:out.md", notify=None)
    with pytest.raises(NotAuthorized):
        facing_network(allow_exec=True, outbound=()).check_targets(
            target="http://127.0.0.1/x", notify=None)
    facing_network(allow_exec=False, outbound=("127.0.0.1", "::1")).check_targets(
        target="http://127.0.0.1:9/x", notify="https://[::1]/x")
    with pytest.raises(NotAuthorized, match="notify"):
        CLOSED.check_targets(target=None, notify="https://example.org/n")


@pytest.mark.parametrize("name", ["live", "a:b", "x=y", "grep:z"])
def test_a_gate_is_judged_by_its_check_whatever_its_name(name: str) -> None:
    """A gate's name may hold `:` or `=`: only its parsed check decides."""
    gate = Gate(name=name, check="http:http://10.0.0.1/health ok")
    with pytest.raises(NotAuthorized, match="outbound allow-list"):
        CLOSED.check_start(target=None, notify=None, gates=[gate])
    facing_network(allow_exec=False, outbound=("10.0.0.1",)).check_start(
        target=None, notify=None, gates=[gate])
    CLOSED.check_start(target=None, notify=None, gates=[Gate(name=name, check="command:x")])


def test_a_review_is_refused_when_any_gate_would_run_here() -> None:
    import msgspec

    packet = msgspec.structs.replace(packet_of(owner="alice"), gates=(
        Gate(name="draft", check="artifact:draft.md"), Gate(name="t", check="command:pytest")))
    with pytest.raises(Refused, match="command: check"):
        CLOSED.check_review(packet)
    OPEN.check_review(packet)
    LOCAL.check_review(packet)


def test_a_commands_and_a_server_file_need_allow_exec_and_name_the_way_instead() -> None:
    with pytest.raises(Refused, match="nothing runs on this server"):
        CLOSED.check_command("pytest -q")
    OPEN.check_command("pytest -q")
    with pytest.raises(Refused) as info:
        CLOSED.check_source("/etc/passwd", run="wp_x", name="passwd")
    assert info.value.steps == (step("artifact", "wp_x", name="passwd",
                                     why="send its bytes instead"),)
    CLOSED.check_source("https://example.org/report.md", run="wp_x", name="report.md")
    OPEN.check_source("/etc/hostname", run="wp_x", name="hostname")


def test_a_local_door_allows_everything_and_reads_its_files() -> None:
    packet = packet_of(owner="alice")
    assert (LOCAL.remote, LOCAL.reads_files) == (False, True)
    assert (CLOSED.reads_files, OPEN.reads_files) == (False, True)
    asks: list[Callable[[Exposure], None]] = [
        lambda e: e.check_command("rm -rf /"),
        lambda e: e.check_source("/etc/passwd", run="wp_x", name="p"),
        lambda e: e.check_check("http:http://evil.example/", packet),
        lambda e: e.check_targets(target="exec:true", notify="http://evil.example/")]
    for ask in asks:
        ask(LOCAL)
        with pytest.raises(WaypostError):
            ask(CLOSED)


def test_the_policy_is_a_frozen_value() -> None:
    assert Exposure(remote=True) == CLOSED
    with pytest.raises(AttributeError):
        CLOSED.allow_exec = True  # type: ignore[misc]


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
            check_outbound(url, "target", (allowed,))
        except NotAuthorized:
            continue
        try:
            parsed = httpx.URL(url)
        except httpx.InvalidURL:
            continue  # no client sends it anywhere
        assert parsed.host == allowed, url


def with_artifact(packet: Packet, artifact: Artifact) -> Packet:
    return apply(packet, make_event(packet, packet.id, ArtifactRecorded(artifact=artifact),
                                    actor="worker-1", at=AT))


@pytest.mark.parametrize("spec", ["grep:x:notes.txt", "grep!:x:notes.txt"])
def test_a_remote_grep_behind_a_reference_artifact_needs_allow_exec(spec: str) -> None:
    """A URL artifact has no stored copy: a grep of its name would read the server's file
    of that name, so it is refused without --allow-exec; a stored artifact's copy is not."""
    packet = packet_of(owner="alice")
    reference = with_artifact(packet, Artifact(
        name="notes.txt", role=ArtifactRole.OTHER, url="https://example.org/notes.txt",
        recorded_at=AT, recorded_by="worker-1"))
    with pytest.raises(Refused, match="nothing runs on this server"):
        CLOSED.check_check(spec, reference)
    OPEN.check_check(spec, reference)
    LOCAL.check_check(spec, reference)
    stored = with_artifact(packet, Artifact(
        name="notes.txt", role=ArtifactRole.OTHER, sha256="0" * 64, bytes=1, stored=True,
        recorded_at=AT, recorded_by="worker-1"))
    CLOSED.check_check(spec, stored)
