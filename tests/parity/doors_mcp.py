"""MCP, over stdio (a `waypost mcp --as ACTOR` process per actor) and over streamable HTTP
(one `waypost mcp --http` process, a bearer token per actor), driven by the official
client. The sessions stay open for the whole run (an event loop in a thread of its own
carries them), and `mcp_class` maps every answer into an outcome class by its error code."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, Final

import httpx2
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import INVALID_REQUEST, PARSE_ERROR, CallToolResult, TextContent

from waypost.http.auth import COOKIE

from .driver import (
    ARTIFACT,
    ERROR_OF_CODE,
    GATE,
    PUBLIC_SUMMARY,
    RETARGET,
    WAIT_S,
    Driver,
    blocker,
    check_spec,
    class_of,
    gate_check,
    gate_name,
    number_text,
    reviewed,
    seen,
    target,
    title,
    transfer,
    worker,
)
from .named import check_mcp
from .terms import NO_LIVE_TOKEN, OWNER, Actor, Call, Cls, Ctx, Door, Hostile
from .world import World

# no live bearer token: none, or a dead one, or the board's cookie alone
NO_BEARER: Final = NO_LIVE_TOKEN | {Actor.OWNER_BY_COOKIE}
CALL_WAIT: Final = 60.0  # seconds one tool call may take (a hung server fails, never hangs)
START_WAIT: Final = 60.0  # seconds `waypost mcp --http` may take to listen
STARTED: Final = "waypost mcp: serving "

def mcp_class(result: CallToolResult) -> Cls:
    """A tool's answer: ok, or its error's code (`mcp.answers` gives it as structured
    content); the SDK's own refusal of arguments the tool's schema does not take has none."""
    if not result.is_error:
        return Cls.OK
    text = "\n".join(c.text for c in result.content if isinstance(c, TextContent))
    check_mcp(result.structured_content or {}, text)
    error = (result.structured_content or {}).get("error")
    if isinstance(error, dict):
        code = error["code"]
        assert code in ERROR_OF_CODE, f"an MCP tool error with the code {code!r}"
        return class_of(ERROR_OF_CODE[code])
    assert "validation error" in text, f"an MCP tool error without a code: {text}"
    return Cls.INVALID


@contextlib.contextmanager
def serving(world: World) -> Iterator[str]:
    """`waypost mcp --http` on a free port, over the world's store; its endpoint URL."""
    log = world.folder / "mcp-http.log"
    with log.open("w") as errors:
        process = subprocess.Popen(
            [sys.executable, "-m", "waypost", "mcp", "--store", world.url, "--as", "server",
             "--http", "127.0.0.1:0"], stderr=errors, stdout=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        yield _listening(process, log)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _listening(process: subprocess.Popen[bytes], log: Path) -> str:
    deadline = time.monotonic() + START_WAIT
    while True:
        found = [line for line in log.read_text().splitlines() if line.startswith(STARTED)]
        if found:
            return found[0][len(STARTED):].strip()
        assert process.poll() is None, f"waypost mcp --http exited: {log.read_text()}"
        assert time.monotonic() < deadline, "waypost mcp --http did not start listening"
        time.sleep(0.05)


RAW_OPENING: Final = (
    '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
    '"capabilities":{},"clientInfo":{"name":"parity-raw","version":"1"}}}',
    '{"jsonrpc":"2.0","method":"notifications/initialized"}')
RAW_PING_ID: Final = 3
RAW_PING: Final = f'{{"jsonrpc":"2.0","id":{RAW_PING_ID},"method":"ping"}}'
RAW_ANSWER_BYTES: Final = 1 << 20


def line_class(answers: dict[object, Any]) -> Cls:
    """A raw line's outcome: JSON-RPC's error for a line it could not read (id null:
    parse error or invalid request) is invalid; a tool's answer is the tool's class. The
    ping after it must be answered either way: a server that stops serving fails."""
    assert "result" in answers.get(RAW_PING_ID, {}), f"no answer to the ping: {answers}"
    if None in answers:
        code = answers[None]["error"]["code"]
        assert code in (PARSE_ERROR, INVALID_REQUEST), f"a JSON-RPC error {code} for a line"
        return Cls.INVALID
    assert 2 in answers, "the server dropped the line without an answer"
    return mcp_class(CallToolResult.model_validate(answers[2]["result"]))


def mcp_number(number: Hostile) -> object:
    """The number as JSON holds it (what the official client sends)."""
    return json.loads(number.json)


class McpStdioDoor(Driver):
    door = Door.MCP_STDIO

    def __init__(self, world: World) -> None:
        super().__init__(world)
        self.stack = contextlib.ExitStack()
        self.portal: BlockingPortal = self.stack.enter_context(start_blocking_portal())
        self.sessions: dict[Actor, ClientSession] = {}

    def close(self) -> None:
        self.stack.close()

    def session(self, actor: Actor) -> ClientSession:
        if actor not in self.sessions:
            opened = self.portal.wrap_async_context_manager(self.connect(actor))
            self.sessions[actor] = self.stack.enter_context(opened)
        return self.sessions[actor]

    @contextlib.asynccontextmanager
    async def connect(self, actor: Actor) -> AsyncIterator[ClientSession]:
        """A `waypost mcp` process acting as the actor, on this world's store."""
        name = Call(actor, Ctx()).name
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "waypost", "mcp", "--store", self.world.url, "--as", name],
            env={"PYTHONPATH": os.pathsep.join(sys.path)}, cwd=str(self.world.folder))
        with (self.world.folder / f"mcp-{name}.log").open("a") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), \
                    ClientSession(read, write) as session:
                await session.initialize()
                yield session

    def tool(self, call: Call, tool: str, **arguments: Any) -> Cls:
        given = call.hostile("line")
        if given is not None:
            return line_class(self.portal.call(self._raw, call, tool, given))
        session = self.session(call.actor)
        result = self.portal.call(self._bounded, session, tool, arguments)
        return mcp_class(result)

    @staticmethod
    async def _bounded(session: ClientSession, name: str,
                       arguments: dict[str, Any]) -> CallToolResult:
        import anyio

        with anyio.fail_after(CALL_WAIT):
            return await session.call_tool(name, arguments)

    async def _raw(self, call: Call, tool: str, given: Hostile) -> dict[object, Any]:
        """The answers, by id, of a fresh server as the actor, on a pipe of its own, to a
        call of `tool` with `given` as its arguments, written raw (the official client
        cannot write what it would never send), then a ping on the same pipe."""
        import anyio
        from anyio.streams.buffered import BufferedByteReceiveStream

        name = call.name
        argv = [sys.executable, "-m", "waypost", "mcp", "--store", self.world.url, "--as", name]
        lines = [*RAW_OPENING, '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":'
                 f'{{"name":{json.dumps(tool)},"arguments":{given.json}}}}}', RAW_PING]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        answers: dict[object, Any] = {}
        with anyio.fail_after(CALL_WAIT), \
                (self.world.folder / f"mcp-{name}-raw.log").open("a") as errlog:
            async with await anyio.open_process(argv, env=env, stderr=errlog,
                                                cwd=self.world.folder) as server:
                assert server.stdin is not None
                assert server.stdout is not None
                await server.stdin.send("".join(f"{each}\n" for each in lines).encode())
                read = BufferedByteReceiveStream(server.stdout)
                for _ in range(len(lines)):  # at most one answer a line
                    answer = json.loads(await read.receive_until(b"\n", RAW_ANSWER_BYTES))
                    answers[answer.get("id")] = answer
                    if RAW_PING_ID in answers:
                        break
                await server.stdin.aclose()
                await server.wait()
        return answers

    def hold(self, ctx: Ctx) -> None:
        """The server holds the epochs of the runs it started or resumed: resume as w1."""
        assert self.resume(Call(Actor.WORKER, ctx)) is Cls.OK

    # --- the tools ------------------------------------------------------------------------

    def start(self, call: Call) -> Cls:
        optional = {arg: number_text(call, arg, None) for arg in ("expect", "deadline")}
        optional["worker"] = worker(call)
        return self.tool(call, "checkpoint_start", title=title(call), target=target(call),
                         owner=OWNER, kind="long_running",
                         max_silence=number_text(call, "max_silence", "1h"),
                         idempotency_key=call.ctx.key or None,
                         **{k: v for k, v in optional.items() if v is not None})

    def claim(self, call: Call) -> Cls:
        return self.tool(call, "claim", run=call.ctx.run)

    def resume(self, call: Call) -> Cls:
        return self.tool(call, "resume", run=call.ctx.run)

    def heartbeat(self, call: Call) -> Cls:
        given = call.hostile("progress")
        progress = 0.5 if given is None else mcp_number(given)
        return self.tool(call, "heartbeat", run=call.ctx.run, note="reproduced it",
                         progress=progress)

    def block(self, call: Call) -> Cls:
        return self.tool(call, "block", run=call.ctx.run, kind="failed_command",
                         detail="the build server refuses connections")

    def unblock(self, call: Call) -> Cls:
        return self.tool(call, "unblock", run=call.ctx.run, blocker=blocker(call),
                         resolution="resolved it")

    def artifact(self, call: Call) -> Cls:
        return self.tool(call, "add_artifact", run=call.ctx.run, name="notes.md",
                         role="report", content=ARTIFACT.decode())

    def skip(self, call: Call) -> Cls:
        return self.tool(call, "skip_evidence", run=call.ctx.run, kind="test",
                         reason="no staging credentials here")

    def check(self, call: Call) -> Cls:
        return self.tool(call, "check_evidence", run=call.ctx.run, check=check_spec(call))

    def command(self, call: Call) -> Cls:
        given = call.hostile("timeout")
        timeout = 10.0 if given is None else mcp_number(given)
        return self.tool(call, "run_evidence", run=call.ctx.run,
                         command=["touch", str(call.ctx.side)], timeout=timeout)

    def ready(self, call: Call) -> Cls:
        return self.tool(call, "mark_ready", run=call.ctx.run,
                         summary="fixed: the session comes first")

    def review(self, call: Call) -> Cls:
        return self.tool(call, "review", run=call.ctx.run)

    def approve(self, call: Call) -> Cls:
        return self.tool(call, "approve", run=call.ctx.run, **self._reviewed(call))

    def changes(self, call: Call) -> Cls:
        return self.tool(call, "request_changes", run=call.ctx.run,
                         reason="add a test for the empty case", **self._reviewed(call))

    def _reviewed(self, call: Call) -> dict[str, str]:
        digest = reviewed(call, self.world)
        return {} if digest is None else {"reviewed": digest}

    def transfer(self, call: Call) -> Cls:
        authority, to = transfer(call)
        return self.tool(call, "transfer", run=call.ctx.run, authority=authority, to=to)

    def cancel(self, call: Call) -> Cls:
        return self.tool(call, "cancel", run=call.ctx.run, reason="the test was deleted upstream")

    def retarget(self, call: Call) -> Cls:
        return self.tool(call, "retarget", run=call.ctx.run, target=target(call, RETARGET))

    def add_gate(self, call: Call) -> Cls:
        return self.tool(call, "add_gate", run=call.ctx.run, name=GATE, check=gate_check(call))

    def adopt_gate(self, call: Call) -> Cls:
        return self.tool(call, "adopt_gate", run=call.ctx.run, name=gate_name(call))

    def read(self, call: Call) -> Cls:
        """checkpoint_status; of a `private` run, also its packet and brief resources."""
        if call.actor in NO_BEARER:
            return self.tool(call, "checkpoint_status", run=call.ctx.run)
        session = self.session(call.actor)
        result = self.portal.call(self._bounded, session, "checkpoint_status",
                                  {"run": call.ctx.run})
        text = json.dumps(result.structured_content) + "\n".join(
            c.text for c in result.content if isinstance(c, TextContent))
        if result.is_error or PUBLIC_SUMMARY not in text:
            return mcp_class(result)
        resources = [self.portal.call(self._resource, session, f"waypost://runs/{call.ctx.run}"
                                      f"{suffix}") for suffix in ("", "/brief")]
        return seen(text, *resources)

    @staticmethod
    async def _resource(session: ClientSession, uri: str) -> str:
        import anyio

        with anyio.fail_after(CALL_WAIT):
            found = await session.read_resource(uri)
        return "\n".join(getattr(c, "text", "") for c in found.contents)

    def list(self, call: Call) -> Cls:
        return self.tool(call, "checkpoint_status")

    def wait(self, call: Call) -> Cls:
        arguments = {"runs": [call.ctx.run], "timeout": WAIT_S}
        if call.actor in NO_BEARER:
            return self.tool(call, "checkpoint_wait", **arguments)
        result = self.portal.call(self._bounded, self.session(call.actor), "checkpoint_wait",
                                  arguments)
        if not result.is_error:
            assert (result.structured_content or {}).get("outcome") == "reached", result
        return mcp_class(result)

    def inbox(self, call: Call) -> Cls:
        listed = self.tool(call, "inbox")
        return listed if listed is not Cls.OK else self.tool(call, "inbox", ack=True)


class McpHttpDoor(McpStdioDoor):
    """The same tools over HTTP: one server, and a session per token."""

    door = Door.MCP_HTTP

    def __init__(self, world: World) -> None:
        super().__init__(world)
        self.url = self.stack.enter_context(serving(world))

    def tool(self, call: Call, tool: str, **arguments: Any) -> Cls:
        if call.actor not in NO_BEARER:
            return super().tool(call, tool, **arguments)
        seen: list[int] = []  # the statuses the client was answered
        try:
            result = self.portal.call(self._once, call.actor, tool, arguments, seen)
        except Exception:  # the client could not begin: the status says why
            if 401 in seen:
                return Cls.UNAUTHENTICATED
            raise
        return mcp_class(result)

    async def _once(self, actor: Actor, tool: str, arguments: dict[str, Any],
                    seen: list[int]) -> CallToolResult:
        async with self.connect(actor, seen) as session:
            return await self._bounded(session, tool, arguments)

    @contextlib.asynccontextmanager
    async def connect(self, actor: Actor, seen: list[int] | None = None,
                      ) -> AsyncIterator[ClientSession]:
        secret = self.world.tokens.get(actor)
        headers = {"Authorization": f"Bearer {secret}"} if secret else {}
        if actor is Actor.OWNER_BY_COOKIE:  # a signed-in board's browser: the cookie alone
            headers = {"Cookie": f"{COOKIE}={secret}"}

        async def record(response: httpx2.Response) -> None:
            if seen is not None:
                seen.append(response.status_code)

        http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=60),
                                  event_hooks={"response": [record]})
        async with http, streamable_http_client(self.url, http_client=http) as (read, write, *_), \
                ClientSession(read, write) as session:
            await session.initialize()
            yield session
