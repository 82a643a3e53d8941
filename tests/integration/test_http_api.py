"""The API's own promises: nothing runs on the server because a remote caller asked (unless
--allow-exec), URLs registered over HTTP reach only allow-listed hosts, Idempotency-Key on
start, cursor paging, the A2A task, and bad input answered with the error document (400,
404, 409, 413, 422), never 500. Claude Code's HTTP hook, which answers 200 whatever
happens, is tested beside the command line's in test_hook_doors."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import waypost
from tests.helpers import Cli, dump_store
from tests.http_support import Api, issue, serving
from waypost.config import Config


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    path = tmp_path / "w.db"
    with waypost.open_store(str(path)):
        pass
    return path


@pytest.fixture
def owner(store_path: Path) -> Iterator[Api]:
    with serving(str(store_path), project=Config(max_artifact_bytes=4096)) as base:
        yield Api(base, issue(str(store_path), "alice", "owner"))


def start(api: Api, **fields: object) -> str:
    started = api.ok("/api/runs", {"title": "Fix the flaky test", "target": "none:",
                                   "worker": "alice", **fields})
    run: str = started["run"]
    return run


def refused_unchanged(api: Api, path: Path, route: str, body: object, status: int,
                      code: str) -> str:
    before = dump_store(path)
    response = api.post(route, body)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code
    assert dump_store(path) == before
    message: str = error["message"]
    return message


# --- nothing runs on the server because a remote caller asked -----------------------------


@pytest.mark.parametrize("body", [
    {"argv": ["touch", "{marker}"]},
    {"check": "command:touch {marker}"},
    {"check": "http:http://127.0.0.1:1/health"},
    {"check": "grep:root:/etc/passwd"},
    {"check": "grep!:secret:."},
])
def test_evidence_that_would_run_or_read_here_is_refused(
        owner: Api, store_path: Path, tmp_path: Path, body: dict[str, object]) -> None:
    marker = tmp_path / "ran"  # where the command would leave its trace, had it run
    body = {key: [part.format(marker=marker) for part in value] if isinstance(value, list)
            else str(value).format(marker=marker) for key, value in body.items()}
    run = start(owner)
    message = refused_unchanged(owner, store_path, f"/api/runs/{run}/evidence", body, 403,
                                "refused")
    assert "nothing runs on this server" in message
    assert not marker.exists()


def test_checks_over_stored_artifacts_always_work(owner: Api) -> None:
    run = start(owner)
    text = b"# Report\n\nThe flaky test is fixed, and here is how it was found.\n"
    assert owner.post(f"/api/runs/{run}/artifacts/report.md", content=text,
                      role="report").status_code == 200
    for check in ("artifact:report.md", "no-private", "grep:flaky:report.md",
                  "grep!:password:report.md"):
        packet = owner.ok(f"/api/runs/{run}/evidence", {"check": check})["packet"]
        assert packet["evidence"][-1]["verdict"] == "passed", packet["evidence"][-1]


def test_a_review_of_gates_that_would_run_here_is_refused_until_allow_exec(
        store_path: Path, tmp_path: Path) -> None:
    token = issue(str(store_path), "alice", "owner")
    marker = tmp_path / "gate-ran"
    with serving(str(store_path)) as base:
        api = Api(base, token)
        run = start(api, gates=[f"touched=command:touch {marker}"])
        api.ok(f"/api/runs/{run}/evidence", {"verdict": "passed", "summary": "it works"})
        api.ok(f"/api/runs/{run}/ready", {"summary": "done"})
        message = refused_unchanged(api, store_path, f"/api/runs/{run}/review", {}, 403,
                                    "refused")
        assert "waypost review" in api.post(f"/api/runs/{run}/review").json()["error"]["hint"]
        assert "touched" not in message or "command:" in message
        assert not marker.exists()
    with serving(str(store_path), allow_exec=True) as base:
        reviewed = Api(base, token).ok(f"/api/runs/{run}/review")
        assert reviewed["approvable"] is True
        assert marker.exists()


@pytest.mark.parametrize(("field", "uri"), [
    ("target", "https://hooks.example.org/waypost"),
    ("notify", "http://127.0.0.1:9/notices"),
    ("target", "http://[::1]:9/x"),
    ("target", "exec:touch delivered"),
])
def test_urls_registered_over_http_reach_only_allowed_hosts(
        owner: Api, store_path: Path, field: str, uri: str) -> None:
    refused_unchanged(owner, store_path, "/api/runs", {"title": "t", field: uri}, 403,
                      "refused" if uri.startswith("exec:") else "not_authorized")
    run = start(owner)
    refused_unchanged(owner, store_path, f"/api/runs/{run}/retarget", {field: uri}, 403,
                      "refused" if uri.startswith("exec:") else "not_authorized")


def test_http_gates_reach_only_allowed_hosts(owner: Api, store_path: Path) -> None:
    refused_unchanged(owner, store_path, "/api/runs",
                      {"title": "t", "gates": ["live=http:http://10.0.0.1/health ok"]}, 403,
                      "not_authorized")


def test_a_listed_host_may_be_registered(store_path: Path) -> None:
    with serving(str(store_path), outbound=("hooks.example.org",)) as base:
        api = Api(base, issue(str(store_path), "alice", "owner"))
        packet = api.ok("/api/runs", {"title": "t", "target": "https://hooks.example.org/w",
                                      "gates": ["live=http:https://hooks.example.org/ ok"]})
        assert packet["packet"]["target"] == "https://hooks.example.org/w"


# --- start, paging, projections -------------------------------------------------------------


def test_idempotency_key_returns_the_same_run_and_refuses_other_parameters(
        owner: Api, store_path: Path) -> None:
    key = {"Idempotency-Key": "deploy-42"}
    first = owner.post("/api/runs", {"title": "Deploy", "target": "none:"}, headers=key)
    again = owner.post("/api/runs", {"title": "Deploy", "target": "none:"}, headers=key)
    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json()["run"] == again.json()["run"]
    assert again.json()["created"] is False
    before = dump_store(store_path)
    other = owner.post("/api/runs", {"title": "Deploy elsewhere"}, headers=key)
    assert other.status_code == 409
    assert other.json()["error"]["code"] == "idempotency_conflict"
    assert dump_store(store_path) == before


def test_cursor_paging_lists_every_run_once_while_runs_change(owner: Api) -> None:
    started = {start(owner) for _ in range(7)}
    seen: list[str] = []
    cursor = None
    for _ in range(10):
        params = {"limit": 3, **({"cursor": cursor} if cursor else {})}
        page = owner.get("/api/runs", **params).json()
        seen += [p["id"] for p in page["runs"]]
        owner.ok(f"/api/runs/{seen[-1]}/heartbeat", {"note": "moves it up the board"})
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert sorted(seen) == sorted(started)
    assert len(seen) == len(started)
    blocked = sorted(started)[:3]
    for run in blocked:
        owner.ok(f"/api/runs/{run}/block", {"kind": "other", "detail": "the disk is full"})
    assert page_ids(owner, limit=2, state=["blocked"]) == sorted(blocked, reverse=True)
    assert page_ids(owner, limit=2, state=["blocked", "in_progress"], owner="alice") == \
        sorted(started, reverse=True)
    assert page_ids(owner, limit=5, owner="bob") == []


def page_ids(api: Api, **params: object) -> list[str]:
    """Every id the listing pages through, following `next_cursor`."""
    seen: list[str] = []
    cursor = None
    for _ in range(20):
        page = api.get("/api/runs", **params, **({"cursor": cursor} if cursor else {})).json()
        seen += [p["id"] for p in page["runs"]]
        cursor = page["next_cursor"]
        if cursor is None:
            return seen
    raise AssertionError("the pages did not end")


def test_events_page_in_order(owner: Api) -> None:
    run = start(owner)
    for n in range(5):
        owner.ok(f"/api/runs/{run}/heartbeat", {"note": f"beat {n}"})
    seqs: list[int] = []
    after = 0
    while True:
        page = owner.get(f"/api/runs/{run}/events", after=after, limit=2).json()
        seqs += [e["seq"] for e in page["events"]]
        if page["next_cursor"] is None:
            break
        after = page["next_cursor"]
    assert seqs == list(range(1, 7))


def test_the_a2a_task_and_the_artifact_download(owner: Api) -> None:
    run = start(owner)
    text = b"The result, in enough words to count as substantive content.\n"
    owner.post(f"/api/runs/{run}/artifacts/result.txt", content=text, role="result")
    task = owner.get(f"/a2a/tasks/{run}").json()
    assert task["id"] == run
    assert task["status"]["state"] == "TASK_STATE_WORKING"
    got = owner.get(f"/api/runs/{run}/artifacts/result.txt")
    assert got.content == text
    assert got.headers["content-disposition"] == 'attachment; filename="result.txt"'
    assert owner.get(f"/api/runs/{run}/artifacts/missing.txt").status_code == 404


# --- bad input: the error document, never 500 -----------------------------------------------


def test_bad_bodies_get_400_413_and_422_and_change_nothing(owner: Api,
                                                          store_path: Path) -> None:
    run = start(owner)
    cases: list[tuple[bytes, int]] = [
        (b"{not json", 400), (b"[1, 2]", 400), (b'{"note": 3}', 400),
        (b'{"nothing": "known"}', 400), (b'{"progress": 2}', 400), (b"\xff\xfe", 400),
        (json.dumps({"note": "n" * 5000}).encode(), 422),
        (b'{"note": "' + b"x" * (2 << 20) + b'"}', 413),
    ]
    for content, status in cases:
        before = dump_store(store_path)
        response = owner.post(f"/api/runs/{run}/heartbeat", content=content,
                              headers={"Content-Type": "application/json"})
        assert response.status_code == status, (content[:40], response.text)
        assert set(response.json()["error"]) == {"code", "message", "hint"}
        assert dump_store(store_path) == before


def test_an_upload_past_the_artifact_limit_gets_413_and_stores_nothing(
        owner: Api, store_path: Path) -> None:
    run = start(owner)
    before = dump_store(store_path)
    response = owner.post(f"/api/runs/{run}/artifacts/big.bin", content=b"x" * 5000)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "too_large"

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it streams
        for _ in range(10):
            yield b"y" * 1000

    import httpx

    streamed = httpx.post(f"{owner.url}/api/runs/{run}/artifacts/big.bin", content=chunks(),
                          headers={"Authorization": f"Bearer {owner.token}"})
    assert streamed.status_code == 413
    assert dump_store(store_path) == before
    bad_name = owner.post(f"/api/runs/{run}/artifacts/.hidden", content=b"x")
    assert bad_name.status_code == 422


def test_unknown_runs_and_routes_are_404(owner: Api) -> None:
    for response in (owner.get("/api/runs/wp_nosuchrun"), owner.post("/api/runs/wp_no/claim"),
                     owner.get("/api/nothing")):
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"


def test_the_reference_is_plain_html_that_loads_nothing_from_elsewhere(owner: Api) -> None:
    page = owner.get("/schema")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "/api/runs/{run_id}/heartbeat" in page.text
    assert "<script" not in page.text.lower()
    assert "src=" not in page.text.lower()
    document = owner.get("/schema/openapi.json").json()
    assert document["openapi"].startswith("3.1")
    heartbeat = document["components"]["schemas"]["HeartbeatBody"]
    assert heartbeat["additionalProperties"] is False


def test_a_missing_token_is_asked_for_as_a_bearer(owner: Api) -> None:
    answer = Api(owner.url).get("/api/runs")
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"] == "Bearer"


COMMANDS = ("claim", "resume", "heartbeat", "block", "unblock", "evidence", "ready", "review",
            "approve", "changes", "transfer", "cancel", "retarget")
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["note", "epoch", "kind", "detail", "blocker", "reason", "check",
                         "argv", "summary", "waivers", "target", "to", "authority", "x"]),
        inner, max_size=4), max_leaves=12)


def test_hostile_bodies_never_get_a_5xx(store_path: Path) -> None:
    """The hardening campaign over HTTP: any bytes, any JSON, to every command."""
    with serving(str(store_path)) as base:
        api = Api(base, issue(str(store_path), "alice", "owner"))
        run = start(api)

        @settings(max_examples=100, deadline=None)
        @given(command=st.sampled_from(COMMANDS),
               body=st.one_of(st.binary(max_size=200), JSON.map(
                   lambda v: json.dumps(v).encode())))
        def probe(command: str, body: bytes) -> None:
            answer = api.post(f"/api/runs/{run}/{command}", content=body,
                              headers={"Content-Type": "application/json"})
            assert answer.status_code < 500, (command, body, answer.text)
            if answer.status_code >= 400:
                assert set(answer.json()["error"]) == {"code", "message", "hint"}

        probe()


def test_serve_refuses_an_open_board_off_loopback_before_it_listens(cli: Cli) -> None:
    cli.ok("init")
    refused = cli("serve", "--host", "0.0.0.0", "--open", "--port", "0")
    assert refused.code == 2
    assert "loopback" in refused.err


def test_the_servers_connections_send_small_answers_at_once() -> None:
    """asyncio sets TCP_NODELAY only on sockets made with IPPROTO_TCP named: without it, an
    answer written in two small parts waited ~40 ms for the client's delayed ACK."""
    import asyncio
    import socket

    from waypost.system.sockets import listening_socket

    async def nodelay_of_a_connection() -> int:
        found: list[int] = []

        def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            conn = writer.get_extra_info("socket")
            found.append(conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(accepted, sock=listening_socket("127.0.0.1", 0))
        port = server.sockets[0].getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        for _ in range(500):
            if found:
                break
            await asyncio.sleep(0.01)
        writer.close()
        server.close()
        return found[0]

    assert asyncio.run(nodelay_of_a_connection()) != 0
