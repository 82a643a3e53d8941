"""Recovery: `resume --as w2` takes over a silent worker's lease and prints a brief that lets
a new agent continue; the old worker is fenced from then on."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from tests.helpers import Cli
from waypost.durations import utcnow
from waypost.store import open_store
from waypost.usecases import watchdog

DRAFT = "# Draft\n\nThe race is in the session cache warm-up; fix half done.\n"


def _silent_run(cli: Cli, tmp_path: Path) -> str:
    """A run whose worker w1 went quiet after recording a draft, blocked by the watchdog."""
    cli.ok("init")
    run = cli.ok("start", "Fix the flaky login test", "--kind", "long_running",
                 "--target", "file:result.md", "--notify", "file:notices.jsonl",
                 "--max-silence", "2s", "--gate", "tests=command:true")
    cli.ok("claim", run, actor="w1")
    (tmp_path / "draft.md").write_text(DRAFT)
    cli.ok("artifact", "add", run, "draft.md", "--role", "draft", actor="w1")
    cli.ok("evidence", "add", run, "--kind", "test", "--verdict", "failed", "--summary",
           "login test fails 1 in 20", actor="w1")
    cli.ok("heartbeat", run, "--note", "warm-up race found; patching the cache", actor="w1")
    with open_store(str(cli.store)) as store:
        report = watchdog.sweep(store, watcher_id="a", now=utcnow() + timedelta(seconds=3))
    assert [a.recorded for a in report.actions] == ["worker_silent (b1)"]
    return run


def test_resume_brief_lets_a_new_worker_continue_and_fences_the_old_one(
        cli: Cli, tmp_path: Path) -> None:
    run = _silent_run(cli, tmp_path)
    brief = cli.ok("resume", run, actor="w2")
    for expected in (f"HANDOFF {run}  Fix the flaky login test",
                     "you        w2, lease epoch 2 (took over from w1): pass --epoch 2",
                     "state      in_progress",
                     "target     file:result.md",
                     'last note  "warm-up race found; patching the cache"',
                     "blocker_opened",
                     "worker_silent: silent for",
                     f"draft.md (draft, {len(DRAFT)} B): waypost artifact get {run} draft.md",
                     "e1 failed reported test: login test fails 1 in 20",
                     "gates still to pass at review:",
                     "tests: command:true",
                     "open blockers: none",
                     f"waypost heartbeat {run} --as w2 --epoch 2"):
        assert expected in brief, expected
    assert len(brief.splitlines()) < 50  # one screen
    (tmp_path / "fetched").mkdir()
    cli.ok("artifact", "get", run, "draft.md", "-o", str(tmp_path / "fetched"), actor="w2")
    assert (tmp_path / "fetched" / "draft.md").read_text() == DRAFT

    old = cli("heartbeat", run, "--note", "back!", actor="w1")
    assert old.code == 3
    assert "w2" in old.err
    cli.ok("heartbeat", run, "--note", "picked up the draft", actor="w2", epoch=2)
    shown = cli("show", run, "--json").json()
    assert (shown["state"], shown["worker"]["actor"], shown["worker"]["epoch"]) == (
        "in_progress", "w2", 2)
    (blocker,) = shown["blockers"]
    assert blocker["resolved_by"] == "w2"
    assert cli.ok("verify") == "ok: 1 run(s) verified"


def test_resume_json_is_the_same_brief_as_data(cli: Cli, tmp_path: Path) -> None:
    run = _silent_run(cli, tmp_path)
    brief = cli("resume", run, "--json", actor="w2").json()
    assert (brief["run"], brief["worker"], brief["epoch"], brief["took_over_from"]) == (
        run, "w2", 2, "w1")
    assert brief["target"] == "file:result.md"
    assert brief["open_blockers"] == []
    assert brief["last_note"] == "warm-up race found; patching the cache"
    assert [a["fetch"] for a in brief["artifacts"]] == [
        f"waypost artifact get {run} draft.md"]
    assert [e["summary"] for e in brief["evidence"]] == ["login test fails 1 in 20"]
    assert [g["name"] for g in brief["gates"]] == ["tests"]
    events = [h["event"] for h in brief["history"]]
    assert events[0] == "started"
    assert events[-3:] == ["blocker_opened", "claimed", "blocker_resolved"]
    assert [h["state"] for h in brief["history"]][-3:] == ["blocked", "blocked", "in_progress"]


def test_a_live_worker_is_taken_over_only_with_the_owners_consent(cli: Cli) -> None:
    cli.ok("init")
    run = cli.ok("start", "Busy", "--kind", "long_running", "--target", "none:",
                 "--max-silence", "30m")
    cli.ok("claim", run, actor="w1")
    for verb in ("resume", "claim"):  # one rule for both
        refused = cli(verb, run, actor="w2")
        assert refused.code == 3, verb
        assert "w1 holds a live lease" in refused.err
        assert f"waypost transfer {run} --authority takeover --to w2 --as alice" in refused.err
    assert cli("resume", run, "--force", actor="w2").code == 2  # no flag walks around it
    assert cli("show", run, "--json").json()["worker"]["actor"] == "w1"
    assert cli.ok("claim", run, actor="w1") == "2"  # the holder may claim its own lease
    cli.ok("transfer", run, "--authority", "takeover", "--to", "w2", actor="alice")
    cli.ok("resume", run, actor="w2")
    assert cli("heartbeat", run, actor="w1").code == 3
    cli.ok("resume", run, actor="alice")  # the owner may always take it back


def test_resume_of_a_finished_run_says_it_is_final_first(cli: Cli) -> None:
    cli.ok("init")
    run = cli.ok("start", "Busy", "--kind", "long_running", "--target", "none:",
                 "--max-silence", "30m")
    cli.ok("claim", run, actor="w1")
    cli.ok("cancel", run, "--reason", "not needed")
    refused = cli("resume", run, "--json", actor="w2")
    assert refused.code == 3
    assert "which is final" in refused.error()["message"]
    assert "--force" not in refused.err


def test_resume_refuses_a_run_that_is_not_being_worked(cli: Cli) -> None:
    cli.ok("init")
    run = cli.ok("start", "Done", "--kind", "long_running", "--target", "none:",
                 "--max-silence", "30m")
    cli.ok("cancel", run, "--reason", "not needed")
    refused = cli("resume", run, "--json", actor="w2")
    assert refused.code == 3
    assert "cancelled" in refused.error()["message"]
