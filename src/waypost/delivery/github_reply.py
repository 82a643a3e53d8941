"""An answer's outcome shown on GitHub, in the thread the `/waypost` command came from:

1. a reaction on the command's comment: `+1` when it was done, `confused` when refused
   (a review has no reactions in the REST API: its reply says it all);
2. a reply in the same thread: who did what, or why not and what changed;
3. the run's sticky comment brought up to date with the outcome and, while the run waits
   for review, the commands for the result as it now stands. Never once the run is
   approved: the relay writes the final result there, and its delivered body is never
   touched after (a comment marked with the final delivery's key is left as it is);
4. the commit statuses on the pull request's head (none on an issue): `waypost/run`, and
   `waypost/<gate>` for each gate a review ran, as `delivery.github.status_plan` names them.

Every step is tried; one GitHub refuses does not keep the others from being shown. The
same token and API base as the relay's GitHub targets (`GITHUB_TOKEN`, `GITHUB_API_URL`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

import msgspec

from waypost.core.outbox import final_key
from waypost.core.reviewed import short
from waypost.delivery.github import (
    api_headers,
    commands,
    find_comment,
    gate_state,
    github_ok,
    marker,
    one_line,
)
from waypost.delivery.rest import Api, Failed
from waypost.display import md_block

DONE: Final = "+1"
REFUSED: Final = "confused"
WAITING: Final = frozenset({"ready_for_review"})  # the commands are shown in these states
FINAL: Final = frozenset({"approved", "delivered"})  # the relay's from here on
STATUS_OF: Final = {"review": "pending", "approve": "success", "changes": "failure",
                    "cancel": "error"}


class Place(msgspec.Struct, frozen=True, kw_only=True):
    """Where the command was said."""

    repo: str  # OWNER/REPO
    number: int  # the pull request or issue
    comment: str  # the command's comment id (a review's id for a review)
    kind: str = "comment"  # "comment" | "review"


class Shown(msgspec.Struct, frozen=True, kw_only=True):
    """What the answer came to, as GitHub is told."""

    run: str
    action: str  # review | approve | changes | cancel
    ok: bool
    actor: str | None = None  # the waypost actor it was done as
    said: str
    state: str | None = None
    digest: str | None = None
    gates: tuple[tuple[str, str], ...] = ()  # (gate, verdict) of the review, when one ran


def show(place: Place, shown: Shown, *, token: str, api: str, timeout: float,
         at: datetime) -> list[str]:
    """Show `shown` at `place`; what could not be shown (empty: all of it was)."""
    problems: list[str] = []
    repo = f"/repos/{place.repo}"
    with Api(api, api_headers(token), timeout=timeout, at=at) as client:
        for step in (_react, _reply, _sticky, _statuses):
            try:
                step(client, repo, place, shown, at)
            except Failed as failed:
                problems.append(failed.attempt.detail)
    return problems


def _react(client: Api, repo: str, place: Place, shown: Shown, at: datetime) -> None:
    if place.kind != "comment":
        return
    github_ok(client.call("POST", f"{repo}/issues/comments/{place.comment}/reactions",
                          body={"content": DONE if shown.ok else REFUSED}), at)


def _reply(client: Api, repo: str, place: Place, shown: Shown, at: datetime) -> None:
    github_ok(client.call("POST", f"{repo}/issues/{place.number}/comments",
                          body={"body": reply_text(shown)}), at)


def reply_text(shown: Shown) -> str:
    """The reply in the thread: never a command itself (its first line is not one)."""
    head = (f"**waypost** run `{shown.run}`: {shown.action} done" if shown.ok else
            f"**waypost** run `{shown.run}`: {shown.action} refused, nothing was done")
    text = f"{head}\n\n{md_block(shown.said)}\n"
    if shown.state in WAITING and shown.digest:
        text += "\n" + commands(shown.run, shown.digest)
    return text


def _sticky(client: Api, repo: str, place: Place, shown: Shown, at: datetime) -> None:
    if not shown.ok or shown.state is None or shown.state in FINAL:
        return
    found = find_comment(client, repo, str(place.number), shown.run, at)
    if found is None:
        return
    ident, body = found
    if body.startswith(marker(shown.run, final_key(shown.run))):
        return  # the delivered result: never touched after
    first = body.split("\n", 1)[0]
    text = f"{first}\n**waypost** run `{shown.run}` is {shown.state}: {md_block(shown.said)}\n"
    if shown.state in WAITING and shown.digest:
        text += f"\nThe result now: `{short(shown.digest)}`.\n\n" + \
            commands(shown.run, shown.digest)
    if text != body:
        github_ok(client.call("PATCH", f"{repo}/issues/comments/{ident}",
                              body={"body": text}), at)


def _statuses(client: Api, repo: str, place: Place, shown: Shown, at: datetime) -> None:
    plan = answer_statuses(shown)
    if not plan:
        return
    pull = client.call("GET", f"{repo}/pulls/{place.number}")
    if pull.status == 404:
        return  # an issue: no commits to mark
    head = github_ok(pull, at)
    sha = head.get("head", {}).get("sha") if isinstance(head, dict) else None
    if not isinstance(sha, str) or not sha:
        return
    for context, state, description in plan:
        github_ok(client.call("POST", f"{repo}/statuses/{sha}", body={
            "state": state, "context": context, "description": description}), at)


def answer_statuses(shown: Shown) -> list[tuple[str, str, str]]:
    """(context, state, description) an outcome sets, `waypost/run` last; none for a
    refusal (nothing changed)."""
    if not shown.ok or shown.action not in STATUS_OF:
        return []
    plan = [(f"waypost/{gate}", gate_state(verdict), verdict)
            for gate, verdict in shown.gates] if shown.action == "review" else []
    what = {"review": "reviewed", "approve": "approved", "changes": "changes requested",
            "cancel": "cancelled"}[shown.action]
    then = (f"; approve with /waypost approve {short(shown.digest)}"
            if shown.action == "review" and shown.state in WAITING and shown.digest else "")
    plan.append(("waypost/run", STATUS_OF[shown.action],
                 one_line(f"{what} by {shown.actor or '?'}{then}")))
    return plan
