"""Structured receipts (`core.receipts`), the classifier's Slack, GitHub and SMTP rows
(`delivery.policy`), the service settings, and an old `delivered` event's hash."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from waypost.core import receipts
from waypost.core.history import event_hash
from waypost.delivery.policy import Outcome, for_github, for_slack, for_smtp
from waypost.delivery.settings import DeliverySettings, load_settings, missing_credential
from waypost.events import Delivered, Event
from waypost.model import DeliveryAssurance, from_json

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_a_structured_receipt_round_trips_and_an_old_plain_one_still_reads() -> None:
    made = receipts.SentReceipt(said="Slack: posted ts=1.2 in C1",
                                assurance=DeliveryAssurance.UPSERT,
                                refs={"channel": "C1", "ts": "1.2"})
    assert receipts.read(receipts.encode(made)) == made
    assert receipts.read("HTTP 200 OK") == receipts.SentReceipt(said="HTTP 200 OK")
    assert receipts.read("{not json at all") == receipts.SentReceipt(said="{not json at all")
    assert receipts.read(None) is None
    assert receipts.shown(receipts.encode(made)) == "Slack: posted ts=1.2 in C1 [upsert]"
    assert receipts.shown("wrote r.md") == "wrote r.md"


@given(st.text(max_size=200))
def test_any_stored_text_reads_as_a_receipt(text: str) -> None:
    found = receipts.read(text)
    assert found is not None
    assert found.said == text or text.startswith("{")


def test_an_old_delivered_event_hashes_as_it_did_before_receipts_said_their_assurance(
) -> None:
    old = from_json(b'{"type":"delivered","key":"wp_1.final","detail":"HTTP 200",'
                    b'"attempts":1}', Delivered)
    assert old.assurance is None
    before = msgspec.json.encode(["0" * 64, "wp_1", 9, NOW, "relay:x", None,
                                  {"type": "delivered", "key": "wp_1.final",
                                   "detail": "HTTP 200", "attempts": 1}])
    assert event_hash(prev_hash="0" * 64, run_id="wp_1", seq=9, at=NOW, actor="relay:x",
                      epoch=None, data=old) == hashlib.sha256(before).hexdigest()
    new = Delivered(key="wp_1.final", detail="x", attempts=1,
                    assurance=DeliveryAssurance.KEYED)
    event = Event(run_id="wp_1", seq=9, at=NOW, actor="relay:x", epoch=None, data=new,
                  prev_hash="0" * 64, hash="h")
    assert from_json(msgspec.json.encode(event), Event).data == new


@pytest.mark.parametrize(("error", "outcome", "said"), [
    ("channel_not_found", Outcome.GIVE_UP, "channel_not_found"),
    ("invalid_auth", Outcome.GIVE_UP, "SLACK_BOT_TOKEN"),
    ("token_revoked", Outcome.GIVE_UP, "SLACK_BOT_TOKEN"),
    ("missing_scope", Outcome.GIVE_UP, "channels:history"),
    ("ratelimited", Outcome.RETRY, "ratelimited"),
    ("internal_error", Outcome.RETRY, "internal_error"),
    ("something_new", Outcome.RETRY, "something_new"),
])
def test_slack_errors(error: str, outcome: Outcome, said: str) -> None:
    attempt = for_slack("chat.postMessage", error, 3.0)
    assert attempt.outcome is outcome
    assert said in attempt.detail


RESET = str(int(NOW.timestamp()) + 90)


@pytest.mark.parametrize(("status", "remaining", "reset", "retry_after", "outcome", "said"), [
    (403, "0", RESET, None, Outcome.RETRY, "rate limited"),
    (429, None, None, 7.0, Outcome.RETRY, "rate limited"),
    (403, "12", RESET, None, Outcome.GIVE_UP, "may not do this"),
    (404, None, None, None, Outcome.GIVE_UP, "repository not found, or the token cannot see"),
    (401, None, None, None, Outcome.GIVE_UP, "GITHUB_TOKEN"),
    (422, None, None, None, Outcome.GIVE_UP, "422"),
    (502, None, None, None, Outcome.RETRY, "502"),
])
def test_github_answers(status: int, remaining: str | None, reset: str | None,
                        retry_after: float | None, outcome: Outcome, said: str) -> None:
    attempt = for_github(status, "Reason", remaining=remaining, reset=reset,
                         retry_after=retry_after, now=NOW)
    assert attempt.outcome is outcome
    assert said in attempt.detail
    if remaining == "0":
        assert attempt.retry_after == 90.0  # until x-ratelimit-reset
    elif retry_after is not None:
        assert attempt.retry_after == retry_after


@pytest.mark.parametrize(("code", "outcome"), [
    (535, Outcome.GIVE_UP), (550, Outcome.GIVE_UP), (553, Outcome.GIVE_UP),
    (451, Outcome.RETRY), (421, Outcome.RETRY),
])
def test_smtp_replies(code: int, outcome: Outcome) -> None:
    assert for_smtp(code, "said", "the server").outcome is outcome


def test_credentials_come_from_the_environment_over_config_and_are_named_when_missing(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for env in ("SLACK_BOT_TOKEN", "GITHUB_TOKEN", "WAYPOST_SMTP_URL", "WAYPOST_SMTP_FROM",
                "GITHUB_API_URL", "WAYPOST_SLACK_API"):
        monkeypatch.delenv(env, raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "waypost.toml").write_text(
        '[delivery]\ngithub_token = "from-config"\n'
        'github_api = "https://ghe.example/api/v3"\n')
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-env")
    settings = load_settings()
    assert (settings.slack_token, settings.github_token, settings.github_api) == (
        "xoxb-env", "from-config", "https://ghe.example/api/v3")
    monkeypatch.setenv("GITHUB_TOKEN", "from-env")
    assert load_settings().github_token == "from-env"
    assert "xoxb" not in repr(settings)
    bare = DeliverySettings()
    assert missing_credential("slack:C0123ABCD", bare) == \
        "SLACK_BOT_TOKEN is not set (nor [delivery] slack_token)"
    assert missing_credential("github-status:o/r@" + "a" * 40, bare) == \
        "GITHUB_TOKEN is not set (nor [delivery] github_token)"
    assert "WAYPOST_SMTP_URL" in (missing_credential("mailto:a@b.example", bare) or "")
    assert missing_credential("slack-webhook:https://hooks.slack.com/x", bare) is None
    assert missing_credential("file:r.md", bare) is None
