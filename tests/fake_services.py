"""Local stand-ins for the Slack Web API and GitHub's REST API, on 127.0.0.1, speaking
their documented request and response shapes (Slack: HTTP 200 with `ok: true|false` and an
`error`, 429 with Retry-After, `metadata` and `blocks` on messages (a chat.update without
blocks keeps them), `include_all_metadata`, cursors;
GitHub: Bearer tokens, `Link: <…>; rel="next"` pages, 401 Bad credentials, 404 Not Found,
403 with x-ratelimit-remaining 0). Both fail on command:

    "500"             answer 500, change nothing
    "429"             answer 429 with Retry-After: 1, change nothing
    "ratelimit"       GitHub: 403 with x-ratelimit-remaining 0 (Slack: as 429)
    "drop"            close the connection without answering, change nothing
    "accept_drop"     do the request, then close the connection without answering
    "accept_timeout"  do the request, then say nothing until the client gives up

A fault is scripted (`fail(path_part, kind, method)`: the next request whose path holds
`path_part`) or drawn at random (`rate`, for the fault campaign)."""

from __future__ import annotations

import json
import random
import re
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.delivery_support import QuietServer, served

Answer = tuple[int, dict[str, str], Any]
FAULTS = ("500", "429", "drop", "accept_drop", "accept_timeout")
HANG = 4.0  # seconds an "accept_timeout" answer is held back (past the tests' timeouts)


class FaultyApi:
    """A JSON API on 127.0.0.1 that fails on command; subclasses `route` requests."""

    def __init__(self, token: str, *, rate: float = 0.0, seed: int = 0,
                 faults: tuple[str, ...] = FAULTS) -> None:
        self.token = token
        self.rate = rate
        self.faults = faults
        self.rng = random.Random(seed)
        self.script: list[tuple[str | None, str, str]] = []  # (method, path part, fault)
        self.raw = b""  # the body of the request being routed, as sent
        self.lock = threading.Lock()
        self.requests: list[tuple[str, str]] = []  # (method, path) of every request
        self.faulted: list[tuple[str, str]] = []  # (path, fault) of every fault made
        self.httpd = QuietServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def fail(self, path_part: str, kind: str, method: str | None = None) -> None:
        with self.lock:
            self.script.append((method, path_part, kind))

    def _fault(self, method: str, path: str) -> str | None:
        with self.lock:
            index = next((i for i, (verb, part, _) in enumerate(self.script)
                          if part in path and verb in (None, method)), None)
            if index is not None:
                kind = self.script.pop(index)[2]
            else:
                kind = self.rng.choice(self.faults) if self.rng.random() < self.rate else ""
            if kind:
                self.faulted.append((path, kind))
            return kind or None

    def route(self, method: str, path: str, query: dict[str, str], body: Any,
              headers: dict[str, str]) -> Answer:
        raise NotImplementedError

    def limited(self, kind: str) -> Answer:
        """The answer of a "429" or "ratelimit" fault."""
        return 429, {"retry-after": "1"}, {"ok": False, "error": "ratelimited"}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                parts = urllib.parse.urlsplit(self.path)
                query = dict(urllib.parse.parse_qsl(parts.query))
                raw = self.rfile.read(int(self.headers.get("content-length", "0") or 0))
                body = json.loads(raw) if raw else None
                headers = {k.lower(): v for k, v in self.headers.items()}
                with api.lock:
                    api.requests.append((self.command, parts.path))
                fault = api._fault(self.command, parts.path)
                if fault == "drop":
                    self.close_connection = True
                    return
                if fault in ("500", "429", "ratelimit"):
                    answer = (500, {}, {"message": "boom"}) if fault == "500" else \
                        api.limited(fault)
                    self._answer(answer)
                    return
                with api.lock:
                    api.raw = raw
                    answer = api.route(self.command, parts.path, query, body, headers)
                if fault == "accept_timeout":
                    time.sleep(HANG)
                if fault in ("accept_drop", "accept_timeout"):
                    self.close_connection = True
                    return
                self._answer(answer)

            def _answer(self, answer: Answer) -> None:
                status, headers, data = answer
                payload = json.dumps(data).encode()
                self.send_response(status)
                for name, value in {"content-type": "application/json", **headers}.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PATCH = _serve

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler

    @contextmanager
    def running(self) -> Iterator[Any]:
        with served(self.httpd):
            yield self


class FakeSlack(FaultyApi):
    """Channels of messages; `chat.postMessage`, `chat.update`, `conversations.history`
    and `conversations.replies` as the Web API documents them."""

    def __init__(self, token: str, channels: tuple[str, ...] = ("C0WAYPOST1",),
                 **faults: Any) -> None:
        super().__init__(token, **faults)
        self.channels: dict[str, list[dict[str, Any]]] = {c: [] for c in channels}
        self.counter = 0
        self.history_limited = 0  # this many history/replies calls answer 429 first
        self.hook_posts: list[str] = []  # texts posted to the incoming webhook
        self.updates: list[dict[str, Any]] = []  # each message as a chat.update left it
        self.hook = f"{self.url}/services/T0WAY/B0POST/not-a-real-secret"

    def messages(self, run_id: str | None = None) -> list[dict[str, Any]]:
        with self.lock:
            found = [m for ms in self.channels.values() for m in ms]
        return [m for m in found if run_id is None or
                m.get("metadata", {}).get("event_payload", {}).get("run") == run_id]

    def route(self, method: str, path: str, query: dict[str, str], body: Any,
              headers: dict[str, str]) -> Answer:
        if path.startswith("/services/"):  # an incoming webhook: no token, no answer body
            if path != urllib.parse.urlsplit(self.hook).path:
                return 404, {}, "no_service"
            self.hook_posts.append(body["text"])
            return 200, {}, "ok"
        if headers.get("authorization") != f"Bearer {self.token}":
            return 200, {}, {"ok": False, "error": "invalid_auth"}
        args = {**query, **(body or {})}
        channel = self.channels.get(str(args.get("channel")))
        if channel is None:
            return 200, {}, {"ok": False, "error": "channel_not_found"}
        name = path.rsplit("/", 1)[-1]
        if name in ("conversations.history", "conversations.replies") and self.history_limited:
            self.history_limited -= 1
            return 429, {"retry-after": "30"}, {"ok": False, "error": "ratelimited"}
        handler = {"chat.postMessage": self._post, "chat.update": self._update,
                   "conversations.history": self._history,
                   "conversations.replies": self._replies}.get(name)
        if handler is None:
            return 200, {}, {"ok": False, "error": "unknown_method"}
        return 200, {}, handler(channel, args)

    def _post(self, channel: list[dict[str, Any]], args: dict[str, Any]) -> Any:
        self.counter += 1
        message = {"type": "message", "ts": f"{1700000000 + self.counter}.{self.counter:06d}",
                   "text": args.get("text", ""), "metadata": args.get("metadata")}
        if args.get("thread_ts"):
            message["thread_ts"] = args["thread_ts"]
        if args.get("blocks") is not None:
            message["blocks"] = args["blocks"]
        channel.append(message)
        return {"ok": True, "channel": args["channel"], "ts": message["ts"], "message": message}

    def _update(self, channel: list[dict[str, Any]], args: dict[str, Any]) -> Any:
        message = next((m for m in channel if m["ts"] == args.get("ts")), None)
        if message is None:
            return {"ok": False, "error": "message_not_found"}
        message["text"] = args.get("text", "")
        if args.get("blocks") is not None:  # left out: the message keeps its blocks
            message["blocks"] = args["blocks"]
        if args.get("metadata"):
            message["metadata"] = args["metadata"]
        self.updates.append(dict(message))
        return {"ok": True, "channel": args["channel"], "ts": message["ts"],
                "text": message["text"]}

    def _history(self, channel: list[dict[str, Any]], args: dict[str, Any]) -> Any:
        top = [m for m in reversed(channel) if "thread_ts" not in m]
        return self._page(top, args)

    def _replies(self, channel: list[dict[str, Any]], args: dict[str, Any]) -> Any:
        thread = [m for m in channel if args.get("ts") in (m["ts"], m.get("thread_ts"))]
        return self._page(thread, args)

    def _page(self, found: list[dict[str, Any]], args: dict[str, Any]) -> Any:
        start, size = int(args.get("cursor") or 0), min(int(args.get("limit", 100)), 15)
        shown = [m if args.get("include_all_metadata") == "true" else
                 {k: v for k, v in m.items() if k != "metadata"}
                 for m in found[start:start + size]]
        more = start + size < len(found)
        return {"ok": True, "messages": shown, "has_more": more,
                "response_metadata": {"next_cursor": str(start + size) if more else ""}}


class FakeGitHub(FaultyApi):
    """Repositories with issue comments and commit statuses, under `prefix` (GitHub
    Enterprise serves the API under /api/v3)."""

    PAGE = 100

    def __init__(self, token: str, repos: tuple[str, ...] = ("octo/app",), *,
                 prefix: str = "", **faults: Any) -> None:
        super().__init__(token, **faults)
        self.repos = set(repos)
        self.prefix = prefix
        self.comments: dict[tuple[str, int], list[dict[str, Any]]] = {}
        self.statuses: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.pulls: dict[tuple[str, int], str] = {}  # a pull request's head sha
        self.reactions: dict[int, list[str]] = {}  # a comment's reactions, in order
        self.counter = 0
        self.api = self.url + prefix
        self.login = "waypost-bot"  # whom the token comments as

    def limited(self, kind: str) -> Answer:
        if kind == "429":
            return 429, {"retry-after": "1"}, {"message": "secondary rate limit"}
        reset = str(int(time.time()) + 1)
        return 403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": reset}, \
            {"message": "API rate limit exceeded"}

    def seed_comments(self, repo: str, number: int, count: int) -> None:
        for n in range(count):
            self._add(repo, number, f"someone else's comment {n}")

    def _add(self, repo: str, number: int, body: str, login: str | None = None
             ) -> dict[str, Any]:
        self.counter += 1
        comment = {"id": 1000 + self.counter, "body": body,
                   "user": {"login": login or self.login, "type": "User"},
                   "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                   "html_url": f"https://github.example/{repo}/issues/{number}"}
        self.comments.setdefault((repo, number), []).append(comment)
        return comment

    def route(self, method: str, path: str, query: dict[str, str], body: Any,
              headers: dict[str, str]) -> Answer:
        if headers.get("authorization") != f"Bearer {self.token}":
            return 401, {}, {"message": "Bad credentials"}
        found = re.fullmatch(re.escape(self.prefix) + r"/repos/([^/]+/[^/]+)/(.+)", path)
        if found is None or found.group(1) not in self.repos:
            return 404, {}, {"message": "Not Found"}
        repo, rest = found.groups()
        if (m := re.fullmatch(r"issues/(\d+)/comments", rest)) and method == "GET":
            return self._list(repo, int(m.group(1)), path, query)
        if m and method == "POST":
            return 201, {}, self._add(repo, int(m.group(1)), body["body"])
        if (m := re.fullmatch(r"issues/comments/(\d+)", rest)) and method == "PATCH":
            for comment in (c for cs in self.comments.values() for c in cs):
                if comment["id"] == int(m.group(1)):
                    comment["body"] = body["body"]
                    return 200, {}, comment
            return 404, {}, {"message": "Not Found"}
        if (m := re.fullmatch(r"issues/comments/(\d+)/reactions", rest)) and method == "POST":
            return self._react(int(m.group(1)), body)
        if (m := re.fullmatch(r"pulls/(\d+)", rest)) and method == "GET":
            sha = self.pulls.get((repo, int(m.group(1))))
            if sha is None:  # an issue, or nothing: GitHub answers 404 for both
                return 404, {}, {"message": "Not Found"}
            return 200, {}, {"number": int(m.group(1)), "state": "open",
                             "head": {"sha": sha, "ref": "feature"}}
        if (m := re.fullmatch(r"statuses/([0-9a-f]{40})", rest)) and method == "POST":
            status = {**body, "id": len(self.statuses) + 1}
            self.statuses.setdefault((repo, m.group(1)), []).append(status)
            return 201, {}, status
        return 404, {}, {"message": "Not Found"}

    def _list(self, repo: str, number: int, path: str, query: dict[str, str]) -> Answer:
        comments = self.comments.get((repo, number), [])
        page, size = int(query.get("page", 1)), min(int(query.get("per_page", 30)), 100)
        shown = comments[(page - 1) * size: page * size]
        headers = {}
        if page * size < len(comments):
            headers["link"] = (f'<{self.url}{path}?per_page={size}&page={page + 1}>; '
                               f'rel="next", <{self.url}{path}?page=9999>; rel="last"')
        return 200, headers, shown

    def run_comments(self, run_id: str) -> list[dict[str, Any]]:
        with self.lock:
            return [c for cs in self.comments.values() for c in cs
                    if f"<!-- waypost run={run_id} " in c["body"]]

    REACTIONS = ("+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes")

    def _react(self, ident: int, body: Any) -> Answer:
        """A reaction on an issue comment: 201 made, 200 when this one was there already,
        422 for content GitHub does not take, 404 for no such comment."""
        if not any(c["id"] == ident for cs in self.comments.values() for c in cs):
            return 404, {}, {"message": "Not Found"}
        content = (body or {}).get("content")
        if content not in self.REACTIONS:
            return 422, {}, {"message": "Validation Failed"}
        made = {"id": ident * 10, "content": content, "user": {"login": self.login}}
        if content in self.reactions.get(ident, []):
            return 200, {}, made
        self.reactions.setdefault(ident, []).append(content)
        return 201, {}, made

    def say(self, repo: str, number: int, login: str, body: str) -> dict[str, Any]:
        """A comment someone writes in the thread (on GitHub, by hand)."""
        with self.lock:
            return self._add(repo, number, body, login)

    def thread(self, repo: str, number: int) -> list[dict[str, Any]]:
        with self.lock:
            return [dict(c) for c in self.comments.get((repo, number), [])]


class Hookshot:
    """GitHub's side of a webhook: deliveries of `issue_comment`, `pull_request_review`
    and `ping` in the documented payload shapes, signed as GitHub signs them
    (`X-Hub-Signature-256`: `sha256=` and the HMAC-SHA256 of the body sent, hex) and sent
    to `url` with `X-GitHub-Event` and `X-GitHub-Delivery`."""

    def __init__(self, url: str, secret: str) -> None:
        self.url = url
        self.secret = secret
        self.sent = 0

    @staticmethod
    def signature(secret: str, body: bytes) -> str:
        import hashlib
        import hmac

        return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()

    def send(self, event: str, payload: Any, *, delivery: str | None = None,
             signature: str | None = None) -> Any:
        import uuid

        import httpx

        body = json.dumps(payload).encode()
        self.sent += 1
        headers = {"content-type": "application/json", "user-agent": "GitHub-Hookshot/1",
                   "x-github-event": event,
                   "x-github-delivery": delivery or str(uuid.uuid4()),
                   "x-github-hook-id": "1",
                   "x-hub-signature-256": signature or self.signature(self.secret, body)}
        return httpx.post(self.url, content=body, headers=headers, timeout=30)

    @staticmethod
    def repository(repo: str) -> dict[str, Any]:
        owner, name = repo.split("/")
        return {"id": 1, "name": name, "full_name": repo, "owner": {"login": owner}}

    @classmethod
    def comment(cls, repo: str, number: int, comment: dict[str, Any], *,
                pull: bool = True) -> dict[str, Any]:
        """`issue_comment` (created) for `comment`, as the fake keeps it."""
        issue: dict[str, Any] = {"number": number, "title": "a change", "state": "open",
                                 "user": {"login": "someone"}}
        if pull:
            issue["pull_request"] = {"url": f"https://api.github.example/repos/{repo}/pulls/"
                                            f"{number}"}
        return {"action": "created", "issue": issue, "comment": comment,
                "repository": cls.repository(repo), "sender": comment["user"]}

    @classmethod
    def review(cls, repo: str, number: int, login: str, body: str, *, ident: int = 77,
               state: str = "approved", sha: str = "0" * 40) -> dict[str, Any]:
        """`pull_request_review` (submitted)."""
        review = {"id": ident, "body": body, "state": state, "commit_id": sha,
                  "user": {"login": login, "type": "User"},
                  "submitted_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        return {"action": "submitted", "review": review,
                "pull_request": {"number": number, "head": {"sha": sha}},
                "repository": cls.repository(repo), "sender": review["user"]}
