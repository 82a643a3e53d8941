"""Who is calling: the bearer token made a Grant by `waypost.usecases.tokens`. What the grant
may do is `waypost.core.access`'s.

Where a token may come from is decided here, once: the `Authorization: Bearer` header on
every route; the board's cookie only on the board's own pages, its `/events` stream and its
downloads (`board_secret_of`). The JSON API, the A2A route and the hook routes take the
header alone (`bearer_of`): a browser attaches the cookie to a request another page of the
same site makes, so a route that took it would act for whoever signed in to the board."""

from __future__ import annotations

from typing import Any, Final

from litestar import Request
from litestar.connection import ASGIConnection
from litestar.di import NamedDependency

from waypost.errors import Unauthenticated
from waypost.model import Grant
from waypost.store.base import Store

COOKIE: Final = "waypost_token"
MAX_TOKEN: Final = 512  # far longer than any token `waypost token issue` prints
GRANT: Final = "waypost_grant"  # the request state's key: the grant `edge` authenticated


def bearer_of(connection: ASGIConnection[Any, Any, Any, Any]) -> str | None:
    """The token of `Authorization: Bearer TOKEN` (None without the header). The board's
    cookie is never read here: a request carrying only it is told to send the header."""
    header = connection.headers.get("authorization")
    if header is None:
        if connection.cookies.get(COOKIE):
            raise Unauthenticated(
                "the board's cookie signs in to the board's pages only, not to this route",
                hint="send: Authorization: Bearer $WAYPOST_TOKEN (waypost token issue)")
        return None
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        raise Unauthenticated("the Authorization header is not 'Bearer TOKEN'",
                              hint="send: Authorization: Bearer $WAYPOST_TOKEN")
    return _bounded(value.strip())


def board_secret_of(connection: ASGIConnection[Any, Any, Any, Any]) -> str | None:
    """The board's token: `Authorization: Bearer TOKEN`, else the board's cookie (its pages,
    `/events` and downloads only; a post must also pass `board_session.check_post`)."""
    if connection.headers.get("authorization") is not None:
        return bearer_of(connection)
    cookie = connection.cookies.get(COOKIE)
    return _bounded(cookie) if cookie else None


def _bounded(secret: str) -> str:
    if len(secret) > MAX_TOKEN:
        raise Unauthenticated("the token is not one this server issued (it is too long)",
                              hint="send the token `waypost token issue` printed")
    return secret


def authenticate(connection: ASGIConnection[Any, Any, Any, Any], store: Store) -> Grant:
    """The grant of the request's bearer token (401 without one, or with a token that is
    unknown, expired or revoked)."""
    from waypost.usecases import tokens

    secret = bearer_of(connection)
    if secret is None:
        raise Unauthenticated("this request carries no token",
                              hint="send: Authorization: Bearer TOKEN (waypost token issue)")
    return tokens.authenticate(store, secret)


def caller(request: Request[Any, Any, Any], store: NamedDependency[Store]) -> Grant:
    """The grant `edge.token_first` authenticated before the body was read (a route outside
    it authenticates here, by the same rule)."""
    grant = request.state.get(GRANT)
    return grant if isinstance(grant, Grant) else authenticate(request, store)
