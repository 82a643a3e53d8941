"""The github: (one sticky comment per run) and github-status: targets against a local
REST API that fails on command (`tests.fake_services.FakeGitHub`), served under /api/v3 as
GitHub Enterprise serves it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.delivery_support import (
    PRIVATE,
    PUBLIC,
    approved_run,
    delivery_failed,
    drain_until_settled,
    fast,
)
from tests.fake_services import FakeGitHub
from tests.helpers import FakeClock
from waypost.delivery.relay import Relay
from waypost.model import (
    DeliveryAssurance,
    DeliveryStatus,
    Kind,
    Purpose,
    State,
)
from waypost.store import Store, open_store
from waypost.usecases import runs, starting

TOKEN = "ghp_test_token_for_the_fake"
REPO = "octo/app"
SHA = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Store]:
    with open_store(str(tmp_path / ".waypost" / "w.db")) as store:
        yield store


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with FakeGitHub(TOKEN, repos=(REPO,), prefix="/api/v3").running() as server:
        yield server


def relay(db: Store, clock: FakeClock, github: FakeGitHub, **settings: Any) -> Relay:
    values: dict[str, Any] = {"github_token": TOKEN, "github_api": github.api, "timeout": 2.0}
    values.update(settings)
    return Relay(db, settings=fast(**values), relay_id="relay:t", clock=clock, rand=lambda: 1.0)


def test_the_result_is_one_marked_comment_with_the_public_parts_only(
        db: Store, clock: FakeClock, github: FakeGitHub) -> None:
    run_id = approved_run(db, clock, target=f"github:{REPO}#7")
    relay(db, clock, github).drain()
    [comment] = github.comments[(REPO, 7)]
    assert comment["body"].startswith(f"<!-- waypost run={run_id} delivery={run_id}.final -->")
    assert PUBLIC in comment["body"]
    assert "ACME-7731" not in comment["body"]
    assert PRIVATE not in comment["body"]
    packet = db.get(run_id)
    assert packet.state is State.DELIVERED
    assert packet.receipt is not None
    assert packet.receipt.assurance is DeliveryAssurance.UPSERT


@pytest.mark.parametrize("fault", ["accept_drop", "accept_timeout"])
def test_an_accepted_but_unanswered_comment_is_found_on_a_later_page_and_not_repeated(
        db: Store, clock: FakeClock, github: FakeGitHub, fault: str) -> None:
    github.seed_comments(REPO, 7, 230)  # the run's comment lands on page 3
    run_id = approved_run(db, clock, target=f"github:{REPO}#7")
    github.fail("/comments", fault, method="POST")  # the comment is made, the answer lost
    [first] = relay(db, clock, github).drain()
    assert first.status is DeliveryStatus.QUEUED
    drain_until_settled(relay(db, clock, github), clock)
    assert len(github.run_comments(run_id)) == 1
    assert len(github.comments[(REPO, 7)]) == 231
    assert db.get(run_id).state is State.DELIVERED


def test_notices_and_the_result_share_the_runs_one_comment(
        db: Store, clock: FakeClock, github: FakeGitHub) -> None:
    uri = f"github:{REPO}#9"
    run_id = approved_run(db, clock, target=uri, notify=uri)  # ready_for_review: a notice
    drain_until_settled(relay(db, clock, github), clock)
    [comment] = github.run_comments(run_id)
    assert PUBLIC in comment["body"]  # the final result replaced the notice
    assert f"delivery={run_id}.final" in comment["body"]


@pytest.mark.parametrize(("target", "settings", "named"), [
    ("github:octo/gone#1", {}, "repository not found, or the token cannot see it"),
    (f"github:{REPO}#1", {"github_token": "ghp_revoked"}, "GitHub refused the token"),
    (f"github:{REPO}#1", {"github_token": None}, "GITHUB_TOKEN is not set"),
    (f"github-status:{REPO}@{SHA}", {"github_token": None}, "GITHUB_TOKEN is not set"),
])
def test_a_missing_repo_or_a_bad_or_missing_token_blocks_in_one_pass(
        db: Store, clock: FakeClock, github: FakeGitHub, target: str,
        settings: dict[str, Any], named: str) -> None:
    run_id = approved_run(db, clock, target=target)
    [done] = relay(db, clock, github, **settings).drain()
    assert done.status is DeliveryStatus.FAILED
    detail = delivery_failed(db, run_id).detail
    assert named in detail
    assert "permanent" in detail


def test_rate_limiting_waits_until_the_reset_and_is_not_a_failure(
        db: Store, clock: FakeClock, github: FakeGitHub) -> None:
    run_id = approved_run(db, clock, target=f"github:{REPO}#3")
    github.fail("/comments", "ratelimit")
    [first] = relay(db, clock, github).drain()
    assert first.status is DeliveryStatus.QUEUED
    assert "rate limited" in (first.last_error or "")
    drain_until_settled(relay(db, clock, github), clock)
    assert len(github.run_comments(run_id)) == 1


def test_a_commit_status_per_gate_and_for_the_run_linking_to_the_board(
        db: Store, clock: FakeClock, github: FakeGitHub) -> None:
    run, _ = starting.start(db, "Fix it", actor="alice", owner="alice",
                        target=f"github-status:{REPO}@{SHA}", kind=Kind.LONG_RUNNING,
                        max_silence=3600, gates=[starting.parse_gate("tests=command:true")],
                        clock=clock)
    worker = runs.Run(db, run.id, actor="w1", clock=clock)
    worker.claim()
    worker.record_command(["true"])
    worker.ready(PRIVATE, public_summary=PUBLIC)
    owner = runs.Run(db, run.id, actor="alice", clock=clock)
    owner.review()
    owner.approve()
    github.fail("/statuses/", "accept_drop")
    drain_until_settled(relay(db, clock, github, board_url="https://board.example"), clock)
    posted = github.statuses[(REPO, SHA)]
    latest = {s["context"]: s for s in posted}
    assert set(latest) == {"waypost/tests", "waypost/run"}
    assert latest["waypost/run"]["state"] == "success"
    assert latest["waypost/tests"]["state"] == "success"
    assert latest["waypost/run"]["target_url"] == f"https://board.example/runs/{run.id}"
    assert len(latest["waypost/run"]["description"]) <= 140
    packet = db.get(run.id)
    assert packet.receipt is not None
    assert packet.receipt.assurance is DeliveryAssurance.UPSERT


def test_a_skipped_gate_is_no_success_on_the_commit(
        db: Store, clock: FakeClock, github: FakeGitHub) -> None:
    """README, GitHub: a gate that did not run (the worker's gate the owner never adopted:
    review records it skipped) is posted as `failure`, saying it was skipped; the owner's
    gate that ran and passed is `success`."""
    run, _ = starting.start(db, "Fix it", actor="alice", owner="alice",
                            target=f"github-status:{REPO}@{SHA}", kind=Kind.LONG_RUNNING,
                            max_silence=3600, gates=[starting.parse_gate("tests=command:true")],
                            clock=clock)
    worker = runs.Run(db, run.id, actor="w1", clock=clock)
    worker.claim()
    worker.add_gate("lint", "command:true")
    worker.record_command(["true"])
    worker.ready(PRIVATE, public_summary=PUBLIC)
    owner = runs.Run(db, run.id, actor="alice", clock=clock)
    owner.review()
    owner.approve(waivers={"lint": "the worker's gate; CI runs lint"})
    drain_until_settled(relay(db, clock, github), clock)
    latest = {s["context"]: s for s in github.statuses[(REPO, SHA)]}
    assert latest["waypost/lint"]["state"] == "failure"
    assert latest["waypost/lint"]["description"].startswith("skipped: ")
    assert latest["waypost/tests"]["state"] == "success"
    assert latest["waypost/run"]["state"] == "success"
    assert db.get(run.id).state is State.DELIVERED


def test_a_retry_after_header_is_respected(db: Store, clock: FakeClock,
                                          github: FakeGitHub) -> None:
    approved_run(db, clock, target=f"github:{REPO}#4")
    github.fail("/comments", "429")
    [first] = relay(db, clock, github, max_delay=60.0).drain()
    assert first.next_attempt_at - clock.now >= timedelta(seconds=1)
    assert next(d for d in db.deliveries([first.run_id])
                if d.purpose is Purpose.FINAL).status is DeliveryStatus.QUEUED


def test_a_github_status_notify_target_shows_the_run_pending(
        db: Store, clock: FakeClock, github: FakeGitHub) -> None:
    approved_run(db, clock, notify=f"github-status:{REPO}@{SHA}")  # ready_for_review
    relay(db, clock, github).drain()
    [status] = github.statuses[(REPO, SHA)]
    assert (status["context"], status["state"]) == ("waypost/run", "pending")
    assert "ready for review" in status["description"]


def test_a_comment_that_only_quotes_the_marker_is_not_taken_for_the_runs(
        db: Store, clock: FakeClock, github: FakeGitHub) -> None:
    run_id = approved_run(db, clock, target=f"github:{REPO}#5")
    quoted = f"> <!-- waypost run={run_id} delivery=x -->\nwhy is this here?"
    github.comments[(REPO, 5)] = [{"id": 1, "body": quoted}]
    relay(db, clock, github).drain()
    first, made = github.comments[(REPO, 5)]
    assert first["body"] == quoted
    assert made["body"].startswith(f"<!-- waypost run={run_id} ")
