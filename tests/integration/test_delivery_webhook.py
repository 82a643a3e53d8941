"""Webhook delivery against a real HTTP server on 127.0.0.1; every request is checked with
the official `standardwebhooks` library."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from tests.delivery_support import (
    PRIVATE,
    PUBLIC,
    Request,
    Responder,
    WebhookServer,
    approved_run,
    delivery_failed,
    drain_until_settled,
    fast,
    new_secret,
)
from tests.helpers import Cli, FakeClock
from waypost.core import outbox, receipts
from waypost.delivery.receiver import Message, Receiver
from waypost.delivery.relay import Relay
from waypost.delivery.webhook import NO_SECRET
from waypost.durations import utcnow
from waypost.model import DeliveryAssurance, DeliveryStatus, State
from waypost.store import Store, open_store


@pytest.fixture
def secret() -> str:
    return new_secret()


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Store]:
    with open_store(str(tmp_path / "w.db")) as store:
        yield store


@pytest.fixture
def now_clock() -> FakeClock:
    """A fake clock starting at the real time: receivers check webhook-timestamp against it."""
    return FakeClock(utcnow())


def scripted(*statuses: int) -> Responder:
    """Answer these statuses first, then 200."""
    answers = list(statuses)

    def respond(request: Request) -> tuple[int, bytes]:
        return (answers.pop(0) if answers else 200), b"thanks"

    return respond


def relay_env(secret: str) -> dict[str, str]:
    return {**os.environ, "WAYPOST_WEBHOOK_SECRET": secret}


def test_three_500s_then_the_fourth_attempt_delivers_under_one_webhook_id(
        db: Store, now_clock: FakeClock, secret: str) -> None:
    respond = scripted(500, 500, 500)
    with WebhookServer(secret, respond).running() as server:
        run_id = approved_run(db, now_clock, target=server.url)
        relay = Relay(db, settings=fast(webhook_secret=secret), clock=now_clock,
                      rand=lambda: 1.0)
        drain_until_settled(relay, now_clock)
    assert server.rejected == []
    assert server.ids() == [outbox.final_key(run_id)] * 4
    assert [p["type"] for p in server.verified] == ["final"] * 4
    assert server.verified[0]["data"]["public_summary"] == PUBLIC
    assert PRIVATE not in str(server.verified[0])
    packet = db.get(run_id)
    assert packet.state is State.DELIVERED
    assert packet.receipt is not None
    assert (packet.receipt.attempts, packet.receipt.detail) == (4, "HTTP 200 OK: thanks")


def test_410_gone_blocks_and_unblock_requeues_under_the_original_key(
        cli: Cli, secret: str) -> None:
    cli.ok("init")
    respond = scripted(410)
    with WebhookServer(secret, respond).running() as server, \
            open_store(str(cli.store)) as store:
        clock = FakeClock(utcnow())
        run_id = approved_run(store, clock, target=server.url)
        relay = Relay(store, settings=fast(webhook_secret=secret), clock=clock)
        [failed] = relay.drain()
        assert failed.status is DeliveryStatus.FAILED
        blocker = delivery_failed(store, run_id)
        assert server.url in blocker.detail
        assert "HTTP 410 Gone" in blocker.detail
        assert "delivery_failed" in cli.ok("show", run_id)
        cli.ok("unblock", run_id, blocker.id, "--resolution", "endpoint re-enabled")
        assert store.get(run_id).state is State.APPROVED
        clock.now = utcnow()  # the CLI's unblock re-queued it as of the real time
        [again] = relay.drain()
    assert again.status is DeliveryStatus.SENT
    assert server.ids() == [outbox.final_key(run_id)] * 2
    assert server.rejected == []
    assert "delivered to http://127.0.0.1:" in cli.ok("show", run_id)


def test_no_secret_means_nothing_is_sent_and_the_reason_is_shown(
        db: Store, now_clock: FakeClock, secret: str) -> None:
    with WebhookServer(secret).running() as server:
        approved_run(db, now_clock, target=server.url)
        [row] = Relay(db, settings=fast(), clock=now_clock).drain()
    assert server.ids() == []
    assert row.status is DeliveryStatus.QUEUED
    assert row.last_error == NO_SECRET


def test_a_relay_killed_mid_send_is_resent_under_the_same_id_and_applied_once(
        db: Store, tmp_path: Path, secret: str) -> None:
    receiver = Receiver(secret, tmp_path / "received.db")
    applied: list[Message] = []
    arrived, release = threading.Event(), threading.Event()

    def respond(request: Request) -> tuple[int, bytes]:
        status, text = receiver.handle(request.body, request.headers, applied.append)
        if not arrived.is_set():
            arrived.set()  # applied; now stall so the relay dies before it hears back
            release.wait(30)
        return status, text.encode()

    with WebhookServer(secret, respond).running() as server:
        run_id = approved_run(db, FakeClock(utcnow()), target=server.url)
        proc = subprocess.Popen(
            [sys.executable, "-m", "waypost", "deliver", "--once", "--timeout", "30s",
             "--store", str(db.url)], env=relay_env(secret),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            assert arrived.wait(30), "the relay never sent the webhook"
            proc.kill()
            proc.wait(10)
        finally:
            release.set()
        [row] = [d for d in db.deliveries([run_id]) if d.key == outbox.final_key(run_id)]
        assert (row.status, row.attempts) == (DeliveryStatus.QUEUED, 1)
        assert db.get(run_id).state is State.APPROVED
        settings = fast(webhook_secret=secret, timeout=30.0)
        after_lease = Relay(db, settings=settings,
                            clock=lambda: utcnow() + timedelta(seconds=settings.lease + 1))
        [resent] = after_lease.drain()
    receiver.close()
    assert server.rejected == []
    assert server.ids() == [outbox.final_key(run_id)] * 2
    assert [m.id for m in applied] == [outbox.final_key(run_id)]
    assert resent.status is DeliveryStatus.SENT
    assert receipts.read(resent.receipt) == receipts.SentReceipt(
        said="HTTP 200 OK: duplicate: already applied", assurance=DeliveryAssurance.KEYED)
    assert db.get(run_id).state is State.DELIVERED


@pytest.mark.slow
def test_two_relays_racing_over_200_runs_send_each_webhook_id_once(
        db: Store, secret: str) -> None:
    with WebhookServer(secret).running() as server:
        clock = FakeClock(utcnow())
        run_ids = [approved_run(db, clock, target=server.url, title=f"run {i}")
                   for i in range(200)]
        command = [sys.executable, "-m", "waypost", "deliver", "--once", "--store",
                   str(db.url)]
        relays = [subprocess.Popen(command, env=relay_env(secret), stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True) for _ in range(2)]
        outputs = [proc.communicate(timeout=120) for proc in relays]
    assert [proc.returncode for proc in relays] == [0, 0], [err for _, err in outputs]
    ids = server.ids()
    assert sorted(ids) == sorted(outbox.final_key(r) for r in run_ids)
    assert len(set(ids)) == len(ids) == 200
    assert server.rejected == []
    assert {p.state for p in db.list_runs()} == {State.DELIVERED}
    sent_lines = sum(out.count(": sent (HTTP 200") for out, _ in outputs)
    assert sent_lines == 200


def test_the_daemon_retries_delivers_and_stops_cleanly_on_sigterm(
        db: Store, secret: str) -> None:
    respond = scripted(500, 500, 500)
    with WebhookServer(secret, respond).running() as server:
        proc = subprocess.Popen(
            [sys.executable, "-m", "waypost", "deliver", "--backoff-base", "0.2s",
             "--interval", "0.1s", "--store", str(db.url)],
            env=relay_env(secret), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            run_id = approved_run(db, FakeClock(utcnow()), target=server.url)
            deadline = time.monotonic() + 30
            while db.get(run_id).state is not State.DELIVERED:
                assert time.monotonic() < deadline, "not delivered within 30 s"
                time.sleep(0.05)
            assert [r.pid for r in db.relays(now=utcnow())] == [proc.pid]
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=20)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 0, err
    assert out.strip().endswith("stopped")
    assert out.count("next in") == 3
    assert server.ids() == [outbox.final_key(run_id)] * 4
    assert db.relays(now=utcnow()) == []
