"""Answers from GitHub against a real `waypost serve` and a local GitHub: deliveries signed
exactly as GitHub signs them (`tests.fake_services.Hookshot`), the REST calls of the reply
answered by `FakeGitHub`. A run goes from ready-for-review to delivered by comments on its
pull request, on both backends; a forged, replayed, unmapped, worker's, outdated or
unconfigured answer changes nothing and says why."""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests import pg
from tests.delivery_support import PRIVATE, PUBLIC, fast
from tests.fake_services import FakeGitHub, Hookshot
from tests.http_support import serving_app
from tests.parity.dump import dump
from waypost.config import Config
from waypost.core.reviewed import result_digest, short
from waypost.delivery.relay import Relay
from waypost.http.settings import ServerConfig
from waypost.model import EvidenceKind, Kind, State, Verdict
from waypost.store import Store
from waypost.usecases import answers, runs, starting

TOKEN = "ghp_test_token_for_the_fake"
SECRET = "a webhook secret only GitHub and this server know"
REPO = "octo/app"
NUMBER = 7
SHA = "0123456789abcdef0123456789abcdef01234567"
CONFIG = Config(github_users=(("octo-alice", "alice"), ("octo-w1", "w1")))
WAIT = 20.0


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with contextlib.ExitStack() as stack:
        yield (stack.enter_context(pg.fresh_schema()) if request.param == "postgres"
               else str(tmp_path / "store.db"))


@pytest.fixture
def github(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHub]:
    with FakeGitHub(TOKEN, repos=(REPO,)).running() as server:
        server.pulls[(REPO, NUMBER)] = SHA
        monkeypatch.setenv("GITHUB_WEBHOOK_SECRET", SECRET)
        monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
        monkeypatch.setenv("GITHUB_API_URL", server.api)
        yield server


class Thread:
    """A pull request's thread: comments written there, delivered to the server."""

    def __init__(self, store: Store, url: str, github: FakeGitHub) -> None:
        self.store = store
        self.github = github
        self.hook = Hookshot(url + "/github/webhook", SECRET)
        self.keys: dict[str, str] = {}  # each delivery's answer key: its comment's

    def say(self, body: str, login: str = "octo-alice", **send: Any) -> tuple[Any, str]:
        """A new comment, delivered; (the response, the delivery's id)."""
        comment = self.github.say(REPO, NUMBER, login, body)
        delivery = send.pop("delivery", None) or f"d-{comment['id']}"
        self.keys[delivery] = f"github:comment:{comment['id']}"
        response = self.hook.send("issue_comment", Hookshot.comment(REPO, NUMBER, comment),
                                  delivery=delivery, **send)
        return response, delivery

    def done(self, delivery: str) -> answers.Outcome:
        """The outcome of the answer accepted from `delivery`, once carried out."""
        deadline = time.monotonic() + WAIT
        while (outcome := answers.outcome_of(self.store, self.keys[delivery])) is None:
            assert time.monotonic() < deadline, f"{delivery} was not carried out"
            time.sleep(0.05)
        return outcome

    def replies(self) -> list[str]:
        return [c["body"] for c in self.github.thread(REPO, NUMBER)
                if c["user"]["login"] == self.github.login and not c["body"].startswith("<!--")]

    def replied(self, count: int) -> list[str]:
        """The replies once there are `count` of them (a refusal is shown after the
        response, by the server's answers thread; bounded wait)."""
        deadline = time.monotonic() + WAIT
        while len(found := self.replies()) < count:
            assert time.monotonic() < deadline, found
            time.sleep(0.05)
        return found

    def statuses(self) -> dict[str, str]:
        return {s["context"]: s["state"] for s in self.github.statuses.get((REPO, SHA), [])}


@contextlib.contextmanager
def served(store_url: str, github: FakeGitHub, config: Config = CONFIG) -> Iterator[Thread]:
    with serving_app(ServerConfig(store_url=store_url, project=config,
                                  allow_exec=True)) as (app, url):
        yield Thread(app.state.store, url, github)


def ready_run(store: Store) -> str:
    run, _ = starting.start(store, "Fix the flaky login test", actor="alice", owner="alice",
                            target=f"github:{REPO}#{NUMBER}",
                            notify=f"github:{REPO}#{NUMBER}", kind=Kind.LONG_RUNNING,
                            max_silence=3600, gates=["tests=command:true"])
    worker = runs.Run(store, run.id, actor="w1")
    worker.claim()
    worker.report_evidence(EvidenceKind.TEST, Verdict.PASSED, "pytest -q: 42 passed")
    worker.ready(PRIVATE, public_summary=PUBLIC)
    return run.id


def relay(store: Store, github: FakeGitHub) -> Relay:
    return Relay(store, settings=fast(github_token=TOKEN, github_api=github.api),
                 relay_id="relay:t")


def digest_in(reply: str) -> str:
    found = re.search(r"^/waypost approve ([0-9a-f]{12})$", reply, re.M)
    assert found, reply
    return found.group(1)


def test_a_run_goes_from_ready_to_delivered_by_comments(store_url: str,
                                                        github: FakeGitHub) -> None:
    with served(store_url, github) as thread:
        run = ready_run(thread.store)
        relay(thread.store, github).drain()  # the ready notice: the run's sticky comment
        [sticky] = github.run_comments(run)
        response, delivery = thread.say("/waypost review")
        assert response.status_code == 202, response.text
        reviewed = thread.done(delivery)
        assert reviewed.ok, reviewed
        [reply] = thread.replies()
        digest = digest_in(reply)  # the reply shows the commands for the result reviewed
        assert digest == short(result_digest(thread.store.get(run)) or "")
        assert thread.statuses() == {"waypost/tests": "success", "waypost/run": "pending"}
        assert digest in github.run_comments(run)[0]["body"]  # the sticky comment too
        response, delivery = thread.say(f"/waypost approve {digest}")
        assert response.status_code == 202, response.text
        assert thread.done(delivery).ok
        assert thread.store.get(run).state is State.APPROVED
        assert thread.store.get(run).approval.by == "alice"  # type: ignore[union-attr]
        assert thread.statuses()["waypost/run"] == "success"
        approved = thread.replies()[-1]
        assert "approve done" in approved
        assert "the run's target" in approved  # a target URI may hold a secret: never shown
        assert f"github:{REPO}#{NUMBER}" not in approved
        commands = [c for c in github.thread(REPO, NUMBER) if c["user"]["login"] != "waypost-bot"]
        assert [github.reactions[c["id"]] for c in commands] == [["+1"], ["+1"]]
        relay(thread.store, github).drain()
        assert thread.store.get(run).state is State.DELIVERED
        [final] = github.run_comments(run)
        assert final["id"] == sticky["id"]
        assert final["body"].startswith(f"<!-- waypost run={run} delivery={run}.final -->")
        before = dump(store_url)
        again = thread.hook.send("issue_comment", Hookshot.comment(
            REPO, NUMBER, commands[-1]), delivery=delivery)  # GitHub redelivers it
        assert again.status_code == 200
        assert again.json()["accepted"] is False
        assert dump(store_url) == before
        assert github.run_comments(run)[0]["body"] == final["body"]


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return str(tmp_path / "store.db")


def test_a_forged_or_unsigned_delivery_changes_nothing(sqlite_url: str,
                                                       github: FakeGitHub) -> None:
    with served(sqlite_url, github) as thread:
        run = ready_run(thread.store)
        before = dump(sqlite_url)
        forged = Hookshot.signature("not the secret", b"{}")
        for signature in (forged, "sha256=" + "0" * 64, "sha1=abc"):
            response, _ = thread.say("/waypost cancel forged", signature=signature)
            assert response.status_code == 401, response.text
            assert "X-Hub-Signature-256" in response.json()["error"]["message"]
        assert dump(sqlite_url) == before
        assert thread.store.get(run).state is State.READY_FOR_REVIEW
        assert thread.replies() == []


def test_a_comment_delivered_again_acts_once(sqlite_url: str, github: FakeGitHub) -> None:
    """GitHub's redelivery (the same delivery id), and a second webhook (an organisation's
    beside the repository's: another id) carry the same comment: it acts once."""
    with served(sqlite_url, github) as thread:
        run = ready_run(thread.store)
        comment = github.say(REPO, NUMBER, "octo-alice", "/waypost review")
        payload = Hookshot.comment(REPO, NUMBER, comment)
        first = thread.hook.send("issue_comment", payload, delivery="d-first")
        assert first.status_code == 202
        thread.keys["d-first"] = first.json()["key"]
        assert thread.done("d-first").ok
        after = dump(sqlite_url)
        for delivery in ("d-first", "d-from-the-organisation"):
            again = thread.hook.send("issue_comment", payload, delivery=delivery)
            assert again.status_code == 200
            assert again.json()["accepted"] is False
            assert again.json()["key"] == first.json()["key"]
        assert dump(sqlite_url) == after
        assert len(thread.store.get(run).reviews) == 1
        assert len(thread.replies()) == 1


def test_an_unmapped_login_changes_nothing(sqlite_url: str, github: FakeGitHub) -> None:
    with served(sqlite_url, github) as thread:
        run = ready_run(thread.store)
        before = dump(sqlite_url)
        digest = short(result_digest(thread.store.get(run)) or "")
        response, _ = thread.say(f"/waypost approve {digest}", login="stranger")
        assert response.status_code == 200
        assert "not mapped" in response.json()["ignored"]
        assert dump(sqlite_url) == before
        assert thread.replies() == []


def test_the_workers_own_login_is_refused_and_says_why(sqlite_url: str,
                                                       github: FakeGitHub) -> None:
    """Refused by the run's rules as it stands: decided before anything is stored (the
    whole store, its answers queue included, is as it was) and answered in the thread."""
    with served(sqlite_url, github) as thread:
        run = ready_run(thread.store)
        before = dump(sqlite_url)
        digest = short(result_digest(thread.store.get(run)) or "")
        for said in (f"/waypost approve {digest}", "/waypost cancel mine to stop"):
            response, delivery = thread.say(said, login="octo-w1")
            assert response.status_code == 200
            assert response.json()["refused"].startswith("w1 ")
            assert thread.store.answer_row(thread.keys[delivery]) is None
        assert dump(sqlite_url) == before
        replies = thread.replied(2)
        assert all("refused, nothing was done" in r for r in replies)
        assert all(v == ["confused"] for v in github.reactions.values())
        assert thread.statuses() == {}


def test_an_answer_to_an_outdated_result_is_refused_saying_what_changed(
        sqlite_url: str, github: FakeGitHub) -> None:
    with served(sqlite_url, github) as thread:
        run = ready_run(thread.store)
        _, delivery = thread.say("/waypost review")
        old = digest_in(thread.replies()[0]) if thread.done(delivery).ok else ""
        worker = runs.Run(thread.store, run, actor="w1")
        runs.Run(thread.store, run, actor="alice").changes("one more case")
        worker.ready(PRIVATE + " and one more case", public_summary=PUBLIC)  # a new result
        runs.Run(thread.store, run, actor="alice").review(config=Config())
        before = dump(sqlite_url)
        shown = len(thread.replies())
        response, delivery = thread.say(f"/waypost approve {old}")
        assert response.status_code == 200
        assert "submitted a new result" in response.json()["refused"]
        assert thread.store.answer_row(thread.keys[delivery]) is None
        assert dump(sqlite_url) == before
        assert "submitted a new result" in thread.replied(shown + 1)[-1]
        assert thread.store.get(run).state is State.READY_FOR_REVIEW


def test_an_approving_review_counts_only_where_configured(sqlite_url: str,
                                                          github: FakeGitHub) -> None:
    with served(sqlite_url, github) as thread:
        run = ready_run(thread.store)
        digest = short(result_digest(thread.store.get(run)) or "")
        before = dump(sqlite_url)
        review = Hookshot.review(REPO, NUMBER, "octo-alice", f"/waypost approve {digest}")
        response = thread.hook.send("pull_request_review", review)
        assert response.status_code == 200
        assert "github_review_approves" in response.json()["ignored"]
        assert dump(sqlite_url) == before
    configured = Config(github_users=CONFIG.github_users, github_review_approves=True)
    with served(sqlite_url, github, configured) as thread:
        bare = Hookshot.review(REPO, NUMBER, "octo-alice", "LGTM", ident=78)
        shown = len(thread.replies())
        response = thread.hook.send("pull_request_review", bare, delivery="review-78")
        assert response.status_code == 200  # refused before anything was stored
        assert "must name the reviewed result" in response.json()["refused"]
        assert thread.store.answer_row("github:review:78") is None
        assert "must name the reviewed result" in thread.replied(shown + 1)[-1]
        assert thread.store.get(run).state is State.READY_FOR_REVIEW
        _, delivery = thread.say("/waypost review")
        digest = digest_in(thread.replies()[-1]) if thread.done(delivery).ok else ""
        named = Hookshot.review(REPO, NUMBER, "octo-alice", f"/waypost approve {digest}\n\n"
                                "Looks right to me.", ident=79)
        assert thread.hook.send("pull_request_review", named,
                                delivery="review-79").status_code == 202
        thread.keys["review-79"] = "github:review:79"
        assert thread.done("review-79").ok
        assert thread.store.get(run).state is State.APPROVED


def test_a_ping_is_answered_and_a_server_without_the_secret_refuses(
        sqlite_url: str, github: FakeGitHub, monkeypatch: pytest.MonkeyPatch) -> None:
    with served(sqlite_url, github) as thread:
        assert thread.hook.send("ping", {"zen": "Keep it logically awesome.",
                                         "hook_id": 1}).status_code == 200
        monkeypatch.delenv("GITHUB_WEBHOOK_SECRET")
        refused = thread.hook.send("ping", {"zen": "x", "hook_id": 1})
        assert refused.status_code == 503
        assert "GITHUB_WEBHOOK_SECRET is not set" in refused.json()["error"]["message"]
        assert SECRET not in refused.text


def test_a_command_that_does_not_read_or_names_no_run_is_refused_in_the_thread(
        sqlite_url: str, github: FakeGitHub) -> None:
    with served(sqlite_url, github) as thread:
        first = ready_run(thread.store)
        before = dump(sqlite_url)
        response, _ = thread.say("/waypost approve")  # names no result
        assert response.status_code == 200
        assert "must name the result" in response.json()["refused"]
        assert dump(sqlite_url) == before
        second = ready_run(thread.store)  # two runs now comment on the thread
        before = dump(sqlite_url)
        response, delivery = thread.say("/waypost cancel enough")
        assert f"name one, e.g. /waypost cancel {second}" in response.json()["refused"]
        assert first in response.json()["refused"]
        again, _ = thread.say("/waypost cancel enough", delivery=delivery)  # redelivered
        assert "refused" in again.json()
        assert dump(sqlite_url) == before  # nothing stored for any of them
        deadline = time.monotonic() + WAIT
        while len(thread.replies()) < 2:  # shown after the response, once per delivery
            assert time.monotonic() < deadline, thread.replies()
            time.sleep(0.05)
        time.sleep(0.3)
        replies = thread.replies()
        assert len(replies) == 2
        assert "must name the result" in replies[0]
        assert "name one" in replies[1]
        commands = [c for c in github.thread(REPO, NUMBER) if c["user"]["login"] == "octo-alice"]
        assert [github.reactions.get(c["id"]) for c in commands] == \
            [["confused"], ["confused"], None]
        response, delivery = thread.say(f"/waypost cancel {second} enough")
        assert response.status_code == 202
        assert thread.done(delivery).ok
        assert thread.store.get(second).state is State.CANCELLED
        assert thread.store.get(first).state is State.READY_FOR_REVIEW


def test_a_deep_or_huge_signed_delivery_is_refused_before_it_is_decoded(
        sqlite_url: str, github: FakeGitHub) -> None:
    """Even signed with the secret, a body nested deeper than any webhook's or larger than
    the route takes is refused with the store unchanged (not a server error)."""
    with served(sqlite_url, github) as thread:
        before = dump(sqlite_url)
        deep = b'{"action":"created","comment":' + b"[" * 50_000 + b"]" * 50_000 + b"}"
        huge = b'{"action":"created","pad":"' + b"x" * (3 * 1024 * 1024) + b'"}'
        for body, status in ((deep, 400), (huge, 413)):
            response = httpx.post(thread.hook.url, content=body, timeout=30, headers={
                "content-type": "application/json", "x-github-event": "issue_comment",
                "x-github-delivery": "d-hostile",
                "x-hub-signature-256": Hookshot.signature(SECRET, body)})
            assert response.status_code == status, response.text[:300]
            assert response.json()["error"]["message"]
        assert dump(sqlite_url) == before
