"""The board's door for an emailed link (`usecases.links`): `GET /link/{token}` shows who
and which run it signs in to, with one button; `POST /link/{token}` uses it, once, sets the
board's cookie and goes to the run's page. A GET never uses a link: mail scanners fetch the
links in a mail before anyone reads it. Signing out of a link's session ends it for good.

A refused link is a page saying why (the status from the one error map), and nothing is
stored. The approval itself is the run page's, behind the board's CSRF rules.
"""

from __future__ import annotations

import functools
from typing import Annotated, Any, Final
from urllib.parse import quote

import anyio.to_thread
from litestar import Request, Response, get, post
from litestar.datastructures import Cookie
from litestar.params import PathParameter
from litestar.response import Redirect

from waypost import errors
from waypost.core.links import MAX_TOKEN, Link
from waypost.http import auth, board_session
from waypost.http.board_render import HEADERS, error_shown, render
from waypost.http.deps import StoreDep
from waypost.http.errors import status_of
from waypost.store import Store
from waypost.usecases import links, tokens

LinkToken = Annotated[str, PathParameter(max_length=MAX_TOKEN,
                                         description="The signed link from the mail.")]
SESSION_SAID: Final = f"{int(links.SESSION.total_seconds() // 3600)} hours"


def _page(token: str, link: Link | None, error: errors.WaypostError | None = None,
          cookies: list[Cookie] | None = None) -> Response[str]:
    body = render("link.html", cursor="", run_id="", visitor="", csrf="", token=token,
                  link=link, session=SESSION_SAID,
                  expires=f"{link.expires_at:%Y-%m-%d %H:%M}Z" if link else "",
                  error=error_shown(error) if error else None)
    return Response(body, media_type="text/html; charset=utf-8",
                    status_code=status_of(error) if error else 200, headers=HEADERS,
                    cookies=cookies)


@get("/link/{token:str}", sync_to_thread=False)
def link_page(token: LinkToken) -> Response[str]:
    """Who and which run the link signs in to, and the one button; nothing is used."""
    try:
        link = links.preview(token, secret=links.server_secret())
    except errors.WaypostError as exc:
        return _page("", None, exc)
    return _page(token, link)


@post("/link/{token:str}", status_code=303)
async def use_link(request: Request[Any, Any, Any], store: StoreDep,
                   token: LinkToken) -> Response[Any]:
    """Use the link, once: a token for its owner on its run alone, kept in the cookie."""
    board_session.check_origin(request)
    try:
        secret, grant = await anyio.to_thread.run_sync(functools.partial(
            links.use, store, token, secret=links.server_secret()))
    except errors.WaypostError as exc:
        return _page("", None, exc)
    cookie = board_session.token_cookie(secret, secure=request.url.scheme == "https")
    return Redirect(f"/runs/{quote(grant.run_id or '', safe='')}", status_code=303,
                    cookies=[cookie])


def end_session(request: Request[Any, Any, Any], store: Store) -> None:
    """On sign-out: a link's session is revoked (a copy of its cookie elsewhere stops
    working); a token signed in by hand is only forgotten by this browser."""
    try:
        secret = auth.board_secret_of(request)
        grant = tokens.authenticate(store, secret) if secret is not None else None
    except errors.Unauthenticated:
        return  # no live token: nothing to end
    if grant is not None:
        links.sign_out(store, grant)
