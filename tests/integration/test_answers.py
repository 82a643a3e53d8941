"""Answers from a service, carried out as the mapped actor by the rules every door follows
(`usecases.answers`): the owner's answer acts once, bound to the result it answered; an
unmapped user, the worker's own identity, an answer to an outdated result or one that names
none changes nothing and says why; a replay is stored once; a second claim after a crash
does not act twice. The service doors (Slack, GitHub) are tested on top of this."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.delivery_support import PRIVATE, PUBLIC
from tests.helpers import FakeClock
from waypost.config import Config, load_config
from waypost.core.exposure import facing_network
from waypost.core.reviewed import result_digest, short
from waypost.delivery.github_commands import Command, Heard, Verb
from waypost.errors import InvalidInput
from waypost.model import EvidenceKind, Kind, State, Verdict
from waypost.store import Store
from waypost.usecases import answers, github_answers, runs, starting
from waypost.usecases.answers import Action, Answer, Answerer, Outcome

CONFIG = Config(slack_users=(("UOWNER1", "alice"), ("UWORKER1", "w1")),
                github_users=(("octo-alice", "alice"),))
EXPOSURE = facing_network(allow_exec=False, outbound=())


def _ready(store: Store, clock: FakeClock, target: str = "none:") -> str:
    run, _ = starting.start(store, "Fix the flaky login test", actor="alice", owner="alice",
                            target=target, kind=Kind.LONG_RUNNING, max_silence=3600,
                            clock=clock)
    worker = runs.Run(store, run.id, actor="w1", clock=clock)
    worker.claim()
    worker.report_evidence(EvidenceKind.TEST, Verdict.PASSED, "pytest -q: 42 passed")
    worker.ready(PRIVATE, public_summary=PUBLIC)
    return run.id


def _answer(run: str, action: Action, *, user: str = "UOWNER1", key: str = "slack:1",
            reviewed: str | None = None, text: str | None = None,
            source: str = "slack") -> Answer:
    return Answer(source=source, key=key, user=user, action=action, run=run,
                  reviewed=reviewed, text=text, at=datetime(2026, 1, 2, 3, 4, 5))


def _do(store: Store, answer: Answer) -> Outcome:
    return answers.carry_out(store, answer, config=CONFIG, exposure=EXPOSURE)


def _state(store: Store, run: str) -> tuple[int, list[bytes]]:
    return store.get(run).version, [e.hash.encode() for e in store.events(run)]


def test_review_then_approve_by_the_mapped_owner(store: Store, clock: FakeClock) -> None:
    run = _ready(store, clock)
    reviewed = _do(store, _answer(run, Action.REVIEW))
    assert reviewed.ok, reviewed
    assert reviewed.actor == "alice"
    assert reviewed.digest == result_digest(store.get(run))
    approved = _do(store, _answer(run, Action.APPROVE, key="slack:2",
                                  reviewed=short(reviewed.digest or "")))
    assert approved.ok, approved
    assert approved.state == State.APPROVED
    assert store.get(run).approval is not None
    assert store.get(run).approval.by == "alice"  # type: ignore[union-attr]


@pytest.mark.parametrize("user", ["UNOBODY9", "UWORKER1"])
def test_an_unmapped_user_or_the_workers_identity_changes_nothing(
        store: Store, clock: FakeClock, user: str) -> None:
    run = _ready(store, clock)
    _do(store, _answer(run, Action.REVIEW))
    before = _state(store, run)
    digest = result_digest(store.get(run))
    for action in (Action.APPROVE, Action.REVIEW, Action.CANCEL):
        outcome = _do(store, _answer(run, action, user=user, reviewed=digest, text="no"))
        assert not outcome.ok
        assert outcome.code == "not_authorized", outcome
        assert ("not mapped" in outcome.said) == (user == "UNOBODY9")
        assert outcome.said.startswith("w1 ") == (user == "UWORKER1")
    assert _state(store, run) == before


def test_an_answer_to_an_outdated_result_is_refused_saying_what_changed(
        store: Store, clock: FakeClock) -> None:
    run = _ready(store, clock)
    seen = result_digest(store.get(run))  # what the ready-for-review message showed
    assert seen is not None
    _do(store, _answer(run, Action.REVIEW))  # a review since changes the verdicts
    before = _state(store, run)
    for action in (Action.APPROVE, Action.CHANGES):
        outcome = _do(store, _answer(run, action, reviewed=seen, text="redo it"))
        assert not outcome.ok
        assert outcome.code == "result_changed", outcome
        assert "ran a review" in outcome.said
        assert short(seen) in outcome.said
    missing = _do(store, _answer(run, Action.APPROVE))
    assert not missing.ok
    assert missing.code == "invalid_input"
    assert _state(store, run) == before


def test_a_replay_is_stored_once_and_carried_out_once(store: Store, clock: FakeClock) -> None:
    run = _ready(store, clock)
    shown: list[tuple[str, bool]] = []
    answerer = Answerer(store, CONFIG, EXPOSURE,
                        {"slack": lambda a, o: shown.append((a.key, o.ok))}, clock=clock)
    review = _answer(run, Action.REVIEW, key="slack:review")
    assert answers.accept(store, review)
    assert not answers.accept(store, review)  # the same request again
    assert answerer.drain() == 1
    assert answerer.drain() == 0
    assert shown == [("slack:review", True)]
    assert len(store.get(run).reviews) == 1
    outcome = answers.outcome_of(store, "slack:review")
    assert outcome is not None
    assert outcome.ok


def test_a_second_claim_after_a_crash_does_not_act_twice(store: Store,
                                                         clock: FakeClock) -> None:
    run = _ready(store, clock)
    review = _answer(run, Action.REVIEW, key="slack:r")
    answers.accept(store, review)
    # the first server claims it, carries it out, and dies before recording the outcome
    [row] = store.claim_answers("first", now=clock(), lease_s=60, limit=5)
    stored = answers._answer.decode(row.body)
    assert _do(store, stored).ok
    clock.advance(61)
    answerer = Answerer(store, CONFIG, EXPOSURE, {}, clock=clock)
    assert answerer.drain() == 1
    assert len(store.get(run).reviews) == 1  # not reviewed twice
    outcome = answers.outcome_of(store, "slack:r")
    assert outcome is not None
    assert outcome.ok
    assert "earlier attempt" in outcome.said


def test_the_mapping_is_read_from_waypost_toml(tmp_path: Path) -> None:
    (tmp_path / "waypost.toml").write_text(
        '[answers]\ngithub_review_approves = true\n'
        '[answers.slack]\nU024BE7LH = "alice"\n[answers.github]\nocto-cat = "bob"\n')
    config = load_config(tmp_path)
    assert config.slack_users == (("U024BE7LH", "alice"),)
    assert config.github_users == (("octo-cat", "bob"),)
    assert config.github_review_approves
    assert answers.mapped(config, "slack", "U024BE7LH") == "alice"
    assert answers.mapped(config, "github", "U024BE7LH") is None
    for bad in ('[answers.slack]\n"Alice Smith" = "alice"\n',  # a display name
                '[answers.github]\nocto = 3\n', '[answers]\ngithub_review_approves = "yes"\n',
                '[answers]\nsecret = "x"\n',
                '[answers.github]\nOcto = "alice"\nocto = "mallory"\n'):
        (tmp_path / "waypost.toml").write_text(bad)
        with pytest.raises(InvalidInput):
            load_config(tmp_path)


def test_a_server_carries_out_what_was_accepted_before_it_started(tmp_path: Path) -> None:
    """An answer accepted by a server that stopped before carrying it out (or whose claim
    expired) is carried out by the next server to start, without a new request."""
    from tests.http_support import serving_app
    from waypost.http.settings import ServerConfig
    from waypost.store import open_store

    url = str(tmp_path / "store.db")
    with open_store(url) as store:
        run = _ready(store, FakeClock())
        answers.accept(store, _answer(run, Action.REVIEW, key="slack:left-behind"))
    with serving_app(ServerConfig(store_url=url, project=CONFIG)) as (app, _):
        served: Store = app.state.store
        deadline = time.monotonic() + 20
        while answers.outcome_of(served, "slack:left-behind") is None:
            assert time.monotonic() < deadline, "the answer was not carried out"
            time.sleep(0.05)
        assert len(served.get(run).reviews) == 1


def test_an_outcome_never_shows_the_runs_target_or_notify_uri(store: Store,
                                                              clock: FakeClock) -> None:
    """An outcome is shown in a channel or a thread others read; a webhook's URL may hold
    its secret."""
    secret = "https://hooks.example.com/services/T0/B0/s3cr3t-in-the-url"
    run = _ready(store, clock, target=secret)
    _do(store, _answer(run, Action.REVIEW))
    digest = result_digest(store.get(run))
    approved = _do(store, _answer(run, Action.APPROVE, key="slack:2", reviewed=digest))
    assert approved.ok, approved
    assert "s3cr3t" not in approved.said
    assert "the run's target" in approved.said


def test_what_the_rules_refuse_now_is_decided_before_anything_is_stored(
        store: Store, clock: FakeClock) -> None:
    run = _ready(store, clock)
    seen = result_digest(store.get(run))
    assert answers.decide(store, _answer(run, Action.REVIEW), config=CONFIG,
                          exposure=EXPOSURE) is None
    _do(store, _answer(run, Action.REVIEW))
    digest = result_digest(store.get(run))
    refused = {
        "worker": _answer(run, Action.APPROVE, user="UWORKER1", reviewed=digest),
        "unmapped": _answer(run, Action.APPROVE, user="UNOBODY9", reviewed=digest),
        "outdated": _answer(run, Action.APPROVE, reviewed=seen),
        "unnamed": _answer(run, Action.APPROVE),
        "no such run": _answer("wp_nosuchrun", Action.REVIEW),
        "no reason": _answer(run, Action.CANCEL, user="octo-alice", source="github")}
    codes = {why: answers.decide(store, answer, config=CONFIG, exposure=EXPOSURE)
             for why, answer in refused.items()}
    assert {why: o.code if o else None for why, o in codes.items()} == {
        "worker": "not_authorized", "unmapped": "not_authorized", "outdated": "result_changed",
        "unnamed": "invalid_input", "no such run": "not_found", "no reason": "invalid_input"}
    assert answers.decide(store, _answer(run, Action.APPROVE, reviewed=digest), config=CONFIG,
                          exposure=EXPOSURE) is None
    assert store.get(run).state is State.READY_FOR_REVIEW  # deciding wrote nothing


def test_an_answer_whose_claims_keep_dying_is_given_up_not_tried_forever(
        store: Store, clock: FakeClock) -> None:
    """A server that dies each time it carries an answer out (the answer itself kills it)
    does not make every later server try it again: after the last attempt the answer is
    recorded as given up, shown where it came from, and nothing is done."""
    run = _ready(store, clock)
    review = _answer(run, Action.REVIEW, key="slack:poison")
    answers.accept(store, review)
    for _ in range(answers.MOST_ATTEMPTS):  # each claim expires unfinished
        assert len(store.claim_answers("dying", now=clock(), lease_s=60, limit=5)) == 1
        clock.advance(61)
    shown: list[Outcome] = []
    answerer = Answerer(store, CONFIG, EXPOSURE, {"slack": lambda a, o: shown.append(o)},
                        clock=clock)
    assert answerer.drain() == 1
    outcome = answers.outcome_of(store, "slack:poison")
    assert outcome is not None
    assert not outcome.ok
    assert "gave up" in outcome.said
    assert shown == [outcome]
    assert store.get(run).reviews == ()  # nothing was done
    assert answerer.drain() == 0  # and it is not claimed again


def test_a_review_from_a_service_runs_no_command_without_allow_exec(
        store: Store, clock: FakeClock, tmp_path: Path) -> None:
    """A Review button (or `/waypost review`) runs the gates on the server: a command gate
    is refused there unless the server runs with --allow-exec, nothing is run or written,
    and the answer says where to review instead."""
    ran = tmp_path / "ran"
    run, _ = starting.start(store, "Fix it", actor="alice", owner="alice", target="none:",
                            kind=Kind.LONG_RUNNING, max_silence=3600,
                            gates=[f"tests=command:touch {ran}"], clock=clock)
    worker = runs.Run(store, run.id, actor="w1", clock=clock)
    worker.claim()
    worker.report_evidence(EvidenceKind.TEST, Verdict.PASSED, "pytest -q: 42 passed")
    worker.ready(PRIVATE, public_summary=PUBLIC)
    before = _state(store, run.id)
    refused = _do(store, _answer(run.id, Action.REVIEW))
    assert not refused.ok
    assert "--allow-exec" in refused.said
    assert _state(store, run.id) == before
    assert not ran.exists()
    allowed = answers.carry_out(store, _answer(run.id, Action.REVIEW, key="slack:2"),
                                config=CONFIG, exposure=facing_network(allow_exec=True,
                                                                       outbound=()))
    assert allowed.ok, allowed
    assert ran.exists()


def test_a_comment_acts_only_on_a_run_of_its_own_thread(store: Store,
                                                        clock: FakeClock) -> None:
    """`/waypost … RUN` on one pull request naming a run that comments elsewhere (or
    nowhere on GitHub) is refused before anything is stored."""
    here = _ready(store, clock, target="github:octo/app#7")
    elsewhere = _ready(store, clock, target="github:octo/app#70")  # not #7
    nowhere = _ready(store, clock)
    for other in (elsewhere, nowhere):
        heard = Heard(kind="comment", repo="octo/app", number=7, comment="1",
                      login="octo-alice", at=datetime(2026, 1, 2, tzinfo=UTC),
                      command=Command(verb=Verb.CANCEL, run=other, reason="not this one"))
        decided = github_answers.decide(store, CONFIG, heard)
        assert isinstance(decided, github_answers.Refusal), decided
        assert here in decided.runs
        assert other not in decided.runs
        assert store.answer_row("github:comment:1") is None
        assert store.get(other).state is State.READY_FOR_REVIEW


def test_a_reason_typed_in_a_service_is_bounded(store: Store, clock: FakeClock) -> None:
    run = _ready(store, clock)
    before = _state(store, run)
    long = _do(store, _answer(run, Action.CANCEL, text="x" * (answers.MAX_TEXT + 1)))
    assert not long.ok
    assert f"at most {answers.MAX_TEXT}" in long.said
    assert _state(store, run) == before
    assert _do(store, _answer(run, Action.CANCEL, key="slack:2",
                              text="x" * answers.MAX_TEXT)).ok


def test_a_reason_left_empty_is_given_only_where_a_button_cannot_require_one(
        store: Store, clock: FakeClock) -> None:
    run = _ready(store, clock)
    by_comment = _do(store, _answer(run, Action.CANCEL, user="octo-alice", source="github"))
    assert by_comment.code == "invalid_input"
    assert _do(store, _answer(run, Action.CANCEL, key="slack:2")).ok
    assert store.get(run).cancel_reason == "cancel from Slack by UOWNER1, no reason typed"


def test_a_github_login_is_mapped_as_github_compares_logins() -> None:
    assert answers.mapped(CONFIG, "github", "Octo-Alice") == "alice"
    assert answers.mapped(CONFIG, "slack", "uowner1") is None  # Slack's ids are exact
    assert answers.mapped(CONFIG, "email", "UOWNER1") is None


def test_the_run_s_uris_are_withheld_from_any_outcome_text(store: Store,
                                                           clock: FakeClock) -> None:
    secret = "https://hooks.example.com/services/T0/B0/s3cr3t-in-the-url"
    run = _ready(store, clock, target=secret)
    said = answers.withheld(store.get(run), f"could not reach {secret}: refused")
    assert said == "could not reach the run's target: refused"
    assert answers.withheld(None, secret) == secret
