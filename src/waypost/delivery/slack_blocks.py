"""The Block Kit of waypost's Slack messages: the buttons an owner answers with, and what
each carries back.

A `slack:` message (posted with a bot token) that waits for the owner carries its answers:

- ready for review: Review, Approve, Request changes and Cancel, each button's `value`
  holding the run and the reviewed-result digest the message shows (`core.reviewed`), and
  one optional input for the reason that Request changes and Cancel take;
- blocked on `missing_input`: an input for the input itself, with Send and Cancel.

Every button's `action_id` starts `waypost_`; `slack_requests` decodes a click on one back
into an `Interaction`. The text stays the message's `text` (what notifications and
screen readers show); the blocks repeat it in a section and add the answers. A message
after an answer says what was done (or why not) and, while the run still waits for the
owner, carries fresh buttons bound to the digest as it now is.
"""

from __future__ import annotations

import json
from typing import Any, Final

REVIEW: Final = "waypost_review"
APPROVE: Final = "waypost_approve"
CHANGES: Final = "waypost_changes"
CANCEL: Final = "waypost_cancel"
SEND: Final = "waypost_send"
# a button's action_id -> the answer it gives (`usecases.answers.Action`'s values)
ACTIONS: Final = {REVIEW: "review", APPROVE: "approve", CHANGES: "changes",
                  CANCEL: "cancel", SEND: "input"}
REASON_BLOCK: Final = "waypost_reason"  # the input block of a reason (changes, cancel)
REASON_INPUT: Final = "waypost_reason_text"
INPUT_BLOCK: Final = "waypost_input"  # the input block of a missing_input blocker's input
INPUT_TEXT: Final = "waypost_input_text"
ANSWERS_BLOCK: Final = "waypost_answers"
MAX_TYPED: Final = 2000  # characters typed in an input (an answer's text takes no more)
MAX_SECTION: Final = 3000  # characters of a section's text (Slack's limit)
READY: Final = "ready_for_review"

Block = dict[str, Any]


def button_value(run: str, *, reviewed: str | None = None, blocker: str | None = None) -> str:
    """What a button carries back: the run, and the digest or the blocker it answers."""
    value: dict[str, str] = {"run": run}
    if reviewed:
        value["reviewed"] = reviewed
    if blocker:
        value["blocker"] = blocker
    return json.dumps(value, separators=(",", ":"))


def notice_blocks(text: str, data: dict[str, Any]) -> list[Block]:
    """The blocks of a notice whose document `data` is this: its text, then the answers
    it waits for (none when it waits for nothing, or the digest is unknown)."""
    return [section(text), *answers(data)]


def answers(data: dict[str, Any]) -> list[Block]:
    """The inputs and buttons of a message about the run `data` describes."""
    run, state = str(data["run"]), data.get("state")
    blocker = data.get("blocker")
    if state == "blocked" and isinstance(blocker, dict):
        if blocker.get("kind") != "missing_input":
            return []
        value = button_value(run, blocker=str(blocker["id"]))
        return [typed(INPUT_BLOCK, INPUT_TEXT, "The input this run is waiting for",
                      optional=False),
                actions([button("Send", SEND, value, style="primary"),
                         button("Cancel the run", CANCEL, button_value(run), style="danger")])]
    reviewed = data.get("reviewed")
    if state != READY or not reviewed:
        return []
    value = button_value(run, reviewed=str(reviewed))
    return [typed(REASON_BLOCK, REASON_INPUT, "Reason (for Request changes or Cancel)",
                  optional=True),
            actions([button("Review", REVIEW, value),
                     button("Approve", APPROVE, value, style="primary"),
                     button("Request changes", CHANGES, value),
                     button("Cancel", CANCEL, value, style="danger")])]


def outcome_blocks(text: str, said: str, data: dict[str, Any]) -> list[Block]:
    """A message after an answer: its text, what the answer came to, and the answers the
    run (as `data` now describes it) still waits for."""
    return [section(text), section(said), *answers(data)]


def section(text: str) -> Block:
    shown = text if len(text) <= MAX_SECTION else text[:MAX_SECTION - 1] + "…"
    return {"type": "section", "text": {"type": "mrkdwn", "text": shown or " "}}


def typed(block_id: str, action_id: str, label: str, *, optional: bool) -> Block:
    return {"type": "input", "block_id": block_id, "optional": optional,
            "label": {"type": "plain_text", "text": label},
            "element": {"type": "plain_text_input", "action_id": action_id,
                        "multiline": True, "max_length": MAX_TYPED}}


def actions(elements: list[Block]) -> Block:
    return {"type": "actions", "block_id": ANSWERS_BLOCK, "elements": elements}


def button(label: str, action_id: str, value: str, *, style: str | None = None) -> Block:
    found: Block = {"type": "button", "action_id": action_id, "value": value,
                    "text": {"type": "plain_text", "text": label}}
    if style:
        found["style"] = style
    return found
