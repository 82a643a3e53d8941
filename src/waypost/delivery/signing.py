"""Standard Webhooks signatures: `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`
with a `whsec_<base64>` secret. Used by the webhook target and by `waypost.delivery.receiver`."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac

from waypost.errors import InvalidInput

PREFIX = "whsec_"


def secret_key(secret: str) -> bytes:
    """The HMAC key inside a `whsec_…` secret (a bare base64 string is accepted too)."""
    text = secret.strip().removeprefix(PREFIX)
    try:
        key = base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        key = b""
    if not key:
        raise InvalidInput(
            "the webhook secret is not a whsec_ secret (whsec_ followed by base64)",
            hint='make one with: python -c "import base64,os; '
            "print('whsec_' + base64.b64encode(os.urandom(32)).decode())\"",
        )
    return key


def signature(key: bytes, msg_id: str, timestamp: str, body: bytes) -> str:
    """The `v1,…` signature of one message (the `webhook-signature` header value)."""
    digest = hmac.new(key, f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def matches(key: bytes, msg_id: str, timestamp: str, body: bytes, header: str) -> bool:
    """Whether any `v1,` signature in the space-separated `header` is right (constant time)."""
    expected = signature(key, msg_id, timestamp, body)
    found = False
    for candidate in header.split():
        found |= hmac.compare_digest(candidate.encode(), expected.encode())
    return found
