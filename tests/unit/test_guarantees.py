"""The guarantees behind the rules, pinned one by one in the pure core: each test fails when
the line it stands on is changed (history hash and link, which blocker re-queues the final
delivery, the owner's heartbeat, which authority a transfer gives, the substance floor)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

from waypost.core import outbox
from waypost.core.authority import holds_authority
from waypost.core.due import is_due, liveness, silent_due
from waypost.core.gates import next_review_id
from waypost.core.history import GENESIS, event_hash, make_event, verify_run
from waypost.core.machine import apply
from waypost.core.sanitize import FindingKind, find
from waypost.errors import (
    IntegrityError,
    InvalidInput,
    NotAuthorized,
    Refused,
    RuleViolation,
    step,
)
from waypost.events import (
    AnyEventData,
    Approved,
    AuthorityTransferred,
    BlockerOpened,
    BlockerResolved,
    Claimed,
    Delivered,
    DeliveryFailed,
    Event,
    EvidenceRecorded,
    Heartbeat,
    MarkedReady,
    Reviewed,
    Started,
)
from waypost.model import (
    Assurance,
    Authority,
    Blocker,
    BlockerKind,
    Evidence,
    EvidenceKind,
    Gate,
    Kind,
    Liveness,
    Packet,
    Purpose,
    State,
    StopRules,
    Verdict,
)
from waypost.usecases.starting import classify
from waypost.usecases.substance import substance_problem

AT = datetime(2026, 1, 1, tzinfo=UTC)
RUN = "wp_guarantee"


class Chain:
    """A run built event by event through the real rules, keeping its events."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.packet: Packet | None = None
        self.at = AT

    def add(self, data: AnyEventData, actor: str = "alice", epoch: int | None = None) -> Packet:
        self.at += timedelta(seconds=1)
        prev = self.events[-1].hash if self.events else GENESIS
        event = make_event(self.packet, RUN, data, actor=actor, at=self.at, epoch=epoch,
                           prev_hash=prev)
        self.packet = apply(self.packet, event)
        self.events.append(event)
        return self.packet

    @property
    def now(self) -> Packet:
        assert self.packet is not None
        return self.packet


def started(chain: Chain | None = None) -> Chain:
    chain = chain or Chain()
    chain.add(Started(title="t", kind=Kind.LONG_RUNNING, owner="alice", target="none:",
                      stop_rules=StopRules(max_silence=600)))
    return chain


def ready(chain: Chain, *, review: bool = True) -> Chain:
    chain.add(Claimed(epoch=1), actor="w1")
    chain.add(EvidenceRecorded(evidence=Evidence(
        id="e1", kind=EvidenceKind.TEST, verdict=Verdict.PASSED, assurance=Assurance.REPORTED,
        summary="42 passed", recorded_at=chain.at, recorded_by="w1")), actor="w1")
    chain.add(MarkedReady(summary="done"), actor="w1")
    if review:
        chain.add(Reviewed(review_id=next_review_id(chain.now)))  # no gates: nothing to re-run
    return chain


# --- history: who did what is in the hash; every link is checked -----------------------


HASHED: dict[str, Any] = {
    "prev_hash": "1" * 64, "run_id": "wp_other", "seq": 8, "at": AT + timedelta(seconds=1),
    "actor": "mallory", "epoch": 3, "data": Heartbeat(note="other"),
}


@pytest.mark.parametrize("field", list(HASHED))
def test_every_field_of_an_event_is_in_its_hash(field: str) -> None:
    fields: dict[str, Any] = {"prev_hash": GENESIS, "run_id": RUN, "seq": 7, "at": AT,
                              "actor": "w1", "epoch": 2, "data": Heartbeat(note="n")}
    before = event_hash(**fields)
    fields[field] = HASHED[field]
    assert event_hash(**fields) != before


def test_verify_refuses_an_event_whose_actor_was_rewritten() -> None:
    chain = ready(started())
    # the claim is rewritten to another actor, and the packet with it (the fold matches)
    forged = msgspec.structs.replace(chain.events[1], actor="mallory")
    events = [chain.events[0], forged, *chain.events[2:]]
    assert chain.now.worker is not None
    worker = msgspec.structs.replace(chain.now.worker, actor="mallory")
    # the later events were the worker's: rewrite them too, so only the hash can tell
    events = [msgspec.structs.replace(e, actor="mallory") if e.actor == "w1" else e
              for e in events]
    with pytest.raises(IntegrityError, match=f"run {RUN} seq 2: hash mismatch"):
        verify_run(RUN, events, msgspec.structs.replace(chain.now, worker=worker))
    verify_run(RUN, chain.events, chain.now)


def test_verify_refuses_an_event_rehashed_over_a_broken_link() -> None:
    chain = started()
    chain.add(Heartbeat(note="first"))
    chain.add(Heartbeat(note="second"))
    first = chain.events[1]
    # seq 2 is forged and hashed again (its own hash is right); seq 3 still links to the old one
    forged = make_event(apply(None, chain.events[0]), RUN,
                        Heartbeat(note="forged"), actor="alice", at=first.at,
                        prev_hash=first.prev_hash)
    events = [chain.events[0], forged, chain.events[2]]
    with pytest.raises(IntegrityError, match=f"run {RUN} seq 3: prev_hash does not match"):
        verify_run(RUN, events, chain.now)


def test_verify_refuses_a_first_event_not_linked_to_genesis() -> None:
    chain = started()
    first = chain.events[0]
    relinked = make_event(None, RUN, first.data, actor=first.actor, at=first.at,
                          prev_hash="f" * 64)
    with pytest.raises(IntegrityError, match="seq 1: prev_hash"):
        verify_run(RUN, [relinked], chain.now)


# --- the outbox: only the delivery_failed blocker re-queues the final delivery ---------


WORKER_KINDS = [k for k in BlockerKind
                if k not in (BlockerKind.DELIVERY_FAILED, BlockerKind.WORKER_SILENT,
                             BlockerKind.DEADLINE_PASSED)]


def _finals(before: Packet, after: Packet, event: Event) -> list[str]:
    return [i.key for i in outbox.plan(before, after, event) if i.purpose is Purpose.FINAL]


@pytest.mark.parametrize("kind", WORKER_KINDS)
def test_resolving_a_blocker_of_in_progress_work_plans_no_delivery(kind: BlockerKind) -> None:
    chain = started()
    chain.add(BlockerOpened(blocker_id="b1", kind=kind, detail="the staging API key"))
    before = chain.now
    after = chain.add(BlockerResolved(blocker_id="b1", resolution="given"))
    assert after.state is State.IN_PROGRESS
    assert _finals(before, after, chain.events[-1]) == []


def _delivery_failed(chain: Chain) -> Chain:
    ready(chain)
    chain.add(Approved(waivers=()))
    chain.add(DeliveryFailed(key=outbox.final_key(RUN), blocker_id="b1",
                             detail="HTTP 410 Gone", attempts=1), actor="relay:1")
    return chain


def test_only_the_last_blocker_of_a_failed_delivery_plans_it_again() -> None:
    chain = _delivery_failed(started())
    chain.add(BlockerOpened(blocker_id="b2", kind=BlockerKind.MISSING_INPUT,
                            detail="the new webhook URL"))
    before = chain.now
    after = chain.add(BlockerResolved(blocker_id="b1", resolution="receiver is back"))
    assert after.state is State.BLOCKED
    assert _finals(before, after, chain.events[-1]) == []
    before = after
    after = chain.add(BlockerResolved(blocker_id="b2", resolution="URL given"))
    assert after.state is State.APPROVED
    assert _finals(before, after, chain.events[-1]) == [outbox.final_key(RUN)]


@pytest.mark.parametrize("actor", ["alice", "w1", "watchdog:w", "relayer"])
def test_only_a_relay_records_the_final_deliverys_outcome(actor: str) -> None:
    chain = ready(started())
    approved = chain.add(Approved(waivers=()))
    delivered = Delivered(key=outbox.final_key(RUN), detail="HTTP 200", attempts=1)
    with pytest.raises(Refused, match=f"{actor} may not"):
        apply(approved, make_event(approved, RUN, delivered, actor=actor, at=chain.at))
    assert chain.add(delivered, actor="relay:1").state is State.DELIVERED


# --- the owner's heartbeat does not count while a worker holds the lease ---------------


def test_the_owners_heartbeat_is_refused_while_a_worker_holds_the_lease() -> None:
    chain = started()
    held = chain.add(Claimed(epoch=1), actor="w1")
    event = make_event(held, RUN, Heartbeat(note="looks fine"), actor="alice", at=chain.at)
    with pytest.raises(Refused) as info:
        apply(held, event)
    message = info.value.message
    assert "alice" in message
    assert "w1 holds the lease" in message
    assert "silent" in message  # why: it would hide a silent worker from the watchdog
    assert step("claim", RUN, actor="alice", why="to take the work over yourself") in \
        info.value.steps


def test_the_owners_heartbeat_counts_while_nobody_holds_the_lease() -> None:
    chain = started()
    after = chain.add(Heartbeat(note="owner working"))
    assert after.progress.last_heartbeat == chain.at
    assert after.progress.heartbeats == 1


def test_the_owner_may_still_block_and_record_while_a_worker_holds_the_lease() -> None:
    chain = started()
    chain.add(Claimed(epoch=1), actor="w1")
    after = chain.add(BlockerOpened(blocker_id="b1", kind=BlockerKind.PERMISSION_BOUNDARY,
                                    detail="needs production access"))
    assert after.state is State.BLOCKED


# --- the lease: every claim takes exactly the next epoch --------------------------------


@pytest.mark.parametrize("epoch", [1, 3, 0])
def test_a_claim_must_take_exactly_the_next_epoch(epoch: int) -> None:
    chain = started()
    held = chain.add(Claimed(epoch=1), actor="w1")
    event = make_event(held, RUN, Claimed(epoch=epoch, took_over_from="w1"), actor="w2",
                       at=chain.at)
    with pytest.raises(InvalidInput, match=f"claim epoch {epoch} is not the next epoch 2"):
        apply(held, event)
    taken = chain.add(Claimed(epoch=2, took_over_from="w1"), actor="w2")
    assert taken.worker is not None
    assert (taken.worker.actor, taken.worker.epoch) == ("w2", 2)


# --- authority: a transfer gives the authority it names, no other ----------------------


def test_a_transferred_deliver_authority_does_not_approve() -> None:
    chain = ready(started())
    packet = chain.add(AuthorityTransferred(authority=Authority.DELIVER, to="bob"))
    assert holds_authority(packet, "bob", Authority.DELIVER)
    assert not holds_authority(packet, "bob", Authority.APPROVE)
    event = make_event(packet, RUN, Approved(waivers=()), actor="bob", at=chain.at)
    with pytest.raises(NotAuthorized, match="bob may not approve"):
        apply(packet, event)
    packet = chain.add(AuthorityTransferred(authority=Authority.APPROVE, to="bob"))
    assert chain.add(Approved(waivers=()), actor="bob").state is State.APPROVED


def test_a_transfer_to_someone_else_gives_nothing() -> None:
    chain = ready(started())
    packet = chain.add(AuthorityTransferred(authority=Authority.APPROVE, to="carol"))
    assert not holds_authority(packet, "bob", Authority.APPROVE)
    assert holds_authority(packet, "alice", Authority.DELIVER)  # the owner holds them all


# --- gates: only a pass passes ------------------------------------------------------------


def _reviewed_with(verdicts: dict[str, tuple[Verdict, ...]], required: bool = True) -> Chain:
    """A run with gates `verdicts` names, reviewed once: each gate's rechecked results."""
    chain = Chain()
    chain.add(Started(title="t", kind=Kind.LONG_RUNNING, owner="alice", target="none:",
                      stop_rules=StopRules(max_silence=600),
                      gates=tuple(Gate(name=n, check="command:true", required=required)
                                  for n in verdicts)))
    ready(chain, review=False)
    rows = [(name, v) for name, found in verdicts.items() for v in found]
    chain.add(Reviewed(review_id="r1", evidence=tuple(Evidence(
        id=f"e{len(chain.now.evidence) + i}", kind=EvidenceKind.COMMAND, verdict=verdict,
        assurance=Assurance.RECHECKED, summary=f"{name}: {verdict}",
        reason="runner offline" if verdict is Verdict.SKIPPED else None, gate=name,
        review="r1", recorded_at=chain.at, recorded_by="alice")
        for i, (name, verdict) in enumerate(rows, start=1))))
    return chain


def _approve(chain: Chain) -> Packet:
    return apply(chain.now, make_event(chain.now, RUN, Approved(waivers=()), actor="alice",
                                       at=chain.at))


@pytest.mark.parametrize("found", [(Verdict.SKIPPED,), (Verdict.PASSED, Verdict.SKIPPED),
                                   (Verdict.FAILED,), (Verdict.PASSED, Verdict.FAILED)])
def test_a_required_gate_that_did_not_pass_refuses_approval(found: tuple[Verdict, ...]) -> None:
    chain = _reviewed_with({"tests": found})
    worst = Verdict.FAILED if Verdict.FAILED in found else Verdict.SKIPPED
    with pytest.raises(RuleViolation, match=f"did not pass in review r1: tests {worst}"):
        _approve(chain)


def test_an_optional_gate_that_did_not_pass_does_not_refuse_approval() -> None:
    chain = _reviewed_with({"lint": (Verdict.FAILED,)}, required=False)
    assert _approve(chain).state is State.APPROVED
    assert _approve(_reviewed_with({"tests": (Verdict.PASSED,)})).state is State.APPROVED


# --- liveness: silent from the moment max_silence has passed ----------------------------


def test_a_run_quiet_for_exactly_max_silence_is_silent() -> None:
    packet = started().now  # max_silence 600, no heartbeat yet
    limit = packet.created_at + timedelta(seconds=600)
    assert liveness(packet, limit) is Liveness.SILENT
    assert is_due(silent_due(packet), limit)
    just_before = limit - timedelta(microseconds=1)
    assert liveness(packet, just_before) is Liveness.FRESH
    assert not is_due(silent_due(packet), just_before)


def test_an_open_silent_worker_blocker_is_never_fresh() -> None:
    """Whatever the state says, a recorded silence stays silent until it is resolved."""
    packet = started().now
    silence = Blocker(id="b1", kind=BlockerKind.WORKER_SILENT, detail="no heartbeat",
                      opened_at=packet.created_at, opened_by="watchdog")
    beside = msgspec.structs.replace(packet, state=State.IN_PROGRESS, blockers=(silence,))
    assert liveness(beside, packet.created_at + timedelta(seconds=1)) is Liveness.SILENT
    resolved = msgspec.structs.replace(silence, resolved_at=packet.created_at,
                                       resolved_by="alice", resolution="resumed")
    after = msgspec.structs.replace(beside, blockers=(resolved,))
    assert liveness(after, packet.created_at + timedelta(seconds=1)) is Liveness.FRESH


# --- the sanitizer: the whole of 172.16.0.0/12 is private -------------------------------


@pytest.mark.parametrize(("address", "private"), [
    ("172.16.0.1", True), ("172.24.9.9", True), ("172.30.1.2", True), ("172.31.255.254", True),
    ("172.15.0.1", False), ("172.32.0.1", False), ("10.0.0.1", True), ("192.168.1.1", True),
])
def test_private_ipv4_ranges_are_found_whole(address: str, private: bool) -> None:
    kinds = [f.kind for f in find(f"ssh {address} to debug")]
    assert kinds == ([FindingKind.PRIVATE_IP] if private else [])


# --- classification: only work expected to take longer than the threshold detaches -----


def test_expect_equal_to_the_threshold_is_bounded() -> None:
    assert classify(None, 600.0, 600.0) is Kind.BOUNDED
    assert classify(None, 600.5, 600.0) is Kind.LONG_RUNNING
    assert classify(None, None, 600.0) is Kind.BOUNDED
    assert classify(Kind.LONG_RUNNING, 1.0, 600.0) is Kind.LONG_RUNNING  # explicit wins
    assert classify(Kind.BOUNDED, 9999.0, 600.0) is Kind.BOUNDED


# --- substance: the floor is inclusive ---------------------------------------------------


def test_an_artifact_of_exactly_the_minimum_size_is_substantive() -> None:
    data = b"alpha beta gamma"
    assert substance_problem("r.md", data, min_bytes=len(data), min_words=3) is None
    problem = substance_problem("r.md", data, min_bytes=len(data) + 1, min_words=3)
    assert problem is not None
    assert "only 16 bytes (at least 17 expected" in problem


def test_an_artifact_of_exactly_the_minimum_words_is_substantive() -> None:
    assert substance_problem("r.md", b"alpha beta gamma", min_bytes=1, min_words=3) is None
    assert substance_problem("r.md", b"alpha beta", min_bytes=1, min_words=3) is not None
