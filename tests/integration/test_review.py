"""The parent's review and approval: gates re-run in the reviewer's environment, approval
only on a passing latest review (or the owner's waiver), refusals that change nothing."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest

from tests.helpers import Cli
from waypost.core.history import make_event
from waypost.core.machine import apply
from waypost.errors import InvalidInput
from waypost.events import EvidenceRecorded, MarkedReady, Reviewed, Started
from waypost.model import (
    Assurance,
    Evidence,
    EvidenceKind,
    Kind,
    Packet,
    Verdict,
    from_json,
    to_json,
)

REPORT = "# Report\n\nThe flaky login test raced the session cache; it now waits for it.\n"
GATES = ("report=artifact:report.md", "tests=command:true", "clean=no-private",
         "docs?=grep:Changelog:report.md")


def ready_run(cli: Cli, tmp_path: Path, *gates: str) -> str:
    cli.ok("init")
    run = cli.ok("start", "Write the report", "--owner", "alice",
                 *(part for gate in gates for part in ("--gate", gate)))
    cli.ok("claim", run, actor="w1")
    (tmp_path / "report.md").write_text(REPORT)
    cli.ok("artifact", "add", run, "report.md", "--role", "report", actor="w1")
    cli.ok("evidence", "run", run, "--", "true", actor="w1")
    cli.ok("ready", run, "--summary", "done", "--public-summary", "The report is written.",
           "--artifact", "report.md", actor="w1")
    return run


def packet(cli: Cli, run: str) -> dict[str, Any]:
    document: dict[str, Any] = cli("show", run, "--json").json()
    return document


def history(cli: Cli, run: str) -> tuple[int, int, str]:
    p = packet(cli, run)
    return p["version"], len(cli("log", run, "--json").json()["events"]), p["state"]


def test_review_reruns_every_gate_as_rechecked_evidence(cli: Cli, tmp_path: Path) -> None:
    run = ready_run(cli, tmp_path, *GATES)
    report = cli("review", run, "--json").json()
    assert (report["review"], report["by"], report["approvable"]) == ("r1", "alice", True)
    verdicts = {g["gate"]: (g["verdict"], g["required"]) for g in report["gates"]}
    assert verdicts == {"report": ("passed", True), "tests": ("passed", True),
                        "clean": ("passed", True), "docs": ("failed", False),
                        "artifact-hashes": ("passed", True)}
    rechecked = [e for e in packet(cli, run)["evidence"] if e["assurance"] == "rechecked"]
    assert [(e["gate"], e["review"], e["recorded_by"]) for e in rechecked] == [
        (g, "r1", "alice") for g in ("report", "tests", "clean", "docs", "artifact-hashes")]
    text = cli.ok("review", run)
    assert text.splitlines()[0] == f"{run} review r2 by alice: approvable"
    assert "GATE" in text
    assert "docs             optional  failed" in text
    approved = cli("approve", run, "--json").json()
    assert (approved["state"], approved["approval"]["by"]) == ("approved", "alice")
    shown = cli.ok("show", run)
    assert "[gate tests, review r1]" in shown
    assert "r2 by alice" in shown
    assert "approved   by alice" in shown
    assert cli.ok("verify", run) == "ok: 1 run(s) verified"


def test_approve_before_any_review_is_refused_and_changes_nothing(
        cli: Cli, tmp_path: Path) -> None:
    run = ready_run(cli, tmp_path, *GATES)
    before = history(cli, run)
    refused = cli("approve", run, "--json")
    assert refused.code == 3
    error = refused.error()
    assert "cannot be approved before a review" in error["message"]
    assert f"waypost review {run} --as alice" in error["hint"]
    assert "the owner alice" in error["hint"]
    assert history(cli, run) == before


def test_the_worker_may_neither_review_nor_approve_without_a_transfer(
        cli: Cli, tmp_path: Path) -> None:
    run = ready_run(cli, tmp_path, *GATES)
    before = history(cli, run)
    review = cli("review", run, "--json", actor="w1")
    assert review.code == 3
    assert review.error()["message"] == (
        f"w1 (the run's own worker) may not review run {run}: only alice may")
    assert history(cli, run) == before
    cli.ok("review", run)
    before = history(cli, run)
    approve = cli("approve", run, "--json", actor="w1")
    assert approve.code == 3
    assert "may not approve" in approve.error()["message"]
    assert "only alice may" in approve.error()["message"]
    assert "--authority approve --to w1 --as alice" in approve.error()["hint"]
    assert history(cli, run) == before
    cli.ok("transfer", run, "--authority", "approve", "--to", "w1")
    cli.ok("review", run, actor="w1")
    assert cli.ok("approve", run, actor="w1") == f"{run} approved"


def test_a_failed_gate_blocks_approval_until_the_owner_waives_it(
        cli: Cli, tmp_path: Path) -> None:
    run = ready_run(cli, tmp_path, "report=artifact:report.md", "tests=command:false")
    review = cli("review", run, "--json")
    assert review.code == 3
    assert review.json()["approvable"] is False
    assert "required gate(s) did not pass: tests" in review.error()["message"]
    before = history(cli, run)
    refused = cli("approve", run, "--json")
    assert refused.code == 3
    assert "tests failed (`false` exited 1" in refused.error()["message"]
    assert "only the owner alice may waive" in refused.error()["hint"]
    assert history(cli, run) == before
    cli.ok("transfer", run, "--authority", "approve", "--to", "bob")
    by_transferee = cli("approve", run, "--waive", "tests=fine", "--json", actor="bob")
    assert by_transferee.code == 3
    assert "only its owner alice may" in by_transferee.error()["message"]
    reason = "the runner lacks the test database; verified by hand on staging"
    assert cli.ok("approve", run, "--waive", f"tests={reason}").startswith(f"{run} approved")
    shown = cli.ok("show", run)
    assert "WAIVED     gate tests by alice at" in shown
    assert reason in shown
    assert reason in cli.ok("show", run, "--md")
    waivers = packet(cli, run)["approval"]["waivers"]
    assert [(w["gate"], w["reason"], w["by"]) for w in waivers] == [("tests", reason, "alice")]


@pytest.mark.parametrize(("waive", "why"), [
    ("nope=because", "has no gate 'nope' to waive"),
    ("tests=", "bad waiver"),
    ("tests", "bad waiver"),
])
def test_a_waiver_needs_a_known_gate_and_a_reason(cli: Cli, tmp_path: Path, waive: str,
                                                  why: str) -> None:
    run = ready_run(cli, tmp_path, "tests=command:false")
    cli("review", run)
    refused = cli("approve", run, "--waive", waive, "--json")
    assert refused.code == 2
    assert why in refused.error()["message"]
    assert packet(cli, run)["state"] == "ready_for_review"


def test_an_artifact_changed_after_recording_fails_the_review(cli: Cli, tmp_path: Path) -> None:
    run = ready_run(cli, tmp_path, "report=artifact:report.md")
    (tmp_path / "report.md").write_text(REPORT + "\nA paragraph added after recording.\n")
    review = cli("review", run, "--json")
    assert review.code == 3
    gates = {g["gate"]: g for g in review.json()["gates"]}
    for name in ("report", "artifact-hashes"):
        assert gates[name]["verdict"] == "failed"
        assert "report.md changed after it was recorded (hash mismatch" in gates[name]["summary"]
    assert cli("approve", run).code == 3
    assert packet(cli, run)["state"] == "ready_for_review"


def test_a_resubmission_needs_a_new_review(cli: Cli, tmp_path: Path) -> None:
    run = ready_run(cli, tmp_path, "tests=command:true")
    cli.ok("review", run)
    cli.ok("changes", run, "--reason", "add the timing numbers")
    cli.ok("ready", run, "--summary", "done, with numbers", "--artifact", "report.md",
           actor="w1")
    refused = cli("approve", run, "--json")
    assert refused.code == 3
    assert "latest review r1 was of an earlier submission" in refused.error()["message"]
    cli.ok("review", run)
    assert cli.ok("approve", run) == f"{run} approved"


def test_review_only_from_ready_for_review(cli: Cli) -> None:
    cli.ok("init")
    run = cli.ok("start", "Not done yet", "--owner", "alice")
    outcome = cli("review", run, "--json")
    assert outcome.code == 3
    assert outcome.error()["code"] == "illegal_transition"


def test_no_gates_and_no_artifacts_still_needs_a_review(cli: Cli) -> None:
    cli.ok("init")
    run = cli.ok("start", "Quick fix", "--owner", "alice")
    cli.ok("evidence", "skip", run, "--kind", "test", "--reason", "no test suite exists")
    cli.ok("ready", run, "--summary", "done")
    assert cli("approve", run).code == 3
    text = cli.ok("review", run)
    assert "nothing to re-run" in text
    assert cli.ok("approve", run) == f"{run} approved"


def test_default_gates_come_from_waypost_toml(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "waypost.toml").write_text(
        '[gates]\nreport = "artifact:report.md"\nclean = "no-private"\n')
    cli.ok("init")
    run = cli.ok("start", "Configured", "--gate", "report=artifact:notes.md",
                 "--gate", "tests=command:true")
    gates = {g["name"]: g["check"] for g in packet(cli, run)["gates"]}
    assert gates == {"report": "artifact:notes.md", "clean": "no-private",
                     "tests": "command:true"}


def test_a_gate_with_a_bad_check_is_refused_at_start(cli: Cli, tmp_path: Path) -> None:
    cli.ok("init")
    assert cli("start", "Bad gate", "--gate", "x=grep:(:a.md").code == 2
    (tmp_path / "waypost.toml").write_text('[gates]\nbad = "nope:1"\n')
    assert cli("start", "Bad config gate").code == 2


# --- the pure rules -----------------------------------------------------------------------

AT = datetime(2026, 1, 1, tzinfo=UTC)


def _ready_packet() -> Packet:
    p = apply(None, make_event(None, "wp_t", Started(title="t", kind=Kind.BOUNDED,
                                                      owner="alice", target="none:"),
                               actor="alice", at=AT))
    ev = Evidence(id="e1", kind=EvidenceKind.TEST, verdict=Verdict.PASSED,
                  assurance=Assurance.RECORDED, summary="ok", recorded_at=AT, recorded_by="alice")
    for data in (EvidenceRecorded(evidence=ev), MarkedReady(summary="done")):
        p = apply(p, make_event(p, "wp_t", data, actor="alice", at=AT))
    return p


def _rechecked(id: str, review: str = "r1", assurance: Assurance = Assurance.RECHECKED,
               gate: str | None = "g") -> Evidence:
    return Evidence(id=id, kind=EvidenceKind.COMMAND, verdict=Verdict.PASSED,
                    assurance=assurance, summary="ok", gate=gate, review=review,
                    recorded_at=AT, recorded_by="alice")


@pytest.mark.parametrize("evidence", [
    _rechecked("e7"),
    _rechecked("e2", review="r9"),
    _rechecked("e2", assurance=Assurance.REPORTED),
    _rechecked("e2", gate=None),
])
def test_a_review_event_must_carry_numbered_rechecked_gate_evidence(evidence: Evidence) -> None:
    p = _ready_packet()
    with pytest.raises(InvalidInput):
        apply(p, make_event(p, "wp_t", Reviewed(review_id="r1", evidence=(evidence,)),
                            actor="alice", at=AT))
    with pytest.raises(InvalidInput, match="review id r2 is not r1"):
        apply(p, make_event(p, "wp_t", Reviewed(review_id="r2"), actor="alice", at=AT))
    reviewed = apply(p, make_event(p, "wp_t", Reviewed(review_id="r1",
                                                       evidence=(_rechecked("e2"),)),
                                   actor="alice", at=AT))
    assert reviewed.reviews[0].evidence == ("e2",)
    assert reviewed.state is p.state


def test_packets_written_before_reviews_existed_still_decode() -> None:
    p = _ready_packet()
    document = msgspec.json.decode(to_json(p))
    del document["reviews"]
    for item in document["evidence"]:
        del item["review"]
    assert from_json(msgspec.json.encode(document), Packet) == p
