"""`waypost serve`: the HTTP API and the board (the `server` extra), loaded only when this
verb runs."""

from __future__ import annotations

from types import FrameType
from typing import Final

import click

from waypost.cli.context import Ctx, verb
from waypost.errors import InvalidInput, NotFound

LOOPBACK: Final = ("127.0.0.1", "localhost", "::1")


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Where to listen. Loopback unless told; put TLS in a reverse proxy.")
@click.option("--port", default=8470, show_default=True, type=click.IntRange(0, 65535))
@click.option("--allow-exec", is_flag=True,
              help="Let remote callers make this server run commands (evidence run, "
              "command:/http: checks, checks reading its files).")
@click.option("--open", "open_board", is_flag=True,
              help="Show the board without a token (honoured on a loopback host only).")
@click.option("--allow-host", "outbound", multiple=True, metavar="HOST",
              help="A host webhook targets and http: checks registered over the API may "
              "reach (repeatable; loopback and private addresses only when listed).")
@verb
def serve(ctx: Ctx, host: str, port: int, allow_exec: bool, open_board: bool,
          outbound: tuple[str, ...]) -> None:
    """Serve the HTTP API (OpenAPI at /schema/openapi.json) and the board.

    Every request needs a bearer token (waypost token issue); the token's holder is the
    actor. Needs the extra: pip install 'waypost[server]'.
    """
    try:
        import uvicorn

        from waypost.http.app import create_app
        from waypost.http.settings import ServerConfig
        from waypost.system.sockets import listening_socket
    except ImportError as exc:
        raise InvalidInput(f"waypost serve needs the server extra, which is not installed "
                           f"({exc})", hint="pip install 'waypost[server]'") from exc
    if open_board and host not in LOOPBACK:
        raise InvalidInput(f"--open shows the board without a token: only on a loopback "
                           f"host, not {host}", hint="drop --open, or --host 127.0.0.1")
    config = ServerConfig(store_url=_store_url(ctx.store_url), host=host, port=port,
                          allow_exec=allow_exec, open_board=open_board, outbound=outbound,
                          project=ctx.config)
    app = create_app(config)
    try:
        sock = listening_socket(host, port)
    except OSError as exc:
        raise InvalidInput(f"cannot listen on {host}:{port}: {exc.strerror}",
                           hint="choose another --port (0: any free one)") from exc
    shown = f"[{host}]" if ":" in host else host
    click.echo(f"waypost: serving on http://{shown}:{sock.getsockname()[1]} "
               "(OpenAPI: /schema/openapi.json)", err=True)
    from waypost.http import stream

    class Server(uvicorn.Server):
        """Ends the board's event streams first when told to stop: a graceful shutdown
        would otherwise wait for streams that never end (browsers reconnect with their
        Last-Event-ID)."""

        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            stream.close_all()
            super().handle_exit(sig, frame)

    server = Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=5))
    server.run(sockets=[sock])


def _store_url(given: str | None) -> str:
    """The store every request uses, found once, now."""
    import os

    from waypost.store import find_default

    url = given or os.environ.get("WAYPOST_URL") or find_default()
    if url is None:
        raise NotFound("no waypost store here or in any parent directory",
                       hint="create one with: waypost init  (or set WAYPOST_URL / pass "
                       "--store)")
    return url
