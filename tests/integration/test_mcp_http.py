"""`waypost mcp --http` driven by the official MCP client over streamable HTTP: every
request carries a bearer token whose holder acts and whose role caps what it may ask; a
request without a live token, or from a foreign Origin, reaches no tool; nothing runs on
the server's machine unless it was started with --allow-exec."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx2
import jsonschema
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import TextResourceContents

from tests.helpers import dump_store
from tests.integration.test_mcp import PASSING, TOOLS, call, drive, refused
from waypost.model import Gate
from waypost.store import open_store
from waypost.usecases import starting, tokens

STARTED = "waypost mcp: serving "


@contextmanager
def mcp_server(store: Path, *extra: str) -> Iterator[str]:
    """A `waypost mcp --http` process on a free port; its endpoint URL. Its stderr goes to
    a file beside the store (a pipe nobody drains could stall it)."""
    log = store.parent / f"mcp-http-{time.monotonic_ns()}.log"
    with log.open("w") as errors:
        process = subprocess.Popen(
            [sys.executable, "-m", "waypost", "mcp", "--store", str(store), "--as",
             "server", "--http", "127.0.0.1:0", *extra],
            stderr=errors, stdout=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        deadline = time.monotonic() + 60
        while True:
            found = [line for line in log.read_text().splitlines() if line.startswith(STARTED)]
            if found:
                break
            assert process.poll() is None, f"the server exited: {log.read_text()}"
            assert time.monotonic() < deadline, "the server did not start listening"
            time.sleep(0.05)
        yield found[0][len(STARTED):].strip()
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@asynccontextmanager
async def client(url: str, secret: str, **headers: str) -> AsyncIterator[ClientSession]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {secret}", **headers},
                              timeout=httpx2.Timeout(30, read=60))
    async with http, streamable_http_client(url, http_client=http) as (read, write, *_), \
            ClientSession(read, write) as session:
        await session.initialize()
        yield session


def issue(store: Path, holder: str, role: str, run_id: str | None = None) -> str:
    with open_store(str(store), create=True) as opened:
        secret, _ = tokens.issue(opened, holder=holder, role=role, run_id=run_id, ttl=None,
                                 by="alice")
    return secret


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Any]:
    """A run owned by alice, worked by worker-1, with an artifact gate; and tokens."""
    store = tmp_path / "w.db"
    with open_store(str(store), create=True) as opened:
        run, _ = starting.start(opened, "Write the report", actor="alice", owner="alice",
                            target="none:", worker="worker-1",
                            gates=[Gate(name="report", check="artifact:report.md")])
        other, _ = starting.start(opened, "Someone else's", actor="bob", owner="bob",
                              target="none:")
    return {"store": store, "run": run.id, "other": other.id,
            "owner": issue(store, "alice", "owner"),
            "worker": issue(store, "worker-1", "worker", run.id),
            "viewer": issue(store, "carol", "viewer")}


def test_a_worker_token_works_the_run_and_an_owner_token_approves_it(
        world: dict[str, Any]) -> None:
    run = world["run"]

    async def scenario() -> None:
        with mcp_server(world["store"]) as url:
            async with client(url, world["worker"]) as worker:
                assert {t.name for t in (await worker.list_tools()).tools} == TOOLS
                await call(worker, "heartbeat", run=run, note="drafting", progress=0.5)
                await call(worker, "add_artifact", run=run, name="report.md", role="report",
                           content="# Report\n\nThe flaky test waited on a lock it never "
                           "took; it now takes it before reading the counter.\n")
                checked = await call(worker, "check_evidence", run=run,
                                     check="artifact:report.md")
                assert checked["evidence"]["verdict"] == "passed"
                text = await refused(worker, "approve", run=run)
                assert "worker token may not approve" in text
                assert "owner" in text
                assert text.splitlines()[-1].startswith("next tool: ")
                text = await refused(worker, "heartbeat", run=world["other"])
                assert f"token is for run {run}" in text
                await call(worker, "mark_ready", run=run, summary="report written",
                           artifacts=["report.md"])
            async with client(url, world["owner"]) as owner:
                reviewed = await call(owner, "review", run=run)
                assert reviewed["approvable"] is True
                approved = await call(owner, "approve", run=run)
                assert approved["state"] == "approved"
                text = await refused(owner, "cancel", run=world["other"], reason="not mine")
                assert "acts as owner only on runs alice owns" in text
        with open_store(str(world["store"])) as opened:
            events = opened.events(run)
        # the token's holder is the actor in the history, whoever the server was started as
        assert {e.type: e.actor for e in events}["heartbeat"] == "worker-1"
        assert {e.type: e.actor for e in events}["approved"] == "alice"
        assert "server" not in {e.actor for e in events}

    drive(scenario)


def test_a_viewer_reads_and_changes_nothing(world: dict[str, Any]) -> None:
    run = world["run"]

    async def scenario() -> None:
        with mcp_server(world["store"]) as url:
            before = dump_store(world["store"])
            async with client(url, world["viewer"]) as viewer:
                status = await call(viewer, "checkpoint_status", run=run)
                assert status["runs"][0]["id"] == run
                packet = await viewer.read_resource(f"waypost://runs/{run}")
                body = packet.contents[0]
                assert isinstance(body, TextResourceContents)
                assert json.loads(body.text)["id"] == run
                for tool, arguments in (("heartbeat", {"run": run}),
                                        ("checkpoint_start", {"title": "mine",
                                                              "target": "none:"}),
                                        ("cancel", {"run": run, "reason": "no"})):
                    text = await refused(viewer, tool, **arguments)
                    assert "viewer token may not" in text
            assert dump_store(world["store"]) == before

    drive(scenario)


def test_no_live_token_or_a_foreign_origin_reaches_no_tool(world: dict[str, Any]) -> None:
    revoked = issue(world["store"], "dave", "owner")
    with open_store(str(world["store"])) as opened:
        tokens.revoke(opened, tokens.authenticate(opened, revoked).id)
    with mcp_server(world["store"]) as url:
        before = dump_store(world["store"])
        hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                 "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                            "clientInfo": {"name": "t", "version": "1"}}}
        accept = {"Accept": "application/json, text/event-stream"}
        for auth in ({}, {"Authorization": "Bearer wpt_nope"},
                     {"Authorization": f"Bearer {revoked}"},
                     {"Authorization": f"Basic {world['owner']}"}):
            answer = httpx2.post(url, json=hello, headers={**accept, **auth}, timeout=30)
            assert answer.status_code == 401, answer.text
            assert answer.json()["error"]["code"] == "unauthenticated"
            assert answer.headers["www-authenticate"].startswith("Bearer")
        foreign = httpx2.post(url, json=hello, timeout=30,
                              headers={**accept, "Authorization": f"Bearer {world['owner']}",
                                       "Origin": "http://evil.example"})
        assert foreign.status_code == 403
        own = httpx2.post(url, json=hello, timeout=30,
                          headers={**accept, "Authorization": f"Bearer {world['owner']}"})
        assert own.status_code == 200
        assert dump_store(world["store"]) == before


def test_nothing_runs_on_the_server_unless_it_allows_exec(world: dict[str, Any],
                                                          tmp_path: Path) -> None:
    run = world["run"]
    side = tmp_path / "SIDE"
    touch = [sys.executable, "-c", f"open({str(side)!r}, 'w')"]
    (tmp_path / "notes.md").write_text("secret notes on the server\n")

    async def scenario() -> None:
        with mcp_server(world["store"]) as url:
            before = dump_store(world["store"])
            async with client(url, world["worker"]) as worker:
                text = await refused(worker, "run_evidence", run=run, command=touch)
                assert "nothing runs on this server because a remote caller asked" in text
                text = await refused(worker, "check_evidence", run=run,
                                     check=f"command:{sys.executable} -c pass")
                assert "would run on this server" in text
                text = await refused(worker, "add_artifact", run=run, name="notes.md",
                                     path=str(tmp_path / "notes.md"))
                assert "would read it from this server's files" in text
                assert "send its bytes instead: add_artifact(" in text
            assert not side.exists()
            assert dump_store(world["store"]) == before
        with mcp_server(world["store"], "--allow-exec") as url:
            async with client(url, world["worker"]) as worker:
                ran = await call(worker, "run_evidence", run=run, command=PASSING, kind="test")
                assert ran["evidence"]["verdict"] == "passed"

    drive(scenario)


def test_every_answer_over_http_matches_its_schema(world: dict[str, Any]) -> None:
    async def scenario() -> None:
        with mcp_server(world["store"]) as url:
            async with client(url, world["owner"]) as owner:
                for tool in (await owner.list_tools()).tools:
                    assert tool.output_schema is not None
                    jsonschema.Draft202012Validator.check_schema(tool.output_schema)
                started = await call(owner, "checkpoint_start", title="Over HTTP",
                                     target="none:")
                assert started["state"] == "in_progress"
                text = await refused(owner, "checkpoint_start", title="For bob",
                                     target="none:", owner="bob")
                assert "may start runs owned by alice, not by bob" in text
                text = await refused(owner, "checkpoint_start", title="Out",
                                     target="https://example.com/hook")
                assert "outbound allow-list" in text
                text = await refused(owner, "checkpoint_start", title="Probe",
                                     target="none:", gates=["up=http:https://example.com ok"])
                assert "outbound allow-list" in text  # as the HTTP API refuses it

    drive(scenario)


def test_a_client_dribbling_its_request_head_is_cut_at_the_read_deadline(
        world: dict[str, Any]) -> None:
    """MCP over HTTP holds its clients to `waypost serve`'s read deadlines: a request head
    sent one line at a time and never ended is answered 408 and closed by the header
    deadline (plus a hang guard), while a whole request on another connection is answered."""
    import socket

    from waypost.system.deadlines import LATE, Limits

    with mcp_server(world["store"]) as url:
        host, _, rest = url.removeprefix("http://").partition(":")
        port = int(rest.split("/", 1)[0])
        started = time.monotonic()
        with socket.create_connection((host, port), timeout=5) as slow:
            slow.sendall(f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\n".encode())
            slow.settimeout(1.0)
            said = b""
            limit = Limits().header_timeout + 15  # the deadline, then a hang guard
            while time.monotonic() - started < limit:
                try:
                    piece = slow.recv(4096)
                except TimeoutError:
                    slow.sendall(b"X-Slow: 1\r\n")  # one more header line, never the end
                    answered = httpx2.post(url, json={}, timeout=10)  # others still served
                    assert answered.status_code == 401  # no token: refused, but answered
                    continue
                if not piece:
                    break
                said += piece
        assert said == LATE, said
        assert time.monotonic() - started >= Limits().header_timeout - 0.5
