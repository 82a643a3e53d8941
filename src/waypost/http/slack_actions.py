"""`POST /slack/actions`: the Request URL of a Slack app's Interactivity, where Slack sends
a click on a button of a waypost message. Authenticated by Slack's signature, not a token.

What is decided, in this order, before anything is stored: the signing secret is set
(`SLACK_SIGNING_SECRET`; else 503), the body is a form (415) of at most `MAX_BODY` bytes
(413), its signature and timestamp are Slack's (`delivery.slack_requests`; else 401), its
payload is a waypost button's (else 422; another app's click: 200 and nothing), and the
Slack user is mapped to a waypost actor (`[answers.slack]`; else 200 with an ephemeral
text, nothing stored). Then the answer is stored under the interaction's own key, so Slack
retrying it, or anyone replaying it, acts once, and the route answers at once: Slack waits
three seconds. The work is done after, by the server's answers thread, which updates the
message with the outcome (`http.slack_replies`).
"""

from __future__ import annotations

import os
import time
from typing import Any, Final

from anyio import to_thread
from litestar import Request, Response, post

from waypost.delivery import slack_requests
from waypost.delivery.slack_requests import Interaction
from waypost.http import edge
from waypost.http.answering import hand_over
from waypost.http.api_files import read_at_most
from waypost.http.deps import ConfigDep, StoreDep
from waypost.http.errors import document
from waypost.usecases.answers import Action, Answer, mapped

FORM: Final = ("application/x-www-form-urlencoded",)


@post("/slack/actions", status_code=200, include_in_schema=False, request_max_body_size=None,
      opt=edge.takes(*FORM))
async def slack_actions(request: Request[Any, Any, Any], store: StoreDep,
                        config: ConfigDep) -> Response[Any]:
    secret = os.environ.get(slack_requests.SECRET_ENV)
    if not secret:
        return Response(document(
            "not_configured", f"{slack_requests.SECRET_ENV} is not set: this server cannot "
            "tell Slack's requests from forged ones, so it takes none; nothing was done",
            hint=f"set {slack_requests.SECRET_ENV} to the Slack app's Signing Secret and "
            "restart waypost serve"), status_code=503)
    edge.media(request, FORM, sent_body=True)
    body = await read_at_most(request, slack_requests.MAX_BODY)
    slack_requests.verify(secret, request.headers.get("x-slack-request-timestamp"), body,
                          request.headers.get("x-slack-signature"), now=time.time())
    clicked = slack_requests.interaction(body)
    if clicked is None:
        return Response(b"", status_code=200)
    if mapped(config.project, "slack", clicked.user) is None:
        return Response({"response_type": "ephemeral", "replace_original": False,
                         "text": f"<@{clicked.user}> is not mapped to a waypost actor "
                         "([answers.slack] in waypost.toml): nothing was done"})
    answer = answer_of(clicked)
    await to_thread.run_sync(hand_over, request.app.state, store, answer)
    return Response(b"", status_code=200)


def answer_of(clicked: Interaction) -> Answer:
    """The answer a click gives (a reason left empty is decided where every answer is:
    `usecases.answers`)."""
    return Answer(source="slack", key=clicked.key, user=clicked.user,
                  action=Action(clicked.action), run=clicked.run, reviewed=clicked.reviewed,
                  text=clicked.text,
                  blocker=clicked.blocker, at=clicked.at,
                  reply={"channel": clicked.channel, "ts": clicked.ts,
                         "text": clicked.shown[:slack_requests.MAX_SHOWN]})
