"""Slack's buttons as a door: a click on a waypost message, sent to a served app's
`POST /slack/actions` as Slack sends it (form-encoded, signed with the app's signing
secret, by the Slack user id the project maps to the actor), then carried out by the
server's answers thread; the outcome it records becomes the outcome class.

A refusal leaves every run, event, delivery and file as it was; the request itself stays
in the answers queue, received once under its key (so a retry of it is recognised, which
the queue's own tests show): that one table is left out of this door's store compare."""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from typing import Any, Final

from tests import slack_support
from tests.http_support import serving_app
from waypost.config import Config
from waypost.core.reviewed import result_digest
from waypost.delivery import slack_blocks
from waypost.errors import NotFound
from waypost.http.settings import ServerConfig
from waypost.usecases import answers

from .driver import ERROR_OF_CODE, Driver, class_of
from .dump import Dump
from .terms import OWNER, STRANGER, WORKER, Actor, Call, Cls, Door
from .world import World

CHANNEL: Final = "C0PARITY1"
USERS: Final = {Actor.OWNER: "UPARITYOWNER", Actor.WORKER: "UPARITYWORKER",
                Actor.STRANGER: "UPARITYSTRANGER"}
CONFIG: Final = Config(slack_users=((USERS[Actor.OWNER], OWNER),
                                    (USERS[Actor.WORKER], WORKER),
                                    (USERS[Actor.STRANGER], STRANGER)))
WAIT_S: Final = 30.0  # seconds an accepted click may take to be carried out
_CLICKS = itertools.count(1)


class RunsOnly:
    """The world's dump but the answers queue (see the module's docstring)."""

    def __init__(self, dump: Any) -> None:
        self.whole = dump

    def __call__(self) -> Dump:
        return {table: rows for table, rows in self.whole().items() if table != "answers"}

    def close(self) -> None:
        self.whole.close()


class SlackDoor(Driver):
    door = Door.SLACK

    def __init__(self, world: World) -> None:
        super().__init__(world)
        world.dump = RunsOnly(world.dump)  # type: ignore[assignment]
        self.stack = contextlib.ExitStack()
        self.saved = os.environ.get(slack_support.SECRET_ENV)
        os.environ[slack_support.SECRET_ENV] = slack_support.SECRET
        app, self.url = self.stack.enter_context(
            serving_app(ServerConfig(store_url=world.url, project=CONFIG)))
        self.answerer: answers.Answerer = app.state.answerer
        # what the server showed on Slack, by the click's key: a refusal decided before
        # anything was stored is only shown
        self.shown: dict[str, answers.Outcome] = {}
        self.answerer.replies = {"slack": self._shown}

    def close(self) -> None:
        self.stack.close()
        if self.saved is None:
            os.environ.pop(slack_support.SECRET_ENV, None)
        else:
            os.environ[slack_support.SECRET_ENV] = self.saved

    def _click(self, call: Call, action_id: str, reason: str | None = None) -> Cls:
        """A click on `action_id` of a message bound to the run as it now stands."""
        run = call.ctx.run
        digest = None if action_id == slack_blocks.CANCEL else self._digest(run)
        if call.args.get("reviewed") == "stale":  # a message showing the result before
            digest = str(getattr(call.ctx, "stale"))  # noqa: B009 (its review: bound answers)
        message = {"ts": "1700000000.000100", "text": f"run {run}",
                   "blocks": [slack_blocks.typed(slack_blocks.REASON_BLOCK,
                                                 slack_blocks.REASON_INPUT, "Reason",
                                                 optional=True),
                              slack_blocks.actions([slack_blocks.button(
                                  action_id, action_id,
                                  slack_blocks.button_value(run, reviewed=digest))])]}
        trigger = f"{next(_CLICKS)}.{time.time_ns()}"
        body = slack_support.click(message, action_id, user=USERS[call.actor],
                                   channel=CHANNEL, trigger=trigger,
                                   typed={slack_blocks.REASON_BLOCK: reason or ""})
        answered = slack_support.send(self.url, body)
        if answered.status_code == 401:
            return Cls.UNAUTHENTICATED
        assert answered.status_code == 200, answered.text
        return self._outcome(f"slack:{trigger}")

    def _digest(self, run: str) -> str | None:
        try:
            return result_digest(self.world.store.get(run))
        except NotFound:
            return None  # a message about a run that is gone

    def _shown(self, answer: answers.Answer, outcome: answers.Outcome) -> None:
        self.shown[answer.key] = outcome

    def _outcome(self, key: str) -> Cls:
        """What the server showed of the click: carried out, or refused before storing."""
        deadline = time.monotonic() + WAIT_S
        while (found := self.shown.get(key)) is None:
            assert time.monotonic() < deadline, f"{key} was not shown"
            time.sleep(0.02)
        return Cls.OK if found.ok else class_of(ERROR_OF_CODE[found.code])

    def review(self, call: Call) -> Cls:
        return self._click(call, slack_blocks.REVIEW)

    def approve(self, call: Call) -> Cls:
        return self._click(call, slack_blocks.APPROVE)

    def changes(self, call: Call) -> Cls:
        return self._click(call, slack_blocks.CHANGES, "add a test for the empty case")

    def cancel(self, call: Call) -> Cls:
        return self._click(call, slack_blocks.CANCEL, "the test was deleted upstream")
