"""`waypost show RUN --a2a`: a real run, read from a real store, as an A2A v1 Task."""

from __future__ import annotations

import json
from pathlib import Path

from a2a.types import Task, TaskState
from google.protobuf.json_format import MessageToDict, ParseDict

from tests.helpers import Cli


def test_show_a2a_follows_a_run_through_its_states(cli: Cli, tmp_path: Path) -> None:
    cli.ok("init")
    run = cli.ok("start", "Write the report", "--owner", "alice", "--kind", "long_running",
                 "--target", "file:result.md", "--max-silence", "30m",
                 "--gate", "tests=command:true")

    def state() -> Task:
        task = ParseDict(json.loads(cli.ok("show", run, "--a2a")), Task())
        assert task.id == run
        return task

    assert state().status.state == TaskState.TASK_STATE_WORKING
    cli.ok("claim", run, actor="w1")
    cli.ok("block", run, "--kind", "permission_boundary", "--detail", "needs prod", actor="w1")
    assert state().status.state == TaskState.TASK_STATE_AUTH_REQUIRED
    cli.ok("unblock", run, "b1", "--resolution", "granted", actor="alice")
    (tmp_path / "report.md").write_text("# Report\n\nThe change is done and tested.\n")
    cli.ok("artifact", "add", run, "report.md", "--role", "report", actor="w1")
    cli.ok("evidence", "run", run, "--kind", "test", "--", "sh", "-c", "echo ok", actor="w1")
    cli.ok("ready", run, "--summary", "done", "--artifact", "report.md", actor="w1")
    task = state()
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert [a.artifact_id for a in task.artifacts] == ["report.md"]
    assert task.artifacts[0].parts[0].text == f"waypost artifact get {run} report.md"
    meta = MessageToDict(task)["metadata"]["waypost"]  # as it came through the proto
    assert meta["owner"] == "alice"
    assert meta["target"] == "file:result.md"
    assert meta["watch"].startswith("unwatched")
    assert [g["gate"] for g in meta["gates"]] == ["tests"]
    cli.ok("cancel", run, "--reason", "no longer needed", actor="alice")
    assert state().status.state == TaskState.TASK_STATE_CANCELED


def test_show_a2a_combines_with_public(cli: Cli) -> None:
    cli.ok("init")
    run = cli.ok("start", "Private work", "--owner", "alice", "--target", "none:")
    shown = json.loads(cli.ok("show", run, "--a2a", "--public"))
    assert ParseDict(shown, Task()).id == run
