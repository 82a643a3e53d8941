"""The CLI as a user meets it: exit codes, --json, errors that name the next command."""

from __future__ import annotations

import errno
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.helpers import Cli
from waypost.errors import InvalidInput, NotFound
from waypost.store import STORE_DIR, STORE_FILE, find_default, open_store


def start_long(cli: Cli, *extra: str) -> str:
    return cli.ok("start", "Write the report", "--owner", "alice", "--kind", "long_running",
                  "--target", "file:result.md", "--max-silence", "30m", *extra)


def counts(cli: Cli, run: str) -> tuple[int, int]:
    packet = cli("show", run, "--json").json()
    events = cli("log", run, "--json").json()["events"]
    return packet["version"], len(events)


@pytest.fixture
def run(cli: Cli) -> str:
    cli.ok("init")
    return start_long(cli)


def test_the_whole_flow_and_show(cli: Cli, run: str, tmp_path: Path) -> None:
    assert cli.ok("claim", run, actor="w1") == "1"
    cli.ok("heartbeat", run, "--note", "drafting", "--progress", "0.5", actor="w1")
    blocker = cli.ok("block", run, "--kind", "missing_input", "--detail", "tag to diff",
                     actor="w1")
    assert blocker == "b1"
    assert cli("show", run, "--json").json()["state"] == "blocked"
    cli.ok("unblock", run, "b1", "--resolution", "v1.4", actor="alice")
    (tmp_path / "report.md").write_text("# Report\n\nThe change is done and tested.\n")
    cli.ok("artifact", "add", run, "report.md", "--role", "report", actor="w1")
    cli.ok("evidence", "run", run, "--kind", "test", "--", "sh", "-c", "echo ok", actor="w1")
    cli.ok("ready", run, "--summary", "done", "--artifact", "report.md", actor="w1")
    text = cli.ok("show", run)
    assert "ready_for_review" in text
    assert "unwatched: nobody will notice silence" in text
    assert "report.md (report)" in text
    assert "e1 passed  recorded" in text
    md = cli.ok("show", run, "--md")
    assert md.startswith("# Write the report")
    assert "| e1 | passed | recorded | test |" in md
    assert cli.ok("verify") == "ok: 1 run(s) verified"


def test_show_json_validates_against_the_schema(cli: Cli, run: str) -> None:
    cli.ok("claim", run, actor="w1")
    cli.ok("block", run, "--kind", "other", "--detail", "disk full on the runner", actor="w1")
    cli.ok("evidence", "skip", run, "--kind", "test", "--reason", "no CI runner", actor="w1")
    schema = json.loads(cli.ok("schema"))
    packet = cli("show", run, "--json").json()
    jsonschema.validate(packet, schema)
    assert packet["schema"] == "waypost.packet/v1"
    assert packet["observed"]["watch"].startswith("unwatched")
    packet["state"] = "sleeping"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(packet, schema)


def test_verify_names_the_run_and_seq_of_a_hand_edited_event(cli: Cli, run: str) -> None:
    cli.ok("heartbeat", run, "--note", "first")
    cli.ok("heartbeat", run, "--note", "second")
    db = sqlite3.connect(cli.store)
    body = db.execute("SELECT body FROM events WHERE run_id = ? AND seq = 2", (run,)).fetchone()
    db.execute("UPDATE events SET body = ? WHERE run_id = ? AND seq = 2",
               (body[0].replace("first", "forged"), run))
    db.commit()
    db.close()
    outcome = cli("verify", "--json")
    assert outcome.code == 3
    error = outcome.error()
    assert error["code"] == "integrity"
    assert f"run {run} seq 2" in error["message"]


def test_verify_catches_a_packet_that_is_not_the_fold(cli: Cli, run: str) -> None:
    db = sqlite3.connect(cli.store)
    db.execute("UPDATE runs SET packet = replace(packet, 'Write the report', 'Other')")
    db.commit()
    db.close()
    outcome = cli("verify", run)
    assert outcome.code == 3
    assert "differs from the fold" in outcome.err


ILLEGAL = [
    # (how to get there, the illegal command)
    ("in_progress", ("changes", "{run}", "--reason", "x")),
    ("blocked", ("ready", "{run}", "--summary", "s")),
    ("ready_for_review", ("heartbeat", "{run}")),
    ("ready_for_review", ("block", "{run}", "--kind", "other", "--detail", "late idea")),
    ("cancelled", ("heartbeat", "{run}")),
    ("cancelled", ("cancel", "{run}", "--reason", "again")),
    ("cancelled", ("unblock", "{run}", "b1", "--resolution", "x")),
]


def reach(cli: Cli, run: str, state: str) -> None:
    cli.ok("claim", run, actor="w1")
    if state == "blocked":
        cli.ok("block", run, "--kind", "other", "--detail", "runner offline", actor="w1")
    if state == "ready_for_review":
        cli.ok("evidence", "skip", run, "--kind", "test", "--reason", "no runner", actor="w1")
        cli.ok("ready", run, "--summary", "done", actor="w1")
    if state == "cancelled":
        cli.ok("cancel", run, "--reason", "not needed")


@pytest.mark.parametrize(("state", "command"), ILLEGAL)
def test_illegal_transitions_exit_3_and_change_nothing(
        cli: Cli, run: str, state: str, command: tuple[str, ...]) -> None:
    reach(cli, run, state)
    before = counts(cli, run)
    args = [part.format(run=run) for part in command]
    actor = "alice" if args[0] in ("changes", "cancel") else "w1"
    outcome = cli(*args, "--json", actor=actor)
    assert outcome.code == 3, outcome.err
    assert outcome.error()["code"] == "illegal_transition"
    assert state in outcome.error()["message"] or "blocked by" in outcome.error()["message"]
    assert counts(cli, run) == before


def test_fencing_refuses_the_old_worker(cli: Cli, run: str) -> None:
    assert cli.ok("claim", run, actor="w1") == "1"
    cli.ok("transfer", run, "--authority", "takeover", "--to", "w2", actor="alice")
    assert cli.ok("claim", run, actor="w2") == "2"
    before = counts(cli, run)
    for args in (("heartbeat", run), ("block", run, "--kind", "other", "--detail", "disk"),
                 ("evidence", "skip", run, "--kind", "test", "--reason", "none")):
        outcome = cli(*args, actor="w1", epoch=1)
        assert outcome.code == 3, args
        assert "w2" in outcome.err
    assert counts(cli, run) == before
    outcome = cli("heartbeat", run, "--json", actor="w2", epoch=1)
    assert outcome.code == 3
    assert outcome.error()["code"] == "stale_lease"
    cli.ok("heartbeat", run, actor="w2", epoch=2)


def test_idempotent_start(cli: Cli) -> None:
    cli.ok("init")
    first = start_long(cli, "--idempotency-key", "job-7")
    assert start_long(cli, "--idempotency-key", "job-7") == first
    outcome = cli("start", "Another title", "--owner", "alice", "--kind", "long_running",
                  "--target", "file:result.md", "--max-silence", "30m",
                  "--idempotency-key", "job-7")
    assert outcome.code == 5
    assert "job-7" in outcome.err
    assert first in outcome.err
    assert len(cli("ls", "--json").json()["runs"]) == 1


def test_long_running_start_names_what_is_missing(cli: Cli) -> None:
    cli.ok("init")
    outcome = cli("start", "x", "--kind", "long_running", "--json")
    assert outcome.code == 3
    message = outcome.error()["message"]
    assert "a target (--target)" in message
    assert "a stop rule (--max-silence or --deadline)" in message


def test_expect_classifies_against_the_threshold(cli: Cli, tmp_path: Path) -> None:
    cli.ok("init")
    short = cli.ok("start", "quick", "--expect", "2m")
    assert cli("show", short, "--json").json()["kind"] == "bounded"
    assert cli("start", "long", "--expect", "2h").code == 3  # long_running, nothing recorded
    (tmp_path / "waypost.toml").write_text('[runs]\nlong_running_after = "3h"\n')
    assert cli("show", cli.ok("start", "long", "--expect", "2h"), "--json").json()["kind"] \
        == "bounded"


def test_errors_as_json_on_stderr_with_exit_codes(cli: Cli, run: str) -> None:
    missing = cli("show", "wp_nope", "--json")
    assert missing.code == 4
    assert missing.out == ""
    assert missing.error()["code"] == "not_found"
    assert "waypost ls" in missing.error()["hint"]
    bad = cli("heartbeat", run, "--progress", "2", "--json")
    assert bad.code == 2
    assert "between 0 and 1" in bad.error()["message"]
    assert cli("start", "x", "--max-silence", "soon").code == 2
    assert cli("frobnicate").code == 2
    assert cli("ls", "--state", "sleeping").code == 2


def test_no_store_tells_you_to_init(cli: Cli, monkeypatch: pytest.MonkeyPatch,
                                    tmp_path: Path) -> None:
    monkeypatch.delenv("WAYPOST_URL", raising=False)
    elsewhere = tmp_path / "empty"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    from waypost.cli import main

    assert main(["ls"]) == 4


def test_the_store_is_found_upward_and_a_path_is_taken_as_written(tmp_path: Path) -> None:
    store = tmp_path / "project" / STORE_DIR / STORE_FILE
    deep = tmp_path / "project" / "src" / "pkg"
    deep.mkdir(parents=True)
    with open_store(f"{store}/") as made:  # a trailing slash names the same file
        assert made.url == f"sqlite:///{store}"
    with open_store(f"sqlite:///{tmp_path}/./project//{STORE_DIR}/{STORE_FILE}") as same:
        assert same.url == f"sqlite:///{store}"
    assert find_default(deep) == str(store)
    assert find_default(tmp_path) is None
    with pytest.raises(InvalidInput, match=r"^\. is not a regular file"):
        open_store("sqlite:///")  # not a throwaway in-memory database


def test_an_unreadable_store_folder_is_an_error_not_a_reason_to_look_further_up(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    outer = tmp_path / STORE_DIR / STORE_FILE
    inner = tmp_path / "project" / STORE_DIR / STORE_FILE
    for path in (outer, inner):
        path.parent.mkdir(parents=True)
        path.write_bytes(b"")
    real_stat = os.stat

    def stat(path: str | os.PathLike[str], *args: Any, **kwargs: Any) -> os.stat_result:
        if os.fspath(path) == str(inner):
            raise PermissionError(errno.EACCES, "Permission denied", str(inner))
        return real_stat(path, *args, **kwargs)

    assert find_default(tmp_path / "project") == str(inner)
    monkeypatch.setattr(os, "stat", stat)
    with pytest.raises(NotFound, match=f"permission denied: this user may not read {inner}"):
        find_default(tmp_path / "project")


def test_ls_shows_active_runs_and_filters(cli: Cli, run: str) -> None:
    other = start_long(cli)
    cli.ok("cancel", other, "--reason", "duplicate")
    board = cli.ok("ls")
    assert run in board
    assert other not in board
    assert other in cli.ok("ls", "--all")
    assert [r["id"] for r in cli("ls", "--state", "cancelled", "--json").json()["runs"]] \
        == [other]


def test_artifact_get_returns_the_stored_bytes(cli: Cli, run: str, tmp_path: Path) -> None:
    source = tmp_path / "data.json"
    source.write_bytes(b'{"rows": 3}\n')
    cli.ok("artifact", "add", run, str(source), "--role", "result")
    source.unlink()
    out = tmp_path / "out"
    out.mkdir()
    cli.ok("artifact", "get", run, "data.json", "-o", str(out))
    assert (out / "data.json").read_bytes() == b'{"rows": 3}\n'
    assert cli("artifact", "add", run, str(source)).code == 4
    assert cli("artifact", "add", run, "https://example.invalid/x", "--name", "../x").code == 2


def test_evidence_run_records_failure_and_the_log(cli: Cli, run: str) -> None:
    outcome = cli("evidence", "run", run, "--json", "--", "sh", "-c", "echo boom >&2; exit 1")
    assert outcome.code == 0
    recorded = outcome.json()["evidence"]
    assert recorded["verdict"] == "failed"
    assert recorded["exit_code"] == 1
    assert recorded["assurance"] == "recorded"
    assert "boom" in recorded["output_tail"]
    assert recorded["log_sha256"]
