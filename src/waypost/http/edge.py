"""The request edge of the token routes (`/api`, `/a2a`): what is decided about a request
before its body is decoded, in this order, by one guard (`token_first`):

1. the token: `Authorization: Bearer` only (`auth.bearer_of`; the board's cookie is the
   board's), authenticated (401) before a byte of the body is read;
2. the media type the route takes (415), as the route declares it (`takes`): commands and
   start take `application/json`, uploads `application/octet-stream`; a route
   authenticated by a request signature will declare its service's type the same way;
3. the body's size (413, Litestar's `request_max_body_size`) and, for JSON, its nesting
   (400 `too_deep`, `inputs.nesting`), decided on the bytes before they are decoded.

The hook routes answer every request 200 (a host reads any other status as a failed hook),
so they ask `media` and `inputs.nesting` themselves and render a refusal as the host's.
"""

from __future__ import annotations

from typing import Any, Final

from litestar.concurrency import sync_to_thread
from litestar.connection import ASGIConnection
from litestar.handlers import BaseRouteHandler

from waypost import inputs
from waypost.errors import UnsupportedMedia
from waypost.http import auth
from waypost.store.base import Store

TAKES: Final = "takes"  # a route's `opt` key: the media types its body may be sent as
JSON: Final = ("application/json",)
# an upload's bytes; no Content-Type at all is taken too (curl -T, a client sending raw
# bytes), but curl's --data-binary default, a form, is refused: send the type
BYTES: Final = ("application/octet-stream", "")
BODYLESS: Final = frozenset({"GET", "HEAD", "OPTIONS", "DELETE"})
ON_LOOP: Final = 64 * 1024  # bytes of JSON whose nesting is counted on the event loop


def takes(*media: str) -> dict[str, tuple[str, ...]]:
    """A route's `opt` declaring the media types its body may be sent as ("" for none)."""
    return {TAKES: media}


async def token_first(connection: ASGIConnection[Any, Any, Any, Any],
                      handler: BaseRouteHandler) -> None:
    """The guard of the token routes: the token, then the media type, then the body's size
    and nesting; the grant is left in the request's state for `auth.caller`."""
    store: Store = connection.app.state.store
    # in the pool every handler's store calls run in (`app.create_app`: `threads`)
    grant = await sync_to_thread(auth.authenticate, connection, store)
    connection.state[auth.GRANT] = grant
    if connection.scope.get("method", "GET") in BODYLESS:
        return
    accepted: tuple[str, ...] = handler.opt.get(TAKES, JSON)
    media(connection, accepted)
    if "application/json" in accepted:
        body: bytes = await connection.body()  # type: ignore[attr-defined]
        if body and not media_type(connection):
            media(connection, accepted, sent_body=True)
        if len(body) > ON_LOOP:
            await sync_to_thread(inputs.nesting, body)  # tens of ms for a MiB: off the loop
        else:
            inputs.nesting(body)


def media_type(connection: ASGIConnection[Any, Any, Any, Any]) -> str:
    """The request's media type, lower case and without parameters ("" if none given)."""
    return connection.headers.get("content-type", "").partition(";")[0].strip().lower()


def media(connection: ASGIConnection[Any, Any, Any, Any], accepted: tuple[str, ...], *,
          sent_body: bool = False) -> None:
    """Refuse (415) a body sent as a type the route does not take. No Content-Type is taken
    where the route says so (""), and on a JSON route when there is no body at all (claim,
    resume, review) — `sent_body` says there was one."""
    given = media_type(connection)
    if given in accepted or (not given and not sent_body):
        return
    named = " or ".join(m for m in accepted if m) or "no body"
    sent = f"as {given}" if given else "without a Content-Type"
    raise UnsupportedMedia(f"this route takes a body sent as {named}; this one came {sent}, "
                           "and nothing was done",
                           hint=f"send the header: Content-Type: {accepted[0]}")
