"""The slack: and slack-webhook: targets against a local Slack Web API that fails on
command (`tests.fake_services.FakeSlack`): one message per delivery, whatever was lost."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from tests.delivery_support import (
    PRIVATE,
    PUBLIC,
    approved_run,
    delivery_failed,
    drain_until_settled,
    fast,
)
from tests.fake_services import FakeSlack
from tests.helpers import FakeClock
from waypost.core import receipts
from waypost.core.reviewed import result_digest
from waypost.delivery.relay import Relay
from waypost.model import (
    BlockerKind,
    DeliveryAssurance,
    DeliveryStatus,
    EvidenceKind,
    Kind,
    Purpose,
    State,
    Verdict,
)
from waypost.store import Store, open_store
from waypost.usecases import runs, starting

TOKEN = "xoxb-test-token"
CHANNEL = "C0WAYPOST1"


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Store]:
    with open_store(str(tmp_path / ".waypost" / "w.db")) as store:
        yield store


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack(TOKEN, channels=(CHANNEL,)).running() as server:
        yield server


def relay(db: Store, clock: FakeClock, slack: FakeSlack, **settings: Any) -> Relay:
    values: dict[str, Any] = {"slack_token": TOKEN, "slack_api": slack.url, "timeout": 2.0}
    values.update(settings)
    return Relay(db, settings=fast(**values), relay_id="relay:t", clock=clock, rand=lambda: 1.0)


def final_row(db: Store, run_id: str) -> Any:
    return next(d for d in db.deliveries([run_id]) if d.purpose is Purpose.FINAL)


def test_the_final_result_is_posted_once_with_its_metadata_and_an_upsert_receipt(
        db: Store, clock: FakeClock, slack: FakeSlack) -> None:
    run_id = approved_run(db, clock, target=f"slack:{CHANNEL}")
    [done] = relay(db, clock, slack).drain()
    [message] = slack.messages()
    assert message["metadata"] == {"event_type": "waypost_delivery", "event_payload": {
        "delivery": f"{run_id}.final", "run": run_id}}
    assert PUBLIC in message["text"]
    assert "ACME-7731" not in message["text"]
    assert PRIVATE not in message["text"]
    packet = db.get(run_id)
    assert packet.state is State.DELIVERED
    assert packet.receipt is not None
    assert packet.receipt.assurance is DeliveryAssurance.UPSERT
    stored = receipts.read(done.receipt)
    assert stored is not None
    assert stored.refs == {"channel": CHANNEL, "ts": message["ts"]}


@pytest.mark.parametrize("fault", ["accept_drop", "accept_timeout"])
def test_an_accepted_but_unanswered_post_is_found_by_its_metadata_not_posted_again(
        db: Store, clock: FakeClock, slack: FakeSlack, fault: str) -> None:
    run_id = approved_run(db, clock, target=f"slack:{CHANNEL}")
    slack.channels[CHANNEL].extend({"type": "message", "ts": f"1.{n}", "text": "chatter"}
                                   for n in range(40))  # the check pages through these
    slack.fail("chat.postMessage", fault)
    [first] = relay(db, clock, slack).drain()
    assert first.status is DeliveryStatus.QUEUED
    assert first.outcome_unknown_at is not None
    drain_until_settled(relay(db, clock, slack), clock)
    assert len(slack.messages(run_id)) == 1
    assert db.get(run_id).state is State.DELIVERED
    said = receipts.read(final_row(db, run_id).receipt)
    assert said is not None
    assert said.said.startswith("Slack: already posted as ts=")


def test_a_429_on_the_duplicate_check_waits_and_never_posts(
        db: Store, clock: FakeClock, slack: FakeSlack) -> None:
    run_id = approved_run(db, clock, target=f"slack:{CHANNEL}")
    slack.fail("chat.postMessage", "accept_drop")
    slack.history_limited = 2
    worker = relay(db, clock, slack, max_delay=120.0, horizon=600.0)
    worker.drain()
    clock.now = final_row(db, run_id).next_attempt_at
    [checked] = worker.drain()
    assert checked.status is DeliveryStatus.QUEUED
    assert "still unknown, so nothing was posted" in (checked.last_error or "")
    assert checked.next_attempt_at - clock.now >= timedelta(seconds=30)  # its Retry-After
    assert len(slack.messages(run_id)) == 1
    drain_until_settled(worker, clock)
    assert len(slack.messages(run_id)) == 1
    assert db.get(run_id).state is State.DELIVERED


def _blocked_on_input(db: Store, clock: FakeClock, slack: FakeSlack) -> Blocked:
    """A run noticed in Slack (target and notify one channel), blocked on missing input."""
    uri = f"slack:{CHANNEL}"
    run, _ = starting.start(db, "Ship the fix", actor="alice", owner="alice", target=uri,
                            notify=uri, kind=Kind.LONG_RUNNING, max_silence=3600, clock=clock)
    worker = runs.Run(db, run.id, actor="w1", clock=clock)
    worker.claim()
    sender = relay(db, clock, slack)
    _, blocker = worker.block(BlockerKind.MISSING_INPUT, "which staging host?")
    sender.drain()
    [notice] = slack.messages(run.id)
    return Blocked(run.id, worker, sender, blocker, notice)


class Blocked(NamedTuple):
    run: str
    worker: runs.Run
    sender: Relay
    blocker: str
    notice: dict[str, Any]


def test_notices_update_one_message_and_the_final_result_goes_in_its_thread(
        db: Store, clock: FakeClock, slack: FakeSlack) -> None:
    run_id, worker, sender, blocker, notice = _blocked_on_input(db, clock, slack)
    runs.Run(db, run_id, actor="alice", clock=clock).unblock(blocker, "staging-2")
    worker.report_evidence(EvidenceKind.TEST, Verdict.PASSED, "pytest -q: 3 passed")
    worker.ready(PRIVATE, public_summary=PUBLIC)
    sender.drain()
    assert [m["ts"] for m in slack.messages(run_id)] == [notice["ts"]]
    assert "ready for review" in slack.messages(run_id)[0]["text"]
    owner = runs.Run(db, run_id, actor="alice", clock=clock)
    owner.review()
    owner.approve()
    sender.drain()
    top, reply = slack.messages(run_id)
    assert (top["ts"], reply.get("thread_ts")) == (notice["ts"], notice["ts"])
    assert PUBLIC in reply["text"]
    assert db.get(run_id).state is State.DELIVERED


@pytest.mark.parametrize(("settings", "channel", "named"), [
    ({}, "C0NOTHERE9", "channel_not_found"),
    ({"slack_token": "xoxb-revoked"}, CHANNEL, "Slack refused the bot token"),
    ({"slack_token": None}, CHANNEL, "SLACK_BOT_TOKEN is not set"),
])
def test_a_permanent_error_or_a_bad_or_missing_token_blocks_in_one_pass(
        db: Store, clock: FakeClock, slack: FakeSlack, settings: dict[str, Any],
        channel: str, named: str) -> None:
    run_id = approved_run(db, clock, target=f"slack:{channel}")
    [done] = relay(db, clock, slack, **settings).drain()
    assert done.status is DeliveryStatus.FAILED
    assert named in delivery_failed(db, run_id).detail
    assert slack.messages() == []


@pytest.mark.parametrize("fault", ["500", "429", "drop"])
def test_transient_failures_back_off_and_then_deliver_once(
        db: Store, clock: FakeClock, slack: FakeSlack, fault: str) -> None:
    run_id = approved_run(db, clock, target=f"slack:{CHANNEL}")
    slack.fail("chat.postMessage", fault)
    [first] = relay(db, clock, slack).drain()
    assert first.status is DeliveryStatus.QUEUED
    if fault == "429":
        assert first.next_attempt_at - clock.now >= timedelta(seconds=1)  # Retry-After: 1
    drain_until_settled(relay(db, clock, slack), clock)
    assert len(slack.messages(run_id)) == 1


def test_an_incoming_webhook_is_at_least_once_and_its_url_is_never_shown(
        db: Store, clock: FakeClock, slack: FakeSlack) -> None:
    run_id = approved_run(db, clock, target=f"slack-webhook:{slack.hook}")
    slack.fail("/services/", "accept_drop")
    [first] = relay(db, clock, slack).drain()
    assert "the Slack incoming webhook" in (first.last_error or "")
    assert "not-a-real-secret" not in (first.last_error or "")
    drain_until_settled(relay(db, clock, slack), clock)
    assert len(slack.hook_posts) == 2  # no way to check: the duplicate is real, and said
    packet = db.get(run_id)
    assert packet.receipt is not None
    assert packet.receipt.assurance is DeliveryAssurance.AT_LEAST_ONCE
    assert "not-a-real-secret" not in packet.receipt.detail


def test_a_slack_webhook_notify_target_gets_each_notice(
        db: Store, clock: FakeClock, slack: FakeSlack) -> None:
    run_id = approved_run(db, clock, notify=f"slack-webhook:{slack.hook}")
    relay(db, clock, slack).drain()
    [text] = slack.hook_posts
    assert f"run {run_id} is ready for review" in text
    assert PRIVATE not in text


def test_text_from_the_packet_can_never_mention_everyone_or_open_a_link(
        db: Store, clock: FakeClock, slack: FakeSlack) -> None:
    approved_run(db, clock, target=f"slack:{CHANNEL}",
                 title="<!channel> see <https://evil.example|the fix> & more")
    relay(db, clock, slack).drain()
    [message] = slack.messages()
    assert "<!channel>" not in message["text"]
    assert "<https://" not in message["text"]
    assert "&lt;!channel&gt; see &lt;https://evil.example|the fix&gt; &amp; more" in \
        message["text"]


def buttons(message: dict[str, Any]) -> dict[str, str]:
    """action_id -> value of every button of `message`."""
    return {e["action_id"]: e["value"] for b in message.get("blocks") or ()
            if b["type"] == "actions" for e in b["elements"]}


def test_a_waiting_notice_carries_buttons_bound_to_what_it_shows(
        db: Store, clock: FakeClock, slack: FakeSlack) -> None:
    run_id, worker, sender, blocker, notice = _blocked_on_input(db, clock, slack)
    assert buttons(notice) == {
        "waypost_send": json.dumps({"run": run_id, "blocker": blocker}, separators=(",", ":")),
        "waypost_cancel": json.dumps({"run": run_id}, separators=(",", ":"))}
    assert [b["block_id"] for b in notice["blocks"] if b["type"] == "input"] == \
        ["waypost_input"]
    assert notice["blocks"][0]["text"]["text"] == notice["text"]
    runs.Run(db, run_id, actor="alice", clock=clock).unblock(blocker, "staging-2")
    worker.report_evidence(EvidenceKind.TEST, Verdict.PASSED, "pytest -q: 3 passed")
    worker.ready(PRIVATE, public_summary=PUBLIC)
    sender.drain()
    [updated] = slack.messages(run_id)
    digest = result_digest(db.get(run_id))
    value = json.dumps({"run": run_id, "reviewed": digest}, separators=(",", ":"))
    assert buttons(updated) == {"waypost_review": value, "waypost_approve": value,
                                "waypost_changes": value, "waypost_cancel": value}
    assert PRIVATE not in json.dumps(updated)
    owner = runs.Run(db, run_id, actor="alice", clock=clock)
    owner.review()
    owner.approve()
    sender.drain()
    _, final = slack.messages(run_id)
    assert "blocks" not in final  # the final result waits for nobody


def test_an_incoming_webhook_notice_links_the_runs_page_on_the_board(
        db: Store, clock: FakeClock, slack: FakeSlack) -> None:
    run_id = approved_run(db, clock, notify=f"slack-webhook:{slack.hook}")
    relay(db, clock, slack, board_url="https://board.example/").drain()
    [text] = slack.hook_posts
    assert text.endswith(f"answer on the board: <https://board.example/runs/{run_id}|{run_id}>")
