"""Every role x operation over HTTP: what a token's role may not do is refused with 403
and leaves the store exactly as it was (every row of every table); what it may do is never
refused for its role. Wrong, expired, revoked and other-run tokens change nothing."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

import waypost
from tests.helpers import dump_store
from tests.http_support import Api, issue, serving
from waypost.durations import utcnow
from waypost.model import BlockerKind
from waypost.usecases import tokens


@dataclass(frozen=True)
class Op:
    name: str
    path: str  # RUN: the run under test
    body: Any = None
    content: bytes | None = None  # an upload's bytes
    read: bool = False

    def send(self, api: Api, run: str) -> httpx.Response:
        path = self.path.replace("RUN", run)
        if self.read:
            return api.get(path)
        if self.content is not None:
            return api.post(path, content=self.content, role="report")
        return api.post(path, self.body)


OPS = (
    Op("list", "/api/runs", read=True),
    Op("show", "/api/runs/RUN", read=True),
    Op("events", "/api/runs/RUN/events", read=True),
    Op("verify", "/api/runs/RUN/verify", read=True),
    Op("a2a", "/a2a/tasks/RUN", read=True),
    Op("download", "/api/runs/RUN/artifacts/notes.md", read=True),
    Op("start", "/api/runs", {"title": "another run"}),
    Op("claim", "/api/runs/RUN/claim"),
    Op("resume", "/api/runs/RUN/resume"),
    Op("heartbeat", "/api/runs/RUN/heartbeat", {"note": "still here"}),
    Op("block", "/api/runs/RUN/block", {"kind": "other", "detail": "the printer jammed"}),
    Op("unblock-own", "/api/runs/RUN/unblock", {"blocker": "b1", "resolution": "fixed"}),
    Op("unblock-owners", "/api/runs/RUN/unblock", {"blocker": "b2", "resolution": "given"}),
    Op("artifact", "/api/runs/RUN/artifacts/report.md",
       content=b"# Report\n\nEverything that was asked for is done and checked.\n"),
    Op("evidence", "/api/runs/RUN/evidence", {"kind": "test", "reason": "no staging key"}),
    Op("add-gate", "/api/runs/RUN/gates", {"name": "notes", "check": "artifact:notes.md"}),
    Op("adopt-gate", "/api/runs/RUN/gates/adopt", {"name": "notes"}),
    Op("ready", "/api/runs/RUN/ready", {"summary": "done"}),
    Op("review", "/api/runs/RUN/review"),
    Op("approve", "/api/runs/RUN/approve"),
    Op("changes", "/api/runs/RUN/changes", {"reason": "add a test"}),
    Op("transfer", "/api/runs/RUN/transfer", {"authority": "approve", "to": "erin"}),
    Op("retarget", "/api/runs/RUN/retarget", {"target": "none:"}),
    Op("cancel", "/api/runs/RUN/cancel", {"reason": "not needed"}),
)
READS = {op.name for op in OPS if op.read}
WRITES = {op.name for op in OPS if not op.read}
OWNERS_ONLY = {"review", "approve", "changes", "transfer", "retarget", "cancel", "start",
               "unblock-owners", "adopt-gate"}
# the bytes of an artifact are for whom sees everything of the run (README, "What each
# reader sees"): a viewer's, a watcher's or another holder's token reads the public view
BYTES = {"download"}
# token -> (holder, role, scoped to the run under test?, other run?), operations refused
ROLES: dict[str, tuple[tuple[str, str, str | None], set[str]]] = {
    "viewer": (("bob", "viewer", None), WRITES | BYTES),
    "watcher": (("carol", "watcher", None), WRITES | BYTES),
    "worker": (("worker-1", "worker", "RUN"), OWNERS_ONLY),
    # its listing holds its own run alone (test_a_run_token_lists_its_run_alone)
    "worker-of-another-run": (("worker-1", "worker", "OTHER"), (READS | WRITES) - {"list"}),
    "owner": (("alice", "owner", None), set()),
    "owner-of-other-runs": (("dave", "owner", None), (WRITES - {"start"}) | BYTES),
}


@pytest.fixture
def world(tmp_path: Path) -> tuple[Path, str, str]:
    """A store with alice's run (worker-1 holds the lease, one blocker it resolves and one
    only the owner does, a stored artifact) and another run."""
    path = tmp_path / "w.db"
    with waypost.open_store(str(path)) as store:
        run, _ = waypost.start(store, "Fix the flaky test", actor="alice", owner="alice",
                               target="none:", worker="worker-1")
        other, _ = waypost.start(store, "Something else", actor="alice", owner="alice",
                                 target="none:")
        notes = tmp_path / "notes.md"
        notes.write_text("Notes on what was tried, long enough to be an artifact.\n")
        work = waypost.Run(store, run.id, actor="worker-1", epoch=1)
        work.add_artifact(str(notes), role=waypost.ArtifactRole.DRAFT, max_bytes=1 << 20)
        work.block(BlockerKind.OTHER, "the test database is down")
        work.block(BlockerKind.MISSING_INPUT, "the staging API key")
    return path, run.id, other.id


@pytest.mark.parametrize("role", list(ROLES))
def test_a_role_is_refused_what_it_may_not_do_and_nothing_changes(
        world: tuple[Path, str, str], role: str) -> None:
    path, run, other = world
    (holder, as_role, scope), refused = ROLES[role]
    scoped = {"RUN": run, "OTHER": other}.get(scope or "")
    api_token = issue(str(path), holder, as_role, run_id=scoped)
    with serving(str(path)) as base:
        api = Api(base, api_token)
        for op in OPS:
            before = dump_store(path)
            response = op.send(api, run)
            if op.name in refused:
                assert response.status_code == 403, (role, op.name, response.text)
                assert response.json()["error"]["code"] == "not_authorized"
                assert dump_store(path) == before, (role, op.name)
            else:
                assert response.status_code not in (401, 403), (role, op.name, response.text)
                assert response.status_code < 500, (role, op.name, response.text)


def test_a_run_token_lists_its_run_alone(world: tuple[Path, str, str]) -> None:
    path, run, other = world
    with serving(str(path)) as base:
        mine = Api(base, issue(str(path), "worker-1", "worker", run_id=other)).get("/api/runs")
        every = Api(base, issue(str(path), "bob", "viewer")).get("/api/runs")
    assert [p["id"] for p in mine.json()["runs"]] == [other]
    assert {p["id"] for p in every.json()["runs"]} == {run, other}


def test_an_owner_token_starts_runs_for_its_holder_only(world: tuple[Path, str, str]) -> None:
    path, _, _ = world
    with serving(str(path)) as base:
        api = Api(base, issue(str(path), "alice", "owner"))
        before = dump_store(path)
        refused = api.post("/api/runs", {"title": "for bob", "owner": "bob"})
        assert refused.status_code == 403
        assert dump_store(path) == before
        started = api.ok("/api/runs", {"title": "for alice"})
        assert started["packet"]["owner"] == "alice"
        assert started["packet"]["created_by"] == "alice"


def test_a_worker_resolves_only_its_own_kinds_of_blocker(world: tuple[Path, str, str]) -> None:
    path, run, _ = world
    with serving(str(path)) as base:
        api = Api(base, issue(str(path), "worker-1", "worker", run_id=run))
        refused = api.post(f"/api/runs/{run}/unblock", {"blocker": "b2", "resolution": "x"})
        assert refused.status_code == 403
        assert "only the owner resolves missing_input" in refused.json()["error"]["message"]
        assert api.ok(f"/api/runs/{run}/unblock", {"blocker": "b1", "resolution": "up again",
                                                   "epoch": 1})["state"] == "blocked"


def test_tokens_that_are_missing_wrong_expired_or_revoked_get_401_and_change_nothing(
        world: tuple[Path, str, str]) -> None:
    path, run, _ = world
    with waypost.open_store(str(path)) as store:
        expired, _ = tokens.issue(store, holder="alice", role="owner", run_id=None,
                                  ttl=timedelta(hours=1), by="test",
                                  now=utcnow() - timedelta(hours=2))
        revoked, grant = tokens.issue(store, holder="alice", role="owner", run_id=None,
                                      ttl=None, by="test")
        tokens.revoke(store, grant.id)
    live = issue(str(path), "alice", "owner")
    wrong = live[:-4] + ("aaaa" if not live.endswith("aaaa") else "bbbb")
    with serving(str(path)) as base:
        for token in (None, wrong, expired, revoked, "x" * 5000, "not a token at all"):
            api = Api(base, token)
            before = dump_store(path)
            for response in (api.post(f"/api/runs/{run}/cancel", {"reason": "stop"}),
                             api.get(f"/api/runs/{run}"), api.get("/api/runs")):
                assert response.status_code == 401, response.text
                assert response.json()["error"]["code"] == "unauthenticated"
            assert dump_store(path) == before
        basic = httpx.get(f"{base}/api/runs", headers={"Authorization": "Basic YTpi"})
        assert basic.status_code == 401
