"""Answers from where the owner already is (Slack's buttons, a `/waypost` comment on
GitHub): accepted at once, carried out after, once, as the mapped actor.

A service's request is decided at its door (the signature, the shape) and stored here
(`accept`) under the service's own request key, so a retried or replayed request is stored
once. `Answerer`, a thread of `waypost serve`, claims what is stored and carries each out
(`carry_out`): the service's user is mapped to a waypost actor by the project's
configuration (`[answers.slack]`, `[answers.github]`; never by display name), and the verb
is the same `Run` verb every other door calls, so the same rules decide: only the owner (or
whom the owner named with `transfer`) reviews and approves, a worker's identity is refused
as the worker, and an approval or a change request names the reviewed result it answers
(`core.reviewed`): answered after the result changed, it is refused, saying what changed.

A server that dies while carrying an answer out leaves its claim to expire; the next claim
looks for what the first one already did before doing anything (`_done_before`), then shows
the outcome where the answer came from (the source's `Reply`) and records it.
"""

from __future__ import annotations

import enum
import logging
import os
import socket
import threading
from collections import deque
from collections.abc import Callable, Mapping
from datetime import datetime

import msgspec

from waypost.config import Config
from waypost.core.exposure import Exposure
from waypost.core.reviewed import result_digest
from waypost.durations import Clock, utcnow
from waypost.errors import InvalidInput, NotAuthorized, WaypostError
from waypost.model import Packet
from waypost.store.answers import AnswerRow
from waypost.store.base import Store
from waypost.usecases.commands import command
from waypost.usecases.runs import Run

LEASE = 600.0  # seconds a claim holds an answer; one held longer (a slow review's gates)
# is claimed again, and `_done_before` keeps its action from being done twice
BATCH = 20  # answers claimed at once
MOST_ATTEMPTS = 5  # claims of one answer before it is recorded as failed
POLL = 5.0  # seconds between looks when nothing woke the thread
MAX_TEXT = 2000  # characters of a reason or an input typed in a service
UNTYPED_REASON: Mapping[str, str] = {"slack": "Slack"}  # sources whose buttons need no reason
SHOWN_AT_MOST = 1000  # refusals waiting to be shown (more: the oldest are not shown)
log = logging.getLogger("waypost.answers")


class Action(enum.StrEnum):
    REVIEW = "review"
    APPROVE = "approve"
    CHANGES = "changes"
    CANCEL = "cancel"
    INPUT = "input"


BOUND = frozenset({Action.APPROVE, Action.CHANGES})  # must name the reviewed result
# the event each action records, by which a later claim sees it was done
EVENT_OF: Mapping[Action, str] = {
    Action.REVIEW: "reviewed", Action.APPROVE: "approved", Action.CHANGES: "changes_requested",
    Action.CANCEL: "cancelled", Action.INPUT: "blocker_resolved"}


class Answer(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One answer, as its service's door decoded it."""

    source: str  # "slack" | "github"
    key: str  # the service's request, unique: `slack:…`, `github:DELIVERY`
    user: str  # the service's identity: a Slack user id, a GitHub login
    action: Action
    run: str
    reviewed: str | None = None  # the digest the message or comment showed
    text: str | None = None  # the reason (changes, cancel) or the typed input (input)
    blocker: str | None = None  # input: the blocker it resolves
    reply: dict[str, str] = {}  # where the outcome is shown (a Slack message, a comment)
    at: datetime  # when the service says it happened
    seen: int | None = None  # the run's version when the answer was accepted


class Outcome(msgspec.Struct, frozen=True, kw_only=True):
    """What an answer came to, as shown where it came from."""

    ok: bool
    said: str  # what was done, or why not (with what changed, and what to do)
    code: str  # "ok", or the refusal's code (result_changed, not_authorized, …)
    actor: str | None = None  # the mapped waypost actor
    digest: str | None = None  # the run's reviewed-result digest after the answer
    state: str | None = None  # the run's state after the answer


Reply = Callable[[Answer, Outcome], None]
_encode = msgspec.json.Encoder()
_answer = msgspec.json.Decoder(Answer)
_outcome = msgspec.json.Decoder(Outcome)


def accept(store: Store, answer: Answer, *, at: datetime | None = None) -> bool:
    """Store `answer` to be carried out; False when its key was already stored (the
    service retried it, or someone replayed it): then nothing more is done."""
    when = at or utcnow()
    try:
        seen: int | None = store.get(answer.run).version
    except WaypostError:
        seen = None  # carried out, it is refused naming why
    body = _encode.encode(msgspec.structs.replace(answer, seen=seen))
    return store.accept_answer(answer.key, source=answer.source, run_id=answer.run,
                               body=body, at=when)


def outcome_of(store: Store, key: str) -> Outcome | None:
    """What the answer stored under `key` came to, once carried out."""
    row = store.answer_row(key)
    return None if row is None or row.outcome is None else _outcome.decode(row.outcome)


def mapped(config: Config, source: str, user: str) -> str | None:
    """The waypost actor a service's user acts as, by the project's configuration only
    (GitHub's logins are case-insensitive, as GitHub treats them; Slack's ids are exact)."""
    if source == "github":
        return next((actor for who, actor in config.github_users
                     if who.casefold() == user.casefold()), None)
    table = config.slack_users if source == "slack" else ()
    return next((actor for who, actor in table if who == user), None)


def decide(store: Store, answer: Answer, *, config: Config,
           exposure: Exposure) -> Outcome | None:
    """Refuse now, before anything is stored, an answer the run's rules refuse as the run
    stands (an unmapped user, no such run, the worker's own identity or anyone else who may
    not, a state that takes no such answer, a result changed since the message): the
    refusal, shown where the answer came from; None when it is to be stored and carried
    out (where the same rules decide again, on the run as it then is)."""
    actor = mapped(config, answer.source, answer.user)
    try:
        if actor is None:
            raise _unmapped(answer)
        _precheck(Run(store, answer.run, actor=actor), answer, exposure)
    except WaypostError as exc:
        return _refused(store, answer, actor, exc)
    return None


def _precheck(run: Run, answer: Answer, exposure: Exposure) -> None:
    """The checks `_act` makes, without doing anything (`Run.precheck`)."""
    from waypost.core.authority import check_may_review
    from waypost.events import Cancelled
    from waypost.usecases import approval

    action = answer.action
    if action in BOUND:
        _check_bound(run, answer)
    if action is Action.REVIEW:
        packet = run.packet
        check_may_review(packet, run.actor)
        exposure.check_review(packet)
    elif action is Action.APPROVE:
        reviewed = approval.given(answer.reviewed)
        run.precheck(lambda p: approval.approved(run, p, (), reviewed))
    elif action is Action.CHANGES:
        text, reviewed = _text(answer), approval.given(answer.reviewed)
        run.precheck(lambda p: approval.changes_requested(run, p, text, reviewed))
    elif action is Action.CANCEL:
        text = _text(answer)
        run.precheck(lambda p: Cancelled(reason=text))
    # an input is decided when carried out (its blocker's own rules, `Run.unblock`)


def _unmapped(answer: Answer) -> NotAuthorized:
    return NotAuthorized(
        f"{answer.source} user {answer.user} is not mapped to a waypost actor: nothing was "
        "done", hint=f"map it in waypost.toml under [answers.{answer.source}]")


def carry_out(store: Store, answer: Answer, *, config: Config, exposure: Exposure,
              again: bool = False) -> Outcome:
    """Do what `answer` asks, as its mapped actor, by the rules every door follows;
    `again`: an earlier claim may have done it already (then it is not done twice)."""
    actor = mapped(config, answer.source, answer.user)
    try:
        if actor is None:
            raise _unmapped(answer)
        run = Run(store, answer.run, actor=actor)
        if again and _done_before(store, answer, actor):
            packet = store.get(answer.run)
            return _ok(answer, actor, packet, "already done by an earlier attempt")
        packet, said = _act(run, answer, config, exposure)
        return _ok(answer, actor, packet, said)
    except WaypostError as exc:
        return _refused(store, answer, actor, exc)


def _act(run: Run, answer: Answer, config: Config,
         exposure: Exposure) -> tuple[Packet, str]:
    action = answer.action
    if action in BOUND:
        _check_bound(run, answer)
    if action is Action.REVIEW:
        exposure.check_review(run.packet)
        packet, report = run.review(config=config, files=exposure.reads_files)
        gates = "; ".join(f"{v.gate} {v.verdict or 'not run'}" for v in report.gates)
        verdict = "approvable" if report.approvable else "not approvable yet"
        return packet, f"review {report.review}: {gates or 'no gates'} ({verdict})"
    if action is Action.APPROVE:
        packet = run.approve(reviewed=answer.reviewed)
        return packet, "approved; the result goes to the run's target"
    text = _text(answer)
    if action is Action.CHANGES:
        return run.changes(text, reviewed=answer.reviewed), f"changes requested: {text}"
    if action is Action.CANCEL:
        return run.cancel(text), f"cancelled: {text}"
    if not answer.blocker:
        raise InvalidInput("the input names no blocker to resolve")
    return run.unblock(answer.blocker, text), f"blocker {answer.blocker} resolved: {text}"


def _check_bound(run: Run, answer: Answer) -> None:
    """An approval or a change request from a service must name the result it answers; the
    Run verb then refuses it inside its write when that is no longer the run's result
    (`usecases.approval`: ResultChanged, saying what changed)."""
    if result_digest(run.packet) is None:  # no result to bind to: the verb refuses it,
        return  # as at every door
    if not answer.reviewed:
        raise InvalidInput(f"an answer from {answer.source} must name the reviewed result it "
                           "answers", hint="answer from the run's latest message")


def _text(answer: Answer) -> str:
    """The reason (or input) an answer gives. A Slack message cannot require a box for one
    button and not the others, so a reason left empty there says who answered from Slack;
    every other source must give one."""
    text = (answer.text or "").strip()
    if not text and answer.source in UNTYPED_REASON and \
            answer.action in (Action.CHANGES, Action.CANCEL):
        text = f"{answer.action} from {UNTYPED_REASON[answer.source]} by {answer.user}, " \
            "no reason typed"
    if not text:
        raise InvalidInput(f"{answer.action} needs a reason: nothing was done")
    if len(text) > MAX_TEXT:
        raise InvalidInput(f"the text is {len(text)} characters; at most {MAX_TEXT}")
    return text


def _done_before(store: Store, answer: Answer, actor: str) -> bool:
    """Whether the answer's action was already recorded by its actor since it was accepted
    (an earlier claim did it, then died before recording the outcome)."""
    if answer.seen is None:
        return False
    kind = EVENT_OF[answer.action]
    return any(e.seq > answer.seen and e.actor == actor and
               e.data.__struct_config__.tag == kind for e in store.events(answer.run))


def _ok(answer: Answer, actor: str, packet: Packet, said: str) -> Outcome:
    said = withheld(packet, f"{actor} ({answer.source} {answer.user}): {said}")
    return Outcome(ok=True, said=said, code="ok", actor=actor, digest=result_digest(packet),
                   state=packet.state)


def withheld(packet: Packet | None, said: str) -> str:
    """`said` without the run's target and notify URIs: an outcome is shown in a channel or
    a thread others read, and a webhook's URL may hold a secret."""
    for uri, name in ((packet.target, "the run's target"), (packet.notify, "its notify")) \
            if packet is not None else ():
        if uri:
            said = said.replace(uri, name)
    return said


def _refused(store: Store, answer: Answer, actor: str | None, exc: WaypostError) -> Outcome:
    try:
        packet: Packet | None = store.get(answer.run)
    except WaypostError:
        packet = None
    hint = exc.hint_with(command)
    said = withheld(packet, exc.message + (f" ({hint})" if hint else ""))
    return Outcome(ok=False, said=said, code=exc.code,
                   actor=actor, digest=result_digest(packet) if packet else None,
                   state=packet.state if packet else None)


class Answerer:
    """Carries accepted answers out: `drain` once, or `serve` until told to stop."""

    def __init__(self, store: Store, config: Config, exposure: Exposure,
                 replies: Mapping[str, Reply], *, clock: Clock = utcnow,
                 lease: float = LEASE) -> None:
        self.store = store
        self.config = config
        self.exposure = exposure
        self.replies = replies
        self.clock = clock
        self.lease = lease
        self.id = f"answers:{socket.gethostname()}:{os.getpid()}:{id(self):x}"
        self.woken = threading.Event()
        # refusals decided before storing, to be shown where they came from (not kept: a
        # refusal changed nothing, and the service's user may simply answer again)
        self.refusals: deque[tuple[Answer, Outcome]] = deque(maxlen=SHOWN_AT_MOST)

    def decide(self, answer: Answer) -> Outcome | None:
        """`decide` with this server's configuration and exposure."""
        return decide(self.store, answer, config=self.config, exposure=self.exposure)

    def show(self, answer: Answer, refusal: Outcome) -> None:
        """Show a refusal decided before storing, from this thread (never the request's)."""
        self.refusals.append((answer, refusal))
        self.wake()

    def wake(self) -> None:
        """Something was accepted: look now."""
        self.woken.set()

    def drain(self) -> int:
        """Carry out every answer that can be claimed now; how many were."""
        done = 0
        for _ in range(1000):  # bounded: a store that keeps refilling is served next time
            rows = self.store.claim_answers(self.id, now=self.clock(), lease_s=self.lease,
                                            limit=BATCH)
            for row in rows:
                self._one(row)
            done += len(rows)
            if len(rows) < BATCH:
                break
        return done

    def serve(self, stop: threading.Event, *, poll: float = POLL) -> None:
        while not stop.is_set():
            self.show_refusals()
            try:
                self.drain()
            except WaypostError as exc:  # the store is away: look again later
                log.warning("answers: %s", exc.message)
            except Exception:  # a bug must not end the thread while the routes accept
                log.exception("answers: carrying answers out failed; trying again later")
            self.woken.wait(poll)
            self.woken.clear()

    def show_refusals(self) -> int:
        """Show every refusal waiting to be shown; how many were."""
        shown = 0
        while self.refusals:
            answer, refusal = self.refusals.popleft()
            self._reply(answer, refusal)
            shown += 1
        return shown

    def _one(self, row: AnswerRow) -> None:
        try:
            answer = _answer.decode(row.body)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            self._finish(row, Outcome(ok=False, said=f"the stored answer does not decode: "
                                      f"{exc}", code="integrity_error"))
            return
        if row.attempts > MOST_ATTEMPTS:
            outcome = Outcome(ok=False, code="error", said=f"gave up after {MOST_ATTEMPTS} "
                              "attempts to carry this answer out")
        else:
            outcome = carry_out(self.store, answer, config=self.config,
                                exposure=self.exposure, again=row.attempts > 1)
        self._reply(answer, outcome)
        self._finish(row, outcome)

    def _reply(self, answer: Answer, outcome: Outcome) -> None:
        reply = self.replies.get(answer.source)
        if reply is not None:
            try:
                reply(answer, outcome)
            except Exception as exc:  # the outcome stands; showing it is best effort
                log.warning("answers: could not show the outcome of %s: %s", answer.key, exc)

    def _finish(self, row: AnswerRow, outcome: Outcome) -> None:
        self.store.finish_answer(row.key, self.id, outcome=_encode.encode(outcome),
                                 at=self.clock())
