"""The signed link an owner is mailed: which run it signs in to, as whom, until when.

A link token is `wl1.<payload>.<signature>`, URL-safe base64 without padding: the payload
is JSON naming the run, the owner, the moment the link expires (whole seconds since the
epoch) and a nonce unique to the mail it came in; the signature is HMAC-SHA256 over
`wl1.<payload>` with the server's link secret. `wl1` is the version: a later format gets
another prefix and this one stays readable. Nothing else is signed, so a token says all
it means; whether it was already used is the store's to know (`usecases.links`).

The same delivery always makes the same token (its nonce comes from the delivery's key,
its expiry from when the delivery was queued), so a mail sent again says the same.
Reading decides everything from the bytes, before any JSON is decoded: the version, the
length, the alphabet, then the signature (compared in constant time), then the payload's
shape, then the expiry.
"""

from __future__ import annotations

import base64
import binascii
from datetime import UTC, datetime
from typing import Annotated, Final

import msgspec

from waypost.errors import InvalidInput, NotAuthorized

VERSION: Final = "wl1"
SECRET_ENV: Final = "WAYPOST_LINK_SECRET"
SHORTEST_SECRET: Final = 32  # characters: e.g. `openssl rand -hex 32` gives 64
MAX_TOKEN: Final = 2048  # far longer than any token made here (an owner name is <= 200)
_ALPHABET: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.")
_KEY_LABEL: Final = b"waypost link nonce v1\n"


class Link(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What a link signs: sign in to `run` as `owner` once, until `expires`."""

    run: Annotated[str, msgspec.Meta(pattern="^[A-Za-z0-9_]{1,64}$")]
    owner: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    expires: Annotated[int, msgspec.Meta(ge=0, le=10**11)]  # seconds since the epoch, UTC
    # unique to the mail: the same delivery makes the same nonce
    nonce: Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{32}$")]

    @property
    def expires_at(self) -> datetime:
        return datetime.fromtimestamp(self.expires, UTC)


_decoder: Final = msgspec.json.Decoder(Link)


def nonce_of(delivery_key: str) -> str:
    """The nonce of the link a delivery carries: 32 hex digits derived from its key."""
    import hashlib

    return hashlib.sha256(_KEY_LABEL + delivery_key.encode()).hexdigest()[:32]


def link_for(*, run: str, owner: str, delivery_key: str, expires_at: datetime) -> Link:
    return Link(run=run, owner=owner, expires=int(expires_at.timestamp()),
                nonce=nonce_of(delivery_key))


def check_secret(secret: str) -> str:
    """`secret` if it is long enough to sign links with; else InvalidInput naming it."""
    if len(secret) < SHORTEST_SECRET:
        raise InvalidInput(f"{SECRET_ENV} must be at least {SHORTEST_SECRET} characters",
                           hint="e.g. export WAYPOST_LINK_SECRET=$(openssl rand -hex 32)")
    return secret


def make(link: Link, secret: str) -> str:
    """The token of `link`, signed with `secret`."""
    signed = f"{VERSION}.{_b64(msgspec.json.encode(link))}"
    return f"{signed}.{_b64(_mac(secret, signed))}"


def read(token: str, secret: str, *, now: datetime) -> Link:
    """The link `token` signs, if this secret signed it and it has not expired; else
    `NotAuthorized` saying which (nothing in the token is believed before its signature)."""
    signed, mac = _signed_part(token)
    import hmac

    if not hmac.compare_digest(mac, _b64(_mac(secret, signed))):
        raise _not_ours()
    try:
        link = _decoder.decode(_unb64(signed.split(".")[1]))
    except (msgspec.DecodeError, ValueError):
        raise _not_ours() from None
    if now >= link.expires_at:
        raise NotAuthorized(f"this link to run {link.run[:64]} expired at "
                            f"{link.expires_at:%Y-%m-%d %H:%M}Z",
                            hint="sign in on the board with a token, or review with: "
                            f"waypost review {link.run[:64]}")
    return link


def _signed_part(token: str) -> tuple[str, str]:
    """The signed text and the signature as given (compared as text: one signature has one
    spelling, so no other token string verifies in its place)."""
    if len(token) > MAX_TOKEN or not set(token) <= _ALPHABET:
        raise _not_ours()
    parts = token.split(".")
    if len(parts) != 3 or parts[0] != VERSION:
        raise _not_ours()
    return f"{parts[0]}.{parts[1]}", parts[2]


def _not_ours() -> NotAuthorized:
    return NotAuthorized("this link is not one this server signed (it was changed, cut "
                         "short, or signed with another secret)",
                         hint="open the link exactly as it came in the mail, or sign in "
                         "on the board with a token")


def _mac(secret: str, signed: str) -> bytes:
    import hashlib
    import hmac

    return hmac.new(secret.encode(), signed.encode(), hashlib.sha256).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as exc:
        raise ValueError(str(exc)) from None
