"""The doors of `waypost serve` (the app under uvicorn in a thread, one server per door and
backend): the JSON API, the board's form posts and pages, and Claude Code's HTTP stop hook.
A status and error code become an outcome class in `http_class`; the board and the hook
read their answers into it (`board_class`, `hook_http_class`)."""

from __future__ import annotations

import contextlib
import json
import re
from typing import Any, Final

import httpx

from tests.http_support import serving
from waypost.http.auth import COOKIE
from waypost.http.board_session import csrf_token
from waypost.http.errors import status_of

from .doors_local import hook_class, stop_input
from .driver import (
    ARTIFACT,
    ERROR_OF_CODE,
    GATE,
    PUBLIC_SUMMARY,
    RETARGET,
    WAIT_S,
    Driver,
    blocker,
    check_spec,
    class_of,
    gate_check,
    gate_name,
    number_text,
    reviewed,
    seen,
    shown,
    target,
    title,
    transfer,
    worker,
)
from .named import check_http
from .terms import DEEP_LEVELS, OWNER, Actor, Call, Cls, Door, Hostile, Wire
from .world import World

# Litestar's own refusals, before any handler (a body that is not the schema's, no route)
LITESTAR_CLASSES: Final = {400: Cls.INVALID, 401: Cls.UNAUTHENTICATED, 403: Cls.REFUSED,
                           404: Cls.NOT_FOUND, 413: Cls.INVALID}


def http_class(status: int, code: str) -> Cls:
    """An HTTP error: its error code, which must come with the status the one error map
    gives it (`http.errors.STATUSES`); Litestar's own refusals by their status."""
    if code in ERROR_OF_CODE:
        assert status == status_of(ERROR_OF_CODE[code]()), f"{code} came as HTTP {status}"
        return class_of(ERROR_OF_CODE[code])
    assert status in LITESTAR_CLASSES, f"HTTP {status} ({code})"
    return LITESTAR_CLASSES[status]


def _answer(response: httpx.Response) -> Cls:
    if response.is_success:
        return Cls.OK
    error = response.json()["error"]
    check_http(error)
    return http_class(response.status_code, error["code"])


def _json_value(value: object) -> object:
    """A hostile number as a hostile client writes it (NaN and infinities included)."""
    return json.loads(value.json) if isinstance(value, Hostile) else value


class WebDoor(Driver):
    """A driver with a server of its own over the world's store."""

    def __init__(self, world: World) -> None:
        super().__init__(world)
        self.stack = contextlib.ExitStack()
        self.url = self.stack.enter_context(serving(world.url))
        self.http = self.stack.enter_context(httpx.Client(base_url=self.url, timeout=60))

    def close(self) -> None:
        self.stack.close()

    def headers(self, call: Call) -> dict[str, str]:
        secret = self.world.tokens.get(call.actor)
        if secret and call.actor is Actor.OWNER_BY_COOKIE:  # the board's cookie alone
            return {"Cookie": f"{COOKIE}={secret}"}
        return {"Authorization": f"Bearer {secret}"} if secret else {}

    def post(self, call: Call, path: str, body: dict[str, object] | None = None,
             **headers: str) -> httpx.Response:
        """POST the body as JSON, written as is (a hostile number stays NaN), or as the
        scenario's `wire` says."""
        content = b"" if body is None else json.dumps(
            {k: _json_value(v) for k, v in body.items()}).encode()
        content, typed = wired(call, content, "application/json")
        return self.http.post(path, content=content, headers={
            **self.headers(call), **headers, **typed})


def wired(call: Call, content: bytes, media: str) -> tuple[bytes, dict[str, str]]:
    """The body and its Content-Type as the scenario's `wire` sends them (else as `media`)."""
    wire = call.args.get("wire")
    if wire is None:
        return content, {"Content-Type": media}
    if wire is Wire.DEEP:
        return b"[" * DEEP_LEVELS + b"]" * DEEP_LEVELS, {"Content-Type": "application/json"}
    if wire is Wire.UNTYPED:
        return content, {}
    return content, {"Content-Type": {
        Wire.TEXT_PLAIN: "text/plain", Wire.FORM: "application/x-www-form-urlencoded",
        Wire.MULTIPART: "multipart/form-data; boundary=x"}[Wire(str(wire))]}


class HttpDoor(WebDoor):
    door = Door.HTTP

    def _command(self, call: Call, command: str, body: dict[str, object] | None = None,
                 *, epoch: bool = False) -> Cls:
        given = call.epoch() if epoch else None
        if given is not None:
            body = {**(body or {}), "epoch": given}
        return _answer(self.post(call, f"/api/runs/{call.ctx.run}/{command}", body))

    def start(self, call: Call) -> Cls:
        body: dict[str, object] = {
            "title": title(call), "owner": OWNER, "target": target(call),
            "kind": "long_running", "max_silence": number_text(call, "max_silence", "1h")}
        if worker(call) is not None:
            body["worker"] = worker(call)
        for arg in ("expect", "deadline"):
            given = number_text(call, arg, None)
            body.update({arg: given} if given is not None else {})
        key = {"Idempotency-Key": call.ctx.key} if call.ctx.key else {}
        return _answer(self.post(call, "/api/runs", body, **key))

    def claim(self, call: Call) -> Cls:
        return self._command(call, "claim")

    def resume(self, call: Call) -> Cls:
        return self._command(call, "resume")

    def heartbeat(self, call: Call) -> Cls:
        progress = call.hostile("progress") or 0.5
        return self._command(call, "heartbeat", {"note": "reproduced it", "progress": progress},
                             epoch=True)

    def block(self, call: Call) -> Cls:
        return self._command(call, "block", {"kind": "failed_command", "detail":
                                             "the build server refuses connections"}, epoch=True)

    def unblock(self, call: Call) -> Cls:
        return self._command(call, "unblock", {"blocker": blocker(call),
                                               "resolution": "resolved it"}, epoch=True)

    def artifact(self, call: Call) -> Cls:
        epoch = call.epoch()
        query: dict[str, Any] = {"role": "report"}
        query.update({"epoch": epoch} if isinstance(epoch, int) else {})
        content, typed = wired(call, ARTIFACT, "application/octet-stream")
        return _answer(self.http.post(f"/api/runs/{call.ctx.run}/artifacts/notes.md",
                                      params=query, content=content,
                                      headers={**self.headers(call), **typed}))

    def skip(self, call: Call) -> Cls:
        return self._command(call, "evidence", {"kind": "test", "reason":
                                                "no staging credentials here"}, epoch=True)

    def report(self, call: Call) -> Cls:
        return self._command(call, "evidence", {"kind": "test", "verdict": "passed",
                                                "summary": "pytest -q: 42 passed"}, epoch=True)

    def check(self, call: Call) -> Cls:
        return self._command(call, "evidence", {"check": check_spec(call)}, epoch=True)

    def command(self, call: Call) -> Cls:
        return self._command(call, "evidence", {"kind": "test", "argv":
                                                ["touch", str(call.ctx.side)]}, epoch=True)

    def ready(self, call: Call) -> Cls:
        return self._command(call, "ready", {"summary": "fixed: the session comes first"},
                             epoch=True)

    def review(self, call: Call) -> Cls:
        return self._command(call, "review")

    def approve(self, call: Call) -> Cls:
        return self._command(call, "approve", {"waivers": {}, **self._reviewed(call)})

    def changes(self, call: Call) -> Cls:
        return self._command(call, "changes", {"reason": "add a test for the empty case",
                                               **self._reviewed(call)})

    def _reviewed(self, call: Call) -> dict[str, str]:
        digest = reviewed(call, self.world)
        return {} if digest is None else {"reviewed": digest}

    def transfer(self, call: Call) -> Cls:
        authority, to = transfer(call)
        return self._command(call, "transfer", {"authority": authority, "to": to})

    def cancel(self, call: Call) -> Cls:
        return self._command(call, "cancel", {"reason": "the test was deleted upstream"})

    def retarget(self, call: Call) -> Cls:
        return self._command(call, "retarget", {"target": target(call, RETARGET)})

    def add_gate(self, call: Call) -> Cls:
        return self._command(call, "gates", {"name": GATE, "check": gate_check(call)},
                             epoch=True)

    def adopt_gate(self, call: Call) -> Cls:
        return self._command(call, "gates/adopt", {"name": gate_name(call)})

    def read(self, call: Call) -> Cls:
        """The packet; of a `private` run, also its events, its A2A task and its artifact's
        bytes (a refusal of the bytes shows nothing of them)."""
        run, headers = call.ctx.run, self.headers(call)
        packet = self.http.get(f"/api/runs/{run}", headers=headers)
        if not packet.is_success or PUBLIC_SUMMARY not in packet.text:
            return _answer(packet)
        answers = [self.http.get(path, headers=headers)
                   for path in (f"/api/runs/{run}/events", f"/a2a/tasks/{run}")]
        assert all(a.status_code == 200 for a in answers), [a.text for a in answers]
        download = self.http.get(f"/api/runs/{run}/artifacts/notes.md", headers=headers)
        assert download.status_code in (200, 403), download.text
        shown = download.text if download.status_code == 200 else ""
        return seen(packet.text, *(a.text for a in answers), shown)

    def list(self, call: Call) -> Cls:
        return _answer(self.http.get("/api/runs", headers=self.headers(call)))

    def wait(self, call: Call) -> Cls:
        answer = self.http.get(f"/api/runs/{call.ctx.run}", params={"wait": f"{WAIT_S}s"},
                               headers=self.headers(call))
        if answer.is_success:
            assert answer.headers["Waypost-Wait"] == "reached", answer.headers
        return _answer(answer)

    def inbox(self, call: Call) -> Cls:
        listed = self.http.get("/api/inbox", headers=self.headers(call))
        if not listed.is_success:
            return _answer(listed)
        return _answer(self.post(call, "/api/inbox/ack"))


# --- the board ----------------------------------------------------------------------------

ERROR_ON_PAGE: Final = re.compile(r'<p class="error" role="alert"><strong>([a-z_]+)</strong>')


def board_class(response: httpx.Response) -> Cls:
    """A board answer: a page, a redirect after an action (to the run: done; to the
    sign-in form: no token), or a page showing the refusal's code."""
    if response.status_code == 303:
        sign_in = response.headers["location"].startswith("/login")
        return Cls.UNAUTHENTICATED if sign_in else Cls.OK
    if response.status_code == 200:
        return Cls.OK
    found = ERROR_ON_PAGE.search(response.text)
    assert found, f"a board page answered {response.status_code} without an error"
    return http_class(response.status_code, found.group(1))


class BoardDoor(WebDoor):
    """A browser signed in with the actor's token (the board's cookie), posting the run
    page's forms with the page's CSRF token."""

    door = Door.BOARD

    def _client(self, call: Call) -> httpx.Client:
        client = httpx.Client(base_url=self.url, timeout=60, follow_redirects=False)
        secret = self.world.tokens.get(call.actor)
        if secret:
            client.cookies.set("waypost_token", secret)
        return client

    def _act(self, call: Call, action: str, fields: dict[str, str] | None = None) -> Cls:
        secret = self.world.tokens.get(call.actor)
        form = {**(fields or {}), "csrf": csrf_token(secret) if secret else ""}
        with self._client(call) as client:
            return board_class(client.post(f"/runs/{call.ctx.run}/{action}", data=form))

    def _page(self, call: Call, path: str) -> Cls:
        with self._client(call) as client:
            return board_class(client.get(path))

    def review(self, call: Call) -> Cls:
        return self._act(call, "review")

    def approve(self, call: Call) -> Cls:
        return self._act(call, "approve", {"reviewed": self._page_digest(call)})

    def changes(self, call: Call) -> Cls:
        return self._act(call, "changes", {"reason": "add a test for the empty case",
                                           "reviewed": self._page_digest(call)})

    def _page_digest(self, call: Call) -> str:
        """The digest the run page's answer forms carry (the scenario's, if it names one)."""
        return reviewed(call, self.world) or shown(self.world, call.ctx.run)

    def cancel(self, call: Call) -> Cls:
        return self._act(call, "cancel", {"reason": "the test was deleted upstream"})

    def adopt_gate(self, call: Call) -> Cls:
        return self._act(call, "adopt", {"gate": gate_name(call)})

    def unblock(self, call: Call) -> Cls:
        return self._act(call, "unblock", {"blocker": blocker(call),
                                           "resolution": "resolved it"})

    def transfer(self, call: Call) -> Cls:
        authority, to = transfer(call)
        return self._act(call, "transfer", {"authority": authority, "to": to})

    def read(self, call: Call) -> Cls:
        """The run page; of a `private` run, also its artifact's download link."""
        with self._client(call) as client:
            page = client.get(f"/runs/{call.ctx.run}")
            if page.status_code != 200 or PUBLIC_SUMMARY not in page.text:
                return board_class(page)
            download = client.get(f"/runs/{call.ctx.run}/artifacts/notes.md")
        assert download.status_code in (200, 403), download.text
        return seen(page.text, download.text if download.status_code == 200 else "")

    def list(self, call: Call) -> Cls:
        return self._page(call, "/")


class HookHttpDoor(WebDoor):
    door = Door.HOOK_HTTP

    def stop(self, call: Call) -> Cls:
        content, typed = wired(call, stop_input(call.ctx.session), "application/json")
        response = self.http.post("/hooks/claude/stop", content=content,
                                  headers={**self.headers(call), **typed})
        if response.status_code != 200:
            return _answer(response)
        return hook_class(response.json())
