"""Who is calling: the bearer token (the `Authorization` header, or the board's cookie)
made a Grant by `waypost.tokens`. What the grant may do is `waypost.core.access`'s."""

from __future__ import annotations

from typing import Any, Final

from litestar.connection import ASGIConnection

from waypost.errors import InvalidInput

COOKIE: Final = "waypost_token"
MAX_TOKEN: Final = 512  # far longer than any token `waypost token issue` prints


def secret_of(connection: ASGIConnection[Any, Any, Any, Any]) -> str | None:
    """The token the caller sent: `Authorization: Bearer TOKEN`, else the board's cookie."""
    header = connection.headers.get("authorization")
    if header is not None:
        scheme, _, value = header.strip().partition(" ")
        if scheme.lower() != "bearer" or not value.strip():
            raise InvalidInput("the Authorization header is not 'Bearer TOKEN'",
                               hint="send: Authorization: Bearer $WAYPOST_TOKEN")
        return value.strip()[:MAX_TOKEN]
    cookie = connection.cookies.get(COOKIE)
    return cookie[:MAX_TOKEN] if cookie else None
