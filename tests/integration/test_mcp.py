"""`waypost mcp` driven over stdio by the official MCP client, as an agent host drives it:
a real server process on a real store, every answer checked against the tool's own
output schema (the client re-validates it too)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult, TextContent, TextResourceContents

from waypost import model
from waypost.config import Config
from waypost.mcp import shapes

TOOLS = {"checkpoint_start", "checkpoint_status", "heartbeat", "block", "unblock",
         "add_artifact", "run_evidence", "check_evidence", "skip_evidence", "mark_ready",
         "claim", "resume", "review", "approve", "request_changes", "transfer", "cancel",
         "retarget", "add_gate", "adopt_gate", "checkpoint_wait", "inbox"}
AGAIN = "next tool: {} (again, with corrected arguments)"
PASSING = [sys.executable, "-c", "print('3 passed')"]


@asynccontextmanager
async def server(store: Path, actor: str, *extra: str,
                 host_session: str | None = None) -> AsyncIterator[ClientSession]:
    env = {"PYTHONPATH": os.pathsep.join(sys.path)}
    if host_session is not None:
        env["CLAUDE_CODE_SESSION_ID"] = host_session
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "waypost", "mcp", "--store", str(store), "--as", actor, *extra],
        env=env, cwd=str(store.parent))
    with (store.parent / f"mcp-{actor}.log").open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            yield session


def drive(work: Callable[[], Awaitable[None]]) -> None:
    """Run an async scenario, bounded (a hung server fails the test, never hangs it)."""

    async def bounded() -> None:
        with anyio.fail_after(120):
            await work()

    anyio.run(bounded)


async def call(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    """A tool's structured answer, checked against the tool's output schema."""
    result = await session.call_tool(tool, arguments)
    assert isinstance(result, CallToolResult)
    assert not result.is_error, text_of(result)
    assert result.structured_content is not None
    listed = {t.name: t for t in (await session.list_tools()).tools}
    schema = listed[tool].output_schema
    assert schema is not None
    document: dict[str, Any] = result.structured_content
    jsonschema.validate(document, schema)
    return document


async def refused(session: ClientSession, tool: str, **arguments: Any) -> str:
    result = await session.call_tool(tool, arguments)
    assert isinstance(result, CallToolResult)
    assert result.is_error, result
    return text_of(result)


def text_of(result: CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))


def test_every_tool_has_a_description_and_both_schemas(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with server(tmp_path / "w.db", "alice") as session:
            tools = (await session.list_tools()).tools
            assert {t.name for t in tools} == TOOLS
            for tool in tools:
                assert len(tool.description or "") > 80, tool.name
                assert "next" in (tool.description or "").lower(), tool.name
                assert tool.input_schema["type"] == "object", tool.name
                assert tool.output_schema is not None, tool.name
                assert tool.output_schema["type"] == "object", tool.name
                assert "next" in tool.output_schema["required"], tool.name
                jsonschema.Draft202012Validator.check_schema(tool.output_schema)
            hints = {t.name: t.annotations for t in tools}
            assert hints["checkpoint_status"] is not None
            assert hints["checkpoint_status"].read_only_hint is True
            assert hints["cancel"] is not None
            assert hints["cancel"].destructive_hint is True
            assert hints["heartbeat"] is not None
            assert hints["heartbeat"].read_only_hint is False

    drive(scenario)


def test_a_whole_flow_start_artifact_evidence_ready_review_approve(tmp_path: Path) -> None:
    store = tmp_path / "w.db"

    async def scenario() -> None:
        async with server(store, "bob") as bob:
            started = await call(bob, "checkpoint_start", title="Fix the flaky test",
                                 owner="alice", target="none:", idempotency_key="k1")
            run = started["run"]
            assert (started["created"], started["state"], started["epoch"]) == (
                True, "in_progress", 1)
            again = await call(bob, "checkpoint_start", title="Fix the flaky test",
                               owner="alice", target="none:", idempotency_key="k1")
            assert (again["run"], again["created"]) == (run, False)
            await call(bob, "heartbeat", run=run, note="reproduced", progress=0.3)
            added = await call(bob, "add_artifact", run=run, name="report.md",
                               role="report", content="# Report\n\nThe race is fixed by "
                               "waiting for the lock before reading the counter.\n")
            assert added["artifact"]["name"] == "report.md"
            assert added["artifact"]["bytes"] > 50
            evidence = await call(bob, "run_evidence", run=run, command=PASSING,
                                  kind="test")
            assert evidence["evidence"]["verdict"] == "passed"
            assert "3 passed" in evidence["evidence"]["output_tail"]
            ready = await call(bob, "mark_ready", run=run, summary="fixed the race",
                               artifacts=["report.md"])
            assert ready["state"] == "ready_for_review"
            text = await refused(bob, "approve", run=run)
            assert "may not approve" in text
            assert "only alice may" in text
            assert text.splitlines()[-1].startswith("next tool: ")
            mine = await call(bob, "checkpoint_status")
            assert [r["id"] for r in mine["runs"]] == [run]
        async with server(store, "alice") as alice:
            review = await call(alice, "review", run=run)
            assert review["approvable"] is True
            assert review["next_call"]["arguments"]["reviewed"] in review["reviewed"]
            approved = await call(alice, "approve", run=run, reviewed=review["reviewed"])
            assert approved["state"] == "approved"
            assert approved["approval"]["reviewed"] == review["reviewed"]
        with model_store(store) as opened:
            packet = opened.get(run)
            assert packet.state == "approved"
            assert [e.verdict for e in packet.evidence][:1] == ["passed"]

    drive(scenario)


def model_store(path: Path) -> Any:
    import waypost

    return waypost.open_store(str(path))


def test_an_illegal_call_is_a_tool_error_naming_the_next_tool(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with server(tmp_path / "w.db", "bob") as bob:
            run = (await call(bob, "checkpoint_start", title="t", target="none:"))["run"]
            blocker = (await call(bob, "block", run=run, kind="missing_input",
                                  detail="the staging API key"))["blocker"]
            text = await refused(bob, "mark_ready", run=run, summary="done")
            assert blocker in text
            assert "next: " in text  # the CLI's hint, as the CLI gives it
            assert text.splitlines()[-1] == "next tool: unblock"
            missing = await refused(bob, "heartbeat", run="wp_nosuchrun")
            assert missing.splitlines()[-1] == "next tool: checkpoint_status"
            bad = await refused(bob, "block", run=run, kind="waiting", detail="x")
            assert "kind" in bad

    drive(scenario)


def test_run_evidence_over_the_limit_is_refused_up_front(tmp_path: Path) -> None:
    marker = tmp_path / "ran"

    async def scenario() -> None:
        async with server(tmp_path / "w.db", "bob", "--evidence-limit", "5s") as bob:
            run = (await call(bob, "checkpoint_start", title="t", target="none:"))["run"]
            touch = [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
            text = await refused(bob, "run_evidence", run=run, command=touch, timeout=30)
            assert f"run it in your shell: waypost evidence run {run} -- " in text
            assert not marker.exists()
            slow = [sys.executable, "-c", "import time; time.sleep(30)"]
            timed_out = await call(bob, "run_evidence", run=run, command=slow, timeout=1)
            assert timed_out["evidence"]["verdict"] == "failed"

    drive(scenario)


def test_the_packet_resource_validates_against_the_schema(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with server(tmp_path / "w.db", "bob") as bob:
            run = (await call(bob, "checkpoint_start", title="t", target="none:"))["run"]
            read = await bob.read_resource(f"waypost://runs/{run}")
            content = read.contents[0]
            assert isinstance(content, TextResourceContents)
            packet = json.loads(content.text)
            jsonschema.validate(packet, model.packet_schema())
            assert packet["id"] == run
            brief = (await bob.read_resource(f"waypost://runs/{run}/brief")).contents[0]
            assert isinstance(brief, TextResourceContents)
            assert run in brief.text
            board = (await bob.read_resource("waypost://board")).contents[0]
            assert isinstance(board, TextResourceContents)
            assert [r["id"] for r in json.loads(board.text)["runs"]] == [run]

    drive(scenario)


def test_the_enumerations_are_the_models() -> None:
    from typing import get_args

    assert set(get_args(shapes.BlockerKindName)) == {k.value for k in model.BlockerKind}
    assert set(get_args(shapes.ArtifactRoleName)) == {r.value for r in model.ArtifactRole}
    assert set(get_args(shapes.SkippedKindName)) == {k.value for k in model.EvidenceKind}
    assert set(get_args(shapes.EvidenceKindName)) == {
        k.value for k in model.EvidenceKind} - {"skipped"}
    assert set(get_args(shapes.KindName)) == {k.value for k in model.Kind}
    assert set(get_args(shapes.AuthorityName)) == {a.value for a in model.Authority}


def _strings(schema: dict[str, Any], defs: dict[str, Any]) -> list[dict[str, Any]]:
    """Every string a schema takes (through anyOf, arrays, objects' values, $refs)."""
    if "$ref" in schema:
        return _strings(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    found = [schema] if schema.get("type") == "string" else []
    for each in schema.get("anyOf", []):
        found += _strings(each, defs)
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            found += _strings(schema[key], defs)
    return found


def test_the_handoffs_tools_take_bounded_strings_only(tmp_path: Path) -> None:
    """claim, transfer and checkpoint_start's worker: a host may send any string; the
    schema bounds each (a length, or the enumeration), as every door bounds a name."""
    async def scenario() -> None:
        async with server(tmp_path / "w.db", "alice") as session:
            listed = {t.name: t for t in (await session.list_tools()).tools}
            for tool, arguments in (("claim", {"run"}), ("transfer", {"run", "authority", "to"}),
                                    ("checkpoint_start", {"worker"})):
                schema = listed[tool].input_schema
                properties = schema["properties"]
                assert arguments <= properties.keys(), tool
                for name in arguments:
                    strings = _strings(properties[name], schema.get("$defs", {}))
                    assert strings, f"{tool}.{name} takes no string"
                    for each in strings:
                        assert "enum" in each or 0 < each.get("maxLength", 0) <= 200, (
                            f"{tool}.{name} takes an unbounded string: {each}")
                    assert len(properties[name].get("description", "")) > 20, (tool, name)
            authority = listed["transfer"].input_schema["properties"]["authority"]
            assert authority.get("enum") == ["approve", "deliver", "takeover"], authority

    drive(scenario)


def test_after_a_takeover_this_servers_writes_are_refused(tmp_path: Path) -> None:
    """The server writes under the lease epoch it holds: once another process of the same
    worker takes the run over (epoch 2), this server's heartbeat is refused as stale."""
    import waypost

    store = tmp_path / "w.db"

    async def scenario() -> None:
        async with server(store, "bob") as bob:
            run = (await call(bob, "checkpoint_start", title="t", owner="alice",
                              target="none:"))["run"]
            await call(bob, "heartbeat", run=run)
            with waypost.open_store(str(store)) as opened:
                waypost.Run(opened, run, actor="bob").resume()
            text = await refused(bob, "heartbeat", run=run, note="still here")
            assert "with lease epoch 1, but a newer process of bob took the lease" in text
            assert "next tool: checkpoint_status" in text  # it stops: no resume of its own

    drive(scenario)


def test_artifacts_by_path_and_their_refusals(tmp_path: Path) -> None:
    report = tmp_path / "notes.md"
    report.write_text("# Notes\n\nEverything the owner needs to check the fix.\n")

    async def scenario() -> None:
        async with server(tmp_path / "w.db", "bob") as bob:
            run = (await call(bob, "checkpoint_start", title="t", target="none:"))["run"]
            added = await call(bob, "add_artifact", run=run, name="notes.md",
                               path=str(report))
            assert added["artifact"]["bytes"] == report.stat().st_size
            both = await refused(bob, "add_artifact", run=run, name="x.md", content="x",
                                 path=str(report))
            assert both.splitlines()[-1].startswith("next tool: add_artifact")
            escape = await refused(bob, "add_artifact", run=run, name="../../x",
                                   content="some text")
            assert "next tool: " in escape
            skipped = await call(bob, "skip_evidence", run=run, kind="live_check",
                                 reason="no staging site yet")
            assert skipped["evidence"]["verdict"] == "skipped"
            checked = await call(bob, "check_evidence", run=run, check="artifact:notes.md")
            assert checked["evidence"]["verdict"] == "passed"

    drive(scenario)


def test_an_unexpected_exception_is_a_short_error_saying_it_is_a_bug(
        caplog: pytest.LogCaptureFixture) -> None:
    from waypost.mcp.answers import answer

    def broken() -> dict[str, Any]:
        raise KeyError("a secret detail")

    result = answer("heartbeat", broken)
    assert result.is_error
    assert "a bug" in text_of(result)
    assert "secret" not in text_of(result)
    assert "secret" in caplog.text  # the traceback stays in the server's log


def test_the_sdk_is_the_sdk_inside_waypost_mcp() -> None:
    """`from mcp.server import MCPServer` inside `waypost.mcp` finds the SDK, not this
    package."""
    from waypost.mcp import server as module
    from waypost.mcp.session import Session

    built = module.build(Session(store_url=None, server_actor="bob", config=Config()))
    assert type(built).__mro__[1].__module__.startswith("mcp.server.")


def test_without_the_extra_the_verb_says_how_to_install_it(tmp_path: Path) -> None:
    import subprocess

    code = ("import sys\n"
            "sys.modules['mcp'] = None  # as if not installed\n"
            "from waypost.cli import main\n"
            "sys.exit(main(['mcp', '--store', sys.argv[1], '--as', 'bob']))\n")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "w.db")],
                          capture_output=True, text=True, check=False, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "pip install 'waypost[mcp]'" in proc.stderr


def test_hostile_arguments_are_refused_as_tool_errors(tmp_path: Path) -> None:
    """Whatever a model sends, the answer is a tool error naming the field, never a crash
    and never a write; text over its limit gets the CLI's own message."""
    store = tmp_path / "w.db"

    async def scenario() -> None:
        async with server(store, "bob") as bob:
            run = (await call(bob, "checkpoint_start", title="t", target="none:"))["run"]
            long_title = await refused(bob, "checkpoint_start", title="x" * 600)
            assert "title is 600 characters, above the limit of 500" in long_title
            assert "next tool: checkpoint_start" in long_title
            control = await refused(bob, "checkpoint_start", title="t", owner="al\nice")
            assert "owner" in control
            for arguments in ({"run": run, "progress": 7}, {"run": run, "progress": "NaN"},
                              {"run": "x" * 100}, {"run": run, "note": ["not", "text"]}):
                text = await refused(bob, "heartbeat", **arguments)
                assert text.splitlines()[-1] == AGAIN.format("heartbeat")
            unknown = await refused(bob, "launch_missiles")
            assert unknown.splitlines()[-1] == "next tool: checkpoint_status"
            escaped = await refused(bob, "checkpoint_status", run="../../etc/passwd")
            assert "next tool: checkpoint_status" in escaped
            bad_target = await refused(bob, "retarget", run=run, target="gopher://x")
            assert "target" in bad_target
            bad_gate = await refused(bob, "checkpoint_start", title="g", gates=["nonsense"])
            assert "gate" in bad_gate
            status = await call(bob, "checkpoint_status", run=run)
            assert status["runs"][0]["version"] == 1  # none of it was written

    drive(scenario)


def test_a_missing_run_resource_is_an_error_with_the_hint(tmp_path: Path) -> None:
    from mcp import MCPError

    async def scenario() -> None:
        async with server(tmp_path / "w.db", "bob") as bob:
            await call(bob, "checkpoint_start", title="t", target="none:")
            with pytest.raises(MCPError) as caught:
                await bob.read_resource("waypost://runs/wp_nosuchrun")
            assert "wp_nosuchrun" in str(caught.value)
            assert "next: " in str(caught.value)

    drive(scenario)


def test_a_server_with_no_store_to_use_says_so_when_it_starts(tmp_path: Path) -> None:
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith("WAYPOST_")}
    proc = subprocess.run([sys.executable, "-m", "waypost", "mcp", "--as", "bob"],
                          cwd=tmp_path, env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, check=False, timeout=60)
    assert proc.returncode == 4, proc.stderr
    assert "waypost init" in proc.stderr


def test_runs_started_by_a_claude_code_server_carry_its_session(tmp_path: Path) -> None:
    """So the host's stop hook finds the session's run (waypost hook stop)."""
    store = tmp_path / "store.db"

    async def scenario() -> None:
        async with server(store, "bob", host_session="sess-42") as bob:
            inherited = (await call(bob, "checkpoint_start", title="t", target="none:"))["run"]
            named = (await call(bob, "checkpoint_start", title="u", target="none:",
                                host_session="sess-7"))["run"]
        with model_store(store) as opened:
            assert opened.session_run("sess-42") == inherited
            assert opened.session_run("sess-7") == named

    drive(scenario)


def test_review_answers_within_the_servers_limit_when_a_gate_runs_long(tmp_path: Path) -> None:
    """A gate whose command outlives the tool's time limit fails with the reason; the
    review tool answers instead of holding the host past its own timeout."""
    store = tmp_path / "w.db"
    sleeper = f"command:{sys.executable} -c \"import time; time.sleep(60)\""

    async def scenario() -> None:
        async with server(store, "alice", "--evidence-limit", "2s") as alice:
            run = (await call(alice, "checkpoint_start", title="Slow gate", target="none:",
                              gates=[f"slow={sleeper}"]))["run"]
            await call(alice, "skip_evidence", run=run, kind="test", reason="no tests here")
            await call(alice, "mark_ready", run=run, summary="done")
            with anyio.fail_after(30):
                reviewed = await call(alice, "review", run=run)
            assert reviewed["approvable"] is False
            gates = {g["gate"]: g for g in reviewed["report"]["gates"]}
            assert gates["slow"]["verdict"] == "failed"

    drive(scenario)


def test_a_command_check_answers_within_the_servers_limit(tmp_path: Path) -> None:
    store = tmp_path / "w.db"

    async def scenario() -> None:
        async with server(store, "alice", "--evidence-limit", "2s") as alice:
            run = (await call(alice, "checkpoint_start", title="Slow check",
                              target="none:"))["run"]
            with anyio.fail_after(30):
                checked = await call(alice, "check_evidence", run=run, check=(
                    f"command:{sys.executable} -c \"import time; time.sleep(60)\""))
            assert checked["evidence"]["verdict"] == "failed"
            assert "timeout" in checked["evidence"]["summary"]

    drive(scenario)
