"""Every tool's answer, in one place: a success as structured content (plain JSON built
from waypost's own records, as `--json` prints them), and the one map from the exception
root to a tool error (`isError`) whose text is the CLI's message and hint, ending with the
tool to call next. The SDK would re-wrap a raised exception ("Error executing tool …"), so
refusals are returned, not raised."""

from __future__ import annotations

import inspect
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec
from mcp.server import MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations

from waypost.errors import InvalidInput, StoreBusy, WaypostError
from waypost.model import to_json

logger = logging.getLogger("waypost.mcp")

# the CLI verb a hint names → the tool that does the same here (longest first)
TOOL_OF_VERB = (
    ("evidence run", "run_evidence"), ("evidence check", "check_evidence"),
    ("evidence skip", "skip_evidence"), ("evidence add", "run_evidence"),
    ("artifact add", "add_artifact"), ("artifact get", "checkpoint_status"),
    ("start", "checkpoint_start"), ("show", "checkpoint_status"),
    ("ls", "checkpoint_status"), ("log", "checkpoint_status"),
    ("heartbeat", "heartbeat"), ("block", "block"), ("unblock", "unblock"),
    ("ready", "mark_ready"), ("claim", "resume"), ("resume", "resume"),
    ("review", "review"), ("approve", "approve"), ("changes", "request_changes"),
    ("cancel", "cancel"), ("retarget", "retarget"), ("gate add", "add_gate"),
    ("gate adopt", "adopt_gate"),
)
_VERB = re.compile(r"\bwaypost ((?:evidence|artifact|gate) \w+|\w+)")


# what a host may assume of each tool (hints): reads change nothing; a repeat of these
# writes changes nothing more; cancel cannot be undone; these run commands or reach URLs
READ_ONLY = {"checkpoint_status"}
IDEMPOTENT = {"checkpoint_start"}  # with an idempotency key
DESTRUCTIVE = {"cancel"}
OPEN_WORLD = {"run_evidence", "check_evidence", "review"}


def add_tools(server: MCPServer, tools: Sequence[Callable[..., CallToolResult]]) -> None:
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


def answer(tool: str, work: Callable[[], Mapping[str, Any]]) -> CallToolResult:
    """Run a tool's work: its document as the answer, or its refusal as a tool error."""
    try:
        return success(work())
    except WaypostError as exc:
        return error(refusal_text(tool, exc))
    except Exception:  # a bug: the traceback stays in the server's log
        logger.exception("waypost tool %s failed unexpectedly", tool)
        return error(f"waypost failed unexpectedly in {tool} (a bug; the server's log has "
                     "the traceback). Nothing more is known about what was written.\n"
                     "next tool: checkpoint_status")


def error(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


def refusal_text(tool: str, exc: WaypostError) -> str:
    """The CLI's message and hint, then the tool to call next."""
    lines = [exc.message]
    if exc.hint:
        lines.append(f"next: {exc.hint}")
    lines.append(f"next tool: {next_tool(tool, exc)}")
    return "\n".join(lines)


def next_tool(tool: str, exc: WaypostError) -> str:
    """The tool the hint's command maps to; else what fits the kind of refusal."""
    for found in _VERB.finditer(exc.hint):
        verb = found.group(1)
        for cli_verb, name in TOOL_OF_VERB:
            if verb == cli_verb or verb.startswith(cli_verb + " "):
                return name
    if isinstance(exc, InvalidInput):
        return f"{tool} (again, with corrected arguments)"
    if isinstance(exc, StoreBusy):
        return f"{tool} (again, in a moment: nothing was written)"
    return "checkpoint_status"
