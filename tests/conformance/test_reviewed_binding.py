"""Conformance: an answer is bound to the result it answers, on every backend. `approve` and
`changes` given a reviewed-result digest that is no longer the run's are refused with what
changed, the store unchanged; the `approved` event records the digest approved; an
approved event written before the digest existed still verifies."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest

from tests import tamper
from tests.delivery_support import PRIVATE, PUBLIC, delivery_failed, fast
from tests.helpers import FakeClock, recorded
from waypost.config import Config
from waypost.core.history import GENESIS, sha256, verify_run
from waypost.core.reviewed import result_digest, short
from waypost.delivery.relay import Relay
from waypost.errors import IllegalTransition, InvalidInput, NotAuthorized, ResultChanged
from waypost.events import Approved, Event
from waypost.model import DeliveryStatus, EvidenceKind, Kind, Purpose, State, Verdict, to_json
from waypost.store import Store
from waypost.usecases import runs, starting


@pytest.fixture(autouse=True)
def _here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # relative file: targets start here on PostgreSQL


def _reviewed(store: Store, clock: FakeClock, target: str = "none:",
              notify: str | None = None) -> str:
    """A run ready for review and reviewed once by its owner, alice; w1 is its worker."""
    run, _ = starting.start(store, "Fix the login test", actor="alice", owner="alice",
                            target=target, notify=notify, kind=Kind.LONG_RUNNING, max_silence=3600,
                            clock=clock)
    worker = runs.Run(store, run.id, actor="w1", clock=clock)
    worker.claim()
    worker.report_evidence(EvidenceKind.TEST, Verdict.PASSED, "pytest -q: 42 passed")
    worker.ready(PRIVATE, public_summary=PUBLIC)
    runs.Run(store, run.id, actor="alice", clock=clock).review(config=Config())
    return run.id


def _digest(store: Store, run_id: str) -> str:
    digest = result_digest(store.get(run_id))
    assert digest is not None
    return digest


def _owner(store: Store, run_id: str, clock: FakeClock) -> runs.Run:
    return runs.Run(store, run_id, actor="alice", clock=clock)


@pytest.mark.parametrize("form", ["whole", "short"])
def test_an_approval_records_the_digest_it_approved(store: Store, clock: FakeClock,
                                                    form: str) -> None:
    run_id = _reviewed(store, clock)
    digest = _digest(store, run_id)
    given = digest if form == "whole" else short(digest)
    packet = _owner(store, run_id, clock).approve(reviewed=given)
    assert packet.state is State.APPROVED
    assert packet.approval is not None
    assert packet.approval.reviewed == digest
    event = store.events(run_id)[-1].data
    assert isinstance(event, Approved)
    assert event.reviewed == digest
    verify_run(run_id, store.events(run_id), store.get(run_id))


def test_an_approval_without_a_digest_binds_to_the_result_as_it_stands(
        store: Store, clock: FakeClock) -> None:
    run_id = _reviewed(store, clock)
    digest = _digest(store, run_id)
    packet = _owner(store, run_id, clock).approve()
    assert packet.approval is not None
    assert packet.approval.reviewed == digest


def test_an_answer_to_a_result_reviewed_again_is_refused_with_what_changed(
        store: Store, clock: FakeClock) -> None:
    run_id = _reviewed(store, clock)
    seen = _digest(store, run_id)
    clock.advance(60)
    _owner(store, run_id, clock).review(config=Config())  # a new review: a new digest
    now = _digest(store, run_id)
    assert now != seen
    before = recorded(store, run_id)
    owner = _owner(store, run_id, clock)
    answers: list[Callable[[], object]] = [lambda: owner.approve(reviewed=seen),
                                           lambda: owner.changes("not yet", reviewed=seen)]
    for answer in answers:
        with pytest.raises(ResultChanged) as refused:
            answer()
        assert "alice ran a review" in refused.value.message
        assert short(now) in refused.value.message
        assert refused.value.code == "result_changed"
        verbs = [(s.verb, dict(s.args)) for s in refused.value.steps]
        assert verbs[0] == ("review", {})
        assert verbs[1][1] == {"reviewed": short(now)}
        assert recorded(store, run_id) == before  # nothing written
    assert _owner(store, run_id, clock).approve(reviewed=now).state is State.APPROVED


def test_a_digest_the_result_never_had_is_refused(store: Store, clock: FakeClock) -> None:
    run_id = _reviewed(store, clock)
    before = recorded(store, run_id)
    with pytest.raises(ResultChanged, match="never reviewed with that digest"):
        _owner(store, run_id, clock).approve(reviewed="0" * 64)
    with pytest.raises(InvalidInput, match="not a reviewed-result digest"):
        _owner(store, run_id, clock).approve(reviewed="abc")
    assert recorded(store, run_id) == before


def test_a_result_that_changes_between_read_and_write_is_refused(
        store: Store, clock: FakeClock) -> None:
    """The owner's handle decides on the packet it last wrote; evidence recorded by the
    worker meanwhile changes the result: the commit is refused by the version guard and
    decided again on the packet it would now be applied to."""
    run_id = _reviewed(store, clock)
    owner = _owner(store, run_id, clock)
    owner.review(config=Config())  # the handle keeps the packet it wrote
    seen = _digest(store, run_id)
    runs.Run(store, run_id, actor="w1", clock=clock).report_evidence(
        EvidenceKind.TEST, Verdict.FAILED, "one more run: 1 failed")
    before = recorded(store, run_id)
    with pytest.raises(ResultChanged, match="w1 recorded evidence"):
        owner.approve(reviewed=seen)
    assert recorded(store, run_id) == before


def test_a_new_result_after_the_notice_is_refused_then_reviewed_and_delivered_once(
        store: Store, clock: FakeClock, tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    run_id = _reviewed(store, clock, target="file:out.json")
    noticed = _digest(store, run_id)  # what the ready-for-review message showed
    _owner(store, run_id, clock).changes("add the retry test")
    worker = runs.Run(store, run_id, actor="w1", clock=clock)
    worker.ready("retry test added", public_summary="Login race fixed, with a retry test")
    before = recorded(store, run_id)
    with pytest.raises(ResultChanged) as refused:
        _owner(store, run_id, clock).approve(reviewed=noticed)
    assert "alice requested changes" in refused.value.message
    assert "w1 submitted a new result" in refused.value.message
    assert recorded(store, run_id) == before

    owner = _owner(store, run_id, clock)
    owner.review(config=Config())
    owner.approve(reviewed=_digest(store, run_id))
    relay = Relay(store, settings=fast(files_root=str(tmp_path)), relay_id="r1",
                  clock=clock, rand=lambda: 0.0)
    [sent] = relay.drain()
    assert (sent.purpose, sent.status) == (Purpose.FINAL, DeliveryStatus.SENT)
    assert relay.drain() == []
    document = json.loads(out.read_text())
    assert document["data"]["public_summary"] == "Login race fixed, with a retry test"
    assert document["data"]["approval"]["reviewed"] == _digest(store, run_id)
    assert document["data"]["reviewed"] == _digest(store, run_id)
    assert store.get(run_id).state is State.DELIVERED


def test_an_approved_event_written_before_the_digest_existed_still_verifies(
        store: Store, clock: FakeClock, tmp_path: Path) -> None:
    """The event as written before `reviewed` existed (`waivers` always present, nothing
    else), hashed over those exact bytes: decoded and hashed again, it is the same."""
    run_id = _reviewed(store, clock)
    _owner(store, run_id, clock).approve()
    approved = store.events(run_id)[-1]
    old_body = {"type": "approved", "waivers": []}
    old_hash = sha256(to_json([approved.prev_hash, run_id, approved.seq, approved.at,
                               approved.actor, approved.epoch, old_body])).hexdigest()
    old = msgspec.convert({**msgspec.to_builtins(approved), "data": old_body,
                           "hash": old_hash}, Event)
    tamper.overwrite_event(store, old)
    packet = store.get(run_id)
    assert packet.approval is not None
    tamper.overwrite_packet(store, msgspec.structs.replace(
        packet, approval=msgspec.structs.replace(packet.approval, reviewed=None)))
    events = store.events(run_id)
    assert b"reviewed" not in to_json(events[-1].data)
    assert events[-1].hash == old_hash
    assert events[0].prev_hash == GENESIS
    verify_run(run_id, events, store.get(run_id))
    relay = Relay(store, settings=fast(files_root=str(tmp_path)), relay_id="r1",
                  clock=clock, rand=lambda: 0.0)
    [sent] = relay.drain()  # an approval that recorded no digest is delivered as before
    assert (sent.purpose, sent.status) == (Purpose.FINAL, DeliveryStatus.SENT)


def test_a_result_changed_in_the_store_after_approval_is_not_delivered(
        store: Store, clock: FakeClock, tmp_path: Path) -> None:
    """A store edited between approval and delivery: the relay sends nothing and blocks
    the run, naming the digest approved and the digest it found."""
    run_id = _reviewed(store, clock, target="file:out.json")
    approved = _owner(store, run_id, clock).approve().approval
    assert approved is not None
    packet = store.get(run_id)
    assert packet.result is not None
    tamper.overwrite_packet(store, msgspec.structs.replace(packet, result=msgspec.structs.replace(
        packet.result, public_summary="Login race fixed; also dropped the audit table")))
    now = _digest(store, run_id)
    relay = Relay(store, settings=fast(files_root=str(tmp_path)), relay_id="r1",
                  clock=clock, rand=lambda: 0.0)
    [failed] = relay.drain()
    assert (failed.purpose, failed.status) == (Purpose.FINAL, DeliveryStatus.FAILED)
    assert not (tmp_path / "out.json").exists()  # nothing was sent
    blocked = delivery_failed(store, run_id)
    assert (f"the result changed after approval: approved {approved.reviewed}, now {now}"
            in blocked.detail)
    assert "permanent" in blocked.detail
    assert relay.drain() == []


def test_the_notice_and_the_markdown_result_carry_the_digest(store: Store, clock: FakeClock,
                                                            tmp_path: Path) -> None:
    run_id = _reviewed(store, clock, target="file:out.md", notify="file:notes.jsonl")
    relay = Relay(store, settings=fast(files_root=str(tmp_path)), relay_id="r1",
                  clock=clock, rand=lambda: 0.0)
    relay.drain()
    digest = _digest(store, run_id)
    [ready] = [json.loads(line) for line in (tmp_path / "notes.jsonl").read_text().splitlines()
               if json.loads(line)["topic"] == "ready_for_review"]
    assert ready["data"]["reviewed"] == digest
    _owner(store, run_id, clock).approve(reviewed=digest)
    relay.drain()
    assert f"reviewed result `{digest}`" in (tmp_path / "out.md").read_text()


def test_the_rules_speak_before_the_digest(store: Store, clock: FakeClock) -> None:
    """Who may answer, and in which state, say more than a digest: a worker's answer to an
    old result is refused as not the worker's to give, a sent-back run's as no longer
    waiting for review."""
    run_id = _reviewed(store, clock)
    with pytest.raises(NotAuthorized):
        runs.Run(store, run_id, actor="w1", clock=clock).approve(reviewed="0" * 64)
    _owner(store, run_id, clock).changes("add the retry test")
    with pytest.raises(IllegalTransition):
        _owner(store, run_id, clock).approve(reviewed="0" * 64)


def test_a_retarget_after_approval_sends_the_result_approved_there(
        store: Store, clock: FakeClock, tmp_path: Path) -> None:
    """The target is not in the digest: the approved result goes to the new target, under
    the same delivery, and the retarget stays on the record after the approval."""
    run_id = _reviewed(store, clock, target="file:first.json")
    digest = _digest(store, run_id)
    _owner(store, run_id, clock).approve(reviewed=digest)
    _owner(store, run_id, clock).retarget("file:second.json")
    relay = Relay(store, settings=fast(files_root=str(tmp_path)), relay_id="r1",
                  clock=clock, rand=lambda: 0.0)
    [sent] = relay.drain()
    assert (sent.purpose, sent.status, sent.target) == (Purpose.FINAL, DeliveryStatus.SENT,
                                                         "file:second.json")
    assert not (tmp_path / "first.json").exists()
    document = json.loads((tmp_path / "second.json").read_text())
    assert document["data"]["approval"]["reviewed"] == digest
    assert [e.type for e in store.events(run_id)[-3:]] == ["approved", "retargeted",
                                                           "delivered"]
