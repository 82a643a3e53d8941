"""Every tool's answer, in one place: a success as structured content (plain JSON built
from waypost's own records, as `--json` prints them), and the one map from the exception
root to a tool error (`isError`): its text is the message, the hint with each next step as
the tool call that takes it, and the tool to call next; its structured content the error
and the first step as data (`next: {"tool", "arguments", "fill", "actor"}`). The SDK would
re-wrap a raised exception ("Error executing tool …"), so refusals are returned, not
raised."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import msgspec
from mcp.server import MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations

from waypost.errors import InvalidInput, Step, StoreBusy, WaypostError
from waypost.model import Packet, to_json

logger = logging.getLogger("waypost.mcp")

# the tool that takes each shared verb here (None: no tool of this server does)
TOOL_OF_VERB: dict[str, str | None] = {
    "read": "checkpoint_status", "list": "checkpoint_status", "start": "checkpoint_start",
    "claim": "claim", "resume": "resume", "heartbeat": "heartbeat", "block": "block",
    "unblock": "unblock", "artifact": "add_artifact", "evidence": "run_evidence",
    "ready": "mark_ready", "review": "review", "approve": "approve",
    "changes": "request_changes", "cancel": "cancel", "retarget": "retarget",
    "add_gate": "add_gate", "adopt_gate": "adopt_gate", "transfer": "transfer",
    "deliver": None,  # the relay's, which no caller drives
}
EVIDENCE_TOOLS = {"check": "check_evidence", "skip": "skip_evidence",
                  "command": "run_evidence"}  # by the evidence step's form


# what a host may assume of each tool (hints): reads change nothing; a repeat of these
# writes changes nothing more; cancel cannot be undone; these run commands or reach URLs
READ_ONLY = {"checkpoint_status", "checkpoint_wait"}
IDEMPOTENT = {"checkpoint_start", "inbox"}  # with an idempotency key; acknowledging again
DESTRUCTIVE = {"cancel"}
OPEN_WORLD = {"run_evidence", "check_evidence", "review"}


def add_tools(server: MCPServer,
              tools: Sequence[Callable[..., CallToolResult | Awaitable[CallToolResult]]],
              ) -> None:
    """Register each tool under its function's name, its docstring the description."""
    for tool in tools:
        name = tool.__name__
        server.add_tool(tool, description=inspect.cleandoc(tool.__doc__ or ""),
                        annotations=ToolAnnotations(
                            read_only_hint=name in READ_ONLY,
                            destructive_hint=name in DESTRUCTIVE,
                            idempotent_hint=name in READ_ONLY | IDEMPOTENT,
                            open_world_hint=name in OPEN_WORLD))


def as_json(document: Any) -> dict[str, Any]:
    """`document` (records, enums, datetimes) as the plain JSON the CLI's `--json` prints."""
    return msgspec.json.decode(to_json(document))  # type: ignore[no-any-return]


def success(document: Mapping[str, Any]) -> CallToolResult:
    plain = as_json(document)
    return CallToolResult(content=[TextContent(type="text", text=to_json(plain).decode())],
                          structured_content=plain)


async def answer_async(tool: str,
                       work: Callable[[], Awaitable[Mapping[str, Any]]]) -> CallToolResult:
    """`answer` for a tool that awaits (a wait that holds no thread)."""
    try:
        return success(await work())
    except WaypostError as exc:
        return refused(tool, exc)
    except Exception:  # a bug: the traceback stays in the server's log
        logger.exception("waypost tool %s failed unexpectedly", tool)
        return error(f"waypost failed unexpectedly in {tool} (a bug; the server's log has "
                     "the traceback).\nnext tool: checkpoint_status")


def answer(tool: str, work: Callable[[], Mapping[str, Any]]) -> CallToolResult:
    """Run a tool's work: its document as the answer, or its refusal as a tool error."""
    try:
        return success(work())
    except WaypostError as exc:
        return refused(tool, exc)
    except Exception:  # a bug: the traceback stays in the server's log
        logger.exception("waypost tool %s failed unexpectedly", tool)
        return error(f"waypost failed unexpectedly in {tool} (a bug; the server's log has "
                     "the traceback). Nothing more is known about what was written.\n"
                     "next tool: checkpoint_status")


def error(text: str, document: dict[str, Any] | None = None) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True,
                          structured_content=document)


def refused(tool: str, exc: WaypostError) -> CallToolResult:
    """A refusal as a tool error: its words, and its error and next step as data."""
    document: dict[str, Any] = {"error": {"code": exc.code, "message": exc.message,
                                          "hint": exc.hint_with(call_text)}}
    if exc.steps:
        document["next"] = next_call(exc.steps[0])
    if exc.steps[1:]:
        document["also"] = [next_call(s) for s in exc.steps[1:]]
    return error(refusal_text(tool, exc), document)


def refusal_text(tool: str, exc: WaypostError) -> str:
    """The message, the hint with its steps as tool calls, then the tool to call next."""
    lines = [exc.message]
    hint = exc.hint_with(call_text)
    if hint:
        lines.append(f"next: {hint}")
    lines.append(f"next tool: {next_tool(tool, exc)}")
    return "\n".join(lines)


def next_tool(tool: str, exc: WaypostError) -> str:
    """The tool of the first step this server has a tool for; else what fits the kind of
    refusal."""
    for step in exc.steps:
        found = tool_of(step)
        if found is not None:
            return found
    if isinstance(exc, InvalidInput):
        return f"{tool} (again, with corrected arguments)"
    if isinstance(exc, StoreBusy):
        return f"{tool} (again, in a moment: nothing was written)"
    return "checkpoint_status"


def tool_of(step: Step) -> str | None:
    return EVIDENCE_TOOLS[step.form] if step.form else TOOL_OF_VERB[step.verb]


def next_call(step: Step) -> dict[str, Any]:
    """A step as data: the tool (None where this server has none: the verb names it), its
    arguments (`Step.fields`, with the run), those to fill in, and who should call it."""
    given, fill = step.fields()
    arguments = given if step.run is None else {"run": step.run} | given
    return {"tool": tool_of(step), "verb": step.verb, "arguments": arguments, "fill": fill,
            "actor": step.actor}


def then_call(packet: Packet, actor: str) -> dict[str, Any]:
    """`{"next_call": …}`: what `actor` calls next on the run, as `next_call` words a step
    (the house's rule, `hooks.decide.then_for`); `{}` when nothing is theirs to do."""
    from waypost.hooks.decide import then_for

    found = then_for(packet, actor)
    return {} if found is None else {"next_call": next_call(found)}


def call_text(step: Step) -> str:
    """A step in words: `tool(run="wp_…", blocker="b1", resolution=…)`, as ACTOR."""
    call = next_call(step)
    shown = [f"{k}={to_json(v).decode()}" for k, v in call["arguments"].items()]
    shown += [f"{name}=…" for name in call["fill"]]
    tool = tool_of(step)
    said = (f"{tool}({', '.join(shown)})" if tool is not None else
            f"{step.verb} ({', '.join(shown)}): no tool of this server does it")
    return said if step.actor is None else f"{said} as {step.actor}"
