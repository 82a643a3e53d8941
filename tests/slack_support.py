"""Slack's side of a click, for tests: the `block_actions` request Slack sends when someone
clicks a button of a message (built from the message's own blocks, as a local Slack holds
them), form-encoded and signed as Slack signs it, with an HMAC computed here, apart from
the code under test."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import time
import urllib.parse
from typing import Any

import httpx

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"  # Slack's documented example signing secret
SECRET_ENV = "SLACK_SIGNING_SECRET"
_TRIGGERS = itertools.count(1)


def headers(body: bytes, *, secret: str = SECRET, at: float | None = None) -> dict[str, str]:
    """The headers Slack sends with `body`: its timestamp and `v0=` signature."""
    stamp = str(int(time.time() if at is None else at))
    mac = hmac.new(secret.encode(), b"v0:" + stamp.encode() + b":" + body, hashlib.sha256)
    return {"content-type": "application/x-www-form-urlencoded",
            "x-slack-request-timestamp": stamp, "x-slack-signature": "v0=" + mac.hexdigest()}


def button(message: dict[str, Any], action_id: str) -> dict[str, Any]:
    """The button `action_id` of `message` (it must have one)."""
    found = [e for b in message.get("blocks") or () if b["type"] == "actions"
             for e in b["elements"] if e["action_id"] == action_id]
    assert found, f"no {action_id} button on {message.get('blocks')}"
    pressed: dict[str, Any] = found[0]
    return pressed


def click(message: dict[str, Any], action_id: str, *, user: str, channel: str,
          typed: dict[str, str] | None = None, trigger: str | None = None) -> bytes:
    """The form body of Slack's block_actions request for a click on `action_id`, with
    `typed` (block_id -> text) in the message's input blocks."""
    pressed = button(message, action_id)
    values: dict[str, Any] = {}
    for block in message.get("blocks") or ():
        if block["type"] == "input":
            element = block["element"]
            text = (typed or {}).get(block["block_id"])
            values[block["block_id"]] = {element["action_id"]: {
                "type": element["type"], "value": text}}
    now = f"{time.time():.6f}"
    payload = {
        "type": "block_actions", "user": {"id": user, "username": "someone",
                                          "name": "someone", "team_id": "T0WAY"},
        "api_app_id": "A0WAYPOST", "token": "verification-token-unused",
        "container": {"type": "message", "message_ts": message["ts"], "channel_id": channel,
                      "is_ephemeral": False},
        "trigger_id": trigger or f"{next(_TRIGGERS)}.4744.{int(time.time() * 1e6):x}",
        "team": {"id": "T0WAY", "domain": "waypost"},
        "channel": {"id": channel, "name": "waypost"},
        "message": {"type": "message", "ts": message["ts"], "text": message["text"],
                    "blocks": message.get("blocks") or []},
        "state": {"values": values},
        "response_url": "https://hooks.slack.com/actions/T0WAY/1/not-used",
        "actions": [{"action_id": action_id, "block_id": "waypost_answers",
                     "text": pressed["text"], "value": pressed["value"], "type": "button",
                     "action_ts": now}],
    }
    return b"payload=" + urllib.parse.quote_plus(json.dumps(payload)).encode()


def send(url: str, body: bytes, *, secret: str = SECRET,
         at: float | None = None) -> httpx.Response:
    """POST `body` to the server's /slack/actions, signed as Slack signs it."""
    return httpx.post(url + "/slack/actions", content=body,
                      headers=headers(body, secret=secret, at=at), timeout=30)
