"""`waypost mcp`: serve the use cases to an agent host over MCP, on stdio or streamable
HTTP. The SDK is loaded only when this verb runs (the `mcp` extra)."""

from __future__ import annotations

import os
from collections.abc import Sequence

import click

from waypost.cli.context import Ctx, duration, verb
from waypost.errors import InvalidInput, NotFound


@click.command()
@click.option("--evidence-limit", default="20s", show_default=True, metavar="DURATION",
              help="The longest a run_evidence command may run (hosts time tool calls out "
              "around 60 s; longer commands belong in a shell).")
@click.option("--http", "address", metavar="HOST:PORT",
              help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (HOST "
              "defaults to 127.0.0.1). Every request needs a bearer token: waypost token "
              "issue.")
@click.option("--allow-exec", is_flag=True,
              help="Over HTTP, let callers run commands, http: checks and path checks on "
              "this machine, and add artifacts by path (refused otherwise).")
@click.option("--allow-host", "outbound", multiple=True, metavar="HOST",
              help="Over HTTP, a host that targets and http: checks callers register may "
              "reach (repeat; loopback and private ranges only when listed).")
@click.option("--allow-origin", "origins", multiple=True, metavar="ORIGIN",
              help="Over HTTP, a browser origin allowed besides the server's own (repeat).")
@verb
def mcp(ctx: Ctx, evidence_limit: str, address: str | None, allow_exec: bool,
        outbound: Sequence[str], origins: Sequence[str]) -> None:
    """Serve waypost's tools to an agent host over MCP (stdin/stdout, or --http).

    Over stdio every tool acts as --as (or WAYPOST_ACTOR): the acting party is the
    server's, never a tool argument. Over HTTP each request acts as its token's holder,
    within the token's role. Needs the extra: pip install 'waypost[mcp]'.
    """
    limit = duration(evidence_limit, "--evidence-limit", positive=True)
    if address is None and (allow_exec or outbound or origins):
        raise InvalidInput("--allow-exec, --allow-host and --allow-origin go with --http",
                           hint="add --http 127.0.0.1:8765, or leave them out")
    try:
        from waypost.mcp.server import check_limit, serve_stdio
        from waypost.mcp.session import Session
    except ImportError as exc:
        raise InvalidInput(f"waypost mcp needs the MCP SDK, which is not installed ({exc})",
                           hint="pip install 'waypost[mcp]'") from exc
    session = Session(store_url=_store_url(ctx.store_url), server_actor=ctx.actor,
                      config=ctx.config, evidence_limit=check_limit(limit or 20.0),
                      host_session=os.environ.get("CLAUDE_CODE_SESSION_ID") or None)
    if address is None:
        serve_stdio(session)
        return
    from waypost.core.exposure import facing_network
    from waypost.mcp.http import parse_address, serve

    parse_address(address)  # decided before anything listens
    session.exposure = facing_network(allow_exec=allow_exec, outbound=outbound)
    serve(session, address, origins=tuple(origins))


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
