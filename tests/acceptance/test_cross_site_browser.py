"""A page of another site cannot write through the board's sign-in (README, "What a request
must be"), in a real browser: the owner signs in to the board as it really happens (the
sign-in form sets the board's cookie), then opens a page served from another port of
127.0.0.1 (the same site: SameSite=Strict does not keep the cookie from its requests).
That page tries every write the server offers (each POST route of the OpenAPI document,
the hook route, and the board's own action forms) every way a page may send one without
the server's consent: fetch with `credentials: "include"` as text/plain, form-encoded,
multipart and untyped bodies, a preflighted JSON fetch, and HTML forms (text/plain and
form-encoded) posted into frames. None succeeds: the store is the same, row for row.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Final

import waypost
from tests.acceptance.test_board_browser import CHROMIUM, FLAGS, LIVE_MS, _require_browser
from tests.board_support import Server
from tests.helpers import dump_store
from waypost.http.app import create_app
from waypost.http.settings import ServerConfig
from waypost.store import open_store
from waypost.usecases import tokens

RUN: Final = "{run_id}"
# a body each write route takes (what would succeed with the owner's token); a POST route
# added to the API without a line here fails the test, so that it is tried too
BODIES: Final[dict[str, object]] = {
    "/api/runs": {"title": "Planted by another site", "owner": "alice", "target": "none:",
                  "kind": "long_running", "max_silence": "1h"},
    f"/api/runs/{RUN}/claim": {}, f"/api/runs/{RUN}/resume": {},
    f"/api/runs/{RUN}/review": {},
    f"/api/runs/{RUN}/heartbeat": {"note": "planted"},
    f"/api/runs/{RUN}/block": {"kind": "other", "detail": "planted"},
    f"/api/runs/{RUN}/unblock": {"blocker": "b1", "resolution": "planted"},
    f"/api/runs/{RUN}/evidence": {"kind": "test", "verdict": "passed", "summary": "planted"},
    f"/api/runs/{RUN}/ready": {"summary": "planted"},
    f"/api/runs/{RUN}/gates": {"name": "planted", "check": "no-private"},
    f"/api/runs/{RUN}/gates/adopt": {"name": "w1-tests"},
    f"/api/runs/{RUN}/approve": {"waivers": {}},
    f"/api/runs/{RUN}/changes": {"reason": "planted"},
    f"/api/runs/{RUN}/transfer": {"authority": "approve", "to": "mallory"},
    f"/api/runs/{RUN}/cancel": {"reason": "planted"},
    f"/api/runs/{RUN}/retarget": {"target": "mailto:mallory@example.com"},
    f"/api/runs/{RUN}/artifacts/{{name}}": "# planted\n\nbytes another site chose\n",
    "/api/inbox/ack": {},  # would move the signed-in owner's acknowledged marks
    "/hooks/claude/{event}": {"session_id": "planted", "transcript_path": "/tmp/t.jsonl",
                              "cwd": "/tmp", "hook_event_name": "SessionStart",
                              "source": "startup"},
    # signed by GitHub, never by a cookie: a page cannot sign, so it plants nothing
    "/github/webhook": {"action": "created", "comment": {"id": 1, "body": "/waypost cancel x",
                                                         "user": {"login": "mallory"}}},
}
BOARD_ACTIONS: Final = ("review", "approve", "changes", "cancel", "adopt")

# What the other site's page does: every write, every way, then `window.done`.
SCRIPT: Final = """
const plan = JSON.parse(document.getElementById("plan").textContent);
const tries = [];
const send = (url, init) => tries.push(
  fetch(url, {method: "POST", credentials: "include", ...init}).catch(() => null));
for (const {url, text} of plan.api) {
  send(url, {mode: "no-cors", headers: {"Content-Type": "text/plain"}, body: text});
  send(url, {mode: "no-cors", body: new URLSearchParams({[text]: ""})});
  send(url, {mode: "no-cors", headers: {"Content-Type": "application/x-www-form-urlencoded"},
             body: text});
  const form = new FormData(); form.append("data", text);
  send(url, {mode: "no-cors", body: form});
  send(url, {mode: "no-cors", body: new Blob([text])});
  send(url, {mode: "cors", headers: {"Content-Type": "application/json"}, body: text});
}
const posted = (url, enctype, fields) => new Promise((resolve) => {
  const frame = document.createElement("iframe");
  frame.name = "f" + Math.random().toString(36).slice(2);
  frame.onload = () => resolve(null);
  setTimeout(() => resolve(null), 10000);
  document.body.appendChild(frame);
  const form = document.createElement("form");
  form.method = "POST"; form.action = url; form.enctype = enctype; form.target = frame.name;
  for (const [name, value] of fields) {
    const input = document.createElement("input");
    input.type = "hidden"; input.name = name; input.value = value; form.appendChild(input);
  }
  document.body.appendChild(form);
  form.submit();
});
for (const {url, text} of plan.api) {
  // text/plain sends `name=value`: the JSON cut before its last quote keeps it JSON
  const cut = text.lastIndexOf('"');
  const split = cut > 0 ? [text.slice(0, cut), text.slice(cut)] : [text, ""];
  tries.push(posted(url, "text/plain", [split]));
  tries.push(posted(url, "application/x-www-form-urlencoded", [[text, ""]]));
}
for (const {url, fields} of plan.board) {
  tries.push(posted(url, "application/x-www-form-urlencoded", fields));
}
Promise.all(tries).then(() => { window.done = true; });
"""


def _post_routes() -> list[str]:
    """Every POST route of the server's OpenAPI document."""
    document = create_app(ServerConfig(store_url="unused")).openapi_schema
    return sorted(path for path, item in (document.paths or {}).items() if item.post)


def _plan(api: str, run: str) -> dict[str, Any]:
    routes = _post_routes()
    assert set(routes) == set(BODIES), f"POST routes to try: {sorted(set(routes) ^ set(BODIES))}"
    tried = []
    for route in routes:
        body = BODIES[route]
        path = route.replace(RUN, run).replace("{name}", "planted.md").replace(
            "{event}", "session-start")
        query = f"?run={run}" if route.startswith("/hooks/") else ""
        text = body if isinstance(body, str) else json.dumps(body)
        tried.append({"url": f"{api}{path}{query}", "text": text})
    board = [{"url": f"{api}/runs/{run}/{action}",
              "fields": [["reason", "planted"], ["gate", "w1-tests"], ["csrf", "x"]]}
             for action in BOARD_ACTIONS]
    return {"api": tried, "board": board}


@contextmanager
def _other_site(page: str) -> Iterator[str]:
    """A page served from another port of 127.0.0.1 (the same site as the board)."""
    body = page.encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def _scene(tmp_path: Path) -> tuple[str, str, str]:
    """A run w1 works on (with w1's gate, for adopt), and the owner's token."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with open_store(url, create=True) as store:
        run, _ = waypost.start(store, "Fix the flaky login test", actor="alice", owner="alice",
                               target="none:", kind=waypost.Kind.LONG_RUNNING,
                               max_silence=3600)
        worker = waypost.Run(store, run.id, actor="w1")
        worker.claim()
        worker.add_gate("w1-tests", "no-private")
        secret, _ = tokens.issue(store, holder="alice", role="owner", run_id=None, ttl=None,
                                 by="test")
    return url, run.id, secret


def test_a_page_of_another_port_writes_nothing_through_the_board_s_cookie(
        tmp_path: Path) -> None:
    _require_browser()
    from playwright.sync_api import expect, sync_playwright

    url, run, secret = _scene(tmp_path)
    server = Server(url, log=tmp_path / "serve.log").start()
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            try:
                context = browser.new_context()
                page = context.new_page()
                page.set_default_timeout(LIVE_MS)
                page.goto(f"{server.url}/login")  # signing in as it really happens
                page.fill("#token", secret)
                page.click("button[type=submit]")
                expect(page.locator(f"#run-{run}")).to_be_visible()
                assert any(c["name"] == "waypost_token" for c in context.cookies(server.url))
                page.goto("about:blank")  # the board's own page holds no stream open
                before = dump_store(tmp_path / "store.db")
                plan = json.dumps(_plan(server.url, run)).replace("</", "<\\/")
                html = (f'<!doctype html><title>another site</title>'
                        f'<script type="application/json" id="plan">{plan}</script>'
                        f"<body><script>{SCRIPT}</script></body>")
                with _other_site(html) as other:
                    page.goto(other)
                    page.wait_for_function("window.done === true", timeout=120_000)
                after = dump_store(tmp_path / "store.db")
            finally:
                browser.close()
    finally:
        server.stop()
    changed = sorted(t for t in after if after[t] != before.get(t))
    assert changed == [], f"a page of another site wrote through the board's cookie: {changed}"
    with open_store(url) as store:
        assert str(store.get(run).state) == "in_progress"
