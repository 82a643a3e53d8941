"""A `/waypost` command heard on GitHub made an answer, and the answer's outcome shown back
in the thread it came from.

`decide` takes what the webhook door read (`delivery.github_commands.heard`: a signed
delivery's command, its author, its thread) and decides, before anything is stored,
whether it is an answer at all: an approving review counts only where `[answers]
github_review_approves = true`; a login not mapped in `[answers.github]` is nobody here; the
thread must be the one a run comments on (its target or notify is `github:OWNER/REPO#N`),
and where several runs share it the command must name one. What is decided an answer is
accepted (`usecases.answers.accept`, keyed by its comment, so a redelivery acts once)
and carried out after as the mapped actor, by the same rules as every other door.

`Reply` shows the outcome on GitHub (`delivery.github_reply`) with the relay's token and
API base.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import msgspec

from waypost.config import Config
from waypost.core.gates import current_review, verdicts
from waypost.delivery import github_reply
from waypost.delivery.github import NO_TOKEN
from waypost.delivery.github_commands import Heard, Ignored, Verb
from waypost.delivery.settings import DeliverySettings
from waypost.durations import utcnow
from waypost.errors import WaypostError
from waypost.model import Packet, State
from waypost.store.base import Store
from waypost.usecases.answers import Action, Answer, Outcome, Reply, mapped

SOURCE = "github"
OPEN = (State.IN_PROGRESS, State.BLOCKED, State.READY_FOR_REVIEW, State.APPROVED)
MOST_RUNS = 2_000  # runs looked through for the thread's (the most recently updated first)
ACTIONS = {Verb.REVIEW: Action.REVIEW, Verb.APPROVE: Action.APPROVE,
           Verb.CHANGES: Action.CHANGES, Verb.CANCEL: Action.CANCEL}


class Replayed(msgspec.Struct, frozen=True, kw_only=True):
    """A delivery whose answer was stored before (GitHub redelivered it, another webhook
    delivered the same comment, or someone replayed it): nothing more is done."""

    key: str


class Refusal(msgspec.Struct, frozen=True, kw_only=True):
    """A command from a mapped login on a run's thread that is refused before it is
    stored (it does not read, or it does not say which run): shown in the thread."""

    said: str
    runs: tuple[str, ...]  # the thread's runs


def decide(store: Store, config: Config, heard: Heard) -> Answer | Replayed | Refusal | Ignored:
    """The answer `heard` gives, a `Refusal` to show in the thread, or why it is `Ignored`
    (nothing stored, nothing shown); `Replayed` when its answer was stored before, whatever
    has happened since. The answer is keyed by the comment (or review) it was given in,
    not by the delivery's id: GitHub redelivers a delivery under its own id, and a
    repository's webhook and its organisation's both deliver the same comment, under two
    ids; either way the comment is answered once."""
    key = f"{SOURCE}:{heard.kind}:{heard.comment}"
    if store.answer_row(key) is not None:
        return Replayed(key=key)
    if heard.kind == "review" and not config.github_review_approves:
        return Ignored(reason="an approving review is not an approval here ([answers] "
                              "github_review_approves = false)")
    if mapped(config, SOURCE, heard.login) is None:
        return Ignored(reason=f"GitHub login {heard.login} is not mapped to a waypost actor "
                              "in [answers.github]")
    runs = thread_runs(store, heard.repo, heard.number)
    if not runs:
        return Ignored(reason=f"no run comments on {heard.repo}#{heard.number}")
    named = tuple(r.id for r in runs)
    if heard.command is None:
        return Refusal(said=heard.problem or "the command does not read", runs=named)
    run = heard.command.run
    if run is not None and run not in named:
        return Refusal(said=f"run {run} does not comment on this thread; its runs: "
                            f"{', '.join(named)}", runs=named)
    # unnamed: the thread's one open run (or its one run, when none is open)
    candidates = [r.id for r in runs if r.state in OPEN] or list(named)
    if run is None and len(candidates) > 1:
        return Refusal(said=f"{len(candidates)} runs comment on this thread "
                            f"({', '.join(candidates)}): name one, e.g. "
                            f"/waypost {heard.command.verb} {candidates[0]} …", runs=named)
    return Answer(source=SOURCE, key=key, user=heard.login,
                  action=ACTIONS[heard.command.verb], run=run or candidates[0],
                  reviewed=heard.command.reviewed, text=heard.command.reason,
                  reply={"repo": heard.repo, "number": str(heard.number),
                         "comment": heard.comment, "kind": heard.kind}, at=heard.at)


def thread_runs(store: Store, repo: str, number: int) -> list[Packet]:
    """The runs whose target or notify is this issue or pull request (GitHub's names are
    not case-sensitive), the most recently updated first."""
    uri = f"github:{repo}#{number}".lower()
    return [p for p in store.list_runs(limit=MOST_RUNS)
            if uri in ((p.target or "").lower(), (p.notify or "").lower())]


def reply(store: Store, settings: DeliverySettings, *,
          clock: Callable[[], datetime] = utcnow) -> Reply:
    """The `Reply` of answers from GitHub: the outcome shown in the command's thread."""

    def show(answer: Answer, outcome: Outcome) -> None:
        place = place_of(answer.reply)
        if place is None:
            return
        if not settings.github_token:
            raise RuntimeError(f"{NO_TOKEN}: the outcome is not shown on GitHub")
        shown = github_reply.Shown(run=answer.run, action=str(answer.action), ok=outcome.ok,
                                   actor=outcome.actor, said=outcome.said,
                                   state=outcome.state, digest=outcome.digest,
                                   gates=_gates(store, answer, outcome))
        problems = github_reply.show(place, shown, token=settings.github_token,
                                     api=settings.github_api, timeout=settings.timeout,
                                     at=clock())
        if problems:
            raise RuntimeError("; ".join(problems))

    return show


def show_refusal(settings: DeliverySettings, heard: Heard, refusal: Refusal, *,
                 at: datetime) -> list[str]:
    """A `Refusal` shown in the thread (confused, and why); what could not be shown."""
    if not settings.github_token:
        return [NO_TOKEN]
    place = github_reply.Place(repo=heard.repo, number=heard.number, comment=heard.comment,
                               kind=heard.kind)
    verb = str(heard.command.verb) if heard.command else "command"
    shown = github_reply.Shown(run=", ".join(refusal.runs), action=verb, ok=False,
                               said=refusal.said)
    return github_reply.show(place, shown, token=settings.github_token,
                             api=settings.github_api, timeout=settings.timeout, at=at)


def place_of(where: dict[str, str]) -> github_reply.Place | None:
    number = where.get("number", "")
    if not (where.get("repo") and number.isdigit() and where.get("comment")):
        return None
    return github_reply.Place(repo=where["repo"], number=int(number),
                              comment=where["comment"], kind=where.get("kind", "comment"))


def _gates(store: Store, answer: Answer, outcome: Outcome) -> tuple[tuple[str, str], ...]:
    """(gate, verdict) of the review an answered `/waypost review` ran."""
    if not outcome.ok or answer.action is not Action.REVIEW:
        return ()
    try:
        packet = store.get(answer.run)
    except WaypostError:
        return ()
    return tuple((v.gate, str(v.verdict) if v.verdict else "not run")
                 for v in verdicts(packet, current_review(packet)))
