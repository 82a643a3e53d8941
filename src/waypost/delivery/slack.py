"""`slack:CHANNEL_ID` through the Slack Web API, and `slack-webhook:URL` (incoming webhooks).

Slack offers no idempotency key, so "once" is built from what it does offer:

- every message carries `metadata` (`event_type` waypost_delivery, `event_payload`: the
  delivery and the run); before any retry (an earlier attempt may have been accepted
  although no answer came back, or its relay died mid-send) the channel's recent history
  (`conversations.history`, or `conversations.replies` in a thread) is searched for the
  delivery, and what is found is not posted again. A 429 on that search means "the outcome
  is still unknown, wait": it never means "post";
- a run's notices update one message (`chat.update` by the `ts` the first notice's receipt
  holds); the final result is posted once as its own message (an edit notifies nobody), in
  that notice message's thread when the notices went to the same channel.

The receipt's assurance is `upsert`. An incoming webhook can be neither searched nor
updated: its receipt says `at_least_once`, and its URL (a secret) is never shown.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from waypost.core import receipts
from waypost.delivery.base import Outgoing, Target
from waypost.delivery.connections import Connections
from waypost.delivery.policy import (
    Attempt,
    Outcome,
    for_slack,
    for_status,
    missing_credential,
    sent,
)
from waypost.delivery.rest import Answer, Api, Failed
from waypost.delivery.settings import DeliverySettings
from waypost.delivery.slack_blocks import notice_blocks
from waypost.model import Delivery, DeliveryAssurance, DeliveryStatus, Purpose

EVENT_TYPE = "waypost_delivery"
HISTORY_PAGES = 5  # pages of recent history searched for an earlier attempt (bounded)
HISTORY_SLACK = timedelta(minutes=5)  # searched from this long before the delivery was queued
MAX_TEXT = 3500  # characters of a message's text (Slack truncates past 40,000)
UPSERT = DeliveryAssurance.UPSERT
NO_TOKEN = "SLACK_BOT_TOKEN is not set (nor [delivery] slack_token)"


class SlackTarget(Target):
    def __init__(self, uri: str, *, token: str | None, api: str, timeout: float,
                 connections: Connections | None = None) -> None:
        self.uri = uri
        self.channel = uri.removeprefix("slack:")
        self.token = token
        self.base = api
        self.timeout = timeout
        self.connections = connections

    def send(self, outgoing: Outgoing, *, at: datetime) -> Attempt:
        if not self.token:
            return missing_credential(NO_TOKEN)
        headers = {"authorization": f"Bearer {self.token}"}
        try:
            with Api(self.base, headers, timeout=self.timeout, at=at,
                     connections=self.connections) as api:
                return self._send(api, outgoing)
        except Failed as failed:
            return failed.attempt

    def _send(self, api: Api, outgoing: Outgoing) -> Attempt:
        delivery = outgoing.delivery
        notice_ts = notice_message(outgoing)
        if delivery.purpose is Purpose.NOTICE and notice_ts is not None:
            return self._update(api, outgoing, notice_ts)
        thread = notice_ts if delivery.purpose is Purpose.FINAL else None
        if delivery.attempts > 1:  # an earlier attempt may have been accepted
            found = self._find(api, delivery, thread)
            if found is not None:
                return sent(f"Slack: already posted as ts={found} in {self.channel} (found "
                            "by its metadata; not posted again)", UPSERT, self._refs(found))
        return self._post(api, outgoing, thread)

    def _refs(self, ts: str) -> dict[str, str]:
        return {"channel": self.channel, "ts": ts}

    def _post(self, api: Api, outgoing: Outgoing, thread: str | None) -> Attempt:
        body = {"channel": self.channel, **content(outgoing.document),
                "metadata": metadata(outgoing.delivery), "unfurl_links": False}
        if thread is not None:
            body["thread_ts"] = thread
        data = slack_ok(api.call("POST", "/chat.postMessage", body=body), "chat.postMessage")
        ts = str(data.get("ts", ""))
        where = f" in the thread of {thread}" if thread else ""
        return sent(f"Slack: posted ts={ts} in {self.channel}{where}", UPSERT, self._refs(ts))

    def _update(self, api: Api, outgoing: Outgoing, ts: str) -> Attempt:
        body = {"channel": self.channel, "ts": ts, **content(outgoing.document),
                "metadata": metadata(outgoing.delivery)}
        answer = api.call("POST", "/chat.update", body=body)
        if isinstance(answer.data, dict) and answer.data.get("error") == "message_not_found":
            return self._post(api, outgoing, None)  # someone deleted it: a new one
        slack_ok(answer, "chat.update")
        return sent(f"Slack: updated ts={ts} in {self.channel}", UPSERT, self._refs(ts))

    def _find(self, api: Api, delivery: Delivery, thread: str | None) -> str | None:
        """The ts of a message carrying `delivery` in the recent history (or the thread)."""
        method = "conversations.replies" if thread else "conversations.history"
        params = {"channel": self.channel, "include_all_metadata": "true", "limit": "100"}
        if thread:
            params["ts"] = thread
        else:
            oldest = delivery.created_at - HISTORY_SLACK
            params["oldest"] = f"{oldest.timestamp():.6f}"
        for _ in range(HISTORY_PAGES):
            answer = api.call("GET", f"/{method}", params=params)
            if answer.status == 429:
                raise Failed(_still_unknown(method, answer.retry_after))
            data = slack_ok(answer, method)
            for message in data.get("messages") or ():
                if _carries(message, delivery.key):
                    return str(message.get("ts"))
            cursor = (data.get("response_metadata") or {}).get("next_cursor")
            if not cursor:
                return None
            params["cursor"] = str(cursor)
        return None


def update_message(settings: DeliverySettings, channel: str, ts: str, text: str,
                   blocks: list[dict[str, Any]], *, at: datetime) -> None:
    """Replace the text and blocks of the message `ts` in `channel` (an answer's outcome
    shown where it was given); `Failed` when Slack refuses or cannot be reached."""
    if not settings.slack_token:
        raise Failed(missing_credential(NO_TOKEN))
    headers = {"authorization": f"Bearer {settings.slack_token}"}
    body = {"channel": channel, "ts": ts, "text": text, "blocks": blocks}
    with Api(settings.slack_api, headers, timeout=settings.timeout, at=at) as api:
        slack_ok(api.call("POST", "/chat.update", body=body), "chat.update")


def _still_unknown(method: str, wait: float | None) -> Attempt:
    attempt = for_slack(method, "ratelimited", wait)
    detail = (f"{attempt.detail}: whether an earlier attempt was posted is still unknown, "
              "so nothing was posted; waiting")
    return Attempt(outcome=attempt.outcome, detail=detail, retry_after=wait,
                   outcome_unknown=True)


def _carries(message: Any, key: str) -> bool:
    meta = message.get("metadata") if isinstance(message, dict) else None
    if not isinstance(meta, dict) or meta.get("event_type") != EVENT_TYPE:
        return False
    payload = meta.get("event_payload")
    return isinstance(payload, dict) and payload.get("delivery") == key


def slack_ok(answer: Answer, method: str) -> dict[str, Any]:
    """The answer's data when Slack said `ok: true`; else `Failed`, classified."""
    if answer.status == 429:
        raise Failed(for_slack(method, "ratelimited", answer.retry_after))
    if not answer.ok:
        raise Failed(for_status(answer.status, f"{answer.reason} (Slack {method})",
                                answer.retry_after))
    data = answer.data
    if not isinstance(data, dict):
        raise Failed(for_slack(method, "the answer was not JSON"))
    if data.get("ok") is not True:
        raise Failed(for_slack(method, str(data.get("error", "unknown error")),
                               answer.retry_after))
    return data


def metadata(delivery: Delivery) -> dict[str, Any]:
    return {"event_type": EVENT_TYPE,
            "event_payload": {"delivery": delivery.key, "run": delivery.run_id}}


def notice_message(outgoing: Outgoing) -> str | None:
    """The ts of the message the run's notices to this same target live in, if sent."""
    target = outgoing.delivery.target
    for earlier in sorted(outgoing.earlier, key=lambda d: (d.created_at, d.key)):
        if earlier.purpose is Purpose.NOTICE and earlier.status is DeliveryStatus.SENT \
                and earlier.target == target:
            found = receipts.read(earlier.receipt)
            if found is not None and found.refs.get("ts"):
                return found.refs["ts"]
    return None


def content(document: dict[str, Any]) -> dict[str, Any]:
    """A message's `text` and, for a notice, its `blocks`: the text again and the buttons
    an owner answers with (`slack_blocks`). The text stays the fallback notifications show."""
    text = message_text(document)
    if document["type"] != "notice":
        return {"text": text}
    return {"text": text, "blocks": notice_blocks(text, document["data"])}


def message_text(document: dict[str, Any]) -> str:
    """The message: the final result in a few lines, or the notice with its next step."""
    data = document["data"]
    head = f"*{escape(data['title'])}* (run `{data['run']}`)"
    if document["type"] == "notice":
        lines = [head, escape(data.get("message", "")), f"next: `{escape(data['next'])}`"]
    else:
        verdicts: dict[str, int] = {}
        for evidence in data["evidence"]:
            verdicts[evidence["verdict"]] = verdicts.get(evidence["verdict"], 0) + 1
        tally = ", ".join(f"{n} {v}" for v, n in sorted(verdicts.items())) or "none"
        lines = [f"{head}: final result, {data['state']}",
                 escape(data.get("public_summary") or "(no public summary was given)"),
                 f"evidence: {tally}; artifacts: {len(data['artifacts'])}",
                 f"fetch: `{escape(data['fetch'])}`"]
    text = "\n".join(line for line in lines if line)
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT - 1] + "…"


def escape(text: str) -> str:
    """Slack's three control characters as entities: text can never open a link or mention."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class SlackWebhookTarget(Target):
    """An incoming webhook: a POST of the message text; at-least-once (nothing to search)."""

    def __init__(self, url: str, *, timeout: float, board: str | None = None,
                 connections: Connections | None = None) -> None:
        self.url = url
        self.timeout = timeout
        self.board = board  # an incoming webhook has no buttons: a notice links the board
        self.connections = connections

    def send(self, outgoing: Outgoing, *, at: datetime) -> Attempt:
        where = "the Slack incoming webhook"  # its URL is a secret: never shown
        try:
            with Api(self.url, {}, timeout=self.timeout, at=at, shown_as=where,
                     connections=self.connections) as api:
                answer = api.call("POST", self.url, body={"text": self._text(outgoing)})
        except Failed as failed:
            return failed.attempt
        attempt = for_status(answer.status, f"{answer.reason} ({where})", answer.retry_after)
        if attempt.outcome is Outcome.SENT:
            return sent(f"{where}: {attempt.detail}", DeliveryAssurance.AT_LEAST_ONCE)
        return attempt

    def _text(self, outgoing: Outgoing) -> str:
        """The message; a notice gets a link to the run's page on the board, where the
        owner answers (when the board's address is configured)."""
        text = message_text(outgoing.document)
        if outgoing.document["type"] != "notice" or not self.board:
            return text
        page = f"{self.board.rstrip('/')}/runs/{outgoing.delivery.run_id}"
        return f"{text}\nanswer on the board: <{escape(page)}|{outgoing.delivery.run_id}>"
