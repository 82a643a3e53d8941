"""Retention through the CLI: `prune` removes finished runs with their history and blobs,
never an active run or a blob an active run names, and `verify` passes afterwards."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import Cli


def _run_with_artifact(cli: Cli, tmp_path: Path, title: str, name: str, text: str) -> str:
    run = cli.ok("start", title, "--kind", "long_running", "--target", "none:",
                 "--notify", "file:notices.jsonl", "--max-silence", "30m")
    cli.ok("claim", run, actor="w1")
    (tmp_path / name).write_text(text)
    cli.ok("artifact", "add", run, name, "--role", "report", actor="w1")
    return run


def test_prune_keeps_active_runs_and_their_blobs_and_verify_passes(
        cli: Cli, tmp_path: Path) -> None:
    cli.ok("init")
    shared = "# Shared findings\n\nBoth runs recorded this same report.\n"
    active = _run_with_artifact(cli, tmp_path, "Still going", "shared.md", shared)
    done = _run_with_artifact(cli, tmp_path, "Abandoned", "old.md", "# Old notes\n\nGone.\n")
    cli.ok("artifact", "add", done, "shared.md", "--role", "report", actor="w1")
    cli.ok("block", done, "--kind", "missing_input", "--detail", "the staging key", actor="w1")
    cli.ok("cancel", done, "--reason", "superseded by the active run")
    kept = cli.ok("prune", "--older-than", "90d")
    assert kept.startswith("pruned 0 run(s)")
    pruned = cli("prune", "--older-than", "0s", "--blob-grace", "0s", "--json").json()
    assert (pruned["runs"], pruned["deliveries"], pruned["blobs"]) == (1, 1, 1)
    assert pruned["events"] == 6  # started, claimed, 2 artifacts, blocked, cancelled
    assert cli("show", done).code == 4
    assert cli("show", active, "--json").json()["state"] == "in_progress"
    cli.ok("artifact", "get", active, "shared.md", "-o", str(tmp_path / "back.md"))
    assert (tmp_path / "back.md").read_text() == shared
    assert cli.ok("verify") == "ok: 1 run(s) verified"


def test_prune_refuses_active_states_and_changes_nothing(cli: Cli) -> None:
    cli.ok("init")
    run = cli.ok("start", "Busy", "--kind", "long_running", "--target", "none:",
                 "--max-silence", "30m")
    refused = cli("prune", "--older-than", "0s", "--state", "in_progress,cancelled", "--json")
    assert refused.code == 2
    assert "finished runs only" in refused.error()["message"]
    assert "in_progress" in refused.error()["message"]
    assert cli("show", run).code == 0
    assert cli("prune", "--older-than", "soon").code == 2
