"""An emailed link used: it signs its owner in to its one run, once (`core.links` makes and
reads the link; this is what using it does to the store).

Using a link mints a bearer token for the link's owner, role owner, scoped to the link's
run, for `SESSION`; the board keeps its secret in the sign-in cookie. The token's id is
derived from the link's nonce, so the store's unique token id is the single-use rule: a
second use of the same link (a second click, another browser, a replay) collides with the
first and is refused, atomically on either backend. Signing out revokes that token, so a
copy of the cookie elsewhere stops working with it.
"""

from __future__ import annotations

import os
import secrets
from datetime import datetime, timedelta
from typing import Final

from waypost.core import links
from waypost.core.links import Link
from waypost.durations import utcnow
from waypost.errors import Conflict, NotAuthorized
from waypost.model import Grant, Role
from waypost.store.base import Store
from waypost.usecases import tokens

SESSION: Final = timedelta(hours=12)  # how long a link's sign-in lasts
GRANT_PREFIX: Final = "tok_link_"  # every link session's token id, and only theirs
CREATED_BY: Final = "email link"


def server_secret() -> str:
    """The secret links are signed with, from the environment; NotAuthorized when this
    server has none (it takes no links then), InvalidInput when it is too short."""
    secret = os.environ.get(links.SECRET_ENV)
    if not secret:
        raise NotAuthorized(f"this server takes no email links ({links.SECRET_ENV} is not "
                            "set where it runs)", hint="sign in on the board with a token")
    return links.check_secret(secret)


def preview(token: str, *, secret: str, now: datetime | None = None) -> Link:
    """What the link would sign in to, if it were used now (nothing is stored: a mail
    scanner fetching the page uses nothing)."""
    return links.read(token, secret, now=now or utcnow())


def use(store: Store, token: str, *, secret: str,
        now: datetime | None = None) -> tuple[str, Grant]:
    """Sign in with the link, once: the session token's secret and its grant. Refused
    (nothing stored) for a link this secret did not sign, an expired one, one whose run is
    gone or now owned by someone else, and one used before (`Conflict`)."""
    at = now or utcnow()
    link = links.read(token, secret, now=at)
    packet = store.load(link.run).packet  # NotFound names the run
    if packet.owner != link.owner:
        raise NotAuthorized(f"this link signs in {link.owner[:200]!r} to run {link.run}, "
                            f"which {packet.owner[:200]!r} owns now",
                            hint="sign in on the board with a token")
    grant = Grant(id=grant_id(link.nonce), holder=link.owner, role=Role.OWNER,
                  run_id=link.run, created_at=at, created_by=CREATED_BY,
                  expires_at=at + SESSION)
    secret_of_session = f"{tokens.PREFIX}{grant.id[4:]}_{secrets.token_urlsafe(32)}"
    try:
        store.put_token(grant, tokens.digest(secret_of_session))
    except Conflict:
        raise Conflict(f"this link to run {link.run} was already used: a link signs in "
                       "once", hint="sign in on the board with a token, or review with: "
                       f"waypost review {link.run}") from None
    return secret_of_session, grant


def sign_out(store: Store, grant: Grant, *, now: datetime | None = None) -> bool:
    """End a link's session for good (its token revoked); any other token is left as it
    is (it was given by hand, and may be in use elsewhere). True if one was revoked."""
    if not is_link_session(grant):
        return False
    tokens.revoke(store, grant.id, now=now)
    return True


def is_link_session(grant: Grant) -> bool:
    return grant.id.startswith(GRANT_PREFIX)


def grant_id(nonce: str) -> str:
    """The session token's id a link's nonce gives: the same for every use of one link."""
    return GRANT_PREFIX + nonce
