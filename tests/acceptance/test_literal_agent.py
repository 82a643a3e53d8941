"""A literal agent: it knows a run id and its own name, and does nothing but run the
commands waypost tells it, each parsed as a shell command line (`shlex`) and run exactly,
with only these placeholders filled in: TEXT (a summary or note), CMD (a command to run as
evidence), PATH (a file to record) and NAME (the name it was recorded under). It reads
the session-start brief, the stop hook's reasons (`waypost hook Stop --host claude`, the
session's JSON on stdin), the inbox's and review's `next:` lines. Playing the owner, the
same agent reviews, approves and sees the delivery in its inbox. Any instruction refused,
as written, fails the test. No WAYPOST_ACTOR is set anywhere: the instructions carry it."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

WAYPOST = [sys.executable, "-m", "waypost"]
HANG_GUARD = 60
FILL = {"TEXT": "the fix is in", "CMD": "true", "PATH": "result.txt", "NAME": "result.txt"}
MAX_TURNS = 12


def _env(**extra: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("WAYPOST_")}
    return {**clean, **extra}


def _run(cwd: Path, argv: list[str], stdin: str | None = None,
         **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, input=stdin, capture_output=True, text=True,
                          env=_env(**env), timeout=HANG_GUARD, check=False)


def execute(cwd: Path, instruction: str) -> str:
    """Run one instruction exactly as written, placeholders filled; refused: the test fails."""
    words = shlex.split(instruction, comments=True)
    assert words[:1] == ["waypost"], instruction
    argv = [*WAYPOST, *(FILL.get(w, w) for w in words[1:])]
    proc = _run(cwd, argv)
    assert proc.returncode == 0, f"refused as written: {instruction}\n{proc.stderr}"
    assert "acting as" not in proc.stderr, f"fell back to the user: {instruction}"
    return proc.stdout + proc.stderr  # a `next:` line beside the output is on stderr


# where an instruction begins in an answer's words: `waypost` and a verb, to the line's end
INSTRUCTION = re.compile(r"waypost (?:heartbeat|artifact add|evidence run|ready|review|"
                         r"approve|deliver|inbox|unblock|resume|claim) .*")


def commands_in(text: str) -> list[str]:
    """Every `waypost …` command line an answer names, in order."""
    return [m.group(0) for m in INSTRUCTION.finditer(text)]


def hook(cwd: Path, event: str, session: str, **env: str) -> dict[str, object]:
    """The host's hook: `waypost hook EVENT --host claude`, the session's JSON on stdin."""
    named = {"session-start": "SessionStart"}.get(event, event)
    data = json.dumps({"session_id": session, "hook_event_name": named,
                       "stop_hook_active": False, "cwd": str(cwd)})
    proc = _run(cwd, [*WAYPOST, "hook", event, "--host", "claude"], stdin=data, **env)
    assert proc.returncode == 0, proc.stderr
    said = json.loads(proc.stdout) if proc.stdout.strip() else {}
    assert isinstance(said, dict)
    return said


def test_a_literal_agent_drives_a_run_to_review_and_its_owner_to_the_delivery(
        tmp_path: Path) -> None:
    (tmp_path / "result.txt").write_text("the flaky test now waits for its server\n")
    assert _run(tmp_path, [*WAYPOST, "init"]).returncode == 0
    proc = _run(tmp_path, [*WAYPOST, "start", "Fix the flaky test", "--target", "none:",
                           "--worker", "w1", "--gate", "tests=command:true", "--as", "alice"])
    assert proc.returncode == 0, proc.stderr
    run = proc.stdout.strip()

    # the worker's session starts with the run named: the brief's next commands
    brief = hook(tmp_path, "session-start", "s-w1", WAYPOST_RUN=run)
    context = brief["hookSpecificOutput"]["additionalContext"]  # type: ignore[index]
    artifact = [c for c in commands_in(context) if c.startswith("waypost artifact add")]
    assert artifact, context
    execute(tmp_path, artifact[0])

    # then, on every stop, what the stop hook says, until it lets the agent stop
    for _ in range(MAX_TURNS):
        said = hook(tmp_path, "Stop", "s-w1")
        if said.get("decision") != "block":
            break
        told = commands_in(str(said["reason"]))
        assert told, said
        execute(tmp_path, told[0])
    else:
        raise AssertionError("the stop hook never let the agent stop")
    shown = json.loads(_run(tmp_path, [*WAYPOST, "show", run, "--json"]).stdout)
    assert shown["state"] == "ready_for_review"

    # the owner: its inbox names the review, the review the approval, the approval the relay
    inbox = _run(tmp_path, [*WAYPOST, "inbox", "--as", "alice"]).stdout
    for verb in ("review", "approve", "deliver"):
        step = [c for c in commands_in(inbox) if c.startswith(f"waypost {verb}")]
        assert step, (verb, inbox)
        inbox = execute(tmp_path, step[0])
    final = _run(tmp_path, [*WAYPOST, "inbox", "--as", "alice"]).stdout
    assert "delivered" in final, final


def test_a_write_with_no_actor_says_once_whom_it_fell_back_to(tmp_path: Path) -> None:
    import getpass

    assert _run(tmp_path, [*WAYPOST, "init"]).returncode == 0
    unnamed = _run(tmp_path, [*WAYPOST, "start", "Fix it", "--target", "none:"])
    assert unnamed.returncode == 0, unnamed.stderr
    told = [line for line in unnamed.stderr.splitlines() if "acting as" in line]
    assert len(told) == 1, unnamed.stderr
    assert getpass.getuser() in told[0]
    assert "--as ACTOR" in told[0]
    assert "export WAYPOST_ACTOR=ACTOR" in told[0]
    run = unnamed.stdout.strip()
    # named, by --as or by the environment: nothing is said; a read never says it
    for argv, env in (([*WAYPOST, "heartbeat", run, "--as", getpass.getuser()], {}),
                      ([*WAYPOST, "heartbeat", run], {"WAYPOST_ACTOR": getpass.getuser()}),
                      ([*WAYPOST, "show", run], {})):
        proc = _run(tmp_path, argv, **env)
        assert proc.returncode == 0, proc.stderr
        assert "acting as" not in proc.stderr, argv


def test_a_refusal_is_written_for_the_caller_and_never_hands_on_a_fenced_epoch(
        tmp_path: Path) -> None:
    assert _run(tmp_path, [*WAYPOST, "init"]).returncode == 0
    run = _run(tmp_path, [*WAYPOST, "start", "Fix it", "--target", "none:", "--worker", "w1",
                          "--as", "alice"]).stdout.strip()
    blocked = _run(tmp_path, [*WAYPOST, "block", run, "--kind", "failed_command", "--detail",
                              "make failed", "--as", "w1", "--epoch", "1"])
    assert blocked.returncode == 0, blocked.stderr
    refused = _run(tmp_path, [*WAYPOST, "ready", run, "--summary", "done", "--as", "w1",
                              "--epoch", "1"])
    assert refused.returncode == 3
    told = commands_in(refused.stderr)
    assert told, refused.stderr
    assert told[0].endswith("--as w1 --epoch 1"), told[0]
    # a newer process of w1 fences epoch 1: the fenced one is not handed an epoch
    assert _run(tmp_path, [*WAYPOST, "claim", run, "--as", "w1"]).returncode == 0
    fenced = _run(tmp_path, [*WAYPOST, "heartbeat", run, "--as", "w1", "--epoch", "1"])
    assert fenced.returncode == 3
    assert "--epoch" not in fenced.stderr, fenced.stderr


# --- the same agent over MCP: the official client over stdio, one server per actor --------

# what the agent fills in, by the argument a `next_call` names in `fill`; nothing else
FILL_ARGUMENTS: dict[str, Any] = {"summary": FILL["TEXT"], "command": [FILL["CMD"]],
                                  "resolution": FILL["TEXT"]}


@asynccontextmanager
async def mcp_server(cwd: Path, actor: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "waypost", "mcp", "--as", actor],
        env={**_env(), "PYTHONPATH": os.pathsep.join(sys.path)}, cwd=str(cwd))
    with (cwd / f"mcp-{actor}.log").open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            yield session


async def call_as_told(session: ClientSession, tool: str,
                       arguments: dict[str, Any]) -> dict[str, Any]:
    """Call exactly the tool and arguments named; refused: the test fails."""
    result = await session.call_tool(tool, arguments)
    said = result.structured_content or {}
    assert not result.is_error, f"refused as told: {tool}({arguments}): {said}"
    return said


def told_call(said: dict[str, Any], actor: str) -> tuple[str, dict[str, Any]] | None:
    """The call an answer names for `actor`, its `fill` filled in; None: nothing is theirs."""
    then = said.get("next_call")
    if not then or then["actor"] not in (None, actor) or then["tool"] is None:
        return None
    missing = [name for name in then["fill"] if name not in FILL_ARGUMENTS]
    assert not missing, then
    return then["tool"], {**then["arguments"],
                          **{name: FILL_ARGUMENTS[name] for name in then["fill"]}}


def test_the_literal_agent_does_the_same_through_mcp(tmp_path: Path) -> None:
    assert _run(tmp_path, [*WAYPOST, "init"]).returncode == 0
    run = _run(tmp_path, [*WAYPOST, "start", "Fix the flaky test", "--target", "none:",
                          "--worker", "w1", "--gate", "tests=command:true", "--as",
                          "alice"]).stdout.strip()

    async def scenario() -> None:
        async with mcp_server(tmp_path, "w1") as worker:
            said = await call_as_told(worker, "checkpoint_status", {"run": run})
            for _ in range(MAX_TURNS):
                told = told_call(said, "w1")
                if told is None:
                    break
                said = await call_as_told(worker, *told)
            else:
                raise AssertionError("the answers never stopped naming a next call")
            assert said.get("state") == "ready_for_review", said
        async with mcp_server(tmp_path, "alice") as owner:
            said = await call_as_told(owner, "inbox", {})
            for verb in ("review", "approve"):
                told = told_call(said, "alice")
                assert told is not None, said
                assert told[0] == verb, told
                said = await call_as_told(owner, *told)
            # what is left is the relay's, not a tool's: it runs as a daemon does
            assert said["next_call"]["verb"] == "deliver", said
            assert _run(tmp_path, [*WAYPOST, "deliver", "--once"]).returncode == 0
            news = await call_as_told(owner, "inbox", {})
            assert "delivered" in [item["topic"] for item in news["items"]], news

    async def bounded() -> None:
        with anyio.fail_after(120):
            await scenario()

    anyio.run(bounded)


def test_a_write_as_no_one_is_not_told_to_take_a_live_lease_it_cannot_take(
        tmp_path: Path) -> None:
    """The instruction without --as, run by an agent with no WAYPOST_ACTOR: refused as the
    user's name, the refusal says whom it fell back to and names no claim (a live lease is
    the owner's to hand over), so nothing it says is refused in turn."""
    assert _run(tmp_path, [*WAYPOST, "init"]).returncode == 0
    run = _run(tmp_path, [*WAYPOST, "start", "Fix it", "--target", "none:", "--worker", "w1",
                          "--as", "alice"]).stdout.strip()
    refused = _run(tmp_path, [*WAYPOST, "evidence", "run", run, "--", "true"])
    assert refused.returncode == 3
    assert "acting as" in refused.stderr
    assert "waypost claim" not in refused.stderr, refused.stderr
    assert "--as" not in refused.stderr.split("next:", 1)[1].replace("--as ACTOR", ""), (
        refused.stderr)  # never a command to run as someone else


def test_a_session_whose_lease_was_taken_over_is_handed_no_one_elses_name_or_epoch(
        tmp_path: Path) -> None:
    assert _run(tmp_path, [*WAYPOST, "init"]).returncode == 0
    run = _run(tmp_path, [*WAYPOST, "start", "Fix it", "--target", "none:", "--worker", "w1",
                          "--session", "s-w1", "--as", "alice"]).stdout.strip()
    said = hook(tmp_path, "Stop", "s-w1")
    assert "--as w1 --epoch 1" in str(said["reason"]), said
    assert _run(tmp_path, [*WAYPOST, "claim", run, "--as", "alice"]).returncode == 0
    said = hook(tmp_path, "Stop", "s-w1")
    assert said["decision"] == "block", said
    assert "--as alice" not in str(said["reason"]), said
    assert "--epoch" not in str(said["reason"]), said
    # a session that says who it is is written for itself, with no epoch it does not hold
    said = hook(tmp_path, "Stop", "s-w1", WAYPOST_ACTOR="w1")
    assert "--as w1" in str(said["reason"]), said
    assert "--epoch" not in str(said["reason"]), said


def test_a_worker_refused_an_owners_move_is_told_to_ask_the_owner_not_to_act_as_it(
        tmp_path: Path) -> None:
    """An owner-only move refused to the worker names the owner's command as the owner's to
    run ("ask the owner, alice, to run: …"), never as one for the worker to run as alice."""
    assert _run(tmp_path, [*WAYPOST, "init"]).returncode == 0
    run = _run(tmp_path, [*WAYPOST, "start", "Fix it", "--target", "none:", "--worker", "w1",
                          "--as", "alice"]).stdout.strip()
    refused = _run(tmp_path, [*WAYPOST, "retarget", run, "mailto:x@example.com", "--as", "w1"])
    assert refused.returncode == 3
    told = refused.stderr.split("next:", 1)[1]
    assert "ask the owner, alice, to run: waypost retarget" in told, told
    assert "run it as" not in told
