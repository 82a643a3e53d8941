"""Answers from Slack, end to end with real parts: the relay posts a notice with buttons to a
local Slack, a click comes back to a real `waypost serve` as Slack sends it (form-encoded,
signed), the server's answers thread carries it out and updates the message; on SQLite and
PostgreSQL. Every refusal leaves the store as it was."""

from __future__ import annotations

import contextlib
import copy
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import pg, slack_support
from tests.delivery_support import PRIVATE, PUBLIC, fast
from tests.fake_services import FakeSlack
from tests.http_support import serving_app
from tests.parity.dump import dump
from waypost.config import Config
from waypost.core.reviewed import result_digest
from waypost.delivery import slack_blocks
from waypost.delivery.relay import Relay
from waypost.events import ChangesRequested
from waypost.http.settings import ServerConfig
from waypost.model import BlockerKind, EvidenceKind, Kind, State, Verdict
from waypost.store import Store
from waypost.usecases import answers, runs, starting
from waypost.usecases.answers import Outcome

TOKEN = "xoxb-test-token"
CHANNEL = "C0WAYPOST1"
OWNER, WORKER, STRANGER = "UOWNER1", "UWORKER1", "USTRANGER1"
CONFIG = Config(slack_users=((OWNER, "alice"), (WORKER, "w1")))
WAIT = 20.0  # seconds the answers thread may take to carry one answer out


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with contextlib.ExitStack() as stack:
        if request.param == "postgres":
            yield stack.enter_context(pg.fresh_schema())
        else:
            yield str(tmp_path / ".waypost" / "w.db")


@pytest.fixture
def slack(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeSlack]:
    monkeypatch.chdir(tmp_path)
    with FakeSlack(TOKEN, channels=(CHANNEL,)).running() as server:
        monkeypatch.setenv("SLACK_SIGNING_SECRET", slack_support.SECRET)
        monkeypatch.setenv("SLACK_BOT_TOKEN", TOKEN)
        monkeypatch.setenv("WAYPOST_SLACK_API", server.url)
        yield server


@pytest.fixture
def served(url: str, slack: FakeSlack) -> Iterator[tuple[str, Store]]:
    """The server's base URL, and the store it serves (its own connection)."""
    with serving_app(ServerConfig(store_url=url, project=CONFIG)) as (app, base):
        yield base, app.state.store


def relay(store: Store, slack: FakeSlack) -> Relay:
    return Relay(store, settings=fast(slack_token=TOKEN, slack_api=slack.url, timeout=5.0),
                 relay_id="relay:t")


def ready_run(store: Store, slack: FakeSlack) -> str:
    """A run ready for review whose notice (with its buttons) is in the channel."""
    uri = f"slack:{CHANNEL}"
    run, _ = starting.start(store, "Fix the flaky login test", actor="alice", owner="alice",
                            target=uri, notify=uri, kind=Kind.LONG_RUNNING, max_silence=3600)
    worker = runs.Run(store, run.id, actor="w1")
    worker.claim()
    worker.report_evidence(EvidenceKind.TEST, Verdict.PASSED, "pytest -q: 42 passed")
    worker.ready(PRIVATE, public_summary=PUBLIC)
    relay(store, slack).drain()
    return run.id


def message(slack: FakeSlack, run: str) -> dict[str, Any]:
    top = [m for m in slack.messages(run) if "thread_ts" not in m]
    assert len(top) == 1
    return copy.deepcopy(top[0])  # as it is now: Slack's own copy changes on an update


def digest_on(message: dict[str, Any], action_id: str) -> str:
    value: str = json.loads(slack_support.button(message, action_id)["value"])["reviewed"]
    return value


def outcome(store: Store, key: str) -> Outcome:
    deadline = time.monotonic() + WAIT
    while (found := answers.outcome_of(store, key)) is None:
        assert time.monotonic() < deadline, f"{key} was not carried out"
        time.sleep(0.05)
    return found


def click(base: str, msg: dict[str, Any], action_id: str, *, user: str = OWNER,
          trigger: str, **extra: Any) -> None:
    body = slack_support.click(msg, action_id, user=user, channel=CHANNEL, trigger=trigger,
                               **extra)
    answered = slack_support.send(base, body)
    assert answered.status_code == 200, answered.text
    assert answered.content == b""


def without_answers(url: str) -> dict[str, list[str]]:
    """The store but its answers queue: what every door's refusal must leave as it was."""
    return {table: rows for table, rows in dump(url).items() if table != "answers"}


def test_review_then_approve_by_buttons_delivers_the_result(
        url: str, slack: FakeSlack, served: tuple[str, Store]) -> None:
    base, store = served
    run = ready_run(store, slack)
    first = message(slack, run)
    assert digest_on(first, slack_blocks.APPROVE) == result_digest(store.get(run))
    click(base, first, slack_blocks.REVIEW, trigger="1.review")
    reviewed = outcome(store, "slack:1.review")
    assert reviewed.ok, reviewed
    after_review = message(slack, run)
    assert ":white_check_mark: <@UOWNER1> reviewed: alice" in after_review["text"]
    assert after_review["text"].startswith(first["text"])
    fresh = digest_on(after_review, slack_blocks.APPROVE)
    assert fresh == result_digest(store.get(run)) != digest_on(first, slack_blocks.APPROVE)
    click(base, after_review, slack_blocks.APPROVE, trigger="2.approve")
    assert outcome(store, "slack:2.approve").ok
    approved = message(slack, run)
    assert "<@UOWNER1> approved" in approved["text"]
    assert not [b for b in approved["blocks"] if b["type"] == "actions"]  # nothing to answer
    packet = store.get(run)
    assert packet.state is State.APPROVED
    assert packet.approval is not None
    assert packet.approval.by == "alice"
    relay(store, slack).drain()
    assert store.get(run).state is State.DELIVERED
    [final] = [m for m in slack.messages(run) if m.get("thread_ts")]
    assert PUBLIC in final["text"]


@pytest.mark.parametrize("url", ["sqlite"], indirect=True)  # both stores: conformance
def test_request_changes_with_a_typed_reason_or_cancel_without_one(
        url: str, slack: FakeSlack, served: tuple[str, Store]) -> None:
    base, store = served
    run = ready_run(store, slack)
    first = message(slack, run)
    click(base, first, slack_blocks.CHANGES, trigger="1.changes",
          typed={slack_blocks.REASON_BLOCK: "the summary names no test"})
    assert outcome(store, "slack:1.changes").ok
    packet = store.get(run)
    assert packet.state is State.IN_PROGRESS
    [asked] = [e.data for e in store.events(run) if isinstance(e.data, ChangesRequested)]
    assert asked.reason == "the summary names no test"
    assert not [b for b in message(slack, run)["blocks"] if b["type"] == "actions"]
    click(base, first, slack_blocks.CANCEL, trigger="2.cancel")  # Cancel needs no digest
    assert outcome(store, "slack:2.cancel").ok
    packet = store.get(run)
    assert packet.state is State.CANCELLED
    assert "from Slack by UOWNER1" in (packet.cancel_reason or "")


@pytest.mark.parametrize("url", ["sqlite"], indirect=True)  # both stores: conformance
def test_forged_stale_replayed_or_unmapped_requests_change_nothing(
        url: str, slack: FakeSlack, served: tuple[str, Store]) -> None:
    base, store = served
    run = ready_run(store, slack)
    msg = message(slack, run)
    body = slack_support.click(msg, slack_blocks.REVIEW, user=OWNER, channel=CHANNEL,
                               trigger="9.review")
    before = dump(url)
    forged = slack_support.send(base, body, secret="not-the-signing-secret")
    assert forged.status_code == 401
    assert "X-Slack-Signature does not match" in forged.text
    stale = slack_support.send(base, body, at=time.time() - 301)
    assert stale.status_code == 401
    assert "more than 300s" in stale.text
    assert dump(url) == before
    assert slack_support.send(base, body).status_code == 200  # the same, signed now: acts
    assert outcome(store, "slack:9.review").ok
    assert len(store.get(run).reviews) == 1
    before = dump(url)
    again = slack_support.send(base, body)  # replayed, freshly signed: stored once already
    assert again.status_code == 200
    assert dump(url) == before
    assert len(store.get(run).reviews) == 1
    stranger = slack_support.click(msg, slack_blocks.APPROVE, user=STRANGER,
                                   channel=CHANNEL, trigger="10.stranger")
    refused = slack_support.send(base, stranger)
    assert refused.status_code == 200
    assert "USTRANGER1> is not mapped" in refused.json()["text"]
    assert dump(url) == before


def test_the_workers_identity_and_an_outdated_message_are_refused_saying_why(
        url: str, slack: FakeSlack, served: tuple[str, Store]) -> None:
    """Refused by the run's rules as it stands: decided before anything is stored (the
    whole store, its answers queue included, is as it was) and shown on the message."""
    base, store = served
    run = ready_run(store, slack)
    first = message(slack, run)
    before = dump(url)
    click(base, first, slack_blocks.APPROVE, user=WORKER, trigger="1.worker")
    said = refused_on(slack, run, "<@UWORKER1> approve: not done (not_authorized)")
    assert "the run's own worker" in said
    assert store.answer_row("slack:1.worker") is None
    assert dump(url) == before
    click(base, first, slack_blocks.REVIEW, trigger="2.review")
    assert outcome(store, "slack:2.review").ok
    before = dump(url)
    click(base, first, slack_blocks.APPROVE, trigger="3.outdated")  # the first message's
    said = refused_on(slack, run, "approve: not done (result_changed)")
    assert "is not the run's result" in said
    assert "alice ran a review" in said
    assert store.answer_row("slack:3.outdated") is None
    assert dump(url) == before
    shown = message(slack, run)
    assert digest_on(shown, slack_blocks.APPROVE) == result_digest(store.get(run))


def refused_on(slack: FakeSlack, run: str, needle: str) -> str:
    """The run's message once it shows a refusal saying `needle` (bounded wait)."""
    deadline = time.monotonic() + WAIT
    while needle not in (text := str(message(slack, run)["text"])):
        assert time.monotonic() < deadline, f"the message never said {needle!r}: {text}"
        time.sleep(0.02)
    return text


def test_without_a_signing_secret_the_route_takes_nothing(
        url: str, slack: FakeSlack, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLACK_SIGNING_SECRET")
    with serving_app(ServerConfig(store_url=url, project=CONFIG)) as (app, base):
        store = app.state.store
        run = ready_run(store, slack)
        body = slack_support.click(message(slack, run), slack_blocks.APPROVE, user=OWNER,
                                   channel=CHANNEL)
        before = dump(url)
        answered = slack_support.send(base, body)
        assert answered.status_code == 503
        assert "SLACK_SIGNING_SECRET is not set" in answered.text
        assert slack_support.SECRET not in answered.text
        assert dump(url) == before


@pytest.mark.parametrize("url", ["sqlite"], indirect=True)  # both stores: conformance
def test_a_body_that_is_not_a_form_or_too_large_is_refused_before_it_is_read(
        url: str, slack: FakeSlack, served: tuple[str, Store]) -> None:
    import httpx

    base, _ = served
    body = b'{"payload": {}}'
    headers = {**slack_support.headers(body), "content-type": "application/json"}
    assert httpx.post(base + "/slack/actions", content=body,
                      headers=headers).status_code == 415
    big = b"payload=" + b"x" * (70 * 1024)
    assert slack_support.send(base, big).status_code == 413
    assert slack_support.send(base, b"payload=%7B%7D").status_code == 422


@pytest.mark.parametrize("url", ["sqlite"], indirect=True)  # both stores: conformance
def test_the_input_a_run_is_blocked_on_is_typed_in_slack(
        url: str, slack: FakeSlack, served: tuple[str, Store]) -> None:
    base, store = served
    uri = f"slack:{CHANNEL}"
    run, _ = starting.start(store, "Deploy to staging", actor="alice", owner="alice",
                            target=uri, notify=uri, kind=Kind.LONG_RUNNING, max_silence=3600)
    worker = runs.Run(store, run.id, actor="w1")
    worker.claim()
    _, blocker = worker.block(BlockerKind.MISSING_INPUT, "which staging host?")
    relay(store, slack).drain()
    click(base, message(slack, run.id), slack_blocks.SEND, trigger="1.send",
          typed={slack_blocks.INPUT_BLOCK: "staging-2"})
    assert outcome(store, "slack:1.send").ok
    packet = store.get(run.id)
    assert packet.state is State.IN_PROGRESS
    [resolved] = [b for b in packet.blockers if b.id == blocker]
    assert resolved.resolution == "staging-2"
    assert "<@UOWNER1> sent the input" in message(slack, run.id)["text"]
