"""`waypost hook stop --host claude` run the way Claude Code runs it: a real process, the
documented Stop JSON on stdin, the answer read from stdout and the exit code."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import waypost
from waypost.store import open_store
from waypost.usecases.starting import parse_gate

SESSION = "3f1c2a9e-5b7d-4c8e-9a1f-0d2b4e6f8a10"
HANG_GUARD = 60  # seconds; a hook answers in well under one


def stop_input(session: str = SESSION, **extra: Any) -> bytes:
    """Claude Code's documented Stop hook input."""
    return json.dumps({"session_id": session, "transcript_path": "/tmp/t.jsonl",
                       "cwd": "/tmp", "permission_mode": "default",
                       "hook_event_name": "Stop", "stop_hook_active": False,
                       "last_assistant_message": "All done!", **extra}).encode()


def hook(cwd: Path, data: bytes, *args: str, **env: str) -> tuple[int, dict[str, Any] | None]:
    """Run the hook; (exit code, the JSON it printed or None for an empty stdout)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("WAYPOST_")}
    proc = subprocess.run([sys.executable, "-m", "waypost", "hook", "stop", "--host", "claude",
                           *args], input=data, capture_output=True, cwd=cwd,
                          env={**clean, **env}, timeout=HANG_GUARD, check=False)
    out = proc.stdout.decode().strip()
    return proc.returncode, json.loads(out) if out else None


@pytest.fixture
def project(tmp_path: Path) -> Path:
    with open_store(str(tmp_path / ".waypost" / "waypost.db")):
        pass
    return tmp_path


def started(project: Path, session: str = SESSION, **kw: Any) -> waypost.Run:
    with open_store(str(project / ".waypost" / "waypost.db")) as store:
        run, _ = waypost.start(store, "Fix the flaky test", actor="alice", owner="alice",
                               target="none:", worker="w1", session=session, **kw)
    return run


def act(project: Path, run_id: str, actor: str, verb: str, *args: Any) -> Any:
    with open_store(str(project / ".waypost" / "waypost.db")) as store:
        return getattr(waypost.Run(store, run_id, actor=actor), verb)(*args)


def test_blocks_a_run_with_no_result_packet_naming_the_next_command(project: Path) -> None:
    run = started(project, gates=[parse_gate("tests=command:true")])
    code, said = hook(project, stop_input())
    assert code == 0
    assert said is not None
    assert said["decision"] == "block"
    assert f"waypost evidence run {run.id} --as w1 --epoch 1 -- true" in said["reason"]


def test_names_ready_once_the_evidence_is_there(project: Path) -> None:
    run = started(project)
    subprocess.run([sys.executable, "-m", "waypost", "evidence", "run", run.id, "--as", "w1",
                    "--", "true"], cwd=project, capture_output=True, check=True,
                   timeout=HANG_GUARD)
    code, said = hook(project, stop_input())
    assert code == 0
    assert said is not None
    assert f"waypost ready {run.id} --summary TEXT" in said["reason"]


def test_allows_a_run_that_is_ready_for_review(project: Path) -> None:
    run = started(project)
    subprocess.run([sys.executable, "-m", "waypost", "evidence", "run", run.id, "--as", "w1",
                    "--", "true"], cwd=project, capture_output=True, check=True,
                   timeout=HANG_GUARD)
    act(project, run.id, "w1", "ready", "fixed the race")
    assert hook(project, stop_input()) == (0, None)


def test_allows_a_session_with_no_run_and_a_project_with_no_store(project: Path,
                                                                  tmp_path_factory:
                                                                  pytest.TempPathFactory) -> None:
    started(project)
    assert hook(project, stop_input(session="another-session")) == (0, None)
    assert hook(tmp_path_factory.mktemp("elsewhere"), stop_input()) == (0, None)


@pytest.mark.parametrize(("kind", "blocks"), [("missing_input", False),
                                              ("permission_boundary", False),
                                              ("failed_command", True),
                                              ("unavailable_resource", True)])
def test_a_blocker_only_the_owner_resolves_lets_the_agent_stop(project: Path, kind: str,
                                                               blocks: bool) -> None:
    run = started(project)
    act(project, run.id, "w1", "block", waypost.BlockerKind(kind), "the staging key")
    code, said = hook(project, stop_input())
    assert code == 0
    assert (said is not None) is blocks
    if said is not None:
        assert f"waypost unblock {run.id} b1 --resolution TEXT" in said["reason"]


def test_a_store_that_cannot_be_opened_is_a_block_saying_so(tmp_path: Path) -> None:
    broken = tmp_path / "broken.db"
    broken.write_bytes(b"this is not a database" * 100)
    code, said = hook(tmp_path, stop_input(), WAYPOST_URL=str(broken))
    assert code == 0
    assert said is not None
    assert said["decision"] == "block"
    assert said["reason"].startswith("waypost hook failed:")
    assert str(broken) in said["reason"]


@pytest.mark.parametrize("data", [b"", b"not json", b'{"session_id": 5}', b"[]",
                                  b'{"session_id": "s", "hook_event_name": "UserPromptSubmit"}',
                                  b"x" * (2 << 20)])
def test_bad_input_is_a_block_saying_what_broke(project: Path, data: bytes) -> None:
    code, said = hook(project, data)
    assert code == 0
    assert said is not None
    assert said["decision"] == "block"
    assert said["reason"].startswith("waypost hook failed:")


def test_a_busy_store_is_a_block_within_the_wait(project: Path) -> None:
    started(project)
    holder = sqlite3.connect(project / ".waypost" / "waypost.db", isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")  # another writer holds the store
        code, said = hook(project, stop_input(), WAYPOST_BUSY_TIMEOUT="300ms")
    finally:
        holder.close()
    assert code == 0
    assert said is not None
    assert "busy" in said["reason"]


def test_past_the_cap_a_blocker_is_recorded_and_the_agent_may_stop(project: Path) -> None:
    run = started(project)
    assert [hook(project, stop_input(), "--cap", "2")[1] is not None for _ in range(2)] == [
        True, True]
    assert hook(project, stop_input(), "--cap", "2") == (0, None)  # the third: let go
    with open_store(str(project / ".waypost" / "waypost.db")) as store:
        packet = store.get(run.id)
    assert packet.state == "blocked"
    (blocker,) = packet.open_blockers
    assert blocker.detail.startswith("waypost hook: the agent was refused a stop 2 times")
    assert hook(project, stop_input(), "--cap", "2") == (0, None)  # still let go
    act(project, run.id, "w1", "unblock", blocker.id, "back at it")
    assert hook(project, stop_input(), "--cap", "2")[1] is not None  # counting again


def test_the_cap_comes_from_the_environment_too(project: Path) -> None:
    started(project)
    assert hook(project, stop_input(), WAYPOST_STOP_CAP="1")[1] is not None
    assert hook(project, stop_input(), WAYPOST_STOP_CAP="1") == (0, None)


def test_the_hook_waits_for_a_busy_store_a_bounded_time_by_itself(project: Path) -> None:
    """No WAYPOST_BUSY_TIMEOUT: the hook still answers well inside a host's hook timeout."""
    started(project)
    holder = sqlite3.connect(project / ".waypost" / "waypost.db", isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        code, said = hook(project, stop_input())  # within the hang guard, or it fails
    finally:
        holder.close()
    assert code == 0
    assert said is not None
    assert "busy" in said["reason"]


def test_input_that_never_ends_is_a_block_within_the_wait(project: Path) -> None:
    started(project)
    read, write = os.pipe()
    try:
        os.write(write, stop_input()[:20])  # a host that hangs mid-document, stdin open
        proc = subprocess.run([sys.executable, "-m", "waypost", "hook", "stop", "--host",
                               "claude"], stdin=read, capture_output=True, cwd=project,
                              timeout=HANG_GUARD, check=False)
    finally:
        os.close(read)
        os.close(write)
    assert proc.returncode == 0
    said = json.loads(proc.stdout)
    assert said["decision"] == "block"
    assert "did not end within" in said["reason"]


def test_a_stop_let_through_starts_the_count_over(project: Path) -> None:
    """One refusal, then a stop let through (the run waits on its owner), then refusable
    again: it takes `cap` refusals in a row again before the agent is let go."""
    run = started(project)
    assert hook(project, stop_input(), "--cap", "2")[1] is not None  # refused: 1 of 2
    _, blocker = act(project, run.id, "w1", "block", waypost.BlockerKind.MISSING_INPUT,
                     "the staging key")
    assert hook(project, stop_input(), "--cap", "2") == (0, None)  # let through
    act(project, run.id, "alice", "unblock", blocker, "here it is")
    assert [hook(project, stop_input(), "--cap", "2")[1] is not None for _ in range(2)] == [
        True, True]  # refused twice again: the count started over
    assert hook(project, stop_input(), "--cap", "2") == (0, None)  # the third: let go
    with open_store(str(project / ".waypost" / "waypost.db")) as store:
        packet = store.get(run.id)
    (cap_blocker,) = packet.open_blockers
    assert cap_blocker.detail.startswith("waypost hook: the agent was refused a stop 2 times")
