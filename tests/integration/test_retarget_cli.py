"""`waypost retarget` end to end: a final delivery that failed for good goes to a new target
once, under the same key; what may not be retargeted is refused with nothing changed; and an
attempt whose outcome is unknown (a real receiver on 127.0.0.1 that reads the request and
never answers) guards the move until the owner accepts a duplicate."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import pytest

from tests.delivery_support import new_secret
from tests.helpers import Cli
from waypost.delivery.base import Outgoing
from waypost.delivery.targets import ExecTarget
from waypost.delivery.webhook import WebhookTarget
from waypost.model import Delivery, DeliveryStatus, Purpose
from waypost.store import open_store

GUARD = 30.0  # seconds: a hang guard, far above what any step here takes


@contextmanager
def silent_receiver() -> Iterator[str]:
    """An HTTP receiver on 127.0.0.1 that reads each request and never answers."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()
    held: list[socket.socket] = []

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            conn.settimeout(GUARD)
            conn.recv(65536)  # the request (or its start): then silence
            held.append(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/hook"
    finally:
        stop.set()
        thread.join(timeout=GUARD)
        for conn in held:
            conn.close()
        listener.close()


def _approved(cli: Cli, target: str) -> str:
    run = cli.ok("start", "Fix the flaky test", "--target", target, "--kind", "long_running",
                 "--max-silence", "30m")
    cli.ok("claim", run, actor="w1")
    cli.ok("evidence", "skip", run, "--kind", "test", "--reason", "no suite here", actor="w1")
    cli.ok("ready", run, "--summary", "fixed", actor="w1")
    cli.ok("review", run)
    cli.ok("approve", run)
    return run


def _final(cli: Cli, run: str) -> Delivery:
    with open_store(str(cli.store)) as store:
        [row] = [d for d in store.deliveries([run]) if d.purpose is Purpose.FINAL]
        return row


def _state(cli: Cli, run: str) -> tuple[int, Delivery | None, int]:
    """What a refusal must leave as it was: the packet's version, the final row, the log."""
    with open_store(str(cli.store)) as store:
        finals = [d for d in store.deliveries([run]) if d.purpose is Purpose.FINAL]
        return store.get(run).version, (finals[0] if finals else None), len(store.events(run))


def test_a_failed_delivery_is_retargeted_and_delivered_once_with_the_same_key(
        cli: Cli, tmp_path: Path) -> None:
    run = _approved(cli, "exec:no-such-command-waypost")
    assert cli("deliver", "--once").code == 3  # failed for good: the run is blocked
    assert cli.ok("show", run, "--json").count('"state":"blocked"') == 1

    moved = cli("retarget", run, "file:result.md", "--json")
    assert moved.code == 0, moved.err
    document = moved.json()
    assert (document["state"], document["target"]) == ("approved", "file:result.md")
    assert (document["delivery"]["key"], document["delivery"]["status"]) == (
        f"{run}.final", "queued")

    sent = cli("deliver", "--once", "--json")
    assert sent.code == 0, sent.err
    [attempt] = sent.json()["attempted"]
    assert (attempt["key"], attempt["status"], attempt["target"]) == (
        f"{run}.final", "sent", "file:result.md")
    assert cli("deliver", "--once", "--json").json()["attempted"] == []  # once
    assert (tmp_path / "result.md").is_file()
    log = cli.ok("log", run)
    assert "retargeted" in log
    assert "target → file:result.md" in log
    assert cli.ok("verify").startswith("ok")


@pytest.mark.parametrize("end", ["delivered", "cancelled"])
def test_a_finished_run_is_refused_with_exit_3(cli: Cli, end: str) -> None:
    run = _approved(cli, "file:result.md")
    if end == "delivered":
        cli.ok("deliver", "--once")
    else:
        cli.ok("cancel", run, "--reason", "not needed")
    refused = cli("retarget", run, "file:other.md", "--json")
    assert refused.code == 3
    assert f"is {end}: cannot retarget" in refused.error()["message"]
    assert f"waypost show {run}" in refused.error()["hint"]


def test_only_the_owner_may_retarget(cli: Cli) -> None:
    run = _approved(cli, "file:result.md")
    before = _state(cli, run)
    refused = cli("retarget", run, "file:other.md", "--json", actor="w1")
    assert refused.code == 3
    assert refused.error()["hint"] == (
        f"ask the owner, alice, to run: waypost retarget {run} URI --as alice")
    assert refused.error()["next"] == {
        "verb": "retarget", "run": run, "args": {}, "fill": ["target"], "actor": "alice",
        "command": f"waypost retarget {run} URI --as alice"}
    assert _state(cli, run) == before


@pytest.mark.parametrize("args", [("file:../outside.md",), ("ftp://x/y",),
                                  ("--notify", "file:.waypost/x"), ()])
def test_a_bad_uri_exits_2_and_stores_nothing(cli: Cli, args: tuple[str, ...]) -> None:
    run = _approved(cli, "file:result.md")
    before = _state(cli, run)
    refused = cli("retarget", run, *args, "--json")
    assert refused.code == 2, refused.err
    assert refused.error()["hint"]
    assert _state(cli, run) == before


def test_a_final_delivery_being_sent_is_refused_with_exit_5(cli: Cli) -> None:
    run = _approved(cli, "file:result.md")
    with open_store(str(cli.store)) as store:
        store.claim_deliveries("relay:busy", now=datetime.now().astimezone(), lease_s=300)
    before = _state(cli, run)
    refused = cli("retarget", run, "file:other.md", "--json")
    assert refused.code == 5
    assert "a relay is sending it now" in refused.error()["message"]
    assert f"waypost show {run}" in refused.error()["hint"]
    assert _state(cli, run) == before


def test_an_unknown_outcome_is_refused_until_a_duplicate_is_accepted(
        cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WAYPOST_WEBHOOK_SECRET", new_secret())
    with silent_receiver() as url:
        run = _approved(cli, url)
        tried = cli("deliver", "--once", "--timeout", "1s", "--json")
    assert tried.code == 0, tried.err  # retried later: not failed for good
    row = _final(cli, run)
    assert (row.status, row.attempts) == (DeliveryStatus.QUEUED, 1)
    assert row.outcome_unknown_at == row.last_attempt_at is not None
    assert "outcome unknown since" in cli.ok("show", run)

    before = _state(cli, run)
    refused = cli("retarget", run, "file:result.md", "--json")
    assert refused.code == 3
    assert "is unknown" in refused.error()["message"]
    assert "--accept-duplicate" in refused.error()["hint"]
    assert _state(cli, run) == before

    cli.ok("retarget", run, "file:result.md", "--accept-duplicate")
    assert "duplicate accepted (the old target may already have the result)" in \
        cli.ok("log", run)
    [event] = [e for e in cli("log", run, "--json").json()["events"]
               if e["data"]["type"] == "retargeted"]
    assert event["data"] == {"type": "retargeted", "target": "file:result.md",
                             "notify": None, "accept_duplicate": True}
    assert f"{url} may already have the result" in cli.ok("show", run)
    [sent] = cli("deliver", "--once", "--json").json()["attempted"]
    assert (sent["key"], sent["status"], sent["target"]) == (f"{run}.final", "sent",
                                                             "file:result.md")
    assert (tmp_path / "result.md").is_file()
    assert cli.ok("verify").startswith("ok")


def _outgoing(target: str) -> Outgoing:
    at = datetime.now().astimezone()
    delivery = Delivery(key="wp_x.final", run_id="wp_x", purpose=Purpose.FINAL,
                        topic="approved", target=target, event_seq=1, created_at=at,
                        queued_at=at, status=DeliveryStatus.QUEUED, attempts=1,
                        next_attempt_at=at)
    return Outgoing(delivery=delivery, document={"run": "wp_x"})


def test_a_webhook_with_no_answer_is_unknown_one_never_reached_is_not() -> None:
    with silent_receiver() as url:
        hung = WebhookTarget(url, secret=new_secret(), timeout=0.5).send(
            _outgoing(url), at=datetime.now().astimezone())
    assert hung.outcome_unknown, hung.detail
    with socket.create_server(("127.0.0.1", 0)) as closed:
        port = closed.getsockname()[1]
    refused = WebhookTarget(f"http://127.0.0.1:{port}/", secret=new_secret(), timeout=2).send(
        _outgoing("x"), at=datetime.now().astimezone())
    assert not refused.outcome_unknown, refused.detail


def test_an_exec_target_cut_off_at_its_timeout_is_unknown() -> None:
    cut = ExecTarget("sleep 20", timeout=0.3).send(_outgoing("exec:sleep 20"),
                                                   at=datetime.now().astimezone())
    assert cut.outcome_unknown, cut.detail
    failed = ExecTarget("false", timeout=5).send(_outgoing("exec:false"),
                                                 at=datetime.now().astimezone())
    assert not failed.outcome_unknown
