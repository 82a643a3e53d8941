"""`github:OWNER/REPO#N` (one sticky comment per run) and `github-status:OWNER/REPO@SHA`
(commit statuses), through GitHub's REST API (`GITHUB_TOKEN`; the base is configurable for
GitHub Enterprise: `https://HOST/api/v3`).

GitHub offers no idempotency key either. The sticky comment carries a hidden marker
(`<!-- waypost run=… delivery=… -->`); every send lists the issue's comments first (every
page) and edits the run's marked comment instead of adding another, so a retry after an
accepted-but-unanswered request edits what it made. A commit status is the latest per
context (`waypost/run`, and `waypost/<gate>` for each gate's evidence in the final result),
so posting it again changes nothing. Both receipts say `upsert`.
"""

from __future__ import annotations

import re
import urllib.parse
from abc import abstractmethod
from datetime import datetime
from typing import Any

from waypost.core.reviewed import short
from waypost.core.targets import service_parts
from waypost.delivery import document
from waypost.delivery.base import Outgoing, Target
from waypost.delivery.connections import Connections
from waypost.delivery.policy import Attempt, for_github, missing_credential, retry, sent
from waypost.delivery.rest import Answer, Api, Failed
from waypost.display import md_block
from waypost.model import DeliveryAssurance

API_VERSION = "2022-11-28"
COMMENT_PAGES = 30  # pages of 100 comments searched for the run's marker (bounded)
MAX_DESCRIPTION = 140  # GitHub's limit for a status description
NO_TOKEN = "GITHUB_TOKEN is not set (nor [delivery] github_token)"
UPSERT = DeliveryAssurance.UPSERT
_NEXT = re.compile(r'<([^>]+)>;\s*rel="next"')


def marker(run_id: str, key: str) -> str:
    return f"<!-- waypost run={run_id} delivery={key} -->"


def _run_marker(run_id: str) -> str:
    return f"<!-- waypost run={run_id} "


def api_headers(token: str) -> dict[str, str]:
    """The headers of every call to GitHub's REST API."""
    return {"authorization": f"Bearer {token}", "accept": "application/vnd.github+json",
            "x-github-api-version": API_VERSION}


class _GitHub(Target):
    def __init__(self, uri: str, *, token: str | None, api: str, timeout: float,
                 connections: Connections | None = None) -> None:
        self.uri = uri
        self.parts = service_parts(uri)
        self.token = token
        self.base = api
        self.timeout = timeout
        self.connections = connections

    @property
    def repo(self) -> str:
        return f"/repos/{self.parts['owner']}/{self.parts['repo']}"

    def send(self, outgoing: Outgoing, *, at: datetime) -> Attempt:
        if not self.token:
            return missing_credential(NO_TOKEN)
        try:
            with Api(self.base, api_headers(self.token), timeout=self.timeout, at=at,
                     connections=self.connections) as api:
                return self._send(api, outgoing, at)
        except Failed as failed:
            return failed.attempt

    @abstractmethod
    def _send(self, api: Api, outgoing: Outgoing, at: datetime) -> Attempt:
        """Send through `api` (one deadline); a failed call raises `Failed`."""


def github_ok(answer: Answer, at: datetime) -> Any:
    """The answer's JSON when GitHub said 2xx; else `Failed`, classified."""
    if answer.ok:
        return answer.data
    raise Failed(for_github(answer.status, answer.reason,
                            remaining=answer.headers.get("x-ratelimit-remaining"),
                            reset=answer.headers.get("x-ratelimit-reset"),
                            retry_after=answer.retry_after, now=at))


class GitHubCommentTarget(_GitHub):
    """One sticky comment per run on a pull request or an issue."""

    def _send(self, api: Api, outgoing: Outgoing, at: datetime) -> Attempt:
        delivery = outgoing.delivery
        where = f"{self.parts['owner']}/{self.parts['repo']}#{self.parts['number']}"
        body = comment_body(outgoing)
        found = self._find(api, delivery.run_id, at)
        if found is None:
            made = github_ok(api.call("POST", f"{self.repo}/issues/{self.parts['number']}"
                                      "/comments", body={"body": body}), at)
            ident = str(made.get("id", "")) if isinstance(made, dict) else ""
            return sent(f"GitHub: commented on {where} (comment {ident})", UPSERT,
                        {"comment": ident})
        ident, existing = found
        if existing == body:
            return sent(f"GitHub: the comment on {where} already says this (comment "
                        f"{ident})", UPSERT, {"comment": ident})
        github_ok(api.call("PATCH", f"{self.repo}/issues/comments/{ident}",
                           body={"body": body}), at)
        return sent(f"GitHub: updated the run's comment on {where} (comment {ident})",
                    UPSERT, {"comment": ident})

    def _find(self, api: Api, run_id: str, at: datetime) -> tuple[str, str] | None:
        return find_comment(api, self.repo, self.parts["number"], run_id, at)


def find_comment(api: Api, repo: str, number: str, run_id: str,
                 at: datetime) -> tuple[str, str] | None:
    """(id, body) of the run's marked comment on issue `number` of `repo` (`/repos/O/R`),
    searching every page (bounded)."""
    url = f"{repo}/issues/{number}/comments"
    params: dict[str, str] | None = {"per_page": "100"}
    for _ in range(COMMENT_PAGES):
        answer = api.call("GET", url, params=params)
        comments = github_ok(answer, at)
        for comment in comments if isinstance(comments, list) else ():
            text = str(comment.get("body") or "")
            if text.startswith(_run_marker(run_id)):  # ours: a quote of it is not
                return str(comment.get("id")), text
        following = _NEXT.search(answer.headers.get("link", ""))
        if following is None:
            return None
        url, params = following.group(1), None
        if _origin(url) != _origin(api.base):  # the token goes nowhere else
            raise Failed(retry(f"GitHub: the next page of comments is on another host "
                               f"({_origin(url)}); not following it"))
    raise Failed(retry(f"GitHub: the run's comment was not found in the first "
                       f"{COMMENT_PAGES * 100} comments; not commenting again"))


def _origin(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def comment_body(outgoing: Outgoing) -> str:
    """The final result as Markdown, or the notice, under the run's marker."""
    delivery, doc = outgoing.delivery, outgoing.document
    if doc["type"] == "final":
        text = document.markdown(doc)
    else:
        data = doc["data"]
        text = (f"**waypost** run `{data['run']}`: {md_block(data.get('message', ''))}\n\n"
                f"next: `{data['next'].replace('`', '')}`\n")
        if doc["topic"] == "ready_for_review" and data.get("reviewed"):
            text += "\n" + commands(data["run"], data["reviewed"])
    return f"{marker(delivery.run_id, delivery.key)}\n{text}"


def commands(run_id: str, digest: str) -> str:
    """The `/waypost` lines the owner may copy into a comment here to answer, each naming
    the result shown by its digest (`delivery.github_commands` reads them)."""
    shown = short(digest)
    return ("Answer here with a comment holding one of these lines (the digest names the "
            "result shown; a newer result refuses it and says what changed):\n\n"
            f"```\n/waypost review\n/waypost approve {shown}\n"
            f"/waypost changes {shown} REASON\n/waypost cancel REASON\n```\n\n"
            f"Where several runs share this thread, name the run: "
            f"`/waypost approve {run_id} {shown}`.\n")


class GitHubStatusTarget(_GitHub):
    """Commit statuses: `waypost/run`, and one per gate with the final result."""

    def __init__(self, uri: str, *, token: str | None, api: str, timeout: float,
                 board: str | None = None, connections: Connections | None = None) -> None:
        super().__init__(uri, token=token, api=api, timeout=timeout, connections=connections)
        self.board = board

    def _send(self, api: Api, outgoing: Outgoing, at: datetime) -> Attempt:
        sha = self.parts["sha"]
        statuses = status_plan(outgoing.document)
        link = (f"{self.board.rstrip('/')}/runs/{outgoing.delivery.run_id}"
                if self.board else None)
        for context, state, description in statuses:
            body = {"state": state, "context": context, "description": description}
            if link:
                body["target_url"] = link
            github_ok(api.call("POST", f"{self.repo}/statuses/{sha}", body=body), at)
        run = statuses[-1]
        return sent(f"GitHub: status {run[1]} for {run[0]} on {self.parts['owner']}/"
                    f"{self.parts['repo']}@{sha[:12]} ({len(statuses)} context(s))", UPSERT,
                    {"sha": sha})


NOTICE_STATES = {"delivery_failed": "error"}  # every other notice: still pending


def gate_state(verdict: str) -> str:
    """A gate's commit status: `success` for a passed gate only. A skipped gate did not
    run, and a skipped check is not a passed one: `failure`, its description saying
    "skipped" and why (GitHub's statuses have no neutral state, and `pending` would wait
    on the final delivery for a check that will never come)."""
    return "success" if verdict == "passed" else "failure"


def status_plan(doc: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(context, state, description) to post, `waypost/run` last."""
    data = doc["data"]
    plan: list[tuple[str, str, str]] = []
    if doc["type"] == "final":
        latest = {e["gate"]: e for e in data["evidence"] if e.get("gate")}
        for gate, evidence in sorted(latest.items()):
            plan.append((f"waypost/{gate}", gate_state(evidence["verdict"]),
                         one_line(f"{evidence['verdict']}: {evidence['summary']}")))
        plan.append(("waypost/run", "success",
                     one_line(data.get("public_summary") or f"{data['title']}: delivered")))
    else:
        plan.append(("waypost/run", NOTICE_STATES.get(doc["topic"], "pending"),
                     one_line(data.get("message", doc["topic"]))))
    return plan


def one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_DESCRIPTION else text[:MAX_DESCRIPTION - 1] + "…"
