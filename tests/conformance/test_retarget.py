"""Conformance: retargeting a run's final delivery, on every backend. The store decides the
row inside the commit: a live lease refuses the whole write, an unknown outcome needs the
owner's acceptance, and a failed final delivery is queued again under its one key."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.delivery_support import approved_run, fast
from tests.helpers import FakeClock
from waypost.core import outbox
from waypost.core.history import verify_run
from waypost.delivery.relay import Relay
from waypost.errors import (
    Conflict,
    IllegalTransition,
    InvalidInput,
    NotAuthorized,
    RuleViolation,
)
from waypost.events import Retargeted
from waypost.model import Delivery, DeliveryStatus, Purpose, State
from waypost.store import Store
from waypost.usecases import retarget, runs, starting
from waypost.usecases.commands import command

LEASE = 60.0


@pytest.fixture(autouse=True)
def _here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # relative file: targets start here on PostgreSQL


def _final(store: Store, run_id: str) -> Delivery:
    [row] = [d for d in store.deliveries([run_id]) if d.purpose is Purpose.FINAL]
    return row


def _relay(store: Store, clock: FakeClock, tmp_path: Path) -> Relay:
    return Relay(store, settings=fast(files_root=str(tmp_path)), relay_id="r1", clock=clock,
                 rand=lambda: 0.0)


def _owner(store: Store, run_id: str, clock: FakeClock) -> runs.Run:
    return runs.Run(store, run_id, actor="alice", clock=clock)


def _unchanged(store: Store, run_id: str, before: tuple[int, Delivery]) -> None:
    assert (store.get(run_id).version, _final(store, run_id)) == before


def test_a_failed_delivery_retargeted_is_delivered_once_under_the_same_key(
        store: Store, clock: FakeClock, tmp_path: Path) -> None:
    run_id = approved_run(store, clock, target="exec:no-such-command-waypost")
    [failed] = _relay(store, clock, tmp_path).drain()
    assert failed.status is DeliveryStatus.FAILED
    assert store.get(run_id).state is State.BLOCKED
    _owner(store, run_id, clock).retarget(notify="file:notes.jsonl")  # the result stays put
    assert store.get(run_id).state is State.BLOCKED
    assert _final(store, run_id).status is DeliveryStatus.FAILED

    packet = _owner(store, run_id, clock).retarget("file:out.md")
    assert (packet.state, packet.target) == (State.APPROVED, "file:out.md")
    assert not packet.open_blockers
    queued = _final(store, run_id)
    assert (queued.key, queued.status, queued.target) == (
        outbox.final_key(run_id), DeliveryStatus.QUEUED, "file:out.md")

    [sent] = _relay(store, clock, tmp_path).drain()
    assert (sent.key, sent.status, sent.attempts) == (outbox.final_key(run_id),
                                                      DeliveryStatus.SENT, 2)
    assert _relay(store, clock, tmp_path).drain() == []  # once
    assert (tmp_path / "out.md").read_text().startswith("# Fix the flaky login test")
    events = store.events(run_id)
    assert [e.type for e in events[-3:]] == ["retargeted", "blocker_resolved", "delivered"]
    assert store.get(run_id).receipt is not None
    verify_run(run_id, events, store.get(run_id))


def test_an_approved_run_still_queued_moves_its_row(store: Store, clock: FakeClock) -> None:
    run_id = approved_run(store, clock, target="file:old.md")
    clock.advance(30)
    _owner(store, run_id, clock).retarget("file:new.md")
    row = _final(store, run_id)
    assert (row.target, row.status, row.next_attempt_at) == ("file:new.md",
                                                             DeliveryStatus.QUEUED, clock())
    assert len([d for d in store.deliveries([run_id]) if d.purpose is Purpose.FINAL]) == 1


def test_a_run_retargeted_before_approval_is_delivered_to_the_new_target(
        store: Store, clock: FakeClock) -> None:
    run, _ = starting.start(store, "t", actor="alice", target="file:old.md", max_silence=600,
                        clock=clock)
    run.retarget("file:new.md", notify="file:notes.jsonl")
    run_id = run.id
    packet = store.get(run_id)
    assert (packet.target, packet.notify) == ("file:new.md", "file:notes.jsonl")
    assert store.deliveries([run_id]) == []  # nothing is queued before approval


def test_a_leased_final_delivery_is_not_moved(store: Store, clock: FakeClock) -> None:
    run_id = approved_run(store, clock, target="file:old.md")
    store.claim_deliveries("relay:busy", now=clock(), lease_s=LEASE)
    before = (store.get(run_id).version, _final(store, run_id))
    with pytest.raises(Conflict, match="a relay is sending it now"):
        _owner(store, run_id, clock).retarget("file:new.md")
    _unchanged(store, run_id, before)


def test_the_store_refuses_a_lease_taken_after_the_decision(
        store: Store, clock: FakeClock) -> None:
    """A relay may claim the row between the retarget's read and its commit: the store
    decides it again inside the commit, so the write fails whole."""
    run_id = approved_run(store, clock, target="file:old.md")
    write = retarget.decide(store, store.load(run_id), actor="alice", at=clock(),
                            target="file:new.md", notify=None, accept_duplicate=False)
    store.claim_deliveries("relay:fast", now=clock(), lease_s=LEASE)
    before = (store.get(run_id).version, _final(store, run_id))
    with pytest.raises(Conflict):
        store.commit_write(write)
    _unchanged(store, run_id, before)
    assert len(store.events(run_id)) == before[0]


def _unknown(store: Store, clock: FakeClock, *, fail: bool = False) -> str:
    """An approved run whose one attempt went out and never came back."""
    run_id = approved_run(store, clock, target="https://receiver.example/hook")
    [claimed] = store.claim_deliveries("relay:1", now=clock(), lease_s=LEASE)
    if fail:
        snap = store.load(run_id)
        relay = Relay(store, relay_id="1", clock=clock)
        store.finish_delivery(claimed.key, "relay:1", at=clock(), error="no answer",
                              outcome_unknown=True,
                              write=relay._run_write(claimed, snap, clock(), None, "no answer"))
        assert store.get(run_id).version == snap.packet.version + 1
    else:
        store.retry_delivery(claimed.key, "relay:1", error="no answer within 1s",
                             retry_at=clock.advance(10), outcome_unknown=True)
    return run_id


@pytest.mark.parametrize("fail", [False, True], ids=["retrying", "failed"])
def test_an_unknown_outcome_moves_only_with_a_duplicate_accepted(
        store: Store, clock: FakeClock, fail: bool) -> None:
    start = clock()
    run_id = _unknown(store, clock, fail=fail)
    row = _final(store, run_id)
    assert row.outcome_unknown_at == row.last_attempt_at == start
    before = (store.get(run_id).version, row)
    with pytest.raises(RuleViolation, match=r"outcome of an attempt .* is unknown") as refused:
        _owner(store, run_id, clock).retarget("file:new.md")
    assert refused.value.hint_with(command).endswith(
        f"if a duplicate is acceptable: waypost retarget {run_id} file:new.md "
        "--accept-duplicate; or let the relay retry the same target: waypost deliver --once")
    [retarget, _] = refused.value.steps
    assert retarget.fields() == ({"target": "file:new.md", "accept_duplicate": True}, [])
    _unchanged(store, run_id, before)

    packet = _owner(store, run_id, clock).retarget("file:new.md", accept_duplicate=True)
    assert (packet.state, packet.target) == (State.APPROVED, "file:new.md")
    moved = _final(store, run_id)
    assert (moved.target, moved.status, moved.outcome_unknown_at, moved.maybe_delivered_to) \
        == ("file:new.md", DeliveryStatus.QUEUED, None, ("https://receiver.example/hook",))
    [event] = [e.data for e in store.events(run_id) if isinstance(e.data, Retargeted)]
    assert event == Retargeted(target="file:new.md", accept_duplicate=True)
    verify_run(run_id, store.events(run_id), store.get(run_id))


def test_the_store_refuses_an_unknown_outcome_recorded_after_the_decision(
        store: Store, clock: FakeClock) -> None:
    run_id = approved_run(store, clock, target="https://receiver.example/hook")
    write = retarget.decide(store, store.load(run_id), actor="alice", at=clock(),
                            target="file:new.md", notify=None, accept_duplicate=False)
    [claimed] = store.claim_deliveries("relay:1", now=clock(), lease_s=LEASE)
    store.retry_delivery(claimed.key, "relay:1", error="timed out", retry_at=clock(),
                         outcome_unknown=True)
    with pytest.raises(RuleViolation):
        store.commit_write(write)
    assert _final(store, run_id).target == "https://receiver.example/hook"


def test_a_lapsed_lease_with_no_outcome_counts_as_unknown(
        store: Store, clock: FakeClock) -> None:
    """Its relay died (or hung) mid-send: the old target may have it."""
    run_id = approved_run(store, clock, target="file:old.md")
    store.claim_deliveries("relay:dead", now=clock(), lease_s=LEASE)
    clock.advance(LEASE + 1)
    with pytest.raises(RuleViolation, match="unknown"):
        _owner(store, run_id, clock).retarget("file:new.md")
    _owner(store, run_id, clock).retarget("file:new.md", accept_duplicate=True)
    row = _final(store, run_id)
    assert (row.target, row.lease_owner, row.maybe_delivered_to) == (
        "file:new.md", None, ("file:old.md",))


def test_the_same_target_needs_no_acceptance_and_notify_alone_leaves_the_row(
        store: Store, clock: FakeClock) -> None:
    run_id = _unknown(store, clock)
    before = _final(store, run_id)
    _owner(store, run_id, clock).retarget(notify="file:notes.jsonl")
    assert store.get(run_id).notify == "file:notes.jsonl"
    assert _final(store, run_id) == before


@pytest.mark.parametrize("end", ["delivered", "cancelled"])
def test_a_finished_run_is_not_retargeted(store: Store, clock: FakeClock, tmp_path: Path,
                                          end: str) -> None:
    run_id = approved_run(store, clock, target="file:out.md")
    if end == "delivered":
        _relay(store, clock, tmp_path).drain()
    else:
        _owner(store, run_id, clock).cancel("not needed")
    with pytest.raises(IllegalTransition, match=f"is {end}: cannot retarget"):
        _owner(store, run_id, clock).retarget("file:other.md")


def test_only_the_owner_retargets(store: Store, clock: FakeClock) -> None:
    run_id = approved_run(store, clock, target="file:out.md")
    with pytest.raises(NotAuthorized, match="only its owner alice"):
        runs.Run(store, run_id, actor="w1", clock=clock).retarget("file:other.md")
    assert _final(store, run_id).target == "file:out.md"


def test_a_retarget_that_changes_nothing_is_refused(store: Store, clock: FakeClock) -> None:
    run, _ = starting.start(store, "t", actor="alice", target="none:", clock=clock)
    with pytest.raises(InvalidInput, match="changes nothing"):
        run.retarget("none:")
    with pytest.raises(InvalidInput, match="name a new target"):
        run.retarget()
    assert store.get(run.id).version == 1
