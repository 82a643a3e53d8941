"""Bearer tokens for the HTTP API (and MCP over HTTP): issue one, know who holds one, revoke.

A token is a secret printed once (`wpt_<id>_<random>`); the store keeps only its SHA-256
and the grant: the holder, who is the actor of every write made with it, the role, which
caps what the holder may do on top of the rules every actor is under, and optionally the
one run it acts on. A secret of 256 random bits needs no slow hash: nothing can be guessed
from its digest."""

from __future__ import annotations

from datetime import datetime, timedelta

from waypost.durations import utcnow
from waypost.errors import InvalidInput, NotFound, Unauthenticated
from waypost.inputs import name
from waypost.model import Grant, Role
from waypost.store.base import Store

PREFIX = "wpt_"
MAX_SECRET = 128  # longer than any secret issued here: refused before it is hashed
_SECRET_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


def issue(store: Store, *, holder: str, role: str, run_id: str | None,
          ttl: timedelta | None, by: str, now: datetime | None = None) -> tuple[str, Grant]:
    """A new token for `holder` acting as `role` (on `run_id` only, when given); return its
    secret, which is never stored or shown again, and its grant."""
    import secrets

    holder = name(holder, "--holder")
    try:
        as_role = Role(role)
    except ValueError:
        raise InvalidInput(f"--role {role[:40]!r} is not a role: use one of "
                           + ", ".join(r.value for r in Role), hint="e.g. --role worker") from None
    if ttl is not None and ttl <= timedelta(0):
        raise InvalidInput("--ttl must be above zero", hint="e.g. --ttl 7d")
    if run_id is not None:
        store.load(run_id)  # NotFound names the run
    at = now or utcnow()
    token_id = "tok_" + secrets.token_hex(6)
    secret = f"{PREFIX}{token_id[4:]}_{secrets.token_urlsafe(32)}"
    grant = Grant(id=token_id, holder=holder, role=as_role, run_id=run_id, created_at=at,
                  created_by=by, expires_at=at + ttl if ttl is not None else None)
    store.put_token(grant, digest(secret))
    return secret, grant


def authenticate(store: Store, secret: str, *, now: datetime | None = None) -> Grant:
    """The grant of a live token; Unauthenticated for a malformed, unknown, expired or
    revoked one (and nothing else, whatever the caller sent)."""
    if (not secret.startswith(PREFIX) or len(secret) > MAX_SECRET
            or not set(secret) <= _SECRET_CHARS):
        raise Unauthenticated("that is not a waypost token",
                              hint="send Authorization: Bearer wpt_…, from: waypost token issue")
    grant = store.token_grant(digest(secret))
    if grant is None:
        raise Unauthenticated("unknown token", hint="ask for one: waypost token issue")
    at = now or utcnow()
    if grant.revoked_at is not None:
        raise Unauthenticated(f"token {grant.id} was revoked at {grant.revoked_at:%Y-%m-%d %H:%M}Z",
                              hint="ask for a new one: waypost token issue")
    if grant.expires_at is not None and grant.expires_at <= at:
        raise Unauthenticated(f"token {grant.id} expired at {grant.expires_at:%Y-%m-%d %H:%M}Z",
                              hint="ask for a new one: waypost token issue")
    return grant


def revoke(store: Store, token_id: str, *, now: datetime | None = None) -> Grant:
    """Revoke a token by its id: every later request with it is refused."""
    grant = store.revoke_token(token_id, at=now or utcnow())
    if grant is None:
        raise NotFound(f"no token {token_id[:80]!r}", hint="list them with: waypost token ls")
    return grant


def live(grant: Grant, now: datetime | None = None) -> bool:
    """Whether the token still works: not revoked, not expired."""
    at = now or utcnow()
    return grant.revoked_at is None and (grant.expires_at is None or at < grant.expires_at)


def digest(secret: str) -> str:
    import hashlib  # only here: the hot verbs never load OpenSSL

    return hashlib.sha256(secret.encode()).hexdigest()
