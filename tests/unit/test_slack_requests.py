"""Requests from Slack: the signature (with Slack's documented example), the time window,
and a click decoded from a block_actions payload built from a message's own blocks."""

from __future__ import annotations

import json
import urllib.parse
from datetime import UTC, datetime

import pytest

from tests import slack_support
from waypost.delivery import slack_blocks, slack_requests
from waypost.errors import InvalidInput, Unauthenticated
from waypost.http import slack_replies
from waypost.usecases.answers import Action, Answer, Outcome

# Slack's documented example ("Verifying requests from Slack"): secret, timestamp, body,
# and the signature Slack says it sends with them
EXAMPLE_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
EXAMPLE_TIMESTAMP = "1531420618"
EXAMPLE_BODY = (
    b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&"
    b"channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&"
    b"command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2F"
    b"commands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id="
    b"398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c")
EXAMPLE_SIGNATURE = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
NOW = float(EXAMPLE_TIMESTAMP)
DIGEST = "sha256:" + "ab" * 32


def test_slacks_documented_example_signs_and_verifies() -> None:
    assert slack_requests.signature(EXAMPLE_SECRET, EXAMPLE_TIMESTAMP,
                                    EXAMPLE_BODY) == EXAMPLE_SIGNATURE
    slack_requests.verify(EXAMPLE_SECRET, EXAMPLE_TIMESTAMP, EXAMPLE_BODY,
                          EXAMPLE_SIGNATURE, now=NOW + 60)


def test_the_tests_own_slack_signs_as_the_documented_example() -> None:
    signed = slack_support.headers(EXAMPLE_BODY, secret=EXAMPLE_SECRET, at=NOW)
    assert signed["x-slack-signature"] == EXAMPLE_SIGNATURE


@pytest.mark.parametrize(("change", "said"), [
    ({"body": EXAMPLE_BODY + b"&x=1"}, "does not match"),
    ({"given": EXAMPLE_SIGNATURE[:-1] + "4"}, "does not match"),
    ({"given": EXAMPLE_SIGNATURE.upper()}, "does not match"),
    ({"secret": EXAMPLE_SECRET + "0"}, "does not match"),
    ({"given": None}, "no X-Slack-Signature"),
    ({"timestamp": None}, "no X-Slack-Signature"),
    ({"timestamp": "1531420618.5"}, "not a time"),
    ({"timestamp": "-1531420618"}, "not a time"),
    ({"timestamp": "1" * 5000}, "not a time"),  # more digits than int() takes
    ({"timestamp": "\u0661\u0665\u0663\u0661"}, "not a time"),  # Arabic-Indic digits
    ({"now": NOW + 301}, "more than 300s"),
    ({"now": NOW - 301}, "more than 300s"),
])
def test_a_forged_or_stale_request_is_refused_saying_why(change: dict[str, object],
                                                          said: str) -> None:
    args: dict[str, object] = {"secret": EXAMPLE_SECRET, "timestamp": EXAMPLE_TIMESTAMP,
                               "body": EXAMPLE_BODY, "given": EXAMPLE_SIGNATURE, "now": NOW}
    args.update(change)
    with pytest.raises(Unauthenticated, match=said):
        slack_requests.verify(args["secret"], args["timestamp"], args["body"],  # type: ignore[arg-type]
                              args["given"], now=args["now"])  # type: ignore[arg-type]


def test_the_edge_of_the_window_is_inside_it() -> None:
    for now in (NOW - 300, NOW + 300):
        slack_requests.verify(EXAMPLE_SECRET, EXAMPLE_TIMESTAMP, EXAMPLE_BODY,
                              EXAMPLE_SIGNATURE, now=now)


def ready_message() -> dict[str, object]:
    data = {"run": "wp_01RUN", "state": "ready_for_review", "reviewed": DIGEST}
    return {"ts": "1700000001.000001", "text": "*Fix it* (run `wp_01RUN`)",
            "blocks": slack_blocks.notice_blocks("*Fix it*", data)}


def test_each_button_of_a_ready_message_decodes_to_its_answer_with_the_digest() -> None:
    message = ready_message()
    for action_id, answer in [(slack_blocks.REVIEW, "review"),
                              (slack_blocks.APPROVE, "approve"),
                              (slack_blocks.CHANGES, "changes"),
                              (slack_blocks.CANCEL, "cancel")]:
        body = slack_support.click(message, action_id, user="U024BE7LH", channel="C0WAY",
                                   typed={slack_blocks.REASON_BLOCK: " too vague "},
                                   trigger="123.456.abc")
        found = slack_requests.interaction(body)
        assert found is not None
        assert (found.action, found.run, found.reviewed) == (answer, "wp_01RUN", DIGEST)
        assert (found.user, found.channel, found.ts) == ("U024BE7LH", "C0WAY",
                                                          "1700000001.000001")
        assert found.text == "too vague"
        assert found.key == "slack:123.456.abc"
        assert found.shown == "*Fix it* (run `wp_01RUN`)"


def test_an_empty_reason_is_none_and_a_missing_input_sends_what_was_typed() -> None:
    body = slack_support.click(ready_message(), slack_blocks.CANCEL, user="U1", channel="C1")
    found = slack_requests.interaction(body)
    assert found is not None
    assert found.text is None
    data = {"run": "wp_01RUN", "state": "blocked",
            "blocker": {"id": "b_7", "kind": "missing_input", "detail": "the API key"}}
    message = {"ts": "1.2", "text": "blocked", "blocks": slack_blocks.notice_blocks("b", data)}
    body = slack_support.click(message, slack_blocks.SEND, user="U1", channel="C1",
                               typed={slack_blocks.INPUT_BLOCK: "use the staging key"})
    found = slack_requests.interaction(body)
    assert found is not None
    assert (found.action, found.blocker, found.text) == ("input", "b_7", "use the staging key")
    assert found.reviewed is None


def test_only_a_waiting_message_with_a_digest_carries_buttons() -> None:
    assert slack_blocks.answers({"run": "r", "state": "ready_for_review"}) == []
    assert slack_blocks.answers({"run": "r", "state": "approved", "reviewed": DIGEST}) == []
    other = {"run": "r", "state": "blocked",
             "blocker": {"id": "b", "kind": "failed_command", "detail": "x"}}
    assert slack_blocks.answers(other) == []


def form(payload: object) -> bytes:
    return b"payload=" + urllib.parse.quote_plus(json.dumps(payload)).encode()


def test_another_apps_click_or_another_interaction_is_none() -> None:
    other = {"type": "block_actions", "user": {"id": "U1"}, "trigger_id": "1",
             "actions": [{"action_id": "their_button", "value": "x", "action_ts": "1"}]}
    assert slack_requests.interaction(form(other)) is None
    assert slack_requests.interaction(form({"type": "view_closed",
                                            "user": {"id": "U1"}})) is None


@pytest.mark.parametrize("body", [
    b"payload=%7B", b"nothing=here", b"payload=1&payload=2", b"\xff\xfe",
    form({"type": "block_actions", "user": {"id": "U1"}, "trigger_id": "1",
          "actions": [{"action_id": "waypost_approve", "value": "not json",
                       "action_ts": "1"}]}),
    form({"type": "block_actions", "user": {"id": "U1"}, "trigger_id": "1",
          "actions": [{"action_id": "waypost_approve", "value": '{"run":"r","x":1}',
                       "action_ts": "1"}]}),
    form({"type": "block_actions", "user": {"id": ""}, "trigger_id": "1",
          "container": {"message_ts": "1", "channel_id": "C"},
          "actions": [{"action_id": "waypost_approve", "value": '{"run":"r"}',
                       "action_ts": "1"}]}),
    form({"type": "block_actions", "user": {"id": "U1"}, "trigger_id": "1",
          "container": {"message_ts": "1", "channel_id": "C"},
          "actions": [{"action_id": "waypost_approve", "value": '{"run":"r"}',
                       "action_ts": "nan"}]}),
    b"payload=" + urllib.parse.quote_plus("[" * 100 + "]" * 100).encode(),
])
def test_a_malformed_payload_is_invalid_input(body: bytes) -> None:
    with pytest.raises(InvalidInput):
        slack_requests.interaction(body)


@pytest.mark.parametrize("user", ["U024BE7LH> is mapped. <@U0OWNER", "<!channel>",
                                  "u024be7lh", "U024BE7LH\u200b", "U024BE7LH|alice"])
def test_a_user_that_is_no_slack_user_id_is_refused(user: str) -> None:
    """Only a Slack user id names who clicked: nothing that would read as another user, a
    channel-wide mention or a display name when the outcome names them (`<@USER>`)."""
    body = slack_support.click(ready_message(), slack_blocks.APPROVE, user=user, channel="C1")
    with pytest.raises(InvalidInput, match="the payload's user is"):
        slack_requests.interaction(body)


@pytest.mark.parametrize("ok", [True, False])
def test_what_an_answer_said_is_shown_in_the_channel_as_text_never_as_a_mention(
        ok: bool) -> None:
    """A reason typed in the message (or anything an outcome repeats) cannot ping the
    channel, mention someone or open a link when the message is updated with it."""
    typed = "<!channel> see <https://evil.example|the fix> & <@U0OTHER>"
    answer = Answer(source="slack", key="slack:1", user="U024BE7LH", action=Action.CANCEL,
                    run="wp_01RUN", text=typed, at=datetime(2026, 1, 2, tzinfo=UTC))
    outcome = Outcome(ok=ok, said=f"alice (slack U024BE7LH): cancelled: {typed}",
                      code="ok" if ok else "conflict")
    shown = slack_replies.outcome_text(answer, outcome)
    assert "<!channel>" not in shown
    assert "<https://" not in shown
    assert "<@U0OTHER>" not in shown
    assert "&lt;!channel&gt;" in shown
    assert "<@U024BE7LH>" in shown  # who answered stays a mention
