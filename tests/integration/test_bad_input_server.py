"""The bad-input campaign's server rows: generated nesting depths, media types, cookie and
Authorization combinations and body sizes against a real served app (uvicorn, a real
socket), on every POST route and a few reads.

Every answer is a documented status (README "What a request must be" and "HTTP API"),
never 500; an error is the one error document; the hook route answers 200, always; and the
edge's order holds: without a live bearer token a token route answers 401 whatever the
body, the board's cookie included; with one, a body of another media type is 415, a body
over the size limit 413, JSON nested past 64 levels 400 `too_deep`. A refusal leaves the
store as it was, row for row.

CI runs a short campaign; `WAYPOST_CAMPAIGN=long` runs a long one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

import waypost
from tests.helpers import dump_store
from tests.http_support import serving
from waypost.http.settings import MAX_JSON_BODY
from waypost.inputs import MAX_NESTING
from waypost.store import open_store
from waypost.usecases import tokens

LONG = os.environ.get("WAYPOST_CAMPAIGN") == "long"
EXAMPLES = 4000 if LONG else 200
DOCUMENTED = {200, 201, 400, 401, 403, 404, 405, 409, 413, 415, 422, 503}
JSON_TYPES = ("application/json", "application/json; charset=utf-8", "Application/JSON")


@dataclass(frozen=True)
class Served:
    url: str
    db: Path
    run: str
    secrets: dict[str, str]  # owner, worker, viewer: live tokens


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("server-campaign")
    url = f"sqlite:///{folder / 'store.db'}"
    with open_store(url, create=True) as store:
        run, _ = waypost.start(store, "Fix the flaky login test", actor="alice",
                               owner="alice", target="none:",
                               kind=waypost.Kind.LONG_RUNNING, max_silence=3600)
        waypost.Run(store, run.id, actor="w1").claim()
        secrets = {role: tokens.issue(store, holder=holder, role=role, run_id=None, ttl=None,
                                      by="campaign")[0]
                   for role, holder in (("owner", "alice"), ("worker", "w1"),
                                        ("viewer", "vic"))}
    with serving(url) as base:
        yield Served(base, folder / "store.db", run.id, secrets)


# --- what the campaign sends --------------------------------------------------------------

COMMANDS = ("claim", "resume", "heartbeat", "block", "unblock", "evidence", "ready", "review",
            "approve", "changes", "transfer", "cancel", "retarget", "gates", "gates/adopt")
routes = st.sampled_from([("POST", "/api/runs"), ("GET", "/api/runs"),
                          ("GET", "/api/runs/{run}"), ("GET", "/a2a/tasks/{run}"),
                          ("POST", "/api/runs/{run}/artifacts/x.md"),
                          ("POST", "/hooks/claude/stop"),
                          ("POST", "/hooks/claude/session-start"),
                          *(("POST", f"/api/runs/{{run}}/{c}") for c in COMMANDS)])
# who the request says it is: (label, live bearer role or None, headers builder key)
CREDENTIALS = ("none", "owner", "worker", "viewer", "cookie_owner", "cookie_and_owner",
               "cookie_and_garbage", "basic", "basic_owner", "bearer_empty", "garbage",
               "too_long")
credentials = st.one_of(st.sampled_from(["owner", "worker"]), st.sampled_from(CREDENTIALS))
media = st.one_of(st.sampled_from(JSON_TYPES), st.sampled_from([
                                   "text/plain", "text/plain; charset=utf-8",
                                   "application/x-www-form-urlencoded",
                                   "multipart/form-data; boundary=x",
                                   "application/octet-stream", "application/xml", "", None,
                                   "application/json-seq", ";", "application/jsonx"]),
                  st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E),
                          max_size=30).map(str.strip))
depths = st.one_of(st.sampled_from([0, 1, MAX_NESTING - 1, MAX_NESTING, MAX_NESTING + 1,
                                    1000, 50_000, 200_000, 500_000, 600_000]),
                   st.integers(0, 600_000))


class Body:
    """A body, shown by what it is (its bytes may be a megabyte)."""

    def __init__(self, what: str, content: bytes) -> None:
        self.what = what
        self.content = content

    def __repr__(self) -> str:
        return f"Body({self.what}, {len(self.content)} bytes)"


@st.composite
def bodies(draw: st.DrawFn) -> Body:
    """A body and what it is: deep JSON (arrays, objects or both), JSON of the schemas'
    shape, junk, a string full of brackets, or one over the size limit."""
    kind = draw(st.sampled_from(["deep", "deep", "shallow", "junk", "strings", "huge", "empty"]))
    if kind == "deep":
        depth = draw(depths)
        opener, closer = draw(st.sampled_from([(b"[", b"]"), (b'{"a":', b"}"),
                                               (b'[{"a":', b"}]")]))
        per = 2 if opener == b'[{"a":' else 1  # levels each opener opens
        levels = depth // per
        return Body(f"deep:{levels * per}", opener * levels + b"1" + closer * levels)
    if kind == "shallow":
        value = draw(st.fixed_dictionaries({}, optional={
            "note": st.text(max_size=20), "reason": st.text(max_size=20),
            "epoch": st.integers(-2, 2**63), "summary": st.text(max_size=20),
            "waivers": st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2),
            "title": st.text(max_size=20), "owner": st.just("alice"),
            "target": st.just("none:"), "kind": st.just("long_running")}))
        return Body("shallow", json.dumps(value).encode())
    if kind == "strings":
        return Body("strings", json.dumps({"note": "[" * 10_000 + "{" * 10_000}).encode())
    if kind == "huge":
        return Body("huge", b"[" + b"1," * (MAX_JSON_BODY // 2) + b"1]")
    if kind == "empty":
        return Body("empty", b"")
    return Body("junk", draw(st.binary(max_size=200)))


def headers_for(label: str, served: Served, content_type: str | None) -> dict[str, str]:
    owner = served.secrets["owner"]
    found = {
        "none": {}, "owner": {"Authorization": f"Bearer {owner}"},
        "worker": {"Authorization": f"Bearer {served.secrets['worker']}"},
        "viewer": {"Authorization": f"Bearer {served.secrets['viewer']}"},
        "cookie_owner": {"Cookie": f"waypost_token={owner}"},
        "cookie_and_owner": {"Cookie": f"waypost_token={owner}",
                             "Authorization": f"Bearer {owner}"},
        "cookie_and_garbage": {"Cookie": f"waypost_token={owner}",
                               "Authorization": "Bearer wpt_nope"},
        "basic": {"Authorization": "Basic YWxpY2U6aHVudGVyMg=="},
        "basic_owner": {"Authorization": f"Basic {owner}"},  # a live token, another scheme
        "bearer_empty": {"Authorization": "Bearer"},
        "garbage": {"Authorization": "Bearer wpt_000000000000_" + "x" * 43},
        "too_long": {"Authorization": "Bearer " + "x" * 5000},
    }[label]
    return {**found, **({"Content-Type": content_type} if content_type is not None else {})}


LIVE = {"owner", "worker", "viewer", "cookie_and_owner"}  # a live bearer token is sent


@settings(max_examples=EXAMPLES, deadline=None, derandomize=not LONG,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(route=routes, credentials=credentials, content_type=media,
       body=bodies())
def test_every_request_gets_a_documented_answer(served: Served, route: tuple[str, str],
                                                credentials: str, content_type: str | None,
                                                body: Body) -> None:
    method, template = route
    path = template.replace("{run}", served.run)
    what, content = body.what, body.content
    note(f"{method} {path} as {credentials}, Content-Type {content_type!r}, body {what} "
         f"({len(content)} bytes)")
    before = dump_store(served.db)
    with httpx.Client(base_url=served.url, timeout=120) as client:
        response = client.request(method, path, headers=headers_for(
            credentials, served, content_type), content=content if method == "POST" else None)
    status = response.status_code
    event(f"{template.rsplit('/', 1)[-1]}: {status}")
    assert status in DOCUMENTED, f"HTTP {status}: {response.text[:300]}"
    if path.startswith("/hooks/"):
        assert status == 200, response.text[:300]
        assert isinstance(response.json(), dict)
        if credentials not in LIVE:  # a stranger's refusals are counted in memory only
            assert dump_store(served.db) == before
        return
    if status >= 400:
        error = response.json()["error"]
        assert {"code", "message", "hint"} <= set(error), error
        assert dump_store(served.db) == before, f"HTTP {status} changed the store"
    if credentials not in LIVE:
        assert status == 401, f"no live bearer token, yet HTTP {status}: {response.text[:300]}"
        return
    typed = (content_type or "").partition(";")[0].strip().lower()
    if method != "POST" or path.endswith("/artifacts/x.md"):
        return
    if content and typed and typed != "application/json":  # named: refused unread
        assert status == 415, f"a {typed!r} body answered {status}: {response.text[:300]}"
    elif content and len(content) > MAX_JSON_BODY:  # too large, typed or not
        assert status == 413, response.text[:300]
    elif content and not typed:  # no type named: read (bounded), then refused
        assert status == 415, f"an untyped body answered {status}: {response.text[:300]}"
    elif what.startswith("deep:") and int(what[5:]) > MAX_NESTING + 1:
        assert status == 400, response.text[:300]
        assert response.json()["error"]["code"] == "too_deep"


@pytest.mark.parametrize("scheme", ["Basic", "Token", "Digest", "Bearer:"])
def test_a_live_token_under_another_scheme_is_no_token(served: Served, scheme: str) -> None:
    """README: a request carries `Authorization: Bearer TOKEN`; the token itself under any
    other scheme is not read as one (401), and nothing changes."""
    before = dump_store(served.db)
    sent = {"Authorization": f"{scheme} {served.secrets['owner']}"}
    with httpx.Client(base_url=served.url, timeout=60) as client:
        answers = [client.get("/api/runs", headers=sent),
                   client.post(f"/api/runs/{served.run}/cancel", json={"reason": "x"},
                               headers=sent)]
    assert [a.status_code for a in answers] == [401, 401], [a.text[:200] for a in answers]
    assert dump_store(served.db) == before


def test_mcp_over_http_checks_the_token_before_a_deep_body(tmp_path: Path) -> None:
    """MCP over HTTP: a deep body gets 401 without a bearer token (the board's cookie is
    none), and a parse error (400) with one; never a 500, and the store is unchanged."""
    from tests.integration.test_mcp_http import issue, mcp_server

    store = tmp_path / "w.db"
    secret = issue(store, "alice", "owner")
    accept = {"Accept": "application/json, text/event-stream",
              "Content-Type": "application/json"}
    with mcp_server(store) as url:
        before = dump_store(store)
        for depth in (MAX_NESTING + 1, 1000, 200_000, 500_000):
            body = (b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":'
                    + b"[" * depth + b"]" * depth + b"}")
            for auth, expected in (({}, 401), ({"Cookie": f"waypost_token={secret}"}, 401),
                                   ({"Authorization": f"Bearer {secret}"}, 400)):
                answer = httpx.post(url, content=body, headers={**accept, **auth}, timeout=60)
                assert answer.status_code == expected, (depth, auth.keys(), answer.text[:200])
        assert dump_store(store) == before
