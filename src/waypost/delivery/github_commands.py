"""What a GitHub webhook says, decided before anything acts on it: whether GitHub signed it
(`X-Hub-Signature-256`), and which `/waypost` command a comment or a review gives.

GitHub signs the raw body with the webhook's secret: `sha256=` and the hex HMAC-SHA256 of
the bytes exactly as sent. It sends no timestamp; a replay is caught by the delivery id
(`X-GitHub-Delivery`), which the answers queue stores once.

A command is the first line of a comment, one per comment, in this grammar (RUN, a run id
`wp_…`, is needed only where several runs share the pull request; DIGEST names the result
answered, as the run's sticky comment shows it: twelve or more hex digits, or `sha256:…`):

    /waypost review [RUN]
    /waypost approve [RUN] DIGEST
    /waypost changes [RUN] DIGEST REASON
    /waypost cancel [RUN] REASON

Anything else that starts with `/waypost` is refused with the grammar; a comment whose first
line does not start with it is not a command at all. Pure: no I/O, no store.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import re
from datetime import datetime
from typing import Any, Final, NoReturn

import msgspec

from waypost.core.reviewed import typed

SIGNATURE_HEADER: Final = "x-hub-signature-256"
EVENT_HEADER: Final = "x-github-event"
DELIVERY_HEADER: Final = "x-github-delivery"
SECRET_ENV: Final = "GITHUB_WEBHOOK_SECRET"
PREFIX: Final = "/waypost"
MAX_BODY: Final = 65_536  # characters: GitHub's own limit for a comment's body
MAX_LINE: Final = 4_200  # characters of the command line: a reason (4,000) and its words
MAX_DELIVERY_ID: Final = 100  # GitHub's delivery ids are GUIDs (36 characters)
MAX_LOGIN: Final = 39  # GitHub's limit for a login
USAGE: Final = ("/waypost review [RUN] · /waypost approve [RUN] DIGEST · "
                "/waypost changes [RUN] DIGEST REASON · /waypost cancel [RUN] REASON")
_RUN: Final = re.compile(r"wp_[0-9A-Za-z]{1,64}")
_LOGIN: Final = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:\[bot\])?")
_REPO: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}")
_DELIVERY: Final = re.compile(r"[A-Za-z0-9-]{1,100}")
_SPACE: Final = re.compile(r"\s+")


def sign(secret: str, body: bytes) -> str:
    """The `X-Hub-Signature-256` GitHub sends with `body`."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify(secret: str, body: bytes, header: str | None) -> bool:
    """Whether `header` is GitHub's signature of `body` (compared in constant time)."""
    if not secret or not header or len(header) > 100:
        return False
    return hmac.compare_digest(sign(secret, body).encode(), header.strip().encode())


class Verb(enum.StrEnum):
    REVIEW = "review"  # run the required gates as the owner
    APPROVE = "approve"  # approve the result the digest names
    CHANGES = "changes"  # request changes to the result the digest names, with a reason
    CANCEL = "cancel"  # stop the run, with a reason


class Command(msgspec.Struct, frozen=True, kw_only=True):
    verb: Verb
    run: str | None = None  # named when several runs share the pull request
    reviewed: str | None = None  # the digest, as typed (hex, normalised)
    reason: str | None = None


class Malformed(Exception):
    """A `/waypost` command that does not read: the message says why, with the grammar."""


def parse(body: str) -> Command | None:
    """The command a comment's body gives; None when its first line is not a command.
    Raises `Malformed` for one that starts with `/waypost` and does not read."""
    if len(body) > MAX_BODY:
        return None if not body.lstrip().startswith(PREFIX) else _malformed(
            f"the comment is over {MAX_BODY} characters")
    first, *rest = body.lstrip().splitlines() or [""]
    first = first.strip()
    if _SPACE.split(first, maxsplit=1)[0] != PREFIX:
        return None
    if any(line.strip().startswith(PREFIX) for line in rest):
        _malformed("one command per comment, on its first line; this one has more")
    if len(first) > MAX_LINE:
        _malformed(f"the command is over {MAX_LINE} characters")
    words = _SPACE.split(first[len(PREFIX):].strip(), maxsplit=1)
    verb = _verb(words[0])
    return _arguments(verb, words[1] if len(words) > 1 else "")


def _verb(word: str) -> Verb:
    try:
        return Verb(word)
    except ValueError:
        shown = word[:20] or "nothing"
        _malformed(f"`{shown}` is not a command")


def _arguments(verb: Verb, text: str) -> Command:
    run, text = _take_run(text)
    if verb is Verb.REVIEW:
        if text:
            _malformed("review takes nothing but the run")
        return Command(verb=verb, run=run)
    if verb is Verb.CANCEL:
        return Command(verb=verb, run=run, reason=_reason(verb, text))
    word = _SPACE.split(text, maxsplit=1)[0] if text else ""
    digest, text = (typed(word) if word else None), _after_word(text)
    if digest is None:
        _malformed(f"{verb} must name the result it answers: copy the line from the run's "
                   "comment (`/waypost " + verb + " DIGEST`)")
    if verb is Verb.APPROVE:
        if text:
            _malformed("approve takes the digest and nothing after it")
        return Command(verb=verb, run=run, reviewed=digest)
    return Command(verb=verb, run=run, reviewed=digest, reason=_reason(verb, text))


def _take_run(text: str) -> tuple[str | None, str]:
    word = _SPACE.split(text, maxsplit=1)[0] if text else ""
    if word.startswith("wp_"):
        if not _RUN.fullmatch(word):
            _malformed(f"`{word[:70]}` is not a run id")
        return word, _after_word(text)
    return None, text


def _after_word(text: str) -> str:
    parts = _SPACE.split(text.strip(), maxsplit=1)
    return parts[1].strip() if len(parts) > 1 else ""


def _reason(verb: Verb, text: str) -> str:
    if not text.strip():
        _malformed(f"{verb} needs a reason after it")
    return text.strip()


def _malformed(why: str) -> NoReturn:
    raise Malformed(f"{why}. Commands: {USAGE}")


# --- webhook payloads ---------------------------------------------------------------------


class Heard(msgspec.Struct, frozen=True, kw_only=True):
    """A command heard in a comment or a review, with where it was said."""

    kind: str  # "comment" | "review"
    repo: str  # OWNER/REPO
    number: int  # the pull request's or issue's number
    comment: str  # the comment's (or the review's) id
    login: str  # who said it
    at: datetime  # when GitHub says it was said
    command: Command | None  # None: it did not read (`problem` says why)
    problem: str | None = None


class Ignored(msgspec.Struct, frozen=True, kw_only=True):
    """A delivery that asks nothing of waypost, and why."""

    reason: str


def heard(event: str, payload: Any) -> Heard | Ignored:
    """What an `issue_comment` or `pull_request_review` delivery says (a decoded JSON
    object); `Ignored` for any other event or action, and for text that is no command."""
    if not isinstance(payload, dict):
        return Ignored(reason="the body is not a JSON object")
    if event == "issue_comment":
        return _comment(payload)
    if event == "pull_request_review":
        return _review(payload)
    return Ignored(reason=f"the {event[:40]!r} event asks nothing of waypost")


def _comment(payload: dict[str, Any]) -> Heard | Ignored:
    if payload.get("action") != "created":
        return Ignored(reason="only a new comment is read as a command")
    comment, issue = _object(payload, "comment"), _object(payload, "issue")
    return _heard("comment", payload, issue.get("number"), comment,
                  comment.get("created_at"), str(comment.get("body") or ""), review=False)


def _review(payload: dict[str, Any]) -> Heard | Ignored:
    review, pull = _object(payload, "review"), _object(payload, "pull_request")
    if payload.get("action") != "submitted":
        return Ignored(reason="only a submitted review is read")
    if str(review.get("state", "")).lower() != "approved":
        return Ignored(reason="only an approving review is read")
    return _heard("review", payload, pull.get("number"), review, review.get("submitted_at"),
                  str(review.get("body") or ""), review=True)


def _heard(kind: str, payload: dict[str, Any], number: Any, said: dict[str, Any], at: Any,
           body: str, *, review: bool) -> Heard | Ignored:
    repo = str(_object(payload, "repository").get("full_name", ""))
    login = str(_object(said, "user").get("login", ""))
    ident = said.get("id")
    if not (_REPO.fullmatch(repo) and _LOGIN.fullmatch(login) and isinstance(number, int)
            and 0 < number < 10**10 and isinstance(ident, int) and ident > 0):
        return Ignored(reason=f"the {kind} does not name its repository, number, id and "
                              "author as GitHub does")
    when = _time(at)
    if when is None:
        return Ignored(reason=f"the {kind}'s time does not read")
    place = Heard(kind=kind, repo=repo, number=number, comment=str(ident), login=login,
                  at=when, command=None)
    try:
        command = parse(body)
    except Malformed as exc:
        return msgspec.structs.replace(place, problem=str(exc))
    if review:
        return _reviewed(place, command)
    if command is None:
        return Ignored(reason="the comment is not a /waypost command")
    return msgspec.structs.replace(place, command=command)


def _reviewed(place: Heard, command: Command | None) -> Heard:
    """An approving review is `/waypost approve`, of the digest its body names (as a
    comment would, on its first line) or of none, which is refused after."""
    if command is None:
        return msgspec.structs.replace(place, command=Command(verb=Verb.APPROVE))
    if command.verb is not Verb.APPROVE:
        return msgspec.structs.replace(
            place, problem=f"an approving review can only approve, not {command.verb}")
    return msgspec.structs.replace(place, command=command)


def _object(parent: dict[str, Any], name: str) -> dict[str, Any]:
    value = parent.get(name)
    return value if isinstance(value, dict) else {}


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str) or len(value) > 40:
        return None
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo is not None else None


def delivery_id(value: str | None) -> str | None:
    """`X-GitHub-Delivery` as the answers queue keys it; None when it is not one."""
    return value if value and _DELIVERY.fullmatch(value) else None
