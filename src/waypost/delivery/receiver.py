"""Receiving waypost webhooks: check the Standard Webhooks signature, refuse timestamps
outside a tolerance, and apply each `webhook-id` once.

The relay sends at least once: after a crash, or when a reply is lost, the same delivery
comes again with the same `webhook-id` (and a fresh timestamp and signature). `Receiver`
remembers every id it applied in a SQLite file, for `retention` (keep it longer than the
sender's retry horizon, 3 days by default), so a resend is answered 200 and not applied
again. `apply` runs inside the transaction that records the id: if it raises, the id is
not recorded (answer 500, the sender retries); writes it makes through `receiver.db`
commit together with the id, which makes applying exactly-once.

    receiver = Receiver(os.environ["WAYPOST_WEBHOOK_SECRET"], "received.db")
    status, text = receiver.handle(raw_body, headers, apply=lambda message: ...)
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from waypost.delivery import signing
from waypost.errors import InvalidInput, Refused

DEFAULT_TOLERANCE = 300.0  # seconds a webhook-timestamp may differ from our clock
DEFAULT_RETENTION = 7 * 86400.0  # seconds an applied id is remembered (> the retry horizon)
DEFAULT_MAX_BODY = 16 * 1024 * 1024  # bytes; a larger body is refused (413), not parsed
MAX_HEADER = {"webhook-id": 256, "webhook-timestamp": 20, "webhook-signature": 4096}

__all__ = ["DEFAULT_MAX_BODY", "DEFAULT_RETENTION", "DEFAULT_TOLERANCE", "Message", "Receiver",
           "WebhookRejected", "WebhookTooLarge"]


class WebhookRejected(Refused):
    """The webhook is not authentic or not fresh; it was not applied."""

    code = "webhook_rejected"


class WebhookTooLarge(InvalidInput):
    """The webhook body is larger than the receiver takes; it was not applied."""

    code = "webhook_too_large"


class Message(msgspec.Struct, frozen=True, kw_only=True):
    """A verified webhook."""

    id: str  # webhook-id: the delivery's idempotency key
    timestamp: datetime  # webhook-timestamp: when this attempt was signed
    payload: dict[str, Any]  # the JSON body: type (final | notice), id, topic, data
    body: bytes  # exactly as received

    @property
    def type(self) -> str:
        return str(self.payload.get("type", ""))


class Receiver:
    """Verifies and dedupes webhooks; safe to share between threads."""

    def __init__(self, secret: str, path: str | Path, *,
                 tolerance: float = DEFAULT_TOLERANCE, retention: float = DEFAULT_RETENTION,
                 max_body: int = DEFAULT_MAX_BODY,
                 clock: Callable[[], float] = time.time) -> None:
        self.key = signing.secret_key(secret)
        self.tolerance = tolerance
        self.max_body = max_body
        self.retention = retention
        self.clock = clock
        self._lock = threading.RLock()
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False,
                                  timeout=60)
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.execute("PRAGMA synchronous = FULL")
        self.db.execute("CREATE TABLE IF NOT EXISTS waypost_received (id TEXT PRIMARY KEY,"
                        " received_at REAL NOT NULL) WITHOUT ROWID")
        self.db.execute("CREATE INDEX IF NOT EXISTS waypost_received_at"
                        " ON waypost_received (received_at)")

    def verify(self, body: bytes, headers: Mapping[str, str]) -> Message:
        """The message, if its signature and timestamp check out; else WebhookRejected
        (or WebhookTooLarge, InvalidInput for a body that is not a JSON object)."""
        if len(body) > self.max_body:
            raise WebhookTooLarge(f"the webhook body is {len(body)} bytes; this receiver "
                                  f"takes at most {self.max_body}")
        msg_id, stamp, signature = _headers(headers)
        if not stamp.isdigit():
            raise WebhookRejected(f"webhook-timestamp {stamp!r} is not unix seconds")
        skew = abs(self.clock() - int(stamp))
        if skew > self.tolerance:
            raise WebhookRejected(f"webhook-timestamp is {skew:.0f} s away from now (tolerance "
                                  f"{self.tolerance:.0f} s): stale or replayed")
        if not signing.matches(self.key, msg_id, stamp, body, signature):
            raise WebhookRejected("no webhook-signature matches: wrong secret or altered body")
        try:
            payload = msgspec.json.decode(body, type=dict[str, Any])
        except msgspec.MsgspecError as exc:
            raise InvalidInput(f"the webhook body is not a JSON object: {exc}") from exc
        return Message(id=msg_id, timestamp=datetime.fromtimestamp(int(stamp), UTC),
                       payload=payload, body=body)

    def receive(self, body: bytes, headers: Mapping[str, str],
                apply: Callable[[Message], None]) -> bool:
        """Verify, then `apply` once per webhook-id: True if applied now, False for a
        duplicate. Raises WebhookRejected (not authentic or not fresh), or what `apply`
        raised (then the id is not recorded, so a retry applies it)."""
        message = self.verify(body, headers)
        with self._transaction() as db:
            if db.execute("SELECT 1 FROM waypost_received WHERE id = ?",
                          (message.id,)).fetchone():
                return False
            apply(message)
            now = self.clock()
            db.execute("INSERT INTO waypost_received (id, received_at) VALUES (?, ?)",
                       (message.id, now))
            db.execute("DELETE FROM waypost_received WHERE received_at < ?",
                       (now - self.retention,))
        return True

    def handle(self, body: bytes, headers: Mapping[str, str],
               apply: Callable[[Message], None]) -> tuple[int, str]:
        """`receive`, as an HTTP status and a short text for the response."""
        try:
            applied = self.receive(body, headers, apply)
        except WebhookRejected as exc:
            return 401, exc.message
        except WebhookTooLarge as exc:
            return 413, exc.message
        except InvalidInput as exc:
            return 400, exc.message
        except Exception as exc:  # the sender will retry with the same webhook-id
            return 500, f"not applied: {type(exc).__name__}"
        return 200, "applied" if applied else "duplicate: already applied"

    def seen(self, msg_id: str) -> bool:
        with self._lock:
            return self.db.execute("SELECT 1 FROM waypost_received WHERE id = ?",
                                   (msg_id,)).fetchone() is not None

    def close(self) -> None:
        with self._lock:
            self.db.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                yield self.db
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
            self.db.execute("COMMIT")


def _headers(headers: Mapping[str, str]) -> tuple[str, str, str]:
    """webhook-id, webhook-timestamp and webhook-signature: present, printable ASCII (as
    Standard Webhooks writes them) and short, else WebhookRejected, never a crash."""
    lower = {str(k).lower(): v for k, v in headers.items()}
    values = []
    for name, limit in MAX_HEADER.items():
        value = lower.get(name, "")
        if not isinstance(value, str) or not value.strip():
            raise WebhookRejected("missing webhook-id, webhook-timestamp or webhook-signature")
        if len(value) > limit:
            raise WebhookRejected(f"{name} is longer than {limit} characters")
        if not (value.isascii() and value.isprintable()):
            raise WebhookRejected(f"{name} is not printable ASCII")
        values.append(value.strip())
    msg_id, stamp, signature = values
    return msg_id, stamp, signature
