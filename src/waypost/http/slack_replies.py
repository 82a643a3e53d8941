"""How an answer given with a Slack button is shown: the message it was given on is updated
(`chat.update`, with the bot token the `slack:` target posts with) to say what was done, or
why not and what changed; while the run still waits for the owner (a review ran its gates,
an answer named a result that has changed since), it carries fresh buttons bound to the
reviewed result as it now is."""

from __future__ import annotations

import logging
from collections.abc import Callable

from waypost.delivery import slack_blocks
from waypost.delivery.rest import Failed
from waypost.delivery.settings import DeliverySettings
from waypost.delivery.slack import escape, update_message
from waypost.durations import utcnow
from waypost.usecases.answers import Action, Answer, Outcome, Reply

log = logging.getLogger("waypost.answers")
DONE = {Action.REVIEW: "reviewed", Action.APPROVE: "approved",
        Action.CHANGES: "requested changes", Action.CANCEL: "cancelled",
        Action.INPUT: "sent the input"}


def slack_reply(settings: Callable[[], DeliverySettings]) -> Reply:
    """The reply of answers from Slack, with the relay's settings as `settings` finds them
    when each reply is made (the bot token and the API base)."""

    def reply(answer: Answer, outcome: Outcome) -> None:
        channel, ts = answer.reply.get("channel"), answer.reply.get("ts")
        if not channel or not ts:
            return
        shown = answer.reply.get("text", "")
        said = outcome_text(answer, outcome)
        text = f"{shown}\n{said}" if shown else said
        blocks = slack_blocks.outcome_blocks(shown, said, waiting(answer, outcome))
        try:
            update_message(settings(), channel, ts, text, blocks, at=utcnow())
        except Failed as failed:
            log.warning("answers: the Slack message %s in %s was not updated: %s", ts,
                        channel, failed.attempt.detail)

    return reply


def outcome_text(answer: Answer, outcome: Outcome) -> str:
    """One line for the channel: who did what, or why nothing was done."""
    who = f"<@{answer.user}>"
    if outcome.ok:
        return f":white_check_mark: {who} {DONE[answer.action]}: {escape(outcome.said)}"
    return (f":no_entry: {who} {answer.action}: not done ({outcome.code}): "
            f"{escape(outcome.said)}")


def waiting(answer: Answer, outcome: Outcome) -> dict[str, object]:
    """What the message's fresh buttons are bound to: the run as the answer left it."""
    data: dict[str, object] = {"run": answer.run, "state": outcome.state,
                               "reviewed": outcome.digest}
    if outcome.state == "blocked" and answer.action is Action.INPUT and answer.blocker \
            and not outcome.ok:  # the input was refused: it may be given again
        data["blocker"] = {"id": answer.blocker, "kind": "missing_input"}
    return data
