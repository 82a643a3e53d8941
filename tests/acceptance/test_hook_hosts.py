"""`waypost hook EVENT --host H` for every host, run the way each host runs it: a real
process, the JSON that host documents on stdin, its answer read from stdout and the exit
code. Each host's format is written out here by hand, from its documentation."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.acceptance.test_hook_stop import HANG_GUARD, SESSION, act, project, started
from waypost.store import open_store
from waypost.usecases.starting import parse_gate

__all__ = ["project"]  # the fixture, shared with test_hook_stop
HOSTS = ("claude", "codex", "gemini", "cursor")
AGENT = "agent-7f2c"


def stop_input(host: str, session: str = SESSION, turn: int = 0, **extra: Any) -> bytes:
    """Each host's documented stop input (Gemini CLI's AfterAgent, Cursor's stop)."""
    documents: dict[str, dict[str, Any]] = {
        "claude": {"session_id": session, "transcript_path": "/tmp/t.jsonl", "cwd": "/tmp",
                   "permission_mode": "default", "hook_event_name": "Stop",
                   "stop_hook_active": False, "last_assistant_message": "All done!"},
        "codex": {"session_id": session, "turn_id": f"turn-{turn}", "transcript_path": None,
                  "cwd": "/tmp", "hook_event_name": "Stop", "model": "gpt-5-codex",
                  "permission_mode": "default", "stop_hook_active": False,
                  "last_assistant_message": "Done."},
        "gemini": {"session_id": session, "transcript_path": "/tmp/t.json", "cwd": "/tmp",
                   "hook_event_name": "AfterAgent", "timestamp": "2026-12-02T11:00:00Z",
                   "prompt": "fix the flaky test", "prompt_response": "Fixed.",
                   "stop_hook_active": False},
        "cursor": {"conversation_id": session, "generation_id": f"gen-{turn}",
                   "model": "claude-sonnet", "hook_event_name": "stop",
                   "cursor_version": "1.7.2", "workspace_roots": ["/tmp"], "user_email": None,
                   "transcript_path": None, "status": "completed", "loop_count": turn},
    }
    return json.dumps({**documents[host], **extra}).encode()


def run_hook(cwd: Path, host: str, event: str, data: bytes, *args: str,
             **env: str) -> tuple[int, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("WAYPOST_")}
    proc = subprocess.run([sys.executable, "-m", "waypost", "hook", event, "--host", host,
                           *args], input=data, capture_output=True, cwd=cwd,
                          env={**clean, **env}, timeout=HANG_GUARD, check=False)
    return proc.returncode, proc.stdout.decode()


def answered(host: str, out: str) -> dict[str, Any] | None:
    """The hook's JSON answer; None for the host's own "nothing to say" (no output for
    Claude and Codex, `{}` for Gemini and Cursor, which read stdout as JSON)."""
    if not out.strip():
        assert host in ("claude", "codex")
        return None
    said = json.loads(out)
    assert isinstance(said, dict)
    if said == {}:
        assert host in ("gemini", "cursor")
        return None
    return said


def refusal(host: str, out: str) -> str | None:
    """The reason when `out` refuses the stop in the host's own format; None when it lets
    the agent stop in that format (anything else fails the test)."""
    said = answered(host, out)
    if said is None:
        return None
    if host == "cursor":
        assert set(said) == {"followup_message"}
        return str(said["followup_message"])
    assert said == {"decision": "deny" if host == "gemini" else "block",
                    "reason": said["reason"]}
    return str(said["reason"])


def stop(cwd: Path, host: str, *args: str, turn: int = 0, session: str = SESSION,
         **env: str) -> str | None:
    code, out = run_hook(cwd, host, "stop", stop_input(host, session, turn), *args, **env)
    assert code == 0
    return refusal(host, out)


def evidence(project: Path, run_id: str) -> None:
    subprocess.run([sys.executable, "-m", "waypost", "evidence", "run", run_id, "--as", "w1",
                    "--", "true"], cwd=project, capture_output=True, check=True,
                   timeout=HANG_GUARD)


@pytest.mark.parametrize("host", HOSTS)
def test_a_run_with_no_result_packet_is_refused_in_the_hosts_format(project: Path,
                                                                    host: str) -> None:
    run = started(project, gates=[parse_gate("tests=command:true")])
    reason = stop(project, host)
    assert reason is not None
    assert f"waypost evidence run {run.id} --as w1 --epoch 1 -- true" in reason


@pytest.mark.parametrize("host", HOSTS)
def test_ready_for_review_and_later_may_stop(project: Path, host: str) -> None:
    run = started(project)
    evidence(project, run.id)
    act(project, run.id, "w1", "ready", "fixed the race")
    assert stop(project, host) is None
    act(project, run.id, "alice", "cancel", "not needed after all")
    assert stop(project, host) is None


@pytest.mark.parametrize("host", HOSTS)
def test_a_store_that_cannot_be_opened_is_a_refusal_saying_so(tmp_path: Path,
                                                              host: str) -> None:
    broken = tmp_path / "broken.db"
    broken.write_bytes(b"this is not a database" * 100)
    reason = stop(tmp_path, host, WAYPOST_URL=str(broken))
    assert reason is not None
    assert reason.startswith("waypost hook failed:")
    assert str(broken) in reason


@pytest.mark.parametrize("host", HOSTS)
@pytest.mark.parametrize("data", [b"", b"not json", b'{"session_id": 5}', b"[]"])
def test_bad_input_is_a_refusal_in_the_hosts_format(project: Path, host: str,
                                                    data: bytes) -> None:
    code, out = run_hook(project, host, "stop", data)
    assert code == 0
    reason = refusal(host, out)
    assert reason is not None
    assert reason.startswith("waypost hook failed:")


@pytest.mark.parametrize("host", HOSTS)
def test_past_the_cap_a_blocker_is_recorded_and_the_agent_may_stop(project: Path,
                                                                   host: str) -> None:
    run = started(project)
    assert stop(project, host, "--cap", "2", turn=1) is not None
    assert stop(project, host, "--cap", "2", turn=2) is not None
    assert stop(project, host, "--cap", "2", turn=3) is None  # the third: let go
    with open_store(str(project / ".waypost" / "waypost.db")) as store:
        (blocker,) = store.get(run.id).open_blockers
    assert blocker.detail.startswith("waypost hook: the agent was refused a stop 2 times")
    assert stop(project, host, "--cap", "2", turn=4) is None


@pytest.mark.parametrize("host", HOSTS)
def test_a_session_with_no_run_may_stop_unless_the_project_requires_one(
        project: Path, host: str) -> None:
    started(project)
    assert stop(project, host, session="another-session") is None
    (project / "waypost.toml").write_text("[hooks]\nrequire_run = true\n")
    reason = stop(project, host, session="another-session")
    assert reason is not None
    assert "waypost start TITLE --target URI --session another-session" in reason
    assert stop(project, host, "--cap", "1") is not None  # the session's own run: its rule


def test_a_required_run_with_no_store_here_says_to_make_one(tmp_path: Path) -> None:
    (tmp_path / "waypost.toml").write_text("[hooks]\nrequire_run = true\n")
    reason = stop(tmp_path, "claude")
    assert reason is not None
    assert "waypost init" in reason
    assert f"--session {SESSION}" in reason


@pytest.mark.parametrize("host", HOSTS)
def test_a_busy_store_is_a_refusal_within_the_wait(project: Path, host: str) -> None:
    started(project)
    holder = sqlite3.connect(project / ".waypost" / "waypost.db", isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")  # another writer holds the store
        reason = stop(project, host, WAYPOST_BUSY_TIMEOUT="300ms")
    finally:
        holder.close()
    assert reason is not None
    assert "busy" in reason


# --- Cursor runs its own stop hook and Claude Code's: one stop, delivered twice ---------


def test_one_cursor_stop_delivered_to_both_hooks_counts_once(project: Path) -> None:
    started(project)
    same = stop_input("cursor", turn=0)
    for host in ("cursor", "claude"):  # Cursor feeds its own input to Claude Code's hook too
        code, out = run_hook(project, host, "stop", same, "--cap", "1")
        assert code == 0
        assert refusal(host, out) is not None  # counted once: still within the cap
    assert stop(project, "cursor", "--cap", "1", turn=1) is None  # the next stop: the second


def test_two_deliveries_racing_count_once(project: Path) -> None:
    started(project)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("WAYPOST_")}
    procs = [subprocess.Popen([sys.executable, "-m", "waypost", "hook", "stop", "--host", host,
                               "--cap", "1"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              cwd=project, env=clean) for host in ("cursor", "claude")]
    outs = [p.communicate(stop_input("cursor", turn=5), timeout=HANG_GUARD)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert [refusal(h, o.decode()) is not None for h, o in zip(("cursor", "claude"), outs,
                                                                strict=True)] == [True, True]


def test_a_cursor_follow_up_is_a_new_turn(project: Path) -> None:
    started(project)
    assert stop(project, "cursor", "--cap", "1", turn=0) is not None
    assert stop(project, "cursor", "--cap", "1", turn=1) is None  # counted: past the cap


# --- a subagent's stop: the rule for the subagent's own run ----------------------------


def subagent_input(host: str, agent: str | None = AGENT) -> bytes:
    documents: dict[str, dict[str, Any]] = {
        "claude": {"session_id": SESSION, "transcript_path": "/tmp/t.jsonl", "cwd": "/tmp",
                   "permission_mode": "default", "hook_event_name": "SubagentStop",
                   "stop_hook_active": False, "agent_id": agent,
                   "agent_transcript_path": "/tmp/a.jsonl", "agent_type": "Explore",
                   "last_assistant_message": "Found it."},
        "codex": {"session_id": SESSION, "turn_id": "turn-1", "transcript_path": None,
                  "cwd": "/tmp", "hook_event_name": "SubagentStop", "model": "gpt-5-codex",
                  "permission_mode": "default", "stop_hook_active": False, "agent_id": agent,
                  "agent_type": "worker", "agent_transcript_path": None,
                  "last_assistant_message": "Done."},
        "cursor": {"conversation_id": SESSION, "generation_id": "gen-1",
                   "hook_event_name": "subagentStop", "subagent_type": "generalPurpose",
                   "status": "completed", "task": "Explore the auth flow",
                   "summary": "Explored.", "loop_count": 0, "subagent_id": agent},
    }
    ids = {"agent_id", "subagent_id"}  # left out when None: the host names no subagent
    document = {k: v for k, v in documents[host].items() if v is not None or k not in ids}
    return json.dumps(document).encode()


@pytest.mark.parametrize("host", ["claude", "codex", "cursor"])
def test_a_subagent_is_held_to_its_own_run(project: Path, host: str) -> None:
    parent = started(project)
    evidence(project, parent.id)
    act(project, parent.id, "w1", "ready", "the parent's part is done")
    started(project, session=AGENT)
    code, out = run_hook(project, host, "subagent-stop", subagent_input(host))
    assert code == 0
    assert refusal(host, out) is not None  # its own run is in progress
    code, out = run_hook(project, host, "subagent-stop", subagent_input(host, "agent-other"))
    assert refusal(host, out) is None  # a subagent with no run of its own


def test_a_cursor_subagent_stop_naming_no_subagent_may_stop(project: Path) -> None:
    started(project)  # the session's run is in progress: it is not the subagent's
    code, out = run_hook(project, "cursor", "subagent-stop", subagent_input("cursor", None))
    assert (code, refusal("cursor", out)) == (0, None)


# --- what a session is told at its start, and at each prompt ---------------------------


def session_start_input(host: str, session: str = SESSION) -> bytes:
    documents: dict[str, dict[str, Any]] = {
        "claude": {"session_id": session, "transcript_path": "/tmp/t.jsonl", "cwd": "/tmp",
                   "hook_event_name": "SessionStart", "source": "resume"},
        "codex": {"session_id": session, "transcript_path": None, "cwd": "/tmp",
                  "hook_event_name": "SessionStart", "model": "gpt-5-codex",
                  "permission_mode": "default", "source": "startup"},
        "gemini": {"session_id": session, "transcript_path": "/tmp/t.json", "cwd": "/tmp",
                   "hook_event_name": "SessionStart", "timestamp": "2026-12-02T11:00:00Z",
                   "source": "startup"},
        "cursor": {"session_id": session, "conversation_id": session, "generation_id": "g",
                   "hook_event_name": "sessionStart", "is_background_agent": False,
                   "composer_mode": "agent"},
    }
    return json.dumps(documents[host]).encode()


def prompt_input(host: str, session: str = SESSION) -> bytes:
    documents: dict[str, dict[str, Any]] = {
        "claude": {"session_id": session, "transcript_path": "/tmp/t.jsonl", "cwd": "/tmp",
                   "permission_mode": "default", "hook_event_name": "UserPromptSubmit",
                   "prompt": "how far along are we?"},
        "codex": {"session_id": session, "turn_id": "turn-2", "transcript_path": None,
                  "cwd": "/tmp", "hook_event_name": "UserPromptSubmit", "model": "gpt-5-codex",
                  "permission_mode": "default", "prompt": "how far along are we?"},
        "gemini": {"session_id": session, "transcript_path": "/tmp/t.json", "cwd": "/tmp",
                   "hook_event_name": "BeforeAgent", "timestamp": "2026-12-02T11:00:00Z",
                   "prompt": "how far along are we?"},
    }
    return json.dumps(documents[host]).encode()


def context(host: str, event: str, out: str) -> str | None:
    """The context the answer gives the agent, read in the host's own format."""
    said = answered(host, out)
    if said is None:
        return None
    if host == "cursor":
        assert set(said) == {"additional_context"}
        return str(said["additional_context"])
    inner = said["hookSpecificOutput"]
    assert set(said) == {"hookSpecificOutput"}
    if host in ("claude", "codex"):
        assert inner.pop("hookEventName") == {"session-start": "SessionStart",
                                              "user-prompt-submit": "UserPromptSubmit"}[event]
    assert set(inner) == {"additionalContext"}
    return str(inner["additionalContext"])


@pytest.mark.parametrize("host", HOSTS)
def test_a_session_starts_with_its_runs_handoff_brief(project: Path, host: str) -> None:
    run = started(project)
    code, out = run_hook(project, host, "session-start", session_start_input(host))
    assert code == 0
    told = context(host, "session-start", out)
    assert told is not None
    assert told.startswith(f"HANDOFF {run.id}  Fix the flaky test")
    assert "pass --epoch 1" in told
    code, out = run_hook(project, host, "session-start", session_start_input(host, "nobody"))
    assert context(host, "session-start", out) is None
    (project / "waypost.toml").write_text("[hooks]\nrequire_run = true\n")
    code, out = run_hook(project, host, "session-start", session_start_input(host, "nobody"))
    assert "waypost start TITLE --target URI --session nobody" in str(
        context(host, "session-start", out))


@pytest.mark.parametrize("host", ["claude", "codex", "gemini"])
def test_each_prompt_carries_the_runs_status_line(project: Path, host: str) -> None:
    run = started(project)
    code, out = run_hook(project, host, "user-prompt-submit", prompt_input(host))
    told = context(host, "user-prompt-submit", out)
    assert code == 0
    assert told is not None
    assert told.startswith(f"waypost: run {run.id} (Fix the flaky test) is in_progress")
    assert "\n" not in told
    code, out = run_hook(project, host, "user-prompt-submit", prompt_input(host, "nobody"))
    assert context(host, "user-prompt-submit", out) is None


@pytest.mark.parametrize("host", HOSTS)
def test_a_failure_at_a_sessions_start_is_told_not_refused(tmp_path: Path, host: str) -> None:
    broken = tmp_path / "broken.db"
    broken.write_bytes(b"this is not a database" * 100)
    code, out = run_hook(tmp_path, host, "session-start", session_start_input(host),
                         WAYPOST_URL=str(broken))
    assert code == 0
    told = context(host, "session-start", out)
    assert told is not None
    assert told.startswith("waypost hook failed:")


@pytest.mark.parametrize(("host", "event"), [("cursor", "stop-now"), ("gemini",
                                                                     "subagent-stop")])
def test_an_event_the_host_lacks_is_a_refusal_naming_what_there_is(project: Path, host: str,
                                                                   event: str) -> None:
    code, out = run_hook(project, host, event, stop_input(host))
    reason = refusal(host, out)
    assert code == 0
    assert reason is not None
    assert f"waypost hook has no {event!r} event for {host}" in reason


def test_the_hot_verb_knows_every_host() -> None:
    from waypost.cli.hot import HOT
    from waypost.hooks import hosts as hook_hosts

    (host,) = [o for o in HOT["hook"].options if o.name == "--host"]
    assert host.choices == hook_hosts.HOSTS


def test_waypost_is_held_to_its_documented_start_command(project: Path) -> None:
    """The command a required run names does start a run the hooks then find."""
    (project / "waypost.toml").write_text("[hooks]\nrequire_run = true\n")
    reason = stop(project, "claude", session="s-new")
    assert reason is not None
    command = reason.split("Start one: ", 1)[1].replace("TITLE", "'the work'").replace(
        "URI", "none:")
    argv = command.split(" ", 1)[1]
    proc = subprocess.run(f"{sys.executable} -m waypost {argv}", shell=True, cwd=project,
                          capture_output=True, timeout=HANG_GUARD, check=False)
    assert proc.returncode == 0, proc.stderr
    assert stop(project, "claude", session="s-new") is not None  # now the run's rule


@pytest.mark.parametrize("host", HOSTS)
def test_a_stream_that_cannot_encode_the_answer_still_gets_it(project: Path,
                                                              host: str) -> None:
    """JSON is UTF-8: a locale that says ASCII must not end the hook with an error."""
    (project / "waypost.toml").write_text("[hooks]\nrequire_run = true\n")
    code, out = run_hook(project, host, "stop", stop_input(host, session="sessión-1"),
                         PYTHONIOENCODING="ascii")
    assert code == 0
    assert "--session 'sessión-1'" in str(refusal(host, out))


@pytest.mark.parametrize("host", HOSTS)
def test_a_required_run_is_refused_up_to_the_cap_too(project: Path, host: str) -> None:
    """No run to record a blocker on: the session's refusals are counted all the same."""
    (project / "waypost.toml").write_text("[hooks]\nrequire_run = true\n")
    assert stop(project, host, "--cap", "2", turn=1) is not None
    assert stop(project, host, "--cap", "2", turn=2) is not None
    code, out = run_hook(project, host, "stop", stop_input(host, turn=3), "--cap", "2")
    assert (code, refusal(host, out)) == (0, None)  # the third: let go
    assert stop(project, host, "--cap", "2", turn=4) is not None  # counting again
    with open_store(str(project / ".waypost" / "waypost.db")) as store:
        assert store.run_ids() == []  # nothing recorded on any run


def test_one_cursor_stop_of_a_session_with_no_run_counts_once(project: Path) -> None:
    (project / "waypost.toml").write_text("[hooks]\nrequire_run = true\n")
    same = stop_input("cursor", turn=0)
    for host in ("cursor", "claude"):
        code, out = run_hook(project, host, "stop", same, "--cap", "1")
        assert (code, refusal(host, out) is not None) == (0, True)
    assert stop(project, "cursor", "--cap", "1", turn=1) is None


@pytest.mark.parametrize("host", HOSTS)
def test_a_session_started_for_a_named_run_is_held_to_it(project: Path, host: str) -> None:
    """A parent starts the run and the worker's host session with WAYPOST_RUN: the session
    start records the session on the run, so the first stop is already gated."""
    run = started(project, session="parent-session")
    assert stop(project, host, session="worker-session") is None  # not its run yet
    code, out = run_hook(project, host, "session-start",
                         session_start_input(host, "worker-session"), WAYPOST_RUN=run.id)
    assert code == 0
    told = context(host, "session-start", out)
    assert told is not None
    assert told.startswith(f"HANDOFF {run.id}")
    reason = stop(project, host, session="worker-session")
    assert reason is not None
    assert run.id in reason


@pytest.mark.parametrize("named", ["wp_nosuchrun", "cancelled"])
def test_a_named_run_that_is_missing_or_over_attaches_nothing(project: Path,
                                                             named: str) -> None:
    run = started(project, session="parent-session")
    if named == "cancelled":
        act(project, run.id, "alice", "cancel", "not needed")
        named = run.id
    code, out = run_hook(project, "claude", "session-start",
                         session_start_input("claude", "worker-session"), WAYPOST_RUN=named)
    assert code == 0
    told = context("claude", "session-start", out)
    assert told is not None
    assert "WAYPOST_RUN" in told
    assert stop(project, "claude", session="worker-session") is None
    with open_store(str(project / ".waypost" / "waypost.db")) as store:
        assert store.session_run("worker-session") is None
