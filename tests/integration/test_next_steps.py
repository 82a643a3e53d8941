"""A refusal's next step, followed at each door: the CLI's `next.command`, the MCP tool
error's `next` tool call and the HTTP error document's `next` route each take the run on
when the caller fills in what the step asks for. The same refusal names the same step at
every door (the verb, the run, the arguments); each door only words it."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from mcp.types import CallToolResult

from tests.helpers import Cli
from tests.http_support import Api, issue, serving
from tests.integration.test_mcp import call, drive, server
from waypost.model import BlockerKind, EvidenceKind, Verdict
from waypost.store import open_store
from waypost.usecases import runs, starting

FILLED = {"resolution": "the disk was emptied", "reason": "the tests fail",
          "summary": "done"}


def blocked_run(store: Path) -> str:
    """A run worked by w1, blocked by its own b1 (a worker resolves `other`), with evidence."""
    with open_store(str(store), create=True) as opened:
        run, _ = starting.start(opened, "Fix it", actor="alice", owner="alice",
                                target="none:", worker="w1")
        worker = runs.Run(opened, run.id, actor="w1", epoch=1)
        worker.report_evidence(EvidenceKind.TEST, Verdict.PASSED, "3 passed")
        worker.block(BlockerKind.OTHER, "the disk is full")
        return run.id


def test_the_cli_names_the_command_that_takes_the_run_on(cli: Cli) -> None:
    cli.ok("init")
    run = blocked_run(cli.store)
    refused = cli("ready", run, "--summary", "done", "--json", actor="w1")
    assert refused.code == 3
    found = refused.error()["next"]
    assert (found["verb"], found["run"], found["args"], found["fill"]) == (
        "unblock", run, {"blocker": "b1"}, ["resolution"])
    # written for the caller who was refused, as it named itself: it runs as written
    assert found["command"] == f"waypost unblock {run} b1 --resolution TEXT --as w1"
    argv = shlex.split(found["command"].replace("TEXT", shlex.quote(FILLED["resolution"])))
    cli.ok(*argv[1:])
    cli.ok("ready", run, "--summary", "done", actor="w1")


def test_the_http_api_names_the_route_that_takes_the_run_on(tmp_path: Path) -> None:
    store = tmp_path / "w.db"
    run = blocked_run(store)
    with serving(str(store)) as base:
        worker = Api(base, issue(str(store), "w1", "worker", run))
        refused = worker.post(f"/api/runs/{run}/ready", {"summary": "done", "epoch": 1})
        assert refused.status_code == 409
        found = refused.json()["error"]["next"]
        assert found == {"verb": "unblock", "method": "POST",
                         "path": f"/api/runs/{run}/unblock", "body": {"blocker": "b1"},
                         "fill": ["resolution"], "actor": None}
        assert f"POST /api/runs/{run}/unblock" in refused.json()["error"]["hint"]
        body = {**found["body"], **{name: FILLED[name] for name in found["fill"]}}
        worker.ok(found["path"], {**body, "epoch": 1})
        assert worker.ok(f"/api/runs/{run}/ready", {"summary": "done",
                                                    "epoch": 1})["state"] == "ready_for_review"


def test_mcp_names_the_tool_call_that_takes_the_run_on(tmp_path: Path) -> None:
    store = tmp_path / "w.db"
    run = blocked_run(store)

    async def scenario() -> None:
        async with server(store, "w1") as w1:
            result = await w1.call_tool("mark_ready", {"run": run, "summary": "done"})
            assert isinstance(result, CallToolResult)
            assert result.is_error
            document: dict[str, Any] = result.structured_content or {}
            assert document["error"]["code"] == "illegal_transition"
            found = document["next"]
            assert found == {"tool": "unblock", "verb": "unblock",
                             "arguments": {"run": run, "blocker": "b1"},
                             "fill": ["resolution"], "actor": None}
            arguments = {**found["arguments"],
                         **{name: FILLED[name] for name in found["fill"]}}
            await call(w1, found["tool"], **arguments)
            ready = await call(w1, "mark_ready", run=run, summary="done")
            assert ready["state"] == "ready_for_review"

    drive(scenario)
