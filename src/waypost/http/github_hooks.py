"""`POST /github/webhook`: GitHub's webhook deliveries (`issue_comment`,
`pull_request_review`, `ping`), so a `/waypost` comment on a run's pull request or issue
answers the run.

Not behind the bearer token: a delivery is authenticated by its signature. In this order,
before anything is stored: the secret (`GITHUB_WEBHOOK_SECRET`; unset, every delivery is
refused 503), the media type (JSON, 415), the size (413), the signature over the raw
bytes (`X-Hub-Signature-256`, 401), the delivery id (400); only then is the body decoded.
A `ping` is answered 200; any other event, or a comment that is no command, 200 with why it
was ignored. A command is decided (`usecases.github_answers.decide`) and, when it is an
answer, accepted under `github:<X-GitHub-Delivery>` (202; a redelivery: 200, nothing more)
and carried out after by the server's answers thread, which shows the outcome in the thread.
A command refused before it is stored (it does not read, or it names no run where several
share the thread) is shown there after the response, once per delivery this process saw.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections import OrderedDict
from typing import Any, Final

import msgspec
from anyio import to_thread
from litestar import Request, Response, post
from litestar.background_tasks import BackgroundTask
from litestar.openapi.datastructures import ResponseSpec

from waypost import inputs
from waypost.delivery import github_commands as hub
from waypost.durations import utcnow
from waypost.errors import InvalidInput, Unauthenticated
from waypost.http import edge
from waypost.http.answering import delivery_settings, hand_over
from waypost.http.api_files import read_at_most
from waypost.http.deps import ConfigDep, StoreDep
from waypost.http.errors import ERRORS, ErrorDocument, document
from waypost.http.settings import ServerConfig
from waypost.usecases import github_answers


class HookReceipt(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What the server made of a delivery (GitHub shows it under the webhook's Recent
    Deliveries)."""

    ok: bool
    accepted: bool | None = None  # an answer: stored now (202), or before (200)
    key: str | None = None  # the stored answer's key (github:comment:ID, github:review:ID)
    run: str | None = None
    action: str | None = None
    ignored: str | None = None  # why it asks nothing of waypost
    refused: str | None = None  # why the command was refused before it was stored
    code: str | None = None  # the refusal's code (invalid_input, not_authorized, …)
    said: str | None = None


RESPONSES: Final = {
    200: ResponseSpec(HookReceipt, description="A ping, a delivery that asks nothing of waypost "
                      "(and why), one taken before, or a command refused before it was "
                      "stored (and why).", generate_examples=False),
    202: ResponseSpec(HookReceipt, description="The command was accepted: it is carried out "
                      "after, and its outcome shown in the thread.", generate_examples=False),
    **{status: ERRORS[status] for status in (400, 413, 415, 422)},
    401: ResponseSpec(ErrorDocument, generate_examples=False, description=(
        "X-Hub-Signature-256 is not GitHub's signature of the body with this server's "
        "secret.")),
    503: ResponseSpec(ErrorDocument, generate_examples=False, description=(
        "GITHUB_WEBHOOK_SECRET is not set on this server: no delivery is taken.")),
}
MAX_BODY: Final = 2 * 1024 * 1024  # bytes; a comment's or a review's delivery is far less
REMEMBERED: Final = 1_000  # delivery ids whose refusal this process has shown
log = logging.getLogger("waypost.answers")
NO_SECRET: Final = (f"{hub.SECRET_ENV} is not set on this server: no GitHub webhook is "
                    "taken; nothing was done")


@post("/github/webhook", status_code=200, tags=["answers"], opt=edge.takes(*edge.JSON),
      request_max_body_size=None, responses=RESPONSES, summary="GitHub's webhook: a "
      "`/waypost` command on a run's pull request or issue, authenticated by "
      "X-Hub-Signature-256")
async def github_webhook(request: Request[Any, Any, Any], store: StoreDep,
                         config: ConfigDep) -> Response[Any]:
    secret = os.environ.get(hub.SECRET_ENV, "")
    if not secret:
        return Response(document("not_configured", NO_SECRET,
                                 f"set {hub.SECRET_ENV} to the webhook's secret"),
                        status_code=503)
    edge.media(request, request.route_handler.opt.get(edge.TAKES, edge.JSON))
    body = await read_at_most(request, MAX_BODY)
    if not hub.verify(secret, body, request.headers.get(hub.SIGNATURE_HEADER)):
        raise Unauthenticated("the delivery's X-Hub-Signature-256 is not GitHub's signature "
                              "of its body with this server's secret; nothing was done",
                              hint=f"give the webhook the secret in {hub.SECRET_ENV}")
    event = request.headers.get(hub.EVENT_HEADER, "")[:100]
    delivery = hub.delivery_id(request.headers.get(hub.DELIVERY_HEADER))
    if delivery is None:
        raise InvalidInput("the delivery has no X-GitHub-Delivery id; nothing was done")
    if event == "ping":
        return Response(HookReceipt(ok=True, said="pong: this server takes the webhook"))
    inputs.nesting(body, "the delivery")
    try:
        payload = json.loads(body)
    except ValueError as exc:
        raise InvalidInput("the delivery's body is not JSON; nothing was done") from exc
    heard = hub.heard(event, payload)
    if isinstance(heard, hub.Ignored):
        return Response(HookReceipt(ok=True, ignored=heard.reason))
    project = config.project
    decided = await to_thread.run_sync(
        lambda: github_answers.decide(store, project, heard))
    if isinstance(decided, hub.Ignored):
        return Response(HookReceipt(ok=True, ignored=decided.reason))
    if isinstance(decided, github_answers.Replayed):
        return Response(HookReceipt(ok=True, accepted=False, key=decided.key,
                                    said="this comment was answered before; nothing more "
                                    "is done"))
    if isinstance(decided, github_answers.Refusal):
        return _refused(request, heard, decided, delivery)
    state = request.app.state
    handed = await to_thread.run_sync(lambda: hand_over(state, store, decided, show=False))
    if handed.refusal is not None:  # refused by the run's rules now: nothing was stored
        if _first_time(request, delivery):  # a redelivery is not answered twice
            state.answerer.show(decided, handed.refusal)
        return Response(HookReceipt(ok=False, run=decided.run, action=str(decided.action),
                                    refused=handed.refusal.said, code=handed.refusal.code))
    fresh = handed.accepted
    return Response(HookReceipt(ok=True, accepted=fresh, key=decided.key, run=decided.run,
                            action=str(decided.action)), status_code=202 if fresh else 200)


def _refused(request: Request[Any, Any, Any], heard: hub.Heard,
             refusal: github_answers.Refusal, delivery: str) -> Response[HookReceipt]:
    said = HookReceipt(ok=False, refused=refusal.said, code="invalid_input")
    if not _first_time(request, delivery):
        return Response(said)
    task = BackgroundTask(_show_refusal, request.app.state.config, heard, refusal)
    return Response(said, background=task)


def _show_refusal(config: ServerConfig, heard: hub.Heard,
                  refusal: github_answers.Refusal) -> None:
    """Shown after the response, in a thread (best effort: nothing was stored)."""
    problems = github_answers.show_refusal(delivery_settings(config), heard, refusal,
                                           at=utcnow())
    if problems:
        log.warning("github: could not show a refusal in %s#%s: %s", heard.repo,
                    heard.number, "; ".join(problems))


_remembered_lock = threading.Lock()


def _first_time(request: Request[Any, Any, Any], delivery: str) -> bool:
    """Whether this process has not shown a refusal of `delivery` yet (bounded memory)."""
    state = request.app.state
    with _remembered_lock:
        seen = state.get("github_refused")
        if not isinstance(seen, OrderedDict):
            seen = state["github_refused"] = OrderedDict()
        if delivery in seen:
            return False
        seen[delivery] = True
        while len(seen) > REMEMBERED:
            seen.popitem(last=False)
        return True
