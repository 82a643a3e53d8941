"""The `http(s):` target: a POST signed per Standard Webhooks, ended by one overall deadline
(`waypost.system.web`: a receiver trickling its answer cannot hold the relay), on the
relay's kept-alive connections (`delivery.connections`) when it has them. httpx is
imported only when a webhook is really sent."""

from __future__ import annotations

import email.utils
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import msgspec

from waypost.delivery import signing
from waypost.delivery.base import Outgoing, Target
from waypost.delivery.connections import Connections, client_for
from waypost.delivery.policy import Attempt, for_status, keyed, retry
from waypost.errors import InvalidInput

if TYPE_CHECKING:
    import httpx

NO_SECRET = ("no webhook secret to sign with: set WAYPOST_WEBHOOK_SECRET or [delivery] "
             "webhook_secret (a whsec_ secret) for the relay")
RECEIPT_BYTES = 200
# the digest of the owner's signed approval statement (`approve --sign`), on a final result
APPROVAL_HEADER = "waypost-approval-statement"


class WebhookTarget(Target):
    def __init__(self, url: str, *, secret: str | None, timeout: float,
                 connections: Connections | None = None) -> None:
        self.url = url
        self.secret = secret
        self.timeout = timeout
        self.connections = connections

    def headers(self, outgoing: Outgoing, at: datetime) -> dict[str, str]:
        """The Standard Webhooks headers: webhook-id is the delivery's idempotency key."""
        if not self.secret:
            raise InvalidInput(NO_SECRET)
        timestamp = str(int(at.timestamp()))
        key = outgoing.delivery.key
        signed = outgoing.document.get("data", {}).get("approval_statement")
        return {"content-type": "application/json", "user-agent": "waypost-relay",
                "webhook-id": key, "webhook-timestamp": timestamp,
                "webhook-signature": signing.signature(signing.secret_key(self.secret), key,
                                                       timestamp, outgoing.body),
                **({APPROVAL_HEADER: str(signed)} if signed else {})}

    def send(self, outgoing: Outgoing, *, at: datetime) -> Attempt:
        try:
            headers = self.headers(outgoing, at)
        except InvalidInput as exc:
            return retry(exc.message)  # the relay's configuration, not the receiver, is wrong
        import httpx

        try:
            with client_for(self.url, self.timeout, self.connections) as client, \
                    client.stream("POST", self.url, content=outgoing.body,
                                  headers=headers) as response:
                attempt = for_status(response.status_code, response.reason_phrase,
                                     retry_after(response.headers.get("retry-after"), at))
                head = _head(response)
        except httpx.TimeoutException as exc:
            return retry(f"no answer from {self.url} within {self.timeout:g}s "
                         f"({type(exc).__name__})", outcome_unknown=after_sending(exc))
        except httpx.HTTPError as exc:
            return retry(f"cannot reach {self.url}: {type(exc).__name__}: {exc}",
                         outcome_unknown=after_sending(exc))
        if head:
            attempt = msgspec.structs.replace(attempt, detail=f"{attempt.detail}: {head}")
        return keyed(attempt)


def after_sending(exc: Exception) -> bool:
    """Whether the whole request had gone out when `exc` ended it: waiting for (or reading)
    the answer timed out, or the connection dropped then. The receiver may have it. A
    failure to connect, or while writing, left it with no complete request."""
    import httpx

    return isinstance(exc, httpx.ReadTimeout | httpx.ReadError | httpx.RemoteProtocolError)


def _head(response: httpx.Response) -> str:
    """The start of the response body, for the receipt or the error (never all of it)."""
    data = b""
    for chunk in response.iter_bytes():
        data += chunk
        if len(data) >= RECEIPT_BYTES:
            break
    return " ".join(data[:RECEIPT_BYTES].decode("utf-8", errors="replace").split())


def retry_after(value: str | None, now: datetime) -> float | None:
    """Seconds from a Retry-After header: delay-seconds or an HTTP date."""
    if not value:
        return None
    if value.strip().isdigit():
        return float(value.strip())
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())
