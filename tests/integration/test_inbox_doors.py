"""The inbox at the authenticated doors (a real server): the reader is the token's holder;
its items are those of the runs it owns that its token may read, as the read model shows
them (a viewer's token of the owner sees the public summary, never the private one); the
acknowledgement is `POST /api/inbox/ack` (application/json, as every command); and the
hook route's session start tells the holder its news once."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests import pg
from tests.helpers import FakeClock
from tests.http_support import Api, issue, serving
from waypost.model import EvidenceKind, Kind, Verdict
from waypost.store import open_store
from waypost.usecases import runs, starting

PRIVATE = "PrivateMark7731 in the private summary"
PUBLIC = "PublicMark3380 in the public summary"


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "store.db")
        return
    pg.require_postgres()
    with pg.fresh_schema() as found:
        yield found


CLOCK = FakeClock()  # one clock, moving on: the items' order is their time's


def _ready(url: str, title: str) -> str:
    """A run alice owns, submitted by w1 with a private and a public summary."""
    clock = CLOCK
    clock.advance(60)
    with open_store(url, create=True) as store:
        run, _ = starting.start(store, title, actor="alice", owner="alice", target="none:",
                                kind=Kind.LONG_RUNNING, max_silence=3600, clock=clock)
        worker = runs.Run(store, run.id, actor="w1", clock=clock)
        worker.claim()
        worker.report_evidence(EvidenceKind.TEST, Verdict.PASSED, "pytest -q: 3 passed")
        worker.ready(PRIVATE, public_summary=PUBLIC)
    return run.id


def test_the_token_holder_reads_and_acknowledges_its_inbox(url: str) -> None:
    first, second = _ready(url, "first"), _ready(url, "second")
    owner, viewer = issue(url, "alice", "owner"), issue(url, "alice", "viewer")
    one_run, bob = issue(url, "alice", "owner", run_id=second), issue(url, "bob", "owner")
    with serving(url) as base:
        listed = Api(base, owner).get("/api/inbox")
        assert listed.status_code == 200, listed.text
        items = listed.json()["items"]
        assert [(i["run_id"], i["topic"]) for i in items] == [
            (first, "ready_for_review"), (second, "ready_for_review")]
        assert PRIVATE in items[0]["detail"]
        seen = Api(base, viewer).get("/api/inbox").json()["items"]
        assert [i["run_id"] for i in seen] == [first, second]
        assert all(PUBLIC in i["detail"] and PRIVATE not in json.dumps(i) for i in seen)
        assert [i["run_id"] for i in Api(base, one_run).get("/api/inbox").json()["items"]] \
            == [second]
        assert Api(base, bob).get("/api/inbox").json() == {
            "reader": "bob", "items": [], "acknowledged": False, "more": False}
        assert Api(base).get("/api/inbox").status_code == 401

        refused = httpx.post(f"{base}/api/inbox/ack", content=b"{}", timeout=30, headers={
            "Authorization": f"Bearer {one_run}", "Content-Type": "text/plain"})
        assert refused.status_code == 415, refused.text
        acked = Api(base, one_run).ok("/api/inbox/ack")
        assert acked["acknowledged"] is True
        assert [i["run_id"] for i in acked["items"]] == [second]
        left = Api(base, owner).get("/api/inbox").json()["items"]
        assert [i["run_id"] for i in left] == [first]  # the narrow token acknowledged less


def test_the_hook_routes_session_start_tells_the_holder_its_news_once(url: str) -> None:
    run = _ready(url, "told at a session's start")
    owner = issue(url, "alice", "owner")

    def session_start(session: str) -> str:
        body = json.dumps({"session_id": session, "hook_event_name": "SessionStart"})
        answer = httpx.post(f"{base}/hooks/claude/session-start", content=body, timeout=30,
                            headers={"Authorization": f"Bearer {owner}",
                                     "Content-Type": "application/json"})
        assert answer.status_code == 200, answer.text
        told = answer.json().get("hookSpecificOutput", {}).get("additionalContext") or ""
        assert isinstance(told, str)
        return told

    with serving(url) as base:
        told = session_start("parent-1")
        assert "while you were gone" in told
        assert run in told
        assert "ready_for_review" in told
        assert session_start("parent-2") == ""  # once
        [kept] = Api(base, owner).get("/api/inbox").json()["items"]
        assert kept["shown"] is True  # shown is not acknowledged


def test_the_hook_routes_news_for_a_viewer_withholds_the_projects_private_terms(
        url: str) -> None:
    """A session started with a viewer's token is told its news as the public view shows
    it: the project's `[sanitize] deny` terms withheld there too, as at every other read."""
    from waypost.config import Config

    codename = "OrionCodename4417"
    run = _ready(url, f"Ship {codename} to staging")
    viewer = issue(url, "alice", "viewer")
    body = json.dumps({"session_id": "viewer-1", "hook_event_name": "SessionStart"})
    with serving(url, project=Config(deny=(codename,))) as base:
        answer = httpx.post(f"{base}/hooks/claude/session-start", content=body, timeout=30,
                            headers={"Authorization": f"Bearer {viewer}",
                                     "Content-Type": "application/json"})
    assert answer.status_code == 200, answer.text
    told = answer.json().get("hookSpecificOutput", {}).get("additionalContext") or ""
    assert run in told
    assert codename not in told
    assert "[REDACTED:" in told
