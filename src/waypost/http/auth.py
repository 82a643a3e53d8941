"""Who is calling: the bearer token (the `Authorization` header, or the board's cookie)
made a Grant by `waypost.usecases.tokens`. What the grant may do is `waypost.core.access`'s."""

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


def secret_of(connection: ASGIConnection[Any, Any, Any, Any]) -> str | None:
    """The token the caller sent: `Authorization: Bearer TOKEN`, else the board's cookie."""
    header = connection.headers.get("authorization")
    if header is not None:
        scheme, _, value = header.strip().partition(" ")
        if scheme.lower() != "bearer" or not value.strip():
            raise Unauthenticated("the Authorization header is not 'Bearer TOKEN'",
                                  hint="send: Authorization: Bearer $WAYPOST_TOKEN")
        return _bounded(value.strip())
    cookie = connection.cookies.get(COOKIE)
    return _bounded(cookie) if cookie else None


def _bounded(secret: str) -> str:
    if len(secret) > MAX_TOKEN:
        raise Unauthenticated("the token is not one this server issued (it is too long)",
                              hint="send the token `waypost token issue` printed")
    return secret


def caller(request: Request[Any, Any, Any], store: NamedDependency[Store]) -> Grant:
    """The grant of the token the request carries (401 without one, or with a token that is
    unknown, expired or revoked)."""
    from waypost.usecases import tokens

    secret = secret_of(request)
    if secret is None:
        raise Unauthenticated("this request carries no token",
                              hint="send: Authorization: Bearer TOKEN (waypost token issue)")
    return tokens.authenticate(store, secret)
