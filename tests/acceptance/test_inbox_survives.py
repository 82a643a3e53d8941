"""The inbox survives the parent: with every waypost process and the parent's session gone
mid-run, a delivery made later is told to the parent's next session once (`session-start`,
"while you were gone"), stays listed until `waypost inbox --ack`, and is gone after it. Each
step is a separate `waypost` process, on real SQLite and real PostgreSQL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import pg

WAYPOST = [sys.executable, "-m", "waypost"]


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.db'}"
        return
    pg.require_postgres()
    with pg.fresh_schema() as url:
        yield url


def _env(url: str, actor: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("WAYPOST_ACTOR", "WAYPOST_RUN")}
    env["WAYPOST_URL"] = url
    if actor is not None:
        env["WAYPOST_ACTOR"] = actor
    return env


def _waypost(url: str, cwd: Path, *args: str, actor: str | None = None,
             stdin: str | None = None) -> str:
    proc = subprocess.run([*WAYPOST, *args], env=_env(url, actor), cwd=cwd, input=stdin,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
    return proc.stdout.strip()


def _session_start(url: str, cwd: Path, session: str) -> str:
    """A new session of the parent's agent host: what its session-start hook tells it."""
    out = _waypost(url, cwd, "hook", "session-start", "--host", "claude", actor="alice",
                   stdin=json.dumps({"session_id": session, "hook_event_name": "SessionStart"}))
    if not out:
        return ""
    said = json.loads(out)["hookSpecificOutput"].get("additionalContext") or ""
    assert isinstance(said, str)
    return said


def _daemons(url: str, cwd: Path) -> list[subprocess.Popen[bytes]]:
    """A watchdog and a relay, as a parent's machine runs them."""
    started = []
    for args in (["watch", "--interval", "1s"], ["deliver", "--interval", "1s"]):
        started.append(subprocess.Popen([*WAYPOST, *args], env=_env(url), cwd=cwd,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    watch = started[0]
    assert watch.stdout is not None
    assert b"watching" in watch.stdout.readline()  # bounded: the process prints it, or dies
    return started


def test_a_delivery_made_while_the_parent_was_gone_is_told_once_and_kept_until_acked(
        store_url: str, tmp_path: Path) -> None:
    if store_url.startswith("sqlite"):
        _waypost(store_url, tmp_path, "init")
    assert "while you were gone" not in _session_start(store_url, tmp_path, "parent-1")
    run = _waypost(store_url, tmp_path, "start", "Fix the flaky test", "--target",
                   "file:result.md", "--kind", "long_running", "--max-silence", "1h",
                   actor="alice")
    daemons = _daemons(store_url, tmp_path)
    _waypost(store_url, tmp_path, "claim", run, actor="w1")
    for proc in daemons:  # every waypost process dies mid-run; the parent's session is gone
        proc.kill()
        proc.wait(timeout=30)
        assert proc.stdout is not None
        proc.stdout.close()

    _waypost(store_url, tmp_path, "evidence", "run", run, "--", sys.executable, "-c", "pass",
             actor="w1")
    _waypost(store_url, tmp_path, "ready", run, "--summary", "the race is fixed", actor="w1")
    _waypost(store_url, tmp_path, "review", run, actor="alice")
    _waypost(store_url, tmp_path, "approve", run, actor="alice")
    _waypost(store_url, tmp_path, "deliver", "--once", "--dir", str(tmp_path))
    assert (tmp_path / "result.md").exists()

    told = _session_start(store_url, tmp_path, "parent-2")
    assert "while you were gone" in told
    [delivered] = [line for line in told.splitlines() if " delivered " in line]
    assert run in delivered
    assert "receipt: " in delivered
    assert "delivered" not in _session_start(store_url, tmp_path, "parent-3")  # once

    listed = json.loads(_waypost(store_url, tmp_path, "inbox", "--json", actor="alice"))
    assert [(i["topic"], i["shown"]) for i in listed["items"]] == [
        ("ready_for_review", True), ("delivered", True)]  # shown, still not acknowledged
    acked = json.loads(_waypost(store_url, tmp_path, "inbox", "--ack", "--json",
                                actor="alice"))
    assert acked["items"] == listed["items"]
    assert acked["acknowledged"] is True
    assert json.loads(_waypost(store_url, tmp_path, "inbox", "--json",
                               actor="alice"))["items"] == []
    assert _waypost(store_url, tmp_path, "inbox", actor="alice") == "inbox of alice: nothing new"
