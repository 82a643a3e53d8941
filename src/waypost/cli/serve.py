"""`waypost serve`: the HTTP API and the board (the `server` extra), loaded only when this
verb runs."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING, Final

import click

from waypost.cli.context import Ctx, verb
from waypost.durations import parse_duration
from waypost.errors import InvalidInput, NotFound, WaypostError

if TYPE_CHECKING:
    from litestar import Litestar

    from waypost.store import Store
    from waypost.system.deadlines import Limits

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
@click.option("--header-timeout", default="10s", show_default=True, metavar="DURATION",
              help="A request's whole head must arrive within this, from the connection's "
              "start (or a later request's first byte); else 408 and closed.")
@click.option("--body-timeout", default="30s", show_default=True, metavar="DURATION",
              help="A request's whole body must arrive within this after its head (a "
              "larger one may take longer while it arrives at 64 KiB/s or faster).")
@click.option("--max-connections", default=1000, show_default=True,
              type=click.IntRange(1, 1_000_000),
              help="Open connections at once, event streams and idle keep-alive ones "
              "included; one more is answered 503 and closed.")
@click.option("--keep-alive", default="5s", show_default=True, metavar="DURATION",
              help="How long an idle connection waits for its next request.")
@click.option("--key-file", envvar="WAYPOST_SIGNING_KEY_FILE", metavar="FILE",
              help="The private key (owner-only file) that signs what GET "
                   "/api/runs/{id}/bundle serves; without one that route is refused.")
@click.option("--key-env", metavar="NAME",
              help="The environment variable holding that private key (PEM) instead.")
@verb
def serve(ctx: Ctx, host: str, port: int, allow_exec: bool, open_board: bool,
          outbound: tuple[str, ...], header_timeout: str, body_timeout: str,
          max_connections: int, keep_alive: str, key_file: str | None,
          key_env: str | None) -> None:
    """Serve the HTTP API (OpenAPI at /schema/openapi.json) and the board.

    Every request needs a bearer token (waypost token issue); the token's holder is the
    actor. Needs the extra: pip install 'waypost[server]'. The deadlines bound reading a
    request, never its answer: the board's event stream stays open.
    """
    try:  # deadlines loads uvicorn
        from waypost.http.app import create_app
        from waypost.http.settings import ServerConfig
        from waypost.system.deadlines import Limits
        from waypost.system.sockets import listening_socket
    except ImportError as exc:
        raise InvalidInput(f"waypost serve needs the server extra, which is not installed "
                           f"({exc})", hint="pip install 'waypost[server]'") from exc
    if open_board and host not in LOOPBACK:
        raise InvalidInput(f"--open shows the board without a token: only on a loopback "
                           f"host, not {host}", hint="drop --open, or --host 127.0.0.1")
    limits = Limits(header_timeout=parse_duration(header_timeout, "--header-timeout",
                                                  positive=True),
                    body_timeout=parse_duration(body_timeout, "--body-timeout", positive=True),
                    max_connections=max_connections,
                    keep_alive=parse_duration(keep_alive, "--keep-alive", positive=True))
    config = ServerConfig(store_url=_store_url(ctx.store_url), host=host, port=port,
                          allow_exec=allow_exec, open_board=open_board, outbound=outbound,
                          project=ctx.config, signing_key_file=key_file,
                          signing_key_env=key_env)
    with _servable(config.store_url, given=ctx.store_url,
                   group_commit=config.project.group_commit) as store:
        app = create_app(config, store=store)
        try:
            sock = listening_socket(host, port)
        except OSError as exc:
            raise InvalidInput(f"cannot listen on {host}:{port}: {exc.strerror}",
                               hint="choose another --port (0: any free one)") from exc
        shown = f"[{host}]" if ":" in host else host
        click.echo(f"waypost: serving on http://{shown}:{sock.getsockname()[1]} "
                   "(OpenAPI: /schema/openapi.json)", err=True)
        _run(app, sock, limits)


def _run(app: Litestar, sock: socket.socket, limits: Limits) -> None:
    """Serve `app` on `sock` until told to stop, each connection held to `limits`."""
    import uvicorn

    from waypost.http import stream
    from waypost.system.deadlines import protocol

    class Server(uvicorn.Server):
        """Ends the board's event streams first when told to stop: a graceful shutdown
        would otherwise wait for streams that never end (browsers reconnect with their
        Last-Event-ID)."""

        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            stream.close_all()
            super().handle_exit(sig, frame)

    server = Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=5,
                                   http=protocol(limits)))
    server.run(sockets=[sock])


@contextmanager
def _servable(url: str, *, given: str | None, group_commit: bool) -> Iterator[Store]:
    """The store at `url`, opened and read once before anything says it is served; one
    that cannot be (damaged, not a store, unreachable) is refused in one line naming the
    cause and `waypost doctor`, with the code the same failure has on any other verb."""
    from waypost.store import open_store

    try:
        store = open_store(url, group_commit=group_commit)
    except WaypostError as exc:
        raise _unservable(exc, given) from exc
    try:
        try:
            store.schema_state()
            store.list_runs(limit=1)
        except WaypostError as exc:
            raise _unservable(exc, given) from exc
        yield store
    finally:
        store.close()


def _unservable(exc: WaypostError, given: str | None) -> WaypostError:
    import shlex

    from waypost.store import POSTGRES_SCHEMES

    cause = " ".join(exc.message.split())  # a driver's message may span lines
    doctor = "waypost doctor"
    if given and not given.startswith(POSTGRES_SCHEMES):  # a URL may hold a password
        doctor += f" --store {shlex.quote(given)}"
    then = f"; {' '.join(exc.hint.split())}" if exc.hint and "doctor" not in exc.hint else ""
    return type(exc)(f"not serving: {cause} (diagnose it with: {doctor}{then})")


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
