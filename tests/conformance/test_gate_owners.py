"""Conformance: gates are the owner's, on each real store. A review runs, in the owner's
environment, only the gates the owner declared or adopted (and those that read only the
store's own copies); a command gate someone else declared is shown as theirs, recorded as
not run, blocks approval until adopted or waived, and runs once adopted. Runs started
before gates said who declared them still verify and still review. Each test fails when
the line it guards is changed: the marker file a gate's command would make proves whether
it ran."""

from __future__ import annotations

from pathlib import Path

import pytest
from msgspec import UNSET

from waypost.config import Config
from waypost.core.history import make_event, verify_run
from waypost.core.machine import apply
from waypost.durations import utcnow
from waypost.errors import (
    IllegalTransition,
    InvalidInput,
    NotAuthorized,
    NotFound,
    RuleViolation,
    StaleLease,
)
from waypost.events import Started
from waypost.model import (
    ArtifactRole,
    Assurance,
    EvidenceKind,
    Gate,
    Kind,
    Packet,
    State,
    Verdict,
    from_json,
)
from waypost.store import Store
from waypost.usecases import runs, starting

REPORT = "# Report\n\nThe race is fixed: the session is created before the redirect now.\n"


def touch(marker: str) -> str:
    return f"command:touch {marker}"


def _to_review(store: Store, run_id: str, worker: str, tmp_path: Path) -> runs.Run:
    """The worker claims the run (unless it holds it), records a report and evidence, and
    submits the result."""
    packet = store.get(run_id)
    work = runs.Run(store, run_id, actor=worker)
    if packet.worker is None or packet.worker.actor != worker:
        work.claim()
    else:
        work.epoch = packet.worker.epoch
    report = tmp_path / "report.md"
    report.write_text(REPORT)
    work.add_artifact(str(report), role=ArtifactRole.REPORT, max_bytes=1 << 20)
    work.report_evidence(EvidenceKind.TEST, Verdict.PASSED, "3 tests pass")
    work.ready("done", artifacts=["report.md"])
    return work


def _review(store: Store, run_id: str, tmp_path: Path) -> dict[str, tuple[object, ...]]:
    """alice's review, run in `tmp_path`: each gate's verdict, whether it awaits adoption,
    and who declared it."""
    _, report = runs.Run(store, run_id, actor="alice").review(cwd=str(tmp_path))
    return {v.gate: (v.verdict, v.awaits_adoption, v.declared_by) for v in report.gates}


def _unchanged(store: Store, run_id: str) -> tuple[Packet, int]:
    return store.get(run_id), len(store.events(run_id))


def test_a_gate_the_worker_added_is_not_run_by_the_owners_review_until_adopted(
        store: Store, tmp_path: Path) -> None:
    run, _ = starting.start(store, "t", actor="alice", owner="alice", target="none:",
                            worker="w1", gates=[Gate(name="mine", check=touch("mine"))])
    worker = runs.Run(store, run.id, actor="w1", epoch=1)
    packet = worker.add_gate("evil", touch("evil"))
    assert [(g.name, g.declared_by) for g in packet.gates] == [("mine", "alice"),
                                                               ("evil", "w1")]
    _to_review(store, run.id, "w1", tmp_path)

    found = _review(store, run.id, tmp_path)
    assert found["mine"] == (Verdict.PASSED, False, "alice")  # the owner's runs as before
    assert found["evil"] == (Verdict.SKIPPED, True, "w1")
    assert (tmp_path / "mine").exists()
    assert not (tmp_path / "evil").exists()
    skipped = [e for e in store.get(run.id).evidence if e.gate == "evil"]
    assert [(e.verdict, e.assurance) for e in skipped] == [(Verdict.SKIPPED,
                                                            Assurance.RECHECKED)]
    assert f"waypost gate adopt {run.id} evil --as alice" in (skipped[0].reason or "")

    owner = runs.Run(store, run.id, actor="alice")
    with pytest.raises(RuleViolation, match="evil skipped") as refused:
        owner.approve()
    assert f"waypost gate adopt {run.id} evil" in refused.value.hint
    owner.adopt_gate("evil")
    assert not (tmp_path / "evil").exists()  # adopting runs nothing: the review does
    assert _review(store, run.id, tmp_path)["evil"] == (Verdict.PASSED, False, "w1")
    assert (tmp_path / "evil").exists()
    assert owner.approve().state is State.APPROVED
    events = store.events(run.id)
    verify_run(run.id, events, store.get(run.id))
    assert [e.type for e in events].count("gate_adopted") == 1


def test_the_owner_may_waive_a_gate_it_did_not_adopt(store: Store, tmp_path: Path) -> None:
    run, _ = starting.start(store, "t", actor="alice", owner="alice", target="none:",
                            worker="w1")
    runs.Run(store, run.id, actor="w1", epoch=1).add_gate("evil", touch("evil"))
    _to_review(store, run.id, "w1", tmp_path)
    _review(store, run.id, tmp_path)
    approved = runs.Run(store, run.id, actor="alice").approve({"evil": "not needed here"})
    assert approved.state is State.APPROVED
    assert not (tmp_path / "evil").exists()


def test_gates_a_non_owner_starts_with_are_the_starters_toml_ones_included(
        store: Store, tmp_path: Path) -> None:
    config = Config(gates=(("toml", touch("toml")),))
    run, _ = starting.start(store, "t", actor="w1", owner="alice", target="none:",
                            worker="w1", gates=[Gate(name="given", check=touch("given"),
                                                     declared_by="alice")],
                            config=config)
    assert {g.name: g.declared_by for g in store.get(run.id).gates} == {"toml": "w1",
                                                                       "given": "w1"}
    _to_review(store, run.id, "w1", tmp_path)
    found = _review(store, run.id, tmp_path)
    assert found["toml"] == (Verdict.SKIPPED, True, "w1")
    assert found["given"] == (Verdict.SKIPPED, True, "w1")
    assert not (tmp_path / "toml").exists()
    assert not (tmp_path / "given").exists()


def test_gates_the_owner_starts_with_run_at_review_toml_ones_included(
        store: Store, tmp_path: Path) -> None:
    config = Config(gates=(("toml", touch("toml")),))
    run, _ = starting.start(store, "t", actor="alice", owner="alice", target="none:",
                            worker="w1", gates=[Gate(name="given", check=touch("given"))],
                            config=config)
    _to_review(store, run.id, "w1", tmp_path)
    found = _review(store, run.id, tmp_path)
    assert found["toml"] == (Verdict.PASSED, False, "alice")
    assert found["given"] == (Verdict.PASSED, False, "alice")
    assert (tmp_path / "toml").exists()
    assert (tmp_path / "given").exists()


def test_a_gate_reading_only_the_store_runs_whoever_declared_it(
        store: Store, tmp_path: Path) -> None:
    run, _ = starting.start(store, "t", actor="alice", owner="alice", target="none:",
                            worker="w1")
    worker = runs.Run(store, run.id, actor="w1", epoch=1)
    worker.add_gate("report", "artifact:report.md")
    worker.add_gate("no-todo", "grep!:TODO:report.md")  # over the stored artifact
    _to_review(store, run.id, "w1", tmp_path)
    (tmp_path / "report.md").unlink()  # nothing on disk: only the stored copy is read
    found = _review(store, run.id, tmp_path)
    assert found["report"] == (Verdict.PASSED, False, "w1")
    assert found["no-todo"] == (Verdict.PASSED, False, "w1")


def _old_style_run(store: Store, starter: str) -> str:
    """A run as releases before gates said who declared them wrote it: the `started`
    event's gates have no `declared_by` (the bytes those releases wrote, decoded)."""
    data = from_json(
        b'{"type":"started","title":"old","kind":"bounded","owner":"alice","target":"none:",'
        b'"notify":null,"worker":"w1","lease_expires_at":null,"stop_rules":{"deadline":null,'
        b'"heartbeat_interval":null,"max_silence":null,"max_attempts":null,"budget":null,'
        b'"review_within":null},"gates":[{"name":"old","check":"command:touch old",'
        b'"required":true}],"idempotency_key":null}', Started)
    event = make_event(None, f"wp_old_{starter}", data, actor=starter, at=utcnow())
    packet, _ = store.create(event, apply(None, event), fingerprint="old")
    return packet.id


@pytest.mark.parametrize(("starter", "runs_it"), [("alice", True), ("w1", False)])
def test_an_old_style_history_still_verifies_and_reviews(
        store: Store, tmp_path: Path, starter: str, runs_it: bool) -> None:
    run_id = _old_style_run(store, starter)
    assert store.get(run_id).gates[0].declared_by is UNSET
    verify_run(run_id, store.events(run_id), store.get(run_id))
    _to_review(store, run_id, "w1", tmp_path)
    found = _review(store, run_id, tmp_path)
    assert found["old"] == ((Verdict.PASSED, False, "alice") if runs_it
                            else (Verdict.SKIPPED, True, "w1"))
    assert (tmp_path / "old").exists() is runs_it
    if not runs_it:
        runs.Run(store, run_id, actor="alice").adopt_gate("old")
        assert _review(store, run_id, tmp_path)["old"][0] is Verdict.PASSED
    verify_run(run_id, store.events(run_id), store.get(run_id))


def test_only_the_owner_adopts_and_a_refusal_changes_nothing(
        store: Store, tmp_path: Path) -> None:
    run, _ = starting.start(store, "t", actor="alice", owner="alice", target="none:",
                            worker="w1", gates=[Gate(name="mine", check="command:true")])
    runs.Run(store, run.id, actor="w1", epoch=1).add_gate("evil", touch("evil"))
    before = _unchanged(store, run.id)
    for actor, gate, error in (("w1", "evil", NotAuthorized), ("mallory", "evil", NotAuthorized),
                               ("alice", "nope", NotFound), ("alice", "mine", RuleViolation)):
        with pytest.raises(error):
            runs.Run(store, run.id, actor=actor).adopt_gate(gate)
        assert _unchanged(store, run.id) == before, (actor, gate)
    runs.Run(store, run.id, actor="alice").adopt_gate("evil")
    with pytest.raises(RuleViolation, match="already"):
        runs.Run(store, run.id, actor="alice").adopt_gate("evil")


def test_who_adds_a_gate_and_when(store: Store, tmp_path: Path) -> None:
    run, _ = starting.start(store, "t", actor="alice", owner="alice", target="none:",
                            worker="w1", gates=[Gate(name="tests", check="command:true")])
    worker = runs.Run(store, run.id, actor="w1", epoch=1)
    before = _unchanged(store, run.id)
    for actor, name, error in (("mallory", "x", StaleLease), ("w1", "tests", RuleViolation),
                               ("w1", "artifact-hashes", RuleViolation)):
        with pytest.raises(error):
            runs.Run(store, run.id, actor=actor, epoch=1).add_gate(name, "command:true")
        assert _unchanged(store, run.id) == before, (actor, name)
    _to_review(store, run.id, "w1", tmp_path)
    with pytest.raises(NotAuthorized, match="once the result is submitted"):
        worker.add_gate("late", "command:true")
    owner = runs.Run(store, run.id, actor="alice")
    assert owner.add_gate("late", "command:true").gates[-1].declared_by == "alice"
    _review(store, run.id, tmp_path)
    owner.approve()
    with pytest.raises(IllegalTransition, match="approved: cannot add_gate"):
        owner.add_gate("later", "command:true")


def test_a_new_run_refuses_gates_said_to_be_declared_or_adopted_by_another(
        store: Store) -> None:
    data = Started(title="t", kind=Kind.BOUNDED, owner="alice", target="none:",
                   gates=(Gate(name="g", check="command:true", declared_by="alice"),))
    event = make_event(None, "wp_forged", data, actor="w1", at=utcnow())
    with pytest.raises(InvalidInput, match="declared by its starter w1"):
        apply(None, event)
