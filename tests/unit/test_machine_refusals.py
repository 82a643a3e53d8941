"""Every refusal of the rules (`core/machine`, `core/moves`, `core/authority`, `core/gates`)
on its own: the exact error class, and a message that names what was refused. Pure: the
packets are folded from events, no store. Then a property: a refused event changes
nothing, and apply refuses only with the error tree, never a crash."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import hypothesis.strategies as st
import msgspec
import pytest
from hypothesis import given, settings

from waypost.core.authority import check_may_resolve, check_may_review, check_may_take_lease
from waypost.core.history import make_event
from waypost.core.machine import apply, fold, next_blocker_id, next_evidence_id
from waypost.core.outbox import final_key
from waypost.errors import (
    IllegalTransition,
    InvalidInput,
    NotAuthorized,
    NotFound,
    RuleViolation,
    StaleLease,
    WaypostError,
)
from waypost.events import (
    AnyEventData,
    Approved,
    ArtifactRecorded,
    AuthorityTransferred,
    BlockerOpened,
    BlockerResolved,
    Cancelled,
    ChangesRequested,
    Claimed,
    Delivered,
    DeliveryFailed,
    EvidenceRecorded,
    GateAdded,
    GateAdopted,
    Heartbeat,
    MarkedReady,
    Nudged,
    Retargeted,
    Reviewed,
    Started,
)
from waypost.model import (
    Artifact,
    ArtifactRole,
    Assurance,
    Authority,
    BlockerKind,
    Evidence,
    EvidenceKind,
    Gate,
    Kind,
    NudgeTopic,
    Packet,
    State,
    StopRules,
    Verdict,
    Waiver,
    to_json,
)

AT = datetime(2026, 1, 1, tzinfo=UTC)
RUN = "wp_test"
TESTS = Gate(name="tests", check="command:pytest -q")


def step(packet: Packet | None, data: AnyEventData, actor: str = "alice",
         epoch: int | None = None, at: datetime = AT) -> Packet:
    return apply(packet, make_event(packet, RUN, data, actor=actor, at=at, epoch=epoch))


def run(**overrides: object) -> Packet:
    """alice's bounded run; w1 holds the lease (epoch 1) unless `worker=None`."""
    fields: dict[str, object] = {"title": "t", "kind": Kind.BOUNDED, "owner": "alice",
                                 "target": "none:", "worker": "w1"}
    fields.update(overrides)
    return step(None, Started(**fields))  # type: ignore[arg-type]


def evidence(packet: Packet, **overrides: object) -> Evidence:
    fields: dict[str, object] = {
        "id": next_evidence_id(packet), "kind": EvidenceKind.TEST, "verdict": Verdict.PASSED,
        "assurance": Assurance.RECORDED, "summary": "3 passed", "recorded_at": AT,
        "recorded_by": "w1"}
    fields.update(overrides)
    return Evidence(**fields)  # type: ignore[arg-type]


def blocked(kind: BlockerKind = BlockerKind.OTHER) -> Packet:
    return step(run(), BlockerOpened(blocker_id="b1", kind=kind, detail="the test db is down"),
                actor="w1")


def ready(**overrides: object) -> Packet:
    p = run(**overrides)
    p = step(p, EvidenceRecorded(evidence=evidence(p)), actor="w1")
    return step(p, MarkedReady(summary="fixed the race"), actor="w1")


def rechecked(packet: Packet, verdict: Verdict, **overrides: object) -> Evidence:
    fields: dict[str, object] = {"assurance": Assurance.RECHECKED, "gate": "tests",
                                 "review": "r1", "verdict": verdict, "recorded_by": "alice"}
    fields.update(overrides)
    return evidence(packet, **fields)


def reviewed(verdict: Verdict = Verdict.PASSED) -> Packet:
    p = ready(gates=(TESTS,))
    return step(p, Reviewed(review_id="r1", evidence=(rechecked(p, verdict),)))


def approved() -> Packet:
    return step(reviewed(), Approved(waivers=()))


def waive(gate: str, reason: str) -> Approved:
    return Approved(waivers=(Waiver(gate=gate, reason=reason, by="alice", at=AT),))


@dataclass(frozen=True)
class Refusal:
    where: str  # the module and rule
    attempt: Callable[[], object]
    error: type[WaypostError]
    names: tuple[str, ...]  # what the message must name


def apply_refusal(where: str, start: Callable[[], Packet], data: AnyEventData,
                  error: type[WaypostError], *names: str, actor: str = "alice",
                  epoch: int | None = None, at: datetime = AT) -> Refusal:
    return Refusal(where, lambda: step(start(), data, actor, epoch, at), error, names)


def resolved_b1_b2_open() -> Packet:
    p = step(blocked(), BlockerOpened(blocker_id="b2", kind=BlockerKind.OTHER,
                                      detail="the printer jammed"), actor="w1")
    return step(p, BlockerResolved(blocker_id="b1", resolution="db is back"), actor="w1")


def resubmitted() -> Packet:
    p = step(reviewed(), ChangesRequested(reason="add a test"))
    p = step(p, EvidenceRecorded(evidence=evidence(p)), actor="w1")
    return step(p, MarkedReady(summary="now with a test"), actor="w1",
                at=AT + timedelta(minutes=1))


def approve_transferred() -> Packet:
    return step(reviewed(Verdict.FAILED),
                AuthorityTransferred(authority=Authority.APPROVE, to="bob"))


def reclaimed() -> Packet:
    return step(run(), Claimed(epoch=2), actor="w1")


def failed_delivery() -> Packet:
    """Approved, then blocked: the final delivery failed for good."""
    return step(approved(), DeliveryFailed(key=final_key(RUN), blocker_id="b1",
                                           detail="410 Gone", attempts=3), actor="relay:1")


def workers_gate() -> Packet:
    return step(run(), GateAdded(name="lint", check="command:ruff check ."), actor="w1")


def workers_gate_adopted() -> Packet:
    return step(workers_gate(), GateAdopted(name="lint"))


def fold_nothing() -> Packet:
    return fold([])


def out_of_order() -> Packet:
    p = run()
    stale = make_event(p, RUN, Heartbeat(note="a"), actor="w1", at=AT)
    return apply(step(p, Heartbeat(note="b"), actor="w1"), stale)


def no_start() -> Packet:
    return apply(None, make_event(run(), RUN, Heartbeat(), actor="w1", at=AT))


S = BlockerKind
SILENT_RULES = StopRules(max_silence=600)
REFUSALS = (
    # --- core/machine.py -------------------------------------------------------------------
    apply_refusal("machine.apply: started twice", run,
                  Started(title="t", kind=Kind.BOUNDED, owner="alice", target="none:"),
                  IllegalTransition, "run wp_test already exists"),
    Refusal("machine.apply: no started event", no_start, NotFound,
            ("run wp_test has no `started` event",)),
    Refusal("machine.apply: seq out of order", out_of_order, InvalidInput,
            ("event seq 2 does not follow version 2",)),
    Refusal("machine.fold: no events", fold_nothing, NotFound, ("no events to fold",)),
    Refusal("machine._start: empty title", lambda: run(title=" "), InvalidInput,
            ("title must not be empty",)),
    Refusal("machine._start: long_running without its records",
            lambda: run(kind=Kind.LONG_RUNNING, target=""), RuleViolation,
            ("a long_running run must record before it starts", "a target (--target)",
             "a stop rule (--max-silence or --deadline)")),
    apply_refusal("machine._claimed: epoch not next", run, Claimed(epoch=5), InvalidInput,
                  "claim epoch 5 is not the next epoch 2", actor="w2"),
    apply_refusal("machine._heartbeat: progress outside 0..1", run, Heartbeat(fraction=1.5),
                  InvalidInput, "progress must be between 0 and 1, not 1.5", actor="w1"),
    apply_refusal("machine._blocker_opened: id not next", run,
                  BlockerOpened(blocker_id="b7", kind=S.OTHER, detail="the db is down"),
                  InvalidInput, "blocker id b7 is not b1", actor="w1"),
    apply_refusal("machine._blocker_opened: empty detail", run,
                  BlockerOpened(blocker_id="b1", kind=S.OTHER, detail="  "),
                  InvalidInput, "a blocker's detail must not be empty", actor="w1"),
    apply_refusal("machine._blocker_opened: vague detail", run,
                  BlockerOpened(blocker_id="b1", kind=S.OTHER, detail="Waiting."),
                  InvalidInput, 'blocker detail "Waiting." says nothing', actor="w1"),
    apply_refusal("machine._blocker_resolved: empty resolution", blocked,
                  BlockerResolved(blocker_id="b1", resolution=" "), InvalidInput,
                  "a resolution must not be empty", actor="w1"),
    apply_refusal("machine._blocker_resolved: no such blocker", blocked,
                  BlockerResolved(blocker_id="b9", resolution="done"), NotFound,
                  "run wp_test has no blocker b9 (open: b1)", actor="w1"),
    apply_refusal("machine._blocker_resolved: already resolved", resolved_b1_b2_open,
                  BlockerResolved(blocker_id="b1", resolution="again"), RuleViolation,
                  "blocker b1 of wp_test is already resolved", actor="w1"),
    apply_refusal("machine._evidence_recorded: id not next", run,
                  EvidenceRecorded(evidence=evidence(run(), id="e5")), InvalidInput,
                  "evidence id e5 is not e1", actor="w1"),
    apply_refusal("machine._evidence_recorded: skipped without a reason", run,
                  EvidenceRecorded(evidence=evidence(run(), verdict=Verdict.SKIPPED,
                                                     reason=" ")),
                  InvalidInput, "skipped evidence needs a named reason", actor="w1"),
    apply_refusal("machine._marked_ready: empty summary", run, MarkedReady(summary=""),
                  InvalidInput, "the summary must not be empty", actor="w1"),
    apply_refusal("machine._marked_ready: no evidence", run, MarkedReady(summary="done"),
                  RuleViolation, "run wp_test has no evidence", actor="w1"),
    apply_refusal("machine._marked_ready: artifacts never recorded",
                  lambda: step(run(), EvidenceRecorded(evidence=evidence(run())), actor="w1"),
                  MarkedReady(summary="done", artifacts=("report.md",)), RuleViolation,
                  "the result of wp_test names artifacts that were never recorded: report.md",
                  actor="w1"),
    apply_refusal("machine._changes_requested: empty reason", ready,
                  ChangesRequested(reason=" "), InvalidInput, "the reason must not be empty"),
    apply_refusal("machine._authority_transferred: nobody to receive it", run,
                  AuthorityTransferred(authority=Authority.APPROVE, to=" "), InvalidInput,
                  "the receiving actor must not be empty"),
    apply_refusal("machine._cancelled: empty reason", run, Cancelled(reason=""), InvalidInput,
                  "the reason must not be empty"),
    apply_refusal("machine._delivered: not the final key", approved,
                  Delivered(key="wp_test.notice", detail="ok", attempts=1), InvalidInput,
                  "wp_test.notice is not the final delivery of wp_test", actor="relay:1"),
    apply_refusal("machine._delivery_failed: not the final key", approved,
                  DeliveryFailed(key="wp_other.final", blocker_id="b1", detail="410 Gone",
                                 attempts=3), InvalidInput,
                  "wp_other.final is not the final delivery of wp_test", actor="relay:1"),
    apply_refusal("machine._delivery_failed: blocker id not next", approved,
                  DeliveryFailed(key=final_key(RUN), blocker_id="b4", detail="410 Gone",
                                 attempts=3), InvalidInput, "blocker id b4 is not b1",
                  actor="relay:1"),
    apply_refusal("machine._delivery_failed: empty detail", approved,
                  DeliveryFailed(key=final_key(RUN), blocker_id="b1", detail=" ", attempts=3),
                  InvalidInput, "a blocker's detail must not be empty", actor="relay:1"),
    apply_refusal("machine._retargeted: names nothing", run, Retargeted(), InvalidInput,
                  "retarget names neither a target nor a notify"),
    apply_refusal("machine._retargeted: empty target", run, Retargeted(target=" "),
                  InvalidInput, "target must not be empty"),
    apply_refusal("machine._retargeted: empty notify", run, Retargeted(notify=""),
                  InvalidInput, "notify must not be empty"),
    apply_refusal("machine._retargeted: changes nothing", run, Retargeted(target="none:"),
                  InvalidInput, "retarget changes nothing: wp_test already goes to none:"),
    apply_refusal("machine._nudged: empty detail", ready,
                  Nudged(topic=NudgeTopic.REVIEW_OVERDUE, detail=" "), InvalidInput,
                  "a nudge's detail must not be empty", actor="watchdog:1",
                  at=AT + timedelta(days=2)),
    Refusal("machine._check_started_gates: a gate declared by another than the starter",
            lambda: run(gates=(Gate(name="tests", check="command:pytest -q",
                                    declared_by="bob"),)),
            InvalidInput, ("gate 'tests' of a new run is declared by its starter alice",)),
    apply_refusal("machine._check_not_approved: a gate added after approval", failed_delivery,
                  GateAdded(name="lint", check="command:ruff check ."), RuleViolation,
                  "run wp_test is approved: too late to add a gate"),
    apply_refusal("machine._check_not_approved: a gate adopted after approval",
                  failed_delivery, GateAdopted(name="tests"), RuleViolation,
                  "run wp_test is approved: too late to adopt a gate"),
    apply_refusal("machine._gate_added: empty name", run,
                  GateAdded(name=" ", check="command:ruff check ."), InvalidInput,
                  "a gate's name must not be empty"),
    apply_refusal("machine._gate_added: empty check", run, GateAdded(name="lint", check=""),
                  InvalidInput, "a gate's check must not be empty"),
    apply_refusal("machine._gate_added: a name taken", lambda: run(gates=(TESTS,)),
                  GateAdded(name="tests", check="command:true"), RuleViolation,
                  "run wp_test already has a gate named 'tests' (command:pytest -q): a gate "
                  "is never replaced", actor="w1"),
    apply_refusal("machine._gate_added: the built-in name", run,
                  GateAdded(name="artifact-hashes", check="command:true"), RuleViolation,
                  "run wp_test already has a gate named 'artifact-hashes' (built in)"),
    apply_refusal("machine._gate_adopted: no such gate", run, GateAdopted(name="lint"),
                  NotFound, "run wp_test has no gate 'lint' (gates: none)"),
    apply_refusal("machine._gate_adopted: adopted twice", workers_gate_adopted,
                  GateAdopted(name="lint"), RuleViolation,
                  "gate 'lint' of wp_test was already adopted by alice"),
    # --- core/moves.py ---------------------------------------------------------------------
    apply_refusal("moves.destination: not from this state", ready,
                  Heartbeat(note="still here"), IllegalTransition,
                  "run wp_test is ready_for_review: cannot heartbeat",
                  "(allowed from ready_for_review: ", actor="w1"),
    apply_refusal("moves.destination: blocked", lambda: blocked(S.MISSING_INPUT),
                  MarkedReady(summary="done"), IllegalTransition,
                  'run wp_test is blocked by b1 (missing_input: "the test db is down"): '
                  "cannot ready", actor="w1"),
    # --- core/authority.py -----------------------------------------------------------------
    *(apply_refusal(f"authority.authorize: {move} by a non-owner", start, data,
                    NotAuthorized, f"w1 may not {move} run wp_test: only its owner alice may",
                    actor="w1")
      for move, start, data in (
          ("changes", ready, ChangesRequested(reason="more")),
          ("transfer", run, AuthorityTransferred(authority=Authority.APPROVE, to="w1")),
          ("cancel", run, Cancelled(reason="enough")),
          ("retarget", run, Retargeted(target="file:elsewhere.md")),
          ("adopt_gate", workers_gate, GateAdopted(name="lint")))),
    apply_refusal("authority.authorize: a worker's gate once the result is submitted", ready,
                  GateAdded(name="lint", check="command:ruff check ."), NotAuthorized,
                  "w1 may not add_gate run wp_test: only its owner alice may once the result "
                  "is submitted", actor="w1"),
    apply_refusal("authority._check_watchdog: a watchdog records only what it watches", run,
                  Heartbeat(note="I am watching"), NotAuthorized,
                  "watchdog:1 may not record heartbeat on wp_test",
                  "records only worker_silent, deadline_passed", actor="watchdog:1"),
    apply_refusal("authority._check_watchdog: a nudge is the watchdog's", ready,
                  Nudged(topic=NudgeTopic.REVIEW_OVERDUE, detail="review it"), NotAuthorized,
                  "alice may not record nudged on wp_test", at=AT + timedelta(days=2)),
    apply_refusal("authority._check_watchdog: not due yet",
                  lambda: run(stop_rules=SILENT_RULES),
                  BlockerOpened(blocker_id="b1", kind=S.WORKER_SILENT, detail="no heartbeat"),
                  RuleViolation, "watchdog:1 may not record worker_silent on wp_test",
                  "it is not due (due 2026-01-01 00:10:00Z)", actor="watchdog:1",
                  at=AT + timedelta(minutes=5)),
    apply_refusal("authority._check_worker: an old lease epoch", reclaimed, Heartbeat(),
                  StaleLease, "w1 wrote to wp_test with lease epoch 1",
                  "a newer process of w1 took the lease (epoch 2)", "must stop",
                  actor="w1", epoch=1),
    apply_refusal("authority._check_worker: an epoch ahead of the lease", run, Heartbeat(),
                  StaleLease, "w1 wrote to wp_test with lease epoch 2",
                  "which no claim of wp_test gave", actor="w1", epoch=2),
    apply_refusal("authority._check_worker: the owner's heartbeat", run, Heartbeat(),
                  StaleLease, "alice (the owner) may not heartbeat wp_test while w1 holds "
                  "the lease (epoch 1)"),
    apply_refusal("authority._check_worker: not the lease holder", run, Heartbeat(),
                  StaleLease, "w2 does not hold the lease on wp_test: w1 took it (epoch 1)",
                  actor="w2"),
    apply_refusal("authority._check_worker: nobody holds the lease",
                  lambda: run(worker=None), Heartbeat(), NotAuthorized,
                  "w2 may not heartbeat run wp_test: it is neither the owner (alice) nor the "
                  "worker", actor="w2"),
    Refusal("authority.check_may_take_lease: a live lease",
            lambda: check_may_take_lease(run(), "w2", AT + timedelta(minutes=1)),
            NotAuthorized, ("w2 may not take over wp_test: w1 holds a live lease (epoch 1",)),
    apply_refusal("authority._check_authority: a review by the lease holder", ready,
                  Reviewed(review_id="r1"), NotAuthorized,
                  "w1 (the run's own worker) may not review run wp_test: only alice may",
                  actor="w1"),
    apply_refusal("authority._check_authority: an approval by the lease holder", reviewed,
                  Approved(waivers=()), NotAuthorized,
                  "w1 (the run's own worker) may not approve run wp_test: only alice may",
                  actor="w1"),
    Refusal("authority.check_may_review: by the lease holder",
            lambda: check_may_review(ready(), "w1"), NotAuthorized,
            ("w1 (the run's own worker) may not review run wp_test",)),
    apply_refusal("authority._check_relay: a delivery recorded by a non-relay", approved,
                  Delivered(key=final_key(RUN), detail="ok", attempts=1), NotAuthorized,
                  "alice may not record deliver on wp_test: only a delivery relay"),
    Refusal("authority.check_may_resolve: the worker resolves an owner's kind",
            lambda: check_may_resolve(blocked(S.MISSING_INPUT), "w1",
                                      blocked(S.MISSING_INPUT).blockers[0]),
            NotAuthorized, ("w1 (the run's worker) may not resolve b1 (missing_input) of "
                            "run wp_test", "only the owner resolves missing_input")),
    # --- core/gates.py ---------------------------------------------------------------------
    apply_refusal("gates.check_review_evidence: review id not next", ready,
                  Reviewed(review_id="r2"), InvalidInput, "review id r2 is not r1"),
    apply_refusal("gates.check_review_evidence: evidence id not next",
                  lambda: ready(gates=(TESTS,)),
                  Reviewed(review_id="r1", evidence=(
                      rechecked(ready(), Verdict.PASSED, id="e9"),)),
                  InvalidInput, "evidence id e9 is not e2"),
    apply_refusal("gates.check_review_evidence: not rechecked evidence",
                  lambda: ready(gates=(TESTS,)),
                  Reviewed(review_id="r1", evidence=(
                      rechecked(ready(), Verdict.PASSED, assurance=Assurance.REPORTED),)),
                  InvalidInput, "evidence e2 of review r1 must be rechecked evidence"),
    apply_refusal("gates.check_approval: before a review", ready, Approved(waivers=()),
                  RuleViolation,
                  "run wp_test cannot be approved before a review"),
    apply_refusal("gates.check_approval: the review was of an earlier submission",
                  resubmitted, Approved(waivers=()), RuleViolation,
                  "run wp_test cannot be approved: its latest review r1 was of an earlier "
                  "submission"),
    apply_refusal("gates.check_approval: a required gate failed",
                  lambda: reviewed(Verdict.FAILED), Approved(waivers=()), RuleViolation,
                  "run wp_test cannot be approved: required gate(s) did not pass in review "
                  "r1: tests failed"),
    apply_refusal("gates._check_waivers: a waiver by a non-owner", approve_transferred,
                  waive("tests", "flaky runner"), NotAuthorized,
                  "bob may not waive gates of run wp_test: only its owner alice may",
                  actor="bob"),
    apply_refusal("gates._check_waivers: no such gate", lambda: reviewed(Verdict.FAILED),
                  waive("nope", "not needed"), InvalidInput,
                  "run wp_test has no gate 'nope' to waive (gates: tests, artifact-hashes)"),
    apply_refusal("gates._check_waivers: a waiver without a reason",
                  lambda: reviewed(Verdict.FAILED), waive("tests", "  "), InvalidInput,
                  "the waiver of gate tests needs a reason"),
)


@pytest.mark.parametrize("refusal", REFUSALS, ids=lambda r: r.where)
def test_each_refusal_is_its_own_error_and_names_what_it_refused(refusal: Refusal) -> None:
    with pytest.raises(WaypostError) as info:
        refusal.attempt()
    assert type(info.value) is refusal.error, info.value.message
    for name in refusal.names:
        assert name in info.value.message


def test_each_fixture_is_itself_accepted() -> None:
    """The packets the refusals start from are reached by accepted events (so a refusal
    above is the refused event's, not its setup's)."""
    for start in (run, blocked, ready, reviewed, approved, resolved_b1_b2_open, resubmitted,
                  approve_transferred, reclaimed, failed_delivery, workers_gate,
                  workers_gate_adopted, lambda: run(worker=None),
                  lambda: run(stop_rules=SILENT_RULES)):
        assert isinstance(start(), Packet)


# --- a refused event changes nothing --------------------------------------------------------

TEXT = st.sampled_from(["the db is down", "fixed it", "done", "", " ", "waiting"])
Build = Callable[[Packet], AnyEventData]
Step = tuple[str, Build, int | None]


def _by(natural: str) -> st.SearchStrategy[str]:
    """Mostly the actor whose move it is, sometimes anyone."""
    return st.sampled_from([natural] * 4 + ["alice", "w1", "w2", "watchdog:1", "relay:1"])


def _blocker_id(p: Packet, which: str) -> str:
    return next_blocker_id(p) if which == "next" else which


def _review(p: Packet, verdict: Verdict) -> Reviewed:
    rid = f"r{len(p.reviews) + 1}"
    return Reviewed(review_id=rid, evidence=(evidence(
        p, assurance=Assurance.RECHECKED, gate="tests", review=rid, verdict=verdict),))


def _moves() -> list[tuple[str, st.SearchStrategy[Build]]]:
    """Events of every type (whose move it naturally is), their ids and keys right or
    wrong, their text blank or not."""
    ids = st.sampled_from(["next", "b1", "b9"])
    return [
        ("w2", st.builds(lambda e: lambda p: Claimed(
            epoch=(p.worker.epoch if p.worker else 0) + e), st.sampled_from([1, 1, 2]))),
        ("w1", st.builds(lambda f: lambda p: Heartbeat(fraction=f),
                         st.none() | st.sampled_from([0.5, 2.0]))),
        ("w1", st.builds(lambda k, d, i: lambda p: BlockerOpened(
            blocker_id=_blocker_id(p, i), kind=k, detail=d),
            st.sampled_from(list(BlockerKind)), TEXT, ids)),
        ("w1", st.builds(lambda i, r: lambda p: BlockerResolved(
            blocker_id=_blocker_id(p, i) if i != "next" else
            (p.open_blockers[0].id if p.open_blockers else "b1"), resolution=r), ids, TEXT)),
        ("w1", st.builds(lambda v, r: lambda p: EvidenceRecorded(evidence=evidence(
            p, verdict=v, reason=r)), st.sampled_from(list(Verdict)), st.none() | TEXT)),
        ("w1", st.builds(lambda n: lambda p: ArtifactRecorded(artifact=Artifact(
            name=n, role=ArtifactRole.REPORT, recorded_at=AT, recorded_by="w1")),
            st.sampled_from(["report.md", "log.txt"]))),
        ("w1", st.builds(lambda t, a: lambda p: MarkedReady(summary=t, artifacts=a), TEXT,
                         st.sampled_from([(), ("report.md",)]))),
        ("alice", st.builds(lambda r: lambda p: ChangesRequested(reason=r), TEXT)),
        ("alice", st.builds(lambda a, t: lambda p: AuthorityTransferred(authority=a, to=t),
                            st.sampled_from(list(Authority)),
                            st.sampled_from(["w1", "w2", " "]))),
        ("alice", st.builds(lambda v: lambda p: _review(p, v),
                            st.sampled_from([Verdict.PASSED, Verdict.FAILED]))),
        ("alice", st.builds(lambda w: lambda p: waive("tests", "flaky") if w
                            else Approved(waivers=()),
                            st.booleans())),
        ("alice", st.builds(lambda r: lambda p: Cancelled(reason=r),
                            st.sampled_from(["", " ", "", "no longer needed"]))),
        ("relay:1", st.builds(lambda k: lambda p: Delivered(key=k, detail="ok", attempts=1),
                              st.sampled_from([final_key(RUN), "wp_test.x"]))),
        ("relay:1", st.builds(lambda i, d: lambda p: DeliveryFailed(
            key=final_key(RUN), blocker_id=_blocker_id(p, i), detail=d, attempts=3),
            ids, TEXT)),
        ("alice", st.builds(lambda t, n: lambda p: Retargeted(target=t, notify=n),
                            st.none() | st.sampled_from(["none:", "file:out.md", " "]),
                            st.none() | st.sampled_from(["file:notes.md", ""]))),
        ("w1", st.builds(lambda n, c: lambda p: GateAdded(name=n, check=c),
                         st.sampled_from(["lint", "tests", "artifact-hashes", " "]),
                         st.sampled_from(["command:ruff check .", ""]))),
        ("alice", st.builds(lambda n: lambda p: GateAdopted(name=n),
                            st.sampled_from(["lint", "tests", "nope"]))),
        ("watchdog:1", st.builds(lambda t, d: lambda p: Nudged(topic=t, detail=d),
                                 st.sampled_from(list(NudgeTopic)), TEXT)),
        ("watchdog:1", st.builds(lambda k, d: lambda p: BlockerOpened(
            blocker_id=next_blocker_id(p), kind=k, detail=d),
            st.sampled_from([BlockerKind.WORKER_SILENT, BlockerKind.DEADLINE_PASSED]),
            TEXT)),
    ]


STEPS = st.one_of(*(st.tuples(_by(actor), build, st.sampled_from([None, None, 1, 2]))
                    for actor, build in _moves()))
RULES = StopRules(max_silence=120, review_within=60, deadline=AT + timedelta(minutes=20))
# where a sequence starts: every state, reached by accepted events
STARTS = st.sampled_from([
    lambda: run(stop_rules=RULES, gates=(TESTS,)), blocked, ready, reviewed, approved,
    lambda: reviewed(Verdict.FAILED), resolved_b1_b2_open, approve_transferred, resubmitted,
    lambda: step(approved(), Delivered(key=final_key(RUN), detail="ok", attempts=1),
                 actor="relay:1"),
    failed_delivery, workers_gate])


@settings(max_examples=300, deadline=None)
@given(start=STARTS, steps=st.lists(STEPS, min_size=1, max_size=25))
def test_a_refused_event_changes_nothing(start: Callable[[], Packet],
                                         steps: list[Step]) -> None:
    """Any sequence of events from any state: a refused one leaves the packet as it was
    and raises only from the error tree (never an AttributeError or an assertion); the
    accepted ones replay to the same packet, so a refusal left no trace."""
    origin = packet = start()
    accepted = []
    for minute, (actor, build, epoch) in enumerate(steps, start=1):
        before = to_json(packet)
        try:
            event = make_event(packet, RUN, build(packet), actor=actor, epoch=epoch,
                               at=AT + timedelta(minutes=minute))
            after = apply(packet, event)
        except WaypostError:  # any other exception fails the test
            assert to_json(packet) == before
            continue
        assert after.version == packet.version + 1
        assert (after.state is State.BLOCKED) is bool(after.open_blockers) or \
            after.state is State.CANCELLED
        accepted.append(event)
        packet = after
    assert functools.reduce(apply, accepted, origin) == packet


def test_a_refused_event_leaves_a_packet_equal_to_its_copy() -> None:
    """The packet a refusal is given is the same value afterwards (records are frozen)."""
    packet = blocked(S.MISSING_INPUT)
    copy = msgspec.json.decode(to_json(packet), type=Packet)
    with pytest.raises(WaypostError):
        step(packet, MarkedReady(summary="done"), actor="w1")
    assert packet == copy
