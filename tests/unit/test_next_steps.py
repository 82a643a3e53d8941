"""A refusal carries its next steps as data (`waypost.errors.Step`), decided where the rule
is, and each door words a step its own way: the CLI as the command line to type, MCP as
the tool call, the HTTP API as the route. Here: which refusal names which step, and that
every door has words for every verb a step may name."""

from __future__ import annotations

import shlex
from datetime import UTC, datetime, timedelta

import pytest

from tests.unit.test_machine import ev, evidence, in_state, started
from tests.unit.test_machine import step as move
from waypost.cli import steps as cli_steps
from waypost.core.access import Operation
from waypost.core.authority import check_may_take_lease
from waypost.core.machine import apply
from waypost.errors import (
    NEEDS,
    VERBS,
    IllegalTransition,
    NotAuthorized,
    Refused,
    RuleViolation,
    StaleLease,
    Step,
    WaypostError,
    step,
)
from waypost.events import (
    Approved,
    AuthorityTransferred,
    BlockerOpened,
    Claimed,
    EvidenceRecorded,
    Heartbeat,
    MarkedReady,
    Retargeted,
    Reviewed,
)
from waypost.http import errors as http_errors
from waypost.mcp import answers as mcp_answers
from waypost.model import (
    Assurance,
    Authority,
    Evidence,
    EvidenceKind,
    Gate,
    Packet,
    State,
    Verdict,
    Waiver,
)

RUN = "wp_test"


def refusal(packet: Packet, data: object, actor: str = "alice",
            epoch: int | None = None) -> WaypostError:
    with pytest.raises(WaypostError) as info:
        apply(packet, ev(packet, data, actor, epoch))  # type: ignore[arg-type]
    return info.value


def commands(exc: WaypostError) -> list[str]:
    return [cli_steps.command(s) for s in exc.steps]


# --- the vocabulary ---------------------------------------------------------------------


def test_every_operation_a_token_names_is_a_verb_a_step_may_name() -> None:
    assert {str(o) for o in Operation} <= VERBS
    assert set(NEEDS) <= VERBS


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_every_door_has_words_for_every_verb(verb: str) -> None:
    found = step(verb, RUN)
    assert cli_steps.command(found).startswith("waypost ")
    assert verb in mcp_answers.TOOL_OF_VERB
    assert (mcp_answers.tool_of(found) is None) == (verb == "deliver")  # the relay's
    route = http_errors.next_route(found)
    assert route.verb == verb
    assert (route.method is None) == (verb == "deliver")


def test_a_step_is_frozen_and_names_only_known_verbs() -> None:
    found = step("unblock", RUN, blocker="b1")
    assert found.fill == ("resolution",)  # what the verb needs and the step does not know
    with pytest.raises(AttributeError):
        found.verb = "cancel"
    with pytest.raises(TypeError):
        found.args["blocker"] = "b2"  # type: ignore[index]
    with pytest.raises(ValueError, match="no verb"):
        Step(verb="unblock-everything")


# --- which refusal names which step -----------------------------------------------------


def test_a_blocked_run_names_an_unblock_step_for_each_open_blocker() -> None:
    blocked = move(in_state(State.BLOCKED),
                   BlockerOpened(blocker_id="b2", kind="other", detail="the disk"))  # type: ignore[arg-type]
    exc = refusal(blocked, MarkedReady(summary="done"))
    assert isinstance(exc, IllegalTransition)
    assert commands(exc) == [f"waypost unblock {RUN} b1 --resolution TEXT",
                             f"waypost unblock {RUN} b2 --resolution TEXT"]


@pytest.mark.parametrize(("state", "verbs"), [
    (State.IN_PROGRESS, ["ready"]),
    (State.READY_FOR_REVIEW, ["review", "approve", "changes"]),
    (State.APPROVED, ["deliver"]),
    (State.CANCELLED, ["read"]),
])
def test_an_illegal_move_names_the_moves_that_take_the_run_on(state: State,
                                                              verbs: list[str]) -> None:
    illegal = Approved(waivers=()) if state is State.IN_PROGRESS else MarkedReady(summary="again")
    exc = refusal(in_state(state), illegal)
    assert isinstance(exc, IllegalTransition)
    assert [s.verb for s in exc.steps] == verbs


def _never_claim_nor_epoch(exc: WaypostError, epoch: int) -> None:
    """A fenced process is told to look, at every door: no step claims or resumes (that
    would fence the newer process), and none hands it the current epoch to pass."""
    assert exc.steps
    assert all(s.verb not in ("claim", "resume") for s in exc.steps), exc.steps
    assert all("epoch" not in s.args and "epoch" not in s.fill for s in exc.steps)
    tool = mcp_answers.refused("heartbeat", exc)
    document = tool.structured_content or {}
    assert document["next"]["tool"] not in ("resume", "claim")
    assert "next tool: resume" not in mcp_answers.refusal_text("heartbeat", exc)
    body = http_errors.error_body(exc)
    assert body.next is not None
    assert not body.next.path or not body.next.path.endswith(("/claim", "/resume"))
    worded = [cli_steps.hint(exc), exc.hint_with(mcp_answers.call_text),
              exc.hint_with(http_errors.route_text), *commands(exc)]
    for text in worded:
        for never in (f"--epoch {epoch}", "waypost claim", "waypost resume", "/claim"):
            assert never not in text, text


def test_a_fenced_process_is_told_a_newer_process_holds_the_lease_and_to_stop() -> None:
    held = move(started(), Claimed(epoch=1), actor="w1")
    taken = move(held, Claimed(epoch=2), actor="w1")
    exc = refusal(taken, Heartbeat(), actor="w1", epoch=1)
    assert isinstance(exc, StaleLease)
    assert "a newer process of w1 took the lease (epoch 2) at" in exc.message
    assert "must stop" in exc.message
    assert "only if that process is gone" in exc.hint
    assert commands(exc) == [f"waypost show {RUN}"]
    _never_claim_nor_epoch(exc, 2)


def test_a_process_fenced_by_another_actor_is_told_who_and_to_stop() -> None:
    held = move(started(), Claimed(epoch=1), actor="w1")
    taken = move(held, Claimed(epoch=2), actor="w2")
    exc = refusal(taken, Heartbeat(), actor="w1", epoch=1)
    assert isinstance(exc, StaleLease)
    assert "w2 took the lease over (epoch 2)" in exc.message
    assert "ask w2 or the owner alice" in exc.hint
    _never_claim_nor_epoch(exc, 2)


def test_an_epoch_no_claim_gave_is_not_answered_with_the_current_one() -> None:
    held = move(started(), Claimed(epoch=1), actor="w1")
    exc = refusal(held, Heartbeat(), actor="w1", epoch=7)
    assert isinstance(exc, StaleLease)
    assert "which no claim of" in exc.message
    assert "epoch 1" not in exc.message + exc.hint
    _never_claim_nor_epoch(exc, 1)


def test_a_worker_that_does_not_hold_a_live_lease_is_not_told_to_claim_it() -> None:
    """A live lease is the owner's, or its nominee's, to take over: a claim would be
    refused in turn, so the refusal names a look and whom to ask."""
    held = move(started(), Claimed(epoch=1), actor="w1")
    exc = refusal(held, Heartbeat(), actor="w2")
    assert isinstance(exc, StaleLease)
    assert exc.hint.startswith("ask w1 or the owner alice (a live lease")
    assert [s.verb for s in exc.steps] == ["read"]


def test_a_worker_the_owner_named_for_the_takeover_is_told_to_claim_it() -> None:
    held = move(started(), Claimed(epoch=1), actor="w1")
    named = move(held, AuthorityTransferred(authority=Authority.TAKEOVER, to="w2"),
                 actor="alice")
    exc = refusal(named, Heartbeat(), actor="w2")
    assert isinstance(exc, StaleLease)
    assert exc.hint == "ask w1 or the owner alice"
    assert cli_steps.hint(exc) == (f"ask w1 or the owner alice; to take it over: "
                                   f"waypost claim {RUN} --as w2")


def test_an_owners_move_by_another_names_the_same_move_as_the_owner() -> None:
    exc = refusal(started(), Retargeted(target="file:x.md"), actor="w1")
    assert isinstance(exc, NotAuthorized)
    assert exc.steps == (step("retarget", RUN, actor="alice", why="ask the owner, alice, to run"),)
    assert commands(exc) == [f"waypost retarget {RUN} URI --as alice"]


def test_ready_without_evidence_names_evidence_run_and_skip() -> None:
    exc = refusal(started(), MarkedReady(summary="done"))
    assert isinstance(exc, RuleViolation)
    assert commands(exc) == [f"waypost evidence run {RUN} -- CMD",
                             f"waypost evidence skip {RUN} --kind test --reason TEXT"]


def test_ready_naming_a_missing_artifact_names_recording_it() -> None:
    p = started()
    p = move(p, EvidenceRecorded(evidence=evidence(p)))
    exc = refusal(p, MarkedReady(summary="done", artifacts=("report.md", "my notes.md")))
    assert commands(exc) == [
        f"waypost artifact add {RUN} PATH --role result --name report.md",
        f"waypost artifact add {RUN} PATH --role result --name 'my notes.md'"]


def _reviewed(verdict: Verdict) -> Packet:
    p = started(gates=(Gate(name="tests", check="command:pytest"),))
    p = move(p, EvidenceRecorded(evidence=evidence(p)))
    p = move(p, MarkedReady(summary="done"))
    gate = Evidence(id=f"e{len(p.evidence) + 1}", kind=EvidenceKind.COMMAND, verdict=verdict,
                    assurance=Assurance.RECHECKED, summary="2 failed", gate="tests",
                    review="r1", recorded_at=p.updated_at, recorded_by="alice")
    return move(p, Reviewed(review_id="r1", evidence=(gate,)))


def test_a_gate_not_passed_names_changes_or_the_owners_waiver() -> None:
    exc = refusal(_reviewed(Verdict.FAILED), Approved(waivers=()))
    assert isinstance(exc, RuleViolation)
    assert commands(exc) == [f"waypost changes {RUN} --reason TEXT --as alice",
                             f"waypost approve {RUN} --waive tests=REASON --as alice"]
    at = datetime(2026, 1, 1, tzinfo=UTC)
    handed = move(_reviewed(Verdict.FAILED),
                  AuthorityTransferred(authority=Authority.APPROVE, to="w1"))
    waived = refusal(handed, Approved(waivers=(
        Waiver(gate="tests", reason="flaky", by="w1", at=at),)), actor="w1")
    assert isinstance(waived, NotAuthorized)
    assert commands(waived) == [f"waypost approve {RUN} --waive GATE=REASON --as alice"]


def test_approval_before_a_review_names_the_owners_review() -> None:
    p = in_state(State.READY_FOR_REVIEW)
    exc = refusal(p, Approved(waivers=()))
    assert [(s.verb, s.actor) for s in exc.steps] == [("review", "alice")]


def test_a_live_lease_names_the_owners_transfer_of_takeover() -> None:
    held = move(started(), Claimed(epoch=1), actor="w1")
    with pytest.raises(NotAuthorized) as info:
        check_may_take_lease(held, "w2", held.updated_at + timedelta(seconds=1))
    assert commands(info.value) == [
        f"waypost transfer {RUN} --authority takeover --to w2 --as alice"]


# --- each door's words ------------------------------------------------------------------


def test_the_cli_quotes_every_value_and_keeps_a_command_after_the_separator() -> None:
    found = step("evidence", RUN, command="pytest -q", actor="ops lead")
    assert shlex.split(cli_steps.command(found)) == [
        "waypost", "evidence", "run", RUN, "--as", "ops lead", "--", "pytest", "-q"]


def test_the_cli_writes_a_gate_as_declared_and_names_the_one_to_adopt() -> None:
    assert cli_steps.command(step("add_gate", RUN, check="command:pytest -q")) == (
        f"waypost gate add {RUN} 'NAME=command:pytest -q'")
    assert cli_steps.command(step("adopt_gate", RUN, name="my gate", actor="alice")) == (
        f"waypost gate adopt {RUN} 'my gate' --as alice")


def test_mcp_words_a_step_as_the_tool_call_with_what_to_fill_in() -> None:
    found = step("unblock", RUN, blocker="b1", actor="alice")
    assert mcp_answers.next_call(found) == {
        "tool": "unblock", "verb": "unblock", "arguments": {"run": RUN, "blocker": "b1"},
        "fill": ["resolution"], "actor": "alice"}
    waiver = step("approve", RUN, gate="tests", fill=("reason",), actor="alice")
    assert mcp_answers.next_call(waiver)["arguments"] == {"run": RUN,
                                                          "waivers": {"tests": ""}}
    assert mcp_answers.next_call(step("claim", RUN))["tool"] == "claim"
    transfer = step("transfer", RUN, authority="takeover", to="w2", actor="alice")
    assert mcp_answers.next_call(transfer) == {
        "tool": "transfer", "verb": "transfer",
        "arguments": {"run": RUN, "authority": "takeover", "to": "w2"}, "fill": [],
        "actor": "alice"}
    skip = step("evidence", RUN, kind="test", fill=("reason",))
    assert mcp_answers.tool_of(skip) == "skip_evidence"


def test_http_words_a_step_as_the_route_that_takes_it() -> None:
    route = http_errors.next_route(step("unblock", RUN, blocker="b1", actor="alice"))
    assert (route.method, route.path, route.body, route.fill, route.actor) == (
        "POST", f"/api/runs/{RUN}/unblock", {"blocker": "b1"}, ["resolution"], "alice")
    upload = http_errors.next_route(step("artifact", RUN, role="result", name="a b.md"))
    assert (upload.path, upload.body, upload.fill) == (
        f"/api/runs/{RUN}/artifacts/a%20b.md?role=result", None, ["content"])
    assert http_errors.next_route(step("read", RUN)).method == "GET"
    assert http_errors.next_route(step("deliver")).method is None


def test_an_error_without_steps_keeps_its_hint() -> None:
    exc = Refused("no", hint="ask someone")
    assert exc.steps == ()
    for render in (cli_steps.command, mcp_answers.call_text, http_errors.route_text):
        assert exc.hint_with(render) == "ask someone"
