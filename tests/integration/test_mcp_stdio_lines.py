"""Over stdio, `waypost mcp` answers every line: one it cannot read (nested 200,000 levels
deep, not JSON at all, or JSON but no JSON-RPC message) gets a JSON-RPC error whose id is
null, as JSON-RPC 2.0 says, and the next request is served as if it had never come.
Driven by a raw client writing the lines itself, and by the official MCP client with the
deep line slipped into its session."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Final

import anyio
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.message import SessionMessage
from mcp.types import INVALID_REQUEST, PARSE_ERROR, JSONRPCError

import waypost

DEPTH: Final = 200_000
WAIT: Final = 60.0  # a server that drops a line fails the test here, never hangs it
ANSWER_BYTES: Final = 1 << 20


def deep(depth: int = DEPTH) -> str:
    """A tool call whose arguments are nested `depth` lists deep."""
    nested = "[" * depth + "]" * depth
    return ('{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"heartbeat",'
            f'"arguments":{{"run":"wp_x","progress":{nested}}}}}}}')


def line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


INITIALIZE: Final = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "raw", "version": "1"}}}
INITIALIZED: Final = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def command(store: Path) -> list[str]:
    return [sys.executable, "-m", "waypost", "mcp", "--store", str(store), "--as", "bob"]


ENV: Final = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}


async def exchange(store: Path, lines: list[bytes], answers: int) -> list[dict[str, Any]]:
    """Write `lines` to a fresh `waypost mcp`, then read `answers` answers."""
    with (store.parent / "mcp.log").open("w") as errlog:
        async with await anyio.open_process(command(store), env=ENV, stderr=errlog) as server:
            assert server.stdin is not None
            assert server.stdout is not None
            for each in lines:
                await server.stdin.send(each)
            buffered = BufferedByteReceiveStream(server.stdout)
            found = [json.loads(await buffered.receive_until(b"\n", ANSWER_BYTES))
                     for _ in range(answers)]
            await server.stdin.aclose()
            await server.wait()
    return found


def test_each_unreadable_line_gets_an_error_and_the_next_request_an_answer(
        tmp_path: Path) -> None:
    store = tmp_path / "w.db"
    lines = [line(INITIALIZE), line(INITIALIZED), deep().encode() + b"\n", b"{not json\n",
             line({"jsonrpc": "1.0", "id": 3, "method": "tools/list"}),
             b'{"jsonrpc":"2.0","id":4,"method":"tools/list"}\n']

    async def run() -> list[dict[str, Any]]:
        with anyio.fail_after(WAIT):
            return await exchange(store, lines, answers=5)

    answers = anyio.run(run)
    errors = [a["error"]["code"] for a in answers if "error" in a]
    assert all(a["id"] is None for a in answers if "error" in a), answers
    # the deep line and the broken one are not JSON; a JSON-RPC 1.0 request is JSON, but
    # no message of this protocol
    assert sorted(errors) == sorted([PARSE_ERROR, PARSE_ERROR, INVALID_REQUEST]), answers
    served = {a["id"] for a in answers if "result" in a}
    assert served == {1, 4}, answers


RELAY: Final = """\
import subprocess, sys
slipped = open(sys.argv[1], "rb").read()
server = subprocess.Popen(sys.argv[2:], stdin=subprocess.PIPE)
for number, line in enumerate(iter(sys.stdin.buffer.readline, b"")):
    server.stdin.write(line)
    if number == 1:  # after the client's `initialized`: in the middle of the session
        server.stdin.write(slipped)
    server.stdin.flush()
server.stdin.close()
sys.exit(server.wait())
"""


def test_the_official_client_keeps_its_session_past_a_deep_line(tmp_path: Path) -> None:
    store = tmp_path / "w.db"
    waypost.open_store(str(store)).close()
    slipped = tmp_path / "deep.jsonl"
    slipped.write_text(deep() + "\n")
    params = StdioServerParameters(command=sys.executable,
                                   args=["-c", RELAY, str(slipped), *command(store)],
                                   env={"PYTHONPATH": os.pathsep.join(sys.path)},
                                   cwd=str(tmp_path))
    seen: list[object] = []

    async def run() -> list[str]:
        with anyio.fail_after(WAIT), (tmp_path / "mcp.log").open("w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), \
                    anyio.create_task_group() as group:
                send, receive = anyio.create_memory_object_stream[Any](0)

                async def tee() -> None:
                    async with send:
                        async for item in read:
                            seen.append(item)
                            await send.send(item)

                group.start_soon(tee)
                async with ClientSession(receive, write) as session:
                    await session.initialize()
                    listed = await session.list_tools()
                    status = await session.call_tool("checkpoint_status", {})
                    assert not status.is_error, status
                group.cancel_scope.cancel()
        return [tool.name for tool in listed.tools]

    assert "heartbeat" in anyio.run(run)
    refusals = [item.message for item in seen if isinstance(item, SessionMessage)
                and isinstance(item.message, JSONRPCError)]
    assert [(r.id, r.error.code) for r in refusals] == [(None, PARSE_ERROR)], refusals
