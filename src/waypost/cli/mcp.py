"""`waypost mcp`: serve the use cases to an agent host over MCP (stdio). The SDK is
loaded only when this verb runs (the `mcp` extra)."""

from __future__ import annotations

import os

import click

from waypost.cli.context import Ctx, duration, verb
from waypost.errors import InvalidInput, NotFound


@click.command()
@click.option("--evidence-limit", default="20s", show_default=True, metavar="DURATION",
              help="The longest a run_evidence command may run (hosts time tool calls out "
              "around 60 s; longer commands belong in a shell).")
@verb
def mcp(ctx: Ctx, evidence_limit: str) -> None:
    """Serve waypost's tools to an agent host over MCP on stdin/stdout.

    Every tool acts as --as (or WAYPOST_ACTOR): the acting party is the server's, never a
    tool argument. Needs the extra: pip install 'waypost[mcp]'.
    """
    limit = duration(evidence_limit, "--evidence-limit", positive=True)
    try:
        from waypost.mcp.server import check_limit, serve_stdio
        from waypost.mcp.session import Session
    except ImportError as exc:
        raise InvalidInput(f"waypost mcp needs the MCP SDK, which is not installed ({exc})",
                           hint="pip install 'waypost[mcp]'") from exc
    session = Session(store_url=_store_url(ctx.store_url), actor=ctx.actor,
                      config=ctx.config, evidence_limit=check_limit(limit or 20.0),
                      host_session=os.environ.get("CLAUDE_CODE_SESSION_ID") or None)
    serve_stdio(session)


def _store_url(given: str | None) -> str:
    """The store every call of this server uses, found once, now: a server with no store
    to use says so when it starts, not in every tool call."""
    from waypost.store import find_default

    url = given or find_default()
    if url is None:
        raise NotFound("no waypost store here or in any parent directory",
                       hint="create one with: waypost init  (or set WAYPOST_URL / pass "
                       "--store)")
    return url
