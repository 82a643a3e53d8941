"""An answer's outcome shown on GitHub (`delivery.github_reply`) against the local GitHub:
the sticky comment shows the commands for the result as it stands, is brought up to date
while the run waits, and its delivered body is never touched; an issue gets no statuses."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.fake_services import FakeGitHub
from waypost.delivery import github_reply
from waypost.delivery.base import Outgoing
from waypost.delivery.github import comment_body, marker
from waypost.delivery.github_commands import parse

TOKEN = "ghp_test_token_for_the_fake"
REPO = "octo/app"
RUN = "wp_01JEXAMPLE0000000000000000"
DIGEST = "sha256:" + "1a2b3c4d5e6f" + "0" * 52
AT = datetime(2026, 12, 5, 3, 0, tzinfo=UTC)


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with FakeGitHub(TOKEN, repos=(REPO,)).running() as server:
        yield server


def _show(github: FakeGitHub, shown: github_reply.Shown, number: int = 7,
          comment: str | None = None) -> list[str]:
    said = comment or str(github.say(REPO, number, "octo-alice", "/waypost …")["id"])
    place = github_reply.Place(repo=REPO, number=number, comment=said)
    return github_reply.show(place, shown, token=TOKEN, api=github.api, timeout=5.0, at=AT)


class _Delivery:
    run_id = RUN
    key = f"{RUN}.4.ready_for_review"


def _ready_notice() -> Outgoing:
    doc: dict[str, Any] = {"type": "notice", "topic": "ready_for_review", "id": "k",
                           "data": {"run": RUN, "message": f"run {RUN} is ready for review",
                                    "next": f"waypost review {RUN}", "reviewed": DIGEST}}
    return Outgoing(delivery=_Delivery(), document=doc)  # type: ignore[arg-type]


def test_the_ready_notice_shows_commands_that_read_back() -> None:
    body = comment_body(_ready_notice())
    lines = [line for line in body.splitlines() if line.startswith("/waypost")]
    assert lines == ["/waypost review", "/waypost approve 1a2b3c4d5e6f",
                     "/waypost changes 1a2b3c4d5e6f REASON", "/waypost cancel REASON"]
    assert [parse(line.replace("REASON", "because")) is not None for line in lines] == \
        [True] * 4
    assert parse(body) is None  # the comment itself is no command


def test_the_sticky_comment_follows_until_approval_and_never_after(
        github: FakeGitHub) -> None:
    notice = github.say(REPO, 7, github.login, f"{marker(RUN, RUN + '.4.ready')}\nready")
    waiting = github_reply.Shown(run=RUN, action="review", ok=True, actor="alice",
                                 said="review r1: tests passed", state="ready_for_review",
                                 digest=DIGEST, gates=(("tests", "passed"),))
    assert _show(github, waiting) == []
    body = github.thread(REPO, 7)[0]["body"]
    assert body.startswith(marker(RUN, RUN + ".4.ready"))
    assert "/waypost approve 1a2b3c4d5e6f" in body
    approved = github_reply.Shown(run=RUN, action="approve", ok=True, actor="alice",
                                  said="approved", state="approved", digest=DIGEST)
    assert _show(github, approved) == []
    assert github.thread(REPO, 7)[0]["body"] == body  # the relay's from approval on
    final = f"{marker(RUN, RUN + '.final')}\n# the delivered result\n"
    github.comments[(REPO, 7)][0]["body"] = final
    assert _show(github, waiting) == []
    assert github.thread(REPO, 7)[0]["body"] == final
    assert notice["id"] == github.thread(REPO, 7)[0]["id"]
    assert github.statuses == {}  # no pull request known: an issue's thread


def test_an_issue_gets_the_reply_and_no_statuses(github: FakeGitHub) -> None:
    shown = github_reply.Shown(run=RUN, action="cancel", ok=True, actor="alice",
                               said="cancelled: not needed", state="cancelled")
    assert _show(github, shown, number=8) == []
    [_, reply] = github.thread(REPO, 8)
    assert "cancel done" in reply["body"]
    assert github.statuses == {}


def test_a_step_github_refuses_does_not_keep_the_others_from_being_shown(
        github: FakeGitHub) -> None:
    github.pulls[(REPO, 7)] = "f" * 40
    shown = github_reply.Shown(run=RUN, action="approve", ok=True, actor="alice",
                               said="approved", state="approved", digest=DIGEST)
    problems = _show(github, shown, comment="999")  # no such comment: no reaction
    assert len(problems) == 1
    assert "404" in problems[0] or "Not Found" in problems[0]
    assert github.statuses[(REPO, "f" * 40)][-1]["state"] == "success"
    assert len(github.thread(REPO, 7)) == 1
