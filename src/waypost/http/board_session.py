"""Who is looking at the board, and whether a form post really came from it.

The board's token lives in a cookie (`auth.COOKIE`): HttpOnly (no script reads it),
SameSite=Strict (no other site's page sends it), entered once on the sign-in form. A post
that changes anything must also carry the page's CSRF token, derived from the secret the
cookie holds (another site can read neither), and come from this server's own origin when
the browser names one. Without a token the board is shown only when the server was started
with `--open` on a loopback host; it then offers no action.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

from litestar.connection import ASGIConnection
from litestar.datastructures import Cookie

from waypost.errors import NotAuthorized, Unauthenticated
from waypost.http import auth
from waypost.http.settings import ServerConfig
from waypost.model import Grant
from waypost.store import Store
from waypost.usecases import tokens

CSRF_FIELD: Final = "csrf"
_CSRF_KEY: Final = b"waypost board csrf v1"


@dataclass(frozen=True)
class Visitor:
    grant: Grant | None  # None: an open board's anonymous viewer
    secret: str | None

    @property
    def label(self) -> str:
        if self.grant is None:
            return "open board (no token): read only"
        scope = f"run {self.grant.run_id}" if self.grant.run_id else "all runs"
        return f"{self.grant.holder} ({self.grant.role}, {scope})"

    @property
    def csrf(self) -> str:
        return csrf_token(self.secret) if self.secret else ""


class SignIn(Exception):
    """The page needs a token the request does not carry (the board shows its form)."""


def csrf_token(secret: str) -> str:
    return hmac.new(_CSRF_KEY, secret.encode("utf-8", "surrogatepass"),
                    hashlib.sha256).hexdigest()


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def open_board(config: ServerConfig) -> bool:
    """`--open` is honoured on a loopback host only."""
    return config.open_board and is_loopback(config.host)


def visitor(connection: ASGIConnection[Any, Any, Any, Any], store: Store,
            config: ServerConfig, *, page: bool = True) -> Visitor:
    """The token's grant, or an open board's anonymous viewer. Without a token: SignIn for
    a page (the board shows its form), `Unauthenticated` (401) for the stream. A wrong,
    expired or revoked token raises `Unauthenticated` (tokens.authenticate)."""
    secret = auth.board_secret_of(connection)
    if secret is None:
        if open_board(config):
            return Visitor(grant=None, secret=None)
        if page:
            raise SignIn
        raise Unauthenticated("the board's feed needs a token",
                              hint="sign in on the board, or send Authorization: Bearer TOKEN")
    return Visitor(grant=tokens.authenticate(store, secret), secret=secret)


def check_post(connection: ASGIConnection[Any, Any, Any, Any], who: Visitor,
               given: str | None) -> None:
    """Refuse (403) a form post that did not come from the board's own page."""
    check_origin(connection)
    if not who.secret or not given or not hmac.compare_digest(given, who.csrf):
        raise NotAuthorized("this form did not come from the board's own page (missing or "
                            "wrong CSRF token)", hint="reload the page and try again")


def check_origin(connection: ASGIConnection[Any, Any, Any, Any]) -> None:
    """A browser names the page a post came from (Origin, else Referer): it must be ours."""
    named = connection.headers.get("origin") or connection.headers.get("referer")
    if named is None:
        return  # no browser sends a cross-site form without them; the CSRF token decides
    host = connection.headers.get("host", "")
    if named == "null" or urlsplit(named).netloc.lower() != host.lower():
        raise NotAuthorized(f"a post from another site ({named[:80]!r}) is refused",
                            hint="use the board's own page")


def token_cookie(secret: str, *, secure: bool) -> Cookie:
    return Cookie(key=auth.COOKIE, value=secret, httponly=True, samesite="strict",
                  secure=secure, path="/")


def cleared_cookie(*, secure: bool) -> Cookie:
    return Cookie(key=auth.COOKIE, value="", httponly=True, samesite="strict", secure=secure,
                  path="/", max_age=0)
