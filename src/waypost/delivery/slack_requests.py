"""What Slack sends `waypost serve` when an owner clicks a button of a waypost message: a
signed request, and its `block_actions` payload decoded into a plain `Interaction`.

Slack signs each request with the app's signing secret: `X-Slack-Signature` is `v0=` and
the hex HMAC-SHA256 of `v0:{X-Slack-Request-Timestamp}:{the raw body}`. `verify` decides
it on the raw bytes, before anything is decoded, in constant time, and refuses a timestamp
more than five minutes from now either way (a replay of an old request, or a clock far
off). Pure: no HTTP stack, no store; the route that calls it is `waypost.http.slack_actions`.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import urllib.parse
from datetime import UTC, datetime
from typing import Final

import msgspec

from waypost import inputs
from waypost.delivery.slack_blocks import (
    ACTIONS,
    INPUT_BLOCK,
    INPUT_TEXT,
    REASON_BLOCK,
    REASON_INPUT,
)
from waypost.errors import InvalidInput, Unauthenticated

SECRET_ENV: Final = "SLACK_SIGNING_SECRET"
VERSION: Final = "v0"
TOLERANCE: Final = 300  # seconds a request's timestamp may be from now, either way
MAX_BODY: Final = 64 * 1024  # bytes of one interaction request (a message's blocks and all)
MAX_FIELD: Final = 255  # characters of an id Slack sends (user, trigger, channel, ts)
MAX_SHOWN: Final = 3500  # characters of a message's text kept to show it again
USER: Final = re.compile(r"[A-Z0-9]{2,32}")  # a Slack user id (U024BE7LH, W…)


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """The `X-Slack-Signature` Slack sends with `body` at `timestamp`."""
    base = f"{VERSION}:{timestamp}:".encode() + body
    return f"{VERSION}=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def verify(secret: str, timestamp: str | None, body: bytes, given: str | None, *,
           now: float) -> None:
    """Refuse (`Unauthenticated`) a request Slack did not sign with `secret`, or whose
    timestamp is more than `TOLERANCE` seconds from `now` (seconds since the epoch)."""
    if not timestamp or not given:
        raise Unauthenticated("the request carries no X-Slack-Signature and "
                              "X-Slack-Request-Timestamp: not from Slack; nothing was done")
    if not timestamp.isascii() or not timestamp.isdigit() or len(timestamp) > 12:
        raise Unauthenticated("X-Slack-Request-Timestamp is not a time in seconds; nothing "
                              "was done")
    if abs(now - int(timestamp)) > TOLERANCE:
        raise Unauthenticated(f"X-Slack-Request-Timestamp is {int(now) - int(timestamp)}s "
                              f"from now, more than {TOLERANCE}s: an old or replayed "
                              "request; nothing was done")
    expected = signature(secret, timestamp, body)
    if not hmac.compare_digest(given.encode(), expected.encode()):
        raise Unauthenticated("X-Slack-Signature does not match the body signed with this "
                              "server's signing secret; nothing was done",
                              hint=f"set {SECRET_ENV} to the app's Signing Secret "
                              "(Basic Information in the app's settings)")


class Interaction(msgspec.Struct, frozen=True, kw_only=True):
    """One click on a waypost button, as Slack described it."""

    key: str  # "slack:" + the interaction's trigger id: a replay carries the same
    user: str  # the Slack user id of who clicked (never a display name)
    action: str  # review, approve, changes, cancel or input
    run: str
    reviewed: str | None = None  # the digest the message showed
    text: str | None = None  # the typed reason or input
    blocker: str | None = None  # input: the blocker it resolves
    channel: str  # where the message is
    ts: str  # which message it is
    shown: str  # the message's text as Slack shows it (the outcome is added below it)
    at: datetime  # when Slack says the click happened


class _User(msgspec.Struct):
    id: str


class _Action(msgspec.Struct):
    action_id: str
    value: str = ""
    action_ts: str = ""


class _Container(msgspec.Struct):
    message_ts: str = ""
    channel_id: str = ""


class _Channel(msgspec.Struct):
    id: str


class _Message(msgspec.Struct):
    ts: str = ""
    text: str = ""


class _Typed(msgspec.Struct):
    value: str | None = None


class _State(msgspec.Struct):
    values: dict[str, dict[str, _Typed]] = {}


class _Payload(msgspec.Struct):
    type: str
    user: _User
    trigger_id: str = ""
    actions: list[_Action] = []
    container: _Container = msgspec.field(default_factory=_Container)
    channel: _Channel | None = None
    message: _Message | None = None
    state: _State = msgspec.field(default_factory=_State)


class _Value(msgspec.Struct, forbid_unknown_fields=True):
    run: str
    reviewed: str | None = None
    blocker: str | None = None


def payload_of(body: bytes) -> bytes:
    """The `payload` field of a form-encoded interaction request (its JSON, as bytes)."""
    try:
        fields = urllib.parse.parse_qs(body.decode("utf-8"), strict_parsing=True,
                                       max_num_fields=8)
    except (UnicodeDecodeError, ValueError) as exc:
        raise InvalidInput(f"the body is not a form: {exc}") from exc
    found = fields.get("payload")
    if not found or len(found) != 1:
        raise InvalidInput("the form carries no single payload field")
    return found[0].encode()


def interaction(body: bytes) -> Interaction | None:
    """The waypost answer a verified request carries; None for a click on anything else
    (a `block_actions` of another app's button, or another kind of interaction)."""
    raw = payload_of(body)
    inputs.nesting(raw, "the payload")
    try:
        payload = msgspec.json.decode(raw, type=_Payload)
    except msgspec.DecodeError as exc:  # not JSON, or not the shape (ValidationError)
        raise InvalidInput(f"the payload is not a block_actions payload: {exc}") from exc
    if payload.type != "block_actions":
        return None
    action = next((a for a in payload.actions if a.action_id in ACTIONS), None)
    if action is None:
        return None
    value = _value(action.value)
    channel = payload.channel.id if payload.channel else payload.container.channel_id
    ts = payload.container.message_ts or (payload.message.ts if payload.message else "")
    answer = ACTIONS[action.action_id]
    typed = _typed(payload.state, *((INPUT_BLOCK, INPUT_TEXT) if answer == "input"
                                    else (REASON_BLOCK, REASON_INPUT)))
    for name, field in (("user", payload.user.id), ("trigger_id", payload.trigger_id),
                        ("channel", channel), ("message ts", ts)):
        _id(field, name)
    return Interaction(key=f"slack:{payload.trigger_id}", user=payload.user.id,
                       action=answer, run=value.run, reviewed=value.reviewed, text=typed,
                       blocker=value.blocker, channel=channel, ts=ts,
                       shown=payload.message.text if payload.message else "",
                       at=_when(action.action_ts))


def _value(text: str) -> _Value:
    try:
        value = msgspec.json.decode(text.encode(), type=_Value)
    except msgspec.DecodeError as exc:
        raise InvalidInput(f"the button's value is not a waypost button's: {exc}") from exc
    _id(value.run, "run")
    return value


def _typed(state: _State, block: str, action: str) -> str | None:
    typed = state.values.get(block, {}).get(action)
    text = (typed.value or "").strip() if typed else ""
    return text or None


def _id(value: str, name: str) -> None:
    if not value or len(value) > MAX_FIELD or not value.isprintable():
        raise InvalidInput(f"the payload's {name} is missing or malformed")
    if name == "user" and not USER.fullmatch(value):  # shown as a mention: <@USER>
        raise InvalidInput("the payload's user is not a Slack user id")


def _when(action_ts: str) -> datetime:
    try:
        return datetime.fromtimestamp(float(action_ts), UTC)
    except (ValueError, OverflowError, OSError) as exc:
        raise InvalidInput("the action's action_ts is not a time") from exc
