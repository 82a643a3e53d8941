"""The mailto: target against a real SMTP server (`aiosmtpd`) on 127.0.0.1 that logs in
one user, refuses addresses and fails on command (`tests.fake_smtp.SmtpServer`)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.delivery_support import (
    PRIVATE,
    PUBLIC,
    approved_run,
    delivery_failed,
    drain_until_settled,
    fast,
)
from tests.fake_smtp import SmtpServer
from tests.helpers import FakeClock
from waypost.delivery.mail import smtp_server
from waypost.delivery.relay import Relay
from waypost.errors import InvalidInput
from waypost.model import DeliveryAssurance, DeliveryStatus, State
from waypost.store import Store, open_store

SENDER = "waypost@relay.example"
TO = "alice@example.com"


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Store]:
    with open_store(str(tmp_path / ".waypost" / "w.db")) as store:
        yield store


@pytest.fixture
def smtp() -> Iterator[SmtpServer]:
    with SmtpServer().running() as server:
        yield server


def relay(db: Store, clock: FakeClock, smtp: SmtpServer, **settings: Any) -> Relay:
    values: dict[str, Any] = {"smtp_url": smtp.url, "smtp_from": SENDER, "timeout": 2.0}
    values.update(settings)
    return Relay(db, settings=fast(**values), relay_id="relay:t", clock=clock, rand=lambda: 1.0)


def test_the_result_is_mailed_with_a_stable_message_id_and_the_public_parts_only(
        db: Store, clock: FakeClock, smtp: SmtpServer) -> None:
    run_id = approved_run(db, clock, target=f"mailto:{TO}")
    relay(db, clock, smtp).drain()
    [message] = smtp.received
    assert message["Message-ID"] == f"<{run_id}.final@relay.example>"
    assert (message["From"], message["To"]) == (SENDER, TO)
    body = message.get_payload(decode=True)
    assert isinstance(body, bytes)
    assert PUBLIC in body.decode()
    assert "ACME-7731" not in body.decode()
    assert PRIVATE not in body.decode()
    packet = db.get(run_id)
    assert packet.state is State.DELIVERED
    assert packet.receipt is not None
    assert packet.receipt.assurance is DeliveryAssurance.AT_LEAST_ONCE


def test_an_accepted_message_whose_answer_was_lost_may_arrive_twice_and_says_so(
        db: Store, clock: FakeClock, smtp: SmtpServer) -> None:
    run_id = approved_run(db, clock, target=f"mailto:{TO}")
    smtp.script.append("accept_timeout")
    [first] = relay(db, clock, smtp).drain()
    assert first.status is DeliveryStatus.QUEUED
    assert first.outcome_unknown_at is not None
    drain_until_settled(relay(db, clock, smtp), clock)
    assert smtp.message_ids() == [f"<{run_id}.final@relay.example>"] * 2
    packet = db.get(run_id)
    assert packet.receipt is not None
    assert packet.receipt.assurance is DeliveryAssurance.AT_LEAST_ONCE


@pytest.mark.parametrize("fault", ["451", "drop"])
def test_a_temporary_refusal_is_retried(db: Store, clock: FakeClock, smtp: SmtpServer,
                                        fault: str) -> None:
    run_id = approved_run(db, clock, target=f"mailto:{TO}")
    smtp.script.append(fault)
    [first] = relay(db, clock, smtp).drain()
    assert first.status is DeliveryStatus.QUEUED
    drain_until_settled(relay(db, clock, smtp), clock)
    assert smtp.message_ids() == [f"<{run_id}.final@relay.example>"]


@pytest.mark.parametrize(("settings", "named"), [
    ({"smtp_url": None}, "WAYPOST_SMTP_URL is not set"),
    ({"smtp_from": None}, "WAYPOST_SMTP_FROM is not set"),
    ({"password": "wrong"}, "refused the login"),
    ({"refuse": TO}, "the address alice@example.com: SMTP 550"),
    ({"smtp_url": "http://mail.example"}, "WAYPOST_SMTP_URL is not smtp://"),
])
def test_a_missing_or_bad_credential_or_a_refused_address_blocks_in_one_pass(
        db: Store, clock: FakeClock, smtp: SmtpServer, settings: dict[str, Any],
        named: str) -> None:
    run_id = approved_run(db, clock, target=f"mailto:{TO}")
    if "password" in settings:
        settings = {"smtp_url": smtp.url.replace(smtp.password, settings["password"])}
    if "refuse" in settings:
        smtp.refuse.add(settings.pop("refuse"))
    [done] = relay(db, clock, smtp, **settings).drain()
    assert done.status is DeliveryStatus.FAILED
    detail = delivery_failed(db, run_id).detail
    assert named in detail
    assert smtp.password not in detail
    assert smtp.received == []


def test_the_smtp_url_is_read_and_a_bad_one_refused_without_its_password() -> None:
    server = smtp_server("smtp://me%40corp:p%3Ass@mail.example:2525?starttls=1")
    assert (server.host, server.port, server.starttls, server.user, server.password) == (
        "mail.example", 2525, True, "me@corp", "p:ss")
    assert smtp_server("smtps://mail.example").port == 465
    assert smtp_server("smtp://mail.example").port == 25
    with pytest.raises(InvalidInput) as refused:
        smtp_server("smtp://u:hunter2@mail.example:99999")
    assert "hunter2" not in refused.value.message


def test_a_mailto_notify_target_gets_each_notice(db: Store, clock: FakeClock,
                                                  smtp: SmtpServer) -> None:
    run_id = approved_run(db, clock, notify=f"mailto:{TO}")  # ready_for_review: a notice
    relay(db, clock, smtp).drain()
    [notice] = smtp.received
    assert notice["Subject"] == "[waypost] Fix the flaky login test: ready_for_review"
    body = notice.get_payload(decode=True)
    assert isinstance(body, bytes)
    assert f"run {run_id} is ready for review" in body.decode()
    assert PRIVATE not in body.decode()


def _body(message: Any) -> str:
    body = message.get_payload(decode=True)
    assert isinstance(body, bytes)
    return str(body.decode())


LINK_SECRET = "l" * 40


def test_a_ready_for_review_mail_carries_the_owners_link_the_same_on_every_retry(
        db: Store, clock: FakeClock, smtp: SmtpServer) -> None:
    from waypost.core import links

    run_id = approved_run(db, clock, notify=f"mailto:{TO}")
    smtp.script.append("accept_timeout")  # kept, answer lost: the relay sends it again
    settings = {"board_url": "https://board.example/", "link_secret": LINK_SECRET}
    relay(db, clock, smtp, **settings).drain()
    drain_until_settled(relay(db, clock, smtp, **settings), clock)
    notices = [_body(m) for m in smtp.received if "ready_for_review" in m["Subject"]]
    assert len(notices) == 2
    found = [re.findall(r"https://board\.example/link/(\S+)", body) for body in notices]
    assert found[0] == found[1]
    assert len(found[0]) == 1
    link = links.read(found[0][0], LINK_SECRET, now=clock.now)
    assert (link.run, link.owner) == (run_id, "alice")
    [notice] = [d for d in db.deliveries([run_id]) if d.topic == "ready_for_review"]
    assert link.expires_at == notice.created_at.replace(microsecond=0) + timedelta(days=7)
    assert "signed in as alice for this run alone" in notices[0]


@pytest.mark.parametrize(("settings", "said"), [
    ({"board_url": "https://board.example"},
     "Review it on the board: https://board.example/runs/{run}"),
    ({"link_secret": LINK_SECRET}, "Review it where waypost runs, with the command below"),
])
def test_without_a_board_or_a_secret_the_mail_says_where_to_review_and_has_no_link(
        db: Store, clock: FakeClock, smtp: SmtpServer, settings: dict[str, Any],
        said: str) -> None:
    run_id = approved_run(db, clock, notify=f"mailto:{TO}")
    relay(db, clock, smtp, **settings).drain()
    [notice] = [_body(m) for m in smtp.received if "ready_for_review" in m["Subject"]]
    assert said.format(run=run_id) in notice
    assert "/link/" not in notice
    assert f"next: waypost review {run_id}" in notice


def test_the_links_lifetime_is_configured_and_its_secret_comes_from_the_environment_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from waypost.delivery.settings import load_settings

    (tmp_path / "waypost.toml").write_text('[delivery]\nlink_ttl = "2d"\n')
    monkeypatch.setenv("WAYPOST_LINK_SECRET", LINK_SECRET)
    settings = load_settings(tmp_path)
    assert (settings.link_ttl, settings.link_secret) == (2 * 86400.0, LINK_SECRET)
    assert LINK_SECRET not in repr(settings)
    monkeypatch.setenv("WAYPOST_LINK_SECRET", "short")
    with pytest.raises(InvalidInput, match="at least 32 characters"):
        load_settings(tmp_path)
    (tmp_path / "waypost.toml").write_text(f'[delivery]\nlink_secret = "{LINK_SECRET}"\n')
    with pytest.raises(InvalidInput, match="unknown key"):
        load_settings(tmp_path)
