"""`waypost.delivery.receiver`: Standard Webhooks verification (cross-checked with the official
library's signer), timestamp tolerance, and durable once-only application."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import standardwebhooks

from tests.delivery_support import new_secret
from waypost.delivery import signing
from waypost.delivery.receiver import Message, Receiver, WebhookRejected
from waypost.errors import InvalidInput

BODY = json.dumps({"type": "final", "id": "wp_1.final", "data": {"run": "wp_1"}}).encode()


class Clock:
    def __init__(self) -> None:
        self.now = float(int(time.time()))  # whole seconds, like webhook-timestamp

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def secret() -> str:
    return new_secret()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def receiver(tmp_path: Path, secret: str, clock: Clock) -> Iterator[Receiver]:
    opened = Receiver(secret, tmp_path / "received.db", clock=clock)
    yield opened
    opened.close()


def signed(secret: str, at: float, msg_id: str = "wp_1.final",
           body: bytes = BODY) -> dict[str, str]:
    """Headers signed by the official standardwebhooks library."""
    moment = datetime.fromtimestamp(at, UTC)
    signature = standardwebhooks.Webhook(secret).sign(msg_id, moment, body.decode())
    return {"Webhook-Id": msg_id, "Webhook-Timestamp": str(int(at)),
            "Webhook-Signature": signature}


def test_a_message_signed_by_the_official_library_verifies(
        receiver: Receiver, secret: str, clock: Clock) -> None:
    message = receiver.verify(BODY, signed(secret, clock.now))
    assert (message.id, message.type) == ("wp_1.final", "final")
    assert message.payload["data"]["run"] == "wp_1"
    assert message.body == BODY


def test_our_signature_verifies_with_the_official_library(secret: str) -> None:
    stamp = str(int(time.time()))
    header = signing.signature(signing.secret_key(secret), "wp_1.final", stamp, BODY)
    headers = {"webhook-id": "wp_1.final", "webhook-timestamp": stamp,
               "webhook-signature": header}
    assert standardwebhooks.Webhook(secret).verify(BODY, headers)["id"] == "wp_1.final"


@pytest.mark.parametrize(("change", "reason"), [
    ({"Webhook-Signature": "v1,AAAA"}, "no webhook-signature matches"),
    ({"Webhook-Id": "wp_2.final"}, "no webhook-signature matches"),
    ({"Webhook-Timestamp": "12345"}, "stale or replayed"),
    ({"Webhook-Timestamp": "soon"}, "not unix seconds"),
    ({"Webhook-Id": ""}, "missing webhook-id"),
])
def test_forged_altered_or_stale_messages_are_rejected(
        receiver: Receiver, secret: str, clock: Clock, change: dict[str, str],
        reason: str) -> None:
    headers = {**signed(secret, clock.now), **change}
    with pytest.raises(WebhookRejected, match=reason):
        receiver.verify(BODY, headers)


def test_an_altered_body_or_another_secret_is_rejected(
        receiver: Receiver, secret: str, clock: Clock) -> None:
    with pytest.raises(WebhookRejected, match="altered body"):
        receiver.verify(BODY + b" ", signed(secret, clock.now))
    with pytest.raises(WebhookRejected, match="wrong secret"):
        receiver.verify(BODY, signed(new_secret(), clock.now))


def test_timestamps_within_the_tolerance_pass_outside_fail(
        receiver: Receiver, secret: str, clock: Clock) -> None:
    receiver.verify(BODY, signed(secret, clock.now - 299))
    receiver.verify(BODY, signed(secret, clock.now + 299))
    with pytest.raises(WebhookRejected, match="302 s away"):
        receiver.verify(BODY, signed(secret, clock.now + 302))


def test_a_resent_id_is_applied_once_even_after_a_restart(
        tmp_path: Path, secret: str, clock: Clock) -> None:
    applied: list[Message] = []
    first = Receiver(secret, tmp_path / "r.db", clock=clock)
    assert first.receive(BODY, signed(secret, clock.now), applied.append)
    first.close()
    clock.now += 3600  # the sender's retry, an hour later, with a fresh timestamp
    again = Receiver(secret, tmp_path / "r.db", clock=clock)
    assert not again.receive(BODY, signed(secret, clock.now), applied.append)
    assert again.handle(BODY, signed(secret, clock.now), applied.append) == (
        200, "duplicate: already applied")
    assert again.seen("wp_1.final")
    again.close()
    assert [m.id for m in applied] == ["wp_1.final"]


def test_a_failing_apply_is_not_recorded_so_the_retry_applies_it(
        receiver: Receiver, secret: str, clock: Clock) -> None:
    def broken(message: Message) -> None:
        receiver.db.execute("CREATE TABLE IF NOT EXISTS results (id TEXT)")
        receiver.db.execute("INSERT INTO results VALUES (?)", (message.id,))
        raise RuntimeError("downstream is down")

    assert receiver.handle(BODY, signed(secret, clock.now), broken) == (
        500, "not applied: RuntimeError")
    assert not receiver.seen("wp_1.final")

    def working(message: Message) -> None:
        receiver.db.execute("CREATE TABLE IF NOT EXISTS results (id TEXT)")
        receiver.db.execute("INSERT INTO results VALUES (?)", (message.id,))

    assert receiver.handle(BODY, signed(secret, clock.now), working) == (200, "applied")
    rows = receiver.db.execute("SELECT id FROM results").fetchall()
    assert rows == [("wp_1.final",)]  # the failed attempt's write was rolled back with it


def test_handle_maps_rejections_to_401_and_bad_json_to_400(
        receiver: Receiver, secret: str, clock: Clock) -> None:
    assert receiver.handle(BODY, {}, lambda m: None)[0] == 401
    body = b"[1, 2]"
    assert receiver.handle(body, signed(secret, clock.now, body=body), lambda m: None)[0] == 400


def test_ids_are_forgotten_only_after_the_retention(
        tmp_path: Path, secret: str, clock: Clock) -> None:
    receiver = Receiver(secret, tmp_path / "r.db", clock=clock, retention=7 * 86400)
    receiver.receive(BODY, signed(secret, clock.now), lambda m: None)
    clock.now += 3 * 86400  # the sender's whole default retry horizon
    other = b'{"type": "notice"}'
    receiver.receive(other, signed(secret, clock.now, "wp_1.5.blocked", other), lambda m: None)
    assert receiver.seen("wp_1.final")
    clock.now += 5 * 86400
    receiver.receive(other, signed(secret, clock.now, "wp_1.9.blocked", other), lambda m: None)
    assert not receiver.seen("wp_1.final")
    assert receiver.seen("wp_1.9.blocked")
    receiver.close()


def test_a_malformed_secret_is_refused_up_front(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="not a whsec_ secret"):
        Receiver("whsec_!!!", tmp_path / "r.db")


@pytest.mark.parametrize(("change", "reason"), [
    ({"Webhook-Timestamp": "\u00b2"}, "not printable ASCII"),
    ({"Webhook-Timestamp": "\u0661\u0667\u0660\u0660"}, "not printable ASCII"),
    ({"Webhook-Timestamp": "1700000000\u00e9"}, "not printable ASCII"),
    ({"Webhook-Timestamp": "9" * 5000}, "longer than 20 characters"),
    ({"Webhook-Id": "wp_1.final\u00e9"}, "not printable ASCII"),
    ({"Webhook-Id": "wp_\ud800"}, "not printable ASCII"),
    ({"Webhook-Id": "x" * 100_000}, "longer than 256 characters"),
    ({"Webhook-Signature": "v1,\u00e9\u00e9"}, "not printable ASCII"),
    ({"Webhook-Signature": "v1,AAAA " * 10_000}, "longer than 4096 characters"),
    ({"Webhook-Id": "wp_1\nfinal"}, "not printable ASCII"),
    ({"Webhook-Signature": "   "}, "missing"),
])
def test_every_bad_header_is_a_401_never_a_500(
        receiver: Receiver, secret: str, clock: Clock, change: dict[str, str],
        reason: str) -> None:
    headers = {**signed(secret, clock.now), **change}
    status, text = receiver.handle(BODY, headers, lambda m: None)
    assert (status, reason in text) == (401, True), text
    assert not receiver.seen("wp_1.final")


def test_a_body_over_the_limit_is_a_413_and_not_applied(
        tmp_path: Path, secret: str, clock: Clock) -> None:
    small = Receiver(secret, tmp_path / "r.db", clock=clock, max_body=1024)
    body = json.dumps({"type": "final", "pad": "x" * 2000}).encode()
    applied: list[Message] = []
    status, text = small.handle(body, signed(secret, clock.now, body=body), applied.append)
    assert (status, applied) == (413, [])
    assert "at most 1024" in text
    small.close()
