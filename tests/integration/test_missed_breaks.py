"""Refusals that must come before anything runs: a review by anyone but the owner runs no
gate, a fenced worker's `evidence run` runs no command, and a remote caller without
--allow-exec may not grep the server's files behind a reference (URL) artifact. Each is
asked at the SDK and at a door, and each proves what did not happen: the marker file a
command would make is not there, and the store is exactly as it was."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

import waypost
from tests.helpers import Cli, FakeClock, recorded
from tests.http_support import Api, issue, serving
from waypost.durations import utcnow
from waypost.errors import NotAuthorized, StaleLease
from waypost.model import Gate, Kind
from waypost.store import Store, open_store

REPORT = "# Report\n\nThe race is fixed: the session is created before the redirect now.\n"


# --- a review by anyone but the owner runs no gate --------------------------------------------


def ready_with_gate(store: Store, marker: Path, tmp_path: Path) -> str:
    """alice's run with her own gate `command:touch MARKER`, made ready by its worker w1."""
    run, _ = waypost.start(store, "Fix the login test", actor="alice", owner="alice",
                           target="none:", worker="w1",
                           gates=[Gate(name="mine", check=f"command:touch {marker}")])
    work = waypost.Run(store, run.id, actor="w1", epoch=1)
    report = tmp_path / "report.md"
    report.write_text(REPORT)
    work.add_artifact(str(report), role=waypost.ArtifactRole.REPORT, max_bytes=1 << 20)
    work.report_evidence(waypost.EvidenceKind.TEST, waypost.Verdict.PASSED, "3 tests pass")
    work.ready("done", artifacts=["report.md"])
    return run.id


def test_a_review_by_anyone_but_the_owner_runs_no_gate(store: Store, tmp_path: Path) -> None:
    marker = tmp_path / "MARKER"
    run_id = ready_with_gate(store, marker, tmp_path)
    for actor in ("mallory", "w1"):
        before = recorded(store, run_id)
        with pytest.raises(NotAuthorized):
            waypost.Run(store, run_id, actor=actor).review(cwd=str(tmp_path))
        assert not marker.exists(), f"{actor}'s refused review ran the owner's gate"
        assert recorded(store, run_id) == before
    waypost.Run(store, run_id, actor="alice").review(cwd=str(tmp_path))
    assert marker.exists()  # the gate does run, for its owner


def test_a_review_by_anyone_but_the_owner_runs_no_gate_at_the_cli(cli: Cli,
                                                                   tmp_path: Path) -> None:
    cli.ok("init")
    marker = tmp_path / "MARKER"
    with open_store(str(cli.store)) as store:
        run_id = ready_with_gate(store, marker, tmp_path)
        before = recorded(store, run_id)
    for actor in ("mallory", "w1"):
        refusal = cli("review", run_id, "--json", actor=actor)
        assert refusal.code == 3, refusal.err
        assert refusal.error()["code"] == "not_authorized"
        assert not marker.exists(), f"{actor}'s refused review ran the owner's gate"
    with open_store(str(cli.store)) as store:
        assert recorded(store, run_id) == before
    assert cli("review", run_id).code == 0
    assert marker.exists()


# --- a fenced worker's evidence command does not run ------------------------------------------


def taken_over(store: Store, clock: FakeClock) -> str:
    """alice's run, claimed by w1 (epoch 1), then taken over by w2 (epoch 2) once w1 fell
    silent."""
    run, _ = waypost.start(store, "t", actor="alice", target="none:", kind=Kind.LONG_RUNNING,
                           clock=clock, max_silence=600, deadline="+30d")
    waypost.Run(store, run.id, actor="w1", clock=clock).claim()
    clock.advance(600)
    waypost.Run(store, run.id, actor="w2", clock=clock).claim()
    lease = store.get(run.id).worker
    assert lease is not None
    assert (lease.actor, lease.epoch) == ("w2", 2)
    return run.id


def test_a_fenced_worker_runs_no_evidence_command(store: Store, clock: FakeClock,
                                                  tmp_path: Path) -> None:
    run_id = taken_over(store, clock)
    marker = tmp_path / "MARKER"
    before = recorded(store, run_id)
    stale = waypost.Run(store, run_id, actor="w1", epoch=1, clock=clock)
    with pytest.raises(StaleLease):
        stale.record_command(["touch", str(marker)], cwd=str(tmp_path))
    assert not marker.exists(), "the fenced worker's command ran before its refusal"
    assert recorded(store, run_id) == before


def test_a_fenced_worker_runs_no_evidence_command_at_the_cli(cli: Cli, tmp_path: Path) -> None:
    cli.ok("init")
    marker = tmp_path / "MARKER"
    with open_store(str(cli.store)) as store:
        run_id = taken_over(store, FakeClock(utcnow() - timedelta(hours=1)))
        before = recorded(store, run_id)
    refusal = cli("evidence", "run", run_id, "--json", "--", "touch", str(marker),
                  actor="w1", epoch=1)
    assert refusal.code == 3, refusal.err
    assert refusal.error()["code"] == "stale_lease"
    assert not marker.exists(), "the fenced worker's command ran before its refusal"
    with open_store(str(cli.store)) as store:
        assert recorded(store, run_id) == before


# --- a remote grep never reads the server's files behind a reference artifact -----------------


def test_a_remote_grep_of_a_reference_artifact_needs_allow_exec(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:
    """notes.txt is only a URL: a grep of it would read a file of that name on the server."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("x marks the spot\n")
    url = str(tmp_path / "w.db")
    with open_store(url, create=True) as store:
        run, _ = waypost.start(store, "t", actor="alice", owner="alice", target="none:",
                               worker="w1")
        waypost.Run(store, run.id, actor="w1", epoch=1).add_artifact(
            "https://example.org/notes.txt", role=waypost.ArtifactRole.OTHER,
            name="notes.txt", max_bytes=1 << 20)
        artifact = store.get(run.id).artifact("notes.txt")
        assert artifact is not None
        assert not artifact.stored
        before = recorded(store, run.id)
    tokens = {"owner": issue(url, "alice", "owner"),
              "worker": issue(url, "w1", "worker", run_id=run.id)}
    with serving(url) as base:
        for who, token in tokens.items():
            refusal = Api(base, token).post(f"/api/runs/{run.id}/evidence",
                                            {"check": "grep:x:notes.txt"})
            assert refusal.status_code in (403, 422), (who, refusal.text)
            assert "nothing runs on this server" in refusal.text, who
    with open_store(url) as store:
        assert recorded(store, run.id) == before



def test_the_cli_reads_waypost_epoch_for_a_verb_without_the_option(cli: Cli) -> None:
    """`WAYPOST_EPOCH` is read by every verb, those without an `--epoch` option too (`gate
    adopt`): a value that is no epoch is bad input naming the variable, and leaves no
    trace; without it the same verb writes."""
    cli.ok("init")
    with open_store(str(cli.store)) as store:
        run, _ = waypost.start(store, "Fence by the environment", actor="alice",
                               owner="alice", target="none:", kind=Kind.LONG_RUNNING,
                               max_silence=3600, worker="w1")
        worker = waypost.Run(store, run.id, actor="w1")
        worker.claim()
        worker.add_gate("lint", "command:true")
        before = recorded(store, run.id)
    bad = cli("gate", "adopt", run.id, "lint", "--json", epoch=0)
    assert (bad.code, bad.error()["code"]) == (2, "invalid_input")
    assert "WAYPOST_EPOCH" in bad.error()["message"]
    with open_store(str(cli.store)) as store:
        assert recorded(store, run.id) == before
    cli.ok("gate", "adopt", run.id, "lint")
