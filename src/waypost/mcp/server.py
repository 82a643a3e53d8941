"""`waypost mcp`: the server, its tools and resources, and the stdio runner."""

from __future__ import annotations

from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import CallToolResult, InputRequiredResult

from waypost.errors import InvalidInput, WaypostError
from waypost.mcp import owner, worker
from waypost.mcp.session import Session
from waypost.model import TERMINAL, State, to_json

INSTRUCTIONS = """\
waypost keeps a checkpoint packet for long-running work, outside your memory: state,
blockers, artifacts, evidence, and one final delivery to a target recorded up front.
As the worker: checkpoint_start (or resume) before the work, heartbeat while working,
block when stuck on something specific, add_artifact for durable outputs, run_evidence /
check_evidence for proof (skip_evidence when a check cannot run, with the reason), then
mark_ready with a summary. As the owner: review, then approve or request_changes.
Every refusal says why and names the tool to call next."""


class WaypostServer(MCPServer):
    """The SDK's server, whose own refusals (arguments that do not fit a tool's input
    schema, an unknown tool) end with the tool to call next, as waypost's do."""

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Context[Any, Any] | None = None,
                        ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise
        except ToolError as exc:
            known = self._tool_manager.get_tool(name) is not None
            step = f"{name} (again, with corrected arguments)" if known else "checkpoint_status"
            raise ToolError(f"{exc}\nnext tool: {step}") from exc.__cause__


def build(session: Session) -> MCPServer:
    """The server with every tool and resource, acting as `session.actor`."""
    server = WaypostServer("waypost", instructions=INSTRUCTIONS, version=_version())
    worker.register(server, session)
    owner.register(server, session)
    _resources(server, session)
    return server


def _resources(server: MCPServer, session: Session) -> None:
    from mcp.server.mcpserver.exceptions import ResourceError

    from waypost.durations import utcnow
    from waypost.views import observe_run, observe_runs

    def refused(exc: WaypostError) -> ResourceError:
        return ResourceError(f"{exc.message} (next: {exc.hint})" if exc.hint else exc.message)

    @server.resource("waypost://runs/{run_id}", name="packet", mime_type="application/json",
                     description="One run's packet as `waypost show RUN --json` prints it "
                     "(validates against `waypost schema`).")
    def packet(run_id: str) -> str:
        try:
            with session.store() as store:
                return to_json(observe_run(store, store.get(run_id))).decode()
        except WaypostError as exc:
            raise refused(exc) from exc

    @server.resource("waypost://runs/{run_id}/brief", name="brief", mime_type="text/plain",
                     description="The handoff brief of one run: where it is, what is open, "
                     "what to fetch, what to do next (read-only: takes nothing over).")
    def brief(run_id: str) -> str:
        from waypost import handoff

        try:
            with session.store() as store:
                found = handoff.brief(store.get(run_id), store.events(run_id))
        except WaypostError as exc:
            raise refused(exc) from exc
        return handoff.brief_text(found, utcnow())

    @server.resource("waypost://board", name="board", mime_type="application/json",
                     description="The active runs (not delivered or cancelled), most recently "
                     "updated first, as `waypost ls --json` prints them.")
    def board() -> str:
        active = [s for s in State if s not in TERMINAL]
        try:
            with session.store() as store:
                packets = observe_runs(store, store.list_runs(states=active, limit=100),
                                       utcnow())
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
