"""`waypost mcp`: the server, its tools and resources, and the stdio runner."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mcp.server import MCPServer
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.stdio import stdio_server
from mcp.types import CallToolResult, InputRequiredResult
from pydantic import AnyUrl

from waypost.core.access import Operation
from waypost.errors import InvalidInput, WaypostError
from waypost.mcp import gates, owner, worker
from waypost.mcp.answers import call_text
from waypost.mcp.session import CALL, OPERATION_OF_TOOL, Call, Session
from waypost.mcp.stdio import Answering
from waypost.model import TERMINAL, Grant, State, to_json

GRANT_KEY = "waypost.grant"  # where the HTTP gate leaves the request's grant in its scope

INSTRUCTIONS = """\
waypost keeps a checkpoint packet for long-running work, outside your memory: state,
blockers, artifacts, evidence, and one final delivery to a target recorded up front.
As the worker: checkpoint_start before the work (or claim a run you were named the worker
of; resume one left silent, with its brief), heartbeat while working, block when stuck on
something specific, add_artifact for durable outputs, run_evidence / check_evidence for
proof (skip_evidence when a check cannot run, with the reason), then mark_ready with a
summary. As the owner: checkpoint_start with a worker to hand the work over, transfer an
authority (approve, deliver, takeover) to another actor, review, then approve or
request_changes; a gate someone else declared runs at your review only once you
adopt_gate it;
inbox lists what happened on your runs while you were away (ack it once handled).
Every refusal says why and names the tool to call next."""


class WaypostServer(MCPServer):
    """The SDK's server, whose own refusals (arguments that do not fit a tool's input
    schema, an unknown tool) end with the tool to call next, as waypost's do. Each call
    runs with who asked (`session.CALL`: over HTTP, the grant of the request's token)."""

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Context[Any, Any] | None = None,
                        ) -> CallToolResult | InputRequiredResult:
        operation = OPERATION_OF_TOOL.get(name, Operation.READ)
        token = CALL.set(Call(grant=_grant(context), operation=operation))
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise
        except ToolError as exc:
            known = self._tool_manager.get_tool(name) is not None
            step = f"{name} (again, with corrected arguments)" if known else "checkpoint_status"
            raise ToolError(f"{exc}\nnext tool: {step}") from exc.__cause__
        finally:
            CALL.reset(token)

    async def read_resource(self, uri: AnyUrl | str, context: Context[Any, Any] | None = None,
                            ) -> Iterable[ReadResourceContents] | InputRequiredResult:
        token = CALL.set(Call(grant=_grant(context), operation=Operation.READ))
        try:
            return await super().read_resource(uri, context)
        finally:
            CALL.reset(token)

    async def run_stdio_async(self) -> None:
        """The SDK's stdio transport, every line it cannot read answered (`stdio`)."""
        async with stdio_server() as (read, write):
            lowlevel = self._lowlevel_server
            await lowlevel.run(Answering(read, write), write,
                               lowlevel.create_initialization_options())


def _grant(context: Context[Any, Any] | None) -> Grant | None:
    """The grant the HTTP gate found for this request's token (None over stdio)."""
    if context is None:
        return None
    try:
        request = context.request_context.request
    except ValueError:  # no request: called in-process
        return None
    scope = getattr(request, "scope", None)
    found = scope.get(GRANT_KEY) if isinstance(scope, dict) else None
    return found if isinstance(found, Grant) else None


def build(session: Session) -> MCPServer:
    """The server with every tool and resource, acting as `session.actor`."""
    server = WaypostServer("waypost", instructions=INSTRUCTIONS, version=_version())
    worker.register(server, session)
    owner.register(server, session)
    gates.register(server, session)
    _resources(server, session)
    return server


def _resources(server: MCPServer, session: Session) -> None:
    from mcp.server.mcpserver.exceptions import ResourceError

    from waypost.durations import utcnow
    from waypost.usecases import reading

    def refused(exc: WaypostError) -> ResourceError:
        hint = exc.hint_with(call_text)
        return ResourceError(f"{exc.message} (next: {hint})" if hint else exc.message)

    @server.resource("waypost://runs/{run_id}", name="packet", mime_type="application/json",
                     description="One run's packet as `waypost show RUN --json` prints it "
                     "(validates against `waypost schema`).")
    def packet(run_id: str) -> str:
        try:
            with session.store() as store:
                found = store.get(run_id)
                session.permit(packet=found)
                seen = reading.runs(store, session.grant, [found], config=session.config)
                return to_json(seen[0]).decode()
        except WaypostError as exc:
            raise refused(exc) from exc

    @server.resource("waypost://runs/{run_id}/brief", name="brief", mime_type="text/plain",
                     description="The handoff brief of one run: where it is, what is open, "
                     "what to fetch, what to do next (read-only: takes nothing over).")
    def brief(run_id: str) -> str:
        from waypost.usecases import handoff

        try:
            with session.store() as store:
                packet = store.get(run_id)
                session.permit(packet=packet)
                found = handoff.brief(
                    reading.seen_packets(session.grant, [packet], config=session.config)[0],
                    reading.events(store, session.grant, run_id, config=session.config,
                                   fold=True))
        except WaypostError as exc:
            raise refused(exc) from exc
        return handoff.brief_text(found, utcnow())

    @server.resource("waypost://board", name="board", mime_type="application/json",
                     description="The active runs (not delivered or cancelled), most recently "
                     "updated first, as `waypost ls --json` prints them.")
    def board() -> str:
        active = [s for s in State if s not in TERMINAL]
        try:
            session.permit(Operation.LIST)
            with session.store() as store:
                listed = session.visible(store.list_runs(states=active, limit=100))
                packets = reading.runs(store, session.grant, listed, config=session.config,
                                       now=utcnow())
        except WaypostError as exc:
            raise refused(exc) from exc
        return to_json({"runs": packets}).decode()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("waypost")
    except PackageNotFoundError:
        return ""


def check_limit(seconds: float) -> float:
    if not 0 < seconds <= 600:
        raise InvalidInput(f"--evidence-limit {seconds:g}s is out of range",
                           hint="give a duration above 0 and at most 10m, e.g. 20s")
    return seconds


def serve_stdio(session: Session) -> None:
    """Serve over stdin/stdout until the client closes them."""
    build(session).run("stdio")
