"""What a new user trips over: each refusal says what happened and the command to type next."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import Cli


@pytest.fixture
def run(cli: Cli) -> str:
    cli.ok("init")
    return cli.ok("start", "Write the report", "--owner", "alice", "--kind", "long_running",
                  "--target", "file:result.md", "--max-silence", "30m")


def test_unblocking_a_blocker_that_does_not_exist_is_not_found(cli: Cli, run: str) -> None:
    cli.ok("claim", run, actor="w1")
    outcome = cli("unblock", run, "b9", "--resolution", "done", "--json", actor="w1")
    assert outcome.code == 4
    assert outcome.error()["message"] == f"run {run} has no blocker b9 (open: none)"


@pytest.mark.parametrize(("prepare", "args", "expected"), [
    ([], ["approve", "RUN"], "waypost ready RUN --summary TEXT --as w1"),
    ([["ready", "RUN", "--summary", "done"]], ["heartbeat", "RUN"], "waypost review RUN"),
    ([["cancel", "RUN", "--reason", "no"]], ["heartbeat", "RUN"], "waypost show RUN"),
])
def test_an_illegal_move_ends_with_the_next_command(cli: Cli, run: str,
                                                    prepare: list[list[str]], args: list[str],
                                                    expected: str) -> None:
    cli.ok("claim", run, actor="w1")
    cli.ok("evidence", "skip", run, "--kind", "test", "--reason", "no tests here", actor="w1")
    for step in prepare:
        cli.ok(*[run if a == "RUN" else a for a in step], actor="w1" if step[0] == "ready"
               else "alice")
    outcome = cli(*[run if a == "RUN" else a for a in args], "--json", actor="w1")
    assert outcome.code == 3
    assert expected.replace("RUN", run) in outcome.error()["hint"]


def test_init_inside_another_stores_tree_needs_here(cli: Cli, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    cli.ok("init")
    inner = tmp_path / "sub" / "dir"
    inner.mkdir(parents=True)
    monkeypatch.chdir(inner)
    monkeypatch.delenv("WAYPOST_URL", raising=False)
    from waypost.cli import main

    assert main(["init"]) == 3
    assert not (inner / ".waypost").exists()
    assert main(["init", "--here"]) == 0
    assert (inner / ".waypost" / "waypost.db").is_file()
    assert main(["init"]) == 0  # again, here: the store is this folder's own


def test_a_usage_error_in_json_names_the_commands_help(cli: Cli, run: str) -> None:
    outcome = cli("evidence", "run", run, "--kind", "nonsense", "--json", "--", "true")
    assert outcome.code == 2
    assert outcome.error()["hint"] == "see: waypost evidence run --help"


def test_evidence_run_options_have_help(cli: Cli) -> None:
    text = cli.ok("evidence", "run", "--help")
    assert "Run it in this folder" in text
    assert "What the command checks" in text


def test_artifact_get_to_stdout_with_json_is_one_document(cli: Cli, run: str,
                                                          tmp_path: Path) -> None:
    import base64
    import json

    cli.ok("claim", run, actor="w1")
    (tmp_path / "report.md").write_text("# Report\n\nThe race is fixed.\n")
    (tmp_path / "blob.bin").write_bytes(b"\xff\x00binary" * 4)
    cli.ok("artifact", "add", run, "report.md", actor="w1")
    cli.ok("artifact", "add", run, "blob.bin", actor="w1")
    text = json.loads(cli.ok("artifact", "get", run, "report.md", "-o", "-", "--json"))
    assert text["text"] == "# Report\n\nThe race is fixed.\n"
    binary = json.loads(cli.ok("artifact", "get", run, "blob.bin", "-o", "-", "--json"))
    assert base64.b64decode(binary["base64"]) == b"\xff\x00binary" * 4
    assert cli.ok("artifact", "get", run, "report.md", "-o", "-").startswith("# Report")


def test_deliver_once_exits_3_when_a_delivery_failed_for_good(cli: Cli) -> None:
    cli.ok("init")
    run = cli.ok("start", "Send it", "--owner", "alice", "--kind", "long_running",
                 "--target", "exec:no-such-command-anywhere", "--max-silence", "30m")
    cli.ok("claim", run, actor="w1")
    cli.ok("evidence", "skip", run, "--kind", "test", "--reason", "nothing to test", actor="w1")
    cli.ok("ready", run, "--summary", "done", actor="w1")
    cli.ok("review", run)
    cli.ok("approve", run)
    outcome = cli("deliver", "--once", "--json")
    assert outcome.code == 3, outcome.err
    assert f"{run}.final" in outcome.error()["message"]
    packet = cli("show", run, "--json").json()
    assert packet["state"] == "blocked"
    assert [b["kind"] for b in packet["blockers"]] == ["delivery_failed"]
    assert cli("deliver", "--once").code == 0  # nothing more to fail: nothing due


@pytest.mark.parametrize("verb", ["init", "ls", "doctor", "demo"])
def test_a_missing_postgres_driver_is_exit_2_everywhere(verb: str, tmp_path: Path) -> None:
    import subprocess
    import sys

    hide_driver = ("import sys; sys.modules['psycopg'] = sys.modules['psycopg_pool'] = None; "
                   "from waypost.cli import main; sys.exit(main(sys.argv[1:]))")
    proc = subprocess.run([sys.executable, "-c", hide_driver, verb, "--store",
                           "postgresql://nobody@127.0.0.1/none", "--json"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path, check=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "needs psycopg" in proc.stdout + proc.stderr


def test_commands_in_hints_quote_names_with_spaces(cli: Cli) -> None:
    import shlex

    cli.ok("init")
    run = cli.ok("start", "Write it", "--owner", "ops lead", "--kind", "long_running",
                 "--target", "none:", "--max-silence", "30m", actor="ops lead")
    cli.ok("claim", run, actor="w1")
    cli.ok("evidence", "skip", run, "--kind", "test", "--reason", "nothing to run", actor="w1")
    cli.ok("ready", run, "--summary", "done", actor="w1")
    hint = cli("approve", run, "--json", actor="ops lead").error()["hint"]
    command = hint.split(": ", 1)[1]
    assert shlex.split(command)[-2:] == ["--as", "ops lead"]


@pytest.mark.parametrize("verb", [["deliver"], ["watch"], ["start"], ["evidence", "run"],
                                  ["prune"], ["doctor"]])
def test_help_writes_defaults_one_way(cli: Cli, verb: list[str]) -> None:
    text = " ".join(cli.ok(*verb, "--help").split())  # click wraps lines
    assert "[default " not in text  # every default reads "[default: …]"
