"""The GitHub door: a `/waypost` comment on the run's pull request, delivered to a real
`waypost serve` (no --allow-exec) signed as GitHub signs it, by a login the project maps to
the scenario's actor; the outcome is what the server's answers thread carried out, its
reply shown on a local GitHub. Each run of this door's world comments on a pull request of
its own (its notify), so a command names the result it answers, never the run.

A service's request is recorded as it is accepted (the answers queue: so a redelivery acts
once), before the rules decide; what a refusal must leave as it was is everything else, so
this door's dump leaves the answers queue out."""

from __future__ import annotations

import contextlib
import itertools
import os
import time
import uuid
from typing import Any, Final

import httpx

from tests.fake_services import FakeGitHub, Hookshot
from tests.http_support import serving_app
from tests.parity.dump import Dump
from waypost.config import Config
from waypost.core.reviewed import result_digest, short
from waypost.errors import WaypostError
from waypost.http.settings import ServerConfig
from waypost.usecases import answers

from .driver import ERROR_OF_CODE, Driver, class_of
from .terms import OWNER, STRANGER, WORKER, Actor, Call, Cls, Door
from .world import World

TOKEN: Final = "ghp_parity_token_for_the_fake"
SECRET: Final = "the parity webhook's secret"
REPO: Final = "octo/app"
LOGINS: Final = {Actor.OWNER: "gh-alice", Actor.WORKER: "gh-w1", Actor.STRANGER: "gh-mallory"}
CONFIG: Final = Config(github_users=((LOGINS[Actor.OWNER], OWNER),
                                     (LOGINS[Actor.WORKER], WORKER),
                                     (LOGINS[Actor.STRANGER], STRANGER)))
NO_RESULT: Final = "0" * 12  # what a comment names when the run has no result to name
WAIT_S: Final = 30.0
REASON: Final = "not what was asked"


class _WithoutAnswers:
    """The world's dump, without the answers queue (see the module's docstring)."""

    def __init__(self, dump: Any) -> None:
        self.inner = dump

    def __call__(self) -> Dump:
        return {t: rows for t, rows in self.inner().items() if t != "answers"}

    def close(self) -> None:
        self.inner.close()


class GitHubDoor(Driver):
    door = Door.GITHUB

    def __init__(self, world: World) -> None:
        super().__init__(world)
        self.stack = contextlib.ExitStack()
        self.github = self.stack.enter_context(FakeGitHub(TOKEN, repos=(REPO,)).running())
        self._environment({"GITHUB_WEBHOOK_SECRET": SECRET, "GITHUB_TOKEN": TOKEN,
                           "GITHUB_API_URL": self.github.api})
        numbers = itertools.count(1)
        world.thread = lambda: f"github:{REPO}#{next(numbers)}"
        world.dump = _WithoutAnswers(world.dump)  # type: ignore[assignment]
        self.numbers = itertools.count(100_000)  # threads no run comments on
        _, url = self.stack.enter_context(serving_app(ServerConfig(
            store_url=world.url, project=CONFIG)))
        self.hook = Hookshot(url + "/github/webhook", SECRET)

    def _environment(self, values: dict[str, str]) -> None:
        before = {name: os.environ.get(name) for name in values}
        os.environ.update(values)

        def restore() -> None:
            for name, value in before.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value

        self.stack.callback(restore)

    def close(self) -> None:
        self.stack.close()

    def _number(self, run: str) -> int:
        try:
            notify = self.world.store.get(run).notify or ""
        except WaypostError:
            return next(self.numbers)
        return int(notify.rsplit("#", 1)[1])

    def _digest(self, call: Call) -> str:
        """The digest the comment names: the one the scenario gives (`stale`: the result's
        before its review), else the result's as the thread now shows it."""
        if call.args.get("reviewed") == "stale":
            return str(getattr(call.ctx, "stale"))  # noqa: B009 (a field of bound answers)
        try:
            digest = result_digest(self.world.store.get(call.ctx.run))
        except WaypostError:
            digest = None
        return short(digest) if digest else NO_RESULT

    def _say(self, call: Call, words: str) -> Cls:
        number = self._number(call.ctx.run)
        comment = self.github.say(REPO, number, LOGINS[call.actor], f"/waypost {words}")
        delivery = uuid.uuid4().hex
        response = self.hook.send("issue_comment", Hookshot.comment(REPO, number, comment),
                                  delivery=delivery)
        return self._answer(response, delivery)

    def _answer(self, response: httpx.Response, delivery: str) -> Cls:
        if response.status_code == 401:
            return Cls.UNAUTHENTICATED
        assert response.status_code in (200, 202), response.text
        said = response.json()
        if "ignored" in said:  # no run comments on the thread: there is none to act on
            return Cls.NOT_FOUND
        if "refused" in said:  # refused before it was stored, saying why
            return class_of(ERROR_OF_CODE[said["code"]])
        assert said["accepted"] is True, said
        deadline = time.monotonic() + WAIT_S
        while (outcome := answers.outcome_of(self.world.store, said["key"])) is None:
            assert time.monotonic() < deadline, f"{delivery} was not carried out"
            time.sleep(0.02)
        if outcome.ok:
            return Cls.OK
        assert outcome.code in ERROR_OF_CODE, outcome
        return class_of(ERROR_OF_CODE[outcome.code])

    def review(self, call: Call) -> Cls:
        return self._say(call, "review")

    def approve(self, call: Call) -> Cls:
        return self._say(call, f"approve {self._digest(call)}")

    def changes(self, call: Call) -> Cls:
        return self._say(call, f"changes {self._digest(call)} {REASON}")

    def cancel(self, call: Call) -> Cls:
        return self._say(call, f"cancel {REASON}")
