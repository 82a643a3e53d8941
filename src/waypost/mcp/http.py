"""`waypost mcp --http`: the same tools over MCP's streamable HTTP, facing the network.

Every request carries a bearer token of the HTTP API (`waypost token issue`): the gate
checks it before the SDK sees the request, and leaves the token's grant in the request's
scope, where each tool call finds who is asking (`session.CALL`). A missing, unknown,
expired or revoked token gets 401 and reaches no tool. The SDK's transport security checks
the Host and Origin headers (a page in a browser cannot drive the server: DNS rebinding),
and the server binds 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from waypost.errors import InvalidInput, Unauthenticated, WaypostError
from waypost.mcp.server import GRANT_KEY, build
from waypost.mcp.session import Session
from waypost.system.sockets import listening_socket
from waypost.usecases.tokens import MAX_SECRET, authenticate

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]
PATH = "/mcp"
LOOPBACK = ("127.0.0.1", "localhost", "[::1]")


class BearerGate:
    """ASGI middleware: a request reaches the MCP app only with a live token."""

    def __init__(self, app: App, session: Session) -> None:
        self.app = app
        self.session = session

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        import anyio

        try:
            secret = _bearer(scope)
            grant = await anyio.to_thread.run_sync(self._authenticate, secret)
        except WaypostError as exc:
            await _refuse(send, 401, exc)
            return
        await self.app({**scope, GRANT_KEY: grant}, receive, send)

    def _authenticate(self, secret: str) -> Any:
        with self.session.store() as store:
            return authenticate(store, secret)


def _bearer(scope: Scope) -> str:
    headers = dict(scope.get("headers") or [])
    raw: bytes = headers.get(b"authorization", b"")
    scheme, _, secret = raw.decode("latin-1")[: MAX_SECRET + 16].partition(" ")
    if scheme.lower() != "bearer" or not secret.strip():
        raise Unauthenticated("this server takes only requests with a bearer token",
                              hint="send Authorization: Bearer wpt_…, from: waypost token "
                              "issue")
    return secret.strip()


async def _refuse(send: Send, status: int, exc: WaypostError) -> None:
    body = json.dumps({"error": exc.as_dict()}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"www-authenticate", b'Bearer realm="waypost"')]})
    await send({"type": "http.response.body", "body": body})


def parse_address(text: str) -> tuple[str, int]:
    """HOST:PORT (HOST defaults to 127.0.0.1; PORT 0 picks a free one)."""
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "", text
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 <= int(port) <= 65535 or len(host) > 253:
        raise InvalidInput(f"--http {text[:80]!r}: write HOST:PORT or PORT",
                           hint="e.g. --http 127.0.0.1:8765")
    return host, int(port)


def app(session: Session, *, host: str, port: int, origins: tuple[str, ...] = ()) -> App:
    """The gated MCP app for a server bound to host:port."""
    from mcp.server.transport_security import TransportSecuritySettings

    names = {host, *LOOPBACK} if host in LOOPBACK else {host}
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{name}:{port}" for name in names],
        allowed_origins=[*(f"http://{name}:{port}" for name in names), *origins])
    inner = build(session).streamable_http_app(streamable_http_path=PATH,
                                               transport_security=security, host=host)
    return BearerGate(inner, session)


def serve(session: Session, address: str, *, origins: tuple[str, ...] = ()) -> None:
    """Serve until stopped (SIGINT/SIGTERM). The URL goes to stderr once listening."""
    import uvicorn

    host, port = parse_address(address)
    try:
        listener = listening_socket(host, port)  # listening before the URL is printed
    except OSError as exc:
        raise InvalidInput(f"cannot listen on {host}:{port}: {exc.strerror or exc}",
                           hint="choose another port, e.g. --http 127.0.0.1:0") from exc
    port = listener.getsockname()[1]
    shown = f"[{host}]" if listener.family == socket.AF_INET6 else host
    served = app(session, host=shown, port=port, origins=origins)
    print(f"waypost mcp: serving http://{shown}:{port}{PATH}", file=sys.stderr, flush=True)
    import logging

    logging.getLogger("mcp").setLevel(logging.WARNING)  # one line per session is noise
    from waypost.system.deadlines import Limits, protocol

    # the same read deadlines and connection limit as `waypost serve`, at their defaults
    config = uvicorn.Config(served, log_level="warning", lifespan="on",
                            http=protocol(Limits()))
    uvicorn.Server(config).run(sockets=[listener])
