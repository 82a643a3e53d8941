"""Gates are the owner's, at every door: the CLI, the HTTP API, MCP and the board. A worker
adds a command gate; it is shown as the worker's; the owner's review does not run it (the
marker file its command would make is not there afterwards) until the owner adopts it,
and then does; anyone but the owner is refused the adoption, and the store is left exactly
as it was. HTTP, MCP and the board run on both backends."""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

import waypost
from tests import pg
from tests.board_support import serving as serving_board
from tests.helpers import Cli
from tests.helpers import recorded as run_recorded
from tests.http_support import Api, issue, serving
from tests.integration.test_mcp import call, refused
from waypost.model import Gate
from waypost.store import open_store
from waypost.usecases import runs, starting

REPORT = "# Report\n\nThe race is fixed: the session is created before the redirect now.\n"


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with contextlib.ExitStack() as stack:
        yield (stack.enter_context(pg.fresh_schema()) if request.param == "postgres"
               else f"sqlite:///{tmp_path / 'w.db'}")


def started(url: str, tmp_path: Path) -> str:
    """alice's run, worked by w1, with alice's own command gate `mine`."""
    with open_store(url, create=True) as store:
        run, _ = starting.start(store, "Fix the login test", actor="alice", owner="alice",
                                target="none:", worker="w1",
                                gates=[Gate(name="mine", check=touch(tmp_path, "mine"))])
    return run.id


def touch(tmp_path: Path, marker: str) -> str:
    return f"command:touch {tmp_path / marker}"


def to_review(url: str, run: str, tmp_path: Path) -> None:
    with open_store(url) as store:
        work = runs.Run(store, run, actor="w1", epoch=1)
        report = tmp_path / "report.md"
        report.write_text(REPORT)
        work.add_artifact(str(report), role=waypost.ArtifactRole.REPORT, max_bytes=1 << 20)
        work.report_evidence(waypost.EvidenceKind.TEST, waypost.Verdict.PASSED, "3 pass")
        work.ready("done", artifacts=["report.md"])


def recorded(url: str, run: str) -> tuple[bytes, bytes]:
    """The run's packet and events as stored: a refusal must leave both as they were."""
    with open_store(url) as store:
        return run_recorded(store, run)


def gate_of(packet: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(g for g in packet["gates"] if g["name"] == name)
    return found


# --- the CLI ------------------------------------------------------------------------------


def test_the_cli_adds_shows_refuses_and_adopts(cli: Cli, tmp_path: Path) -> None:
    cli.ok("init")
    url = str(cli.store)
    run = started(url, tmp_path)
    added = cli("gate", "add", run, f"evil={touch(tmp_path, 'evil')}", "--json", actor="w1")
    assert added.code == 0, added.err
    assert (added.json()["gate"]["declared_by"], added.json()["runs_at_review"]) == ("w1",
                                                                                     False)
    shown = cli("show", run, "--json").json()
    assert gate_of(shown, "evil")["declared_by"] == "w1"
    assert "adopted_by" not in gate_of(shown, "evil")
    assert gate_of(shown, "mine")["declared_by"] == "alice"
    assert f"NOT run at review until the owner adopts it: waypost gate adopt {run} evil" \
        in cli.ok("show", run)
    to_review(url, run, tmp_path)
    review = cli("review", run, "--json")
    assert review.code == 3
    verdicts = {g["gate"]: (g["verdict"], g["awaits_adoption"]) for g in review.json()["gates"]}
    assert verdicts["evil"] == ("skipped", True)
    assert verdicts["mine"] == ("passed", False)
    assert not (tmp_path / "evil").exists()
    assert cli("approve", run).code == 3
    for actor in ("w1", "mallory"):
        before = recorded(url, run)
        refusal = cli("gate", "adopt", run, "evil", "--json", actor=actor)
        assert refusal.code == 3
        assert refusal.error()["code"] == "not_authorized"
        assert recorded(url, run) == before
    adopted = cli("gate", "adopt", run, "evil", "--json").json()
    assert adopted["gate"]["adopted_by"] == "alice"
    assert cli("review", run).code == 0
    assert (tmp_path / "evil").exists()
    assert cli.ok("verify", run) == "ok: 1 run(s) verified"


def test_the_cli_adds_an_optional_gate_as_optional(cli: Cli, tmp_path: Path) -> None:
    """`--optional` is what it says: the gate is recorded as not required, and a gate
    added without it is required."""
    cli.ok("init")
    run = started(str(cli.store), tmp_path)
    cli.ok("gate", "add", run, "lint=artifact:report.md", "--optional")
    cli.ok("gate", "add", run, "docs=artifact:report.md")
    shown = cli("show", run, "--json").json()
    assert (gate_of(shown, "lint")["required"], gate_of(shown, "docs")["required"]) == (
        False, True)


# --- the HTTP API -------------------------------------------------------------------------


def test_the_api_adds_refuses_and_adopts(store_url: str, tmp_path: Path) -> None:
    run = started(store_url, tmp_path)
    owner = issue(store_url, "alice", "owner")
    tokens = {"worker": issue(store_url, "w1", "worker", run_id=run),
              "other owner": issue(store_url, "dave", "owner"),
              "viewer": issue(store_url, "vic", "viewer")}
    with serving(store_url, allow_exec=True) as base:
        worker = Api(base, tokens["worker"])
        packet = worker.ok(f"/api/runs/{run}/gates",
                           {"name": "evil", "check": touch(tmp_path, "evil")})["packet"]
        assert gate_of(packet, "evil")["declared_by"] == "w1"
        to_review(store_url, run, tmp_path)
        alice = Api(base, owner)
        reviewed = alice.ok(f"/api/runs/{run}/review")
        verdicts = {g["gate"]: g["verdict"] for g in reviewed["gates"]}
        assert (verdicts["evil"], verdicts["mine"]) == ("skipped", "passed")
        assert not (tmp_path / "evil").exists()
        for who, token in tokens.items():
            before = recorded(store_url, run)
            refusal = Api(base, token).post(f"/api/runs/{run}/gates/adopt", {"name": "evil"})
            assert refusal.status_code == 403, (who, refusal.text)
            assert recorded(store_url, run) == before, who
        adopted = alice.ok(f"/api/runs/{run}/gates/adopt", {"name": "evil"})["packet"]
        assert gate_of(adopted, "evil")["adopted_by"] == "alice"
        assert alice.ok(f"/api/runs/{run}/review")["approvable"] is True
        assert (tmp_path / "evil").exists()


def test_a_remote_review_is_not_refused_for_a_gate_it_does_not_run(
        store_url: str, tmp_path: Path) -> None:
    """Without --allow-exec a review refuses a gate that would run a command here: only
    the gates it would run count, so a worker's gate cannot hold up the owner's review."""
    with open_store(store_url, create=True) as store:
        run, _ = starting.start(store, "t", actor="alice", owner="alice", target="none:",
                                worker="w1")
    with serving(store_url) as base:
        Api(base, issue(store_url, "w1", "worker", run_id=run.id)).ok(
            f"/api/runs/{run.id}/gates", {"name": "evil", "check": touch(tmp_path, "evil")})
        to_review(store_url, run.id, tmp_path)
        reviewed = Api(base, issue(store_url, "alice", "owner")).ok(
            f"/api/runs/{run.id}/review")
    assert {g["gate"]: g["verdict"] for g in reviewed["gates"]}["evil"] == "skipped"
    assert not (tmp_path / "evil").exists()


# --- MCP ----------------------------------------------------------------------------------


@asynccontextmanager
async def mcp_as(url: str, actor: str, logs: Path) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "waypost", "mcp", "--store", url, "--as", actor],
        env={"PYTHONPATH": os.pathsep.join(sys.path)}, cwd=str(logs))
    with (logs / f"mcp-{actor}.log").open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            yield session


def test_the_mcp_tools_add_refuse_and_adopt(store_url: str, tmp_path: Path) -> None:
    run = started(store_url, tmp_path)

    async def scenario() -> None:
        async with mcp_as(store_url, "w1", tmp_path) as w1:
            added = await call(w1, "add_gate", run=run, name="evil",
                               check=touch(tmp_path, "evil"))
            assert (added["gate"]["declared_by"], added["gate"]["runs_at_review"]) == (
                "w1", False)
            to_review(store_url, run, tmp_path)
            before = recorded(store_url, run)
            said = await refused(w1, "adopt_gate", run=run, name="evil")
            assert "only its owner alice" in said
            assert said.splitlines()[-1].startswith("next tool: ")
            assert recorded(store_url, run) == before
        async with mcp_as(store_url, "alice", tmp_path) as alice:
            review = await call(alice, "review", run=run)
            assert review["approvable"] is False
            assert not (tmp_path / "evil").exists()
            adopted = await call(alice, "adopt_gate", run=run, name="evil")
            assert adopted["gate"]["adopted_by"] == "alice"
            assert (await call(alice, "review", run=run))["approvable"] is True
            assert (tmp_path / "evil").exists()

    async def bounded() -> None:
        with anyio.fail_after(120):
            await scenario()

    anyio.run(bounded)


# --- the board ----------------------------------------------------------------------------


def _csrf(page: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    assert found, "the page carries no CSRF token"
    return found.group(1)


@contextlib.contextmanager
def signed_in(base: str, secret: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base, timeout=20, follow_redirects=False) as client:
        assert client.post("/login", data={"token": secret},
                           headers={"Origin": base}).status_code == 303
        yield client


def test_the_board_offers_adoption_to_the_owner_alone(store_url: str, tmp_path: Path) -> None:
    run = started(store_url, tmp_path)
    with open_store(store_url) as store:
        runs.Run(store, run, actor="w1", epoch=1).add_gate("evil", touch(tmp_path, "evil"))
    secrets = {who: issue(store_url, who, role)
               for who, role in (("alice", "owner"), ("bob", "owner"), ("vic", "viewer"))}
    adopt = f'action="/runs/{run}/adopt"'
    with serving_board(store_url) as server:
        own = {"Origin": server.url}
        for who in ("bob", "vic"):
            with signed_in(server.url, secrets[who]) as client:
                page = client.get(f"/runs/{run}").text
                assert "not run at review until the owner adopts it" in page
                assert adopt not in page
                before = recorded(store_url, run)
                response = client.post(f"/runs/{run}/adopt", headers=own,
                                       data={"csrf": _csrf(page), "gate": "evil"})
                assert response.status_code == 403, (who, response.text)
                assert recorded(store_url, run) == before, who
        with signed_in(server.url, secrets["alice"]) as alice:
            page = alice.get(f"/runs/{run}").text
            assert adopt in page
            assert "declared by w1" in page
            response = alice.post(f"/runs/{run}/adopt", headers=own,
                                  data={"csrf": _csrf(page), "gate": "evil"})
            assert response.status_code == 303, response.text
            page = alice.get(f"/runs/{run}").text
            assert "adopted by alice" in page
            assert adopt not in page
    with open_store(store_url) as store:
        assert store.get(run).gates[-1].adopted_by == "alice"
