"""`GET /api/runs/{id}?wait=DURATION`: a long poll answered once another writer's change
makes the run need the parent, or when the wait ends (`Waypost-Wait` says which); bounded
(at most 60 s), decided for the token before any waiting, and never cut by the server's
read deadlines (they bound reading the request, not the answer). Timeouts are hang guards."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests import pg
from tests.helpers import claimed_run
from tests.http_support import issue, serve_process, serving
from waypost.model import BlockerKind
from waypost.store import open_store
from waypost.usecases import runs

GUARD = 30.0


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with pg.each_backend(request.param, tmp_path) as found:
        yield found


def _claimed(url: str) -> tuple[str, int]:
    with open_store(url) as store:
        return claimed_run(store)


def _block_later(url: str, run: str, epoch: int, after: float) -> threading.Thread:
    def block() -> None:
        time.sleep(after)
        with open_store(url) as store:
            runs.Run(store, run, actor="w1", epoch=epoch).block(BlockerKind.MISSING_INPUT,
                                                                "the API key")

    thread = threading.Thread(target=block)
    thread.start()
    return thread


def _get(base: str, run: str, token: str, **params: str) -> httpx.Response:
    return httpx.get(f"{base}/api/runs/{run}", params=params, timeout=GUARD + 30,
                     headers={"Authorization": f"Bearer {token}"})


def test_a_long_poll_is_answered_once_the_run_needs_the_parent(url: str) -> None:
    run, epoch = _claimed(url)
    token = issue(url, "alice", "owner")
    with serving(url) as base:
        writer = _block_later(url, run, epoch, after=1.0)
        started = time.monotonic()
        answer = _get(base, run, token, wait=f"{int(GUARD)}s")
        writer.join(GUARD)
    assert answer.status_code == 200, answer.text
    assert answer.headers["Waypost-Wait"] == "reached"
    assert answer.json()["state"] == "blocked"
    assert time.monotonic() < started + GUARD


def test_a_long_poll_ends_with_the_wait_and_is_bounded(url: str) -> None:
    run, _ = _claimed(url)
    token = issue(url, "alice", "owner")
    with serving(url) as base:
        answer = _get(base, run, token, wait="0.5s")
        assert (answer.status_code, answer.headers["Waypost-Wait"]) == (200, "timed_out")
        assert answer.json()["state"] == "in_progress"
        assert _get(base, run, token, wait="61s").status_code == 422
        assert _get(base, run, token, wait="soon").status_code == 422
        assert _get(base, "wp_nosuchrun", token, wait="30s").status_code == 404
        plain = _get(base, run, token)
        assert plain.status_code == 200
        assert "Waypost-Wait" not in plain.headers


def test_a_long_poll_waits_only_for_a_token_that_may_read_the_run(url: str) -> None:
    run, _ = _claimed(url)
    other, _ = _claimed(url)
    token = issue(url, "alice", "owner", run_id=other)
    with serving(url) as base:
        started = time.monotonic()
        assert _get(base, run, token, wait=f"{int(GUARD)}s").status_code == 403
        assert _get(base, run, "wpt_nosuchtoken", wait=f"{int(GUARD)}s").status_code == 401
    assert time.monotonic() < started + GUARD


def test_the_read_deadlines_do_not_cut_a_long_polls_answer(tmp_path: Path) -> None:
    url = str(tmp_path / "w.db")
    run, epoch = _claimed(url)
    token = issue(url, "alice", "owner")
    with serve_process(url, "--header-timeout", "1s", "--body-timeout", "1s",
                       "--keep-alive", "1s") as (_, base):
        quiet = _get(base, run, token, wait="3s")  # ends past every read deadline
        assert (quiet.status_code, quiet.headers["Waypost-Wait"]) == (200, "timed_out")
        writer = _block_later(url, run, epoch, after=2.5)
        answer = _get(base, run, token, wait="20s")
        writer.join(GUARD)
    assert (answer.status_code, answer.headers["Waypost-Wait"]) == (200, "reached")
    assert answer.json()["state"] == "blocked"


def test_long_polls_hold_no_thread_of_the_server(tmp_path: Path) -> None:
    """More long polls than the server has threads for its store calls (anyio's 40): a
    plain read is still answered while they all wait, and all of them answer the change."""
    import anyio

    url = str(tmp_path / "w.db")
    run, epoch = _claimed(url)
    token = issue(url, "alice", "owner")
    headers = {"Authorization": f"Bearer {token}"}
    polls = 60

    async def scenario(base: str) -> None:
        answers: list[httpx.Response] = []
        async with httpx.AsyncClient(base_url=base, headers=headers,
                                     timeout=GUARD + 30,
                                     limits=httpx.Limits(max_connections=polls + 5)) as http:

            async def poll() -> None:
                answers.append(await http.get(f"/api/runs/{run}", params={"wait": "30s"}))

            async with anyio.create_task_group() as tasks:
                for _ in range(polls):
                    tasks.start_soon(poll)
                await anyio.sleep(1.0)
                plain = await http.get(f"/api/runs/{run}")
                assert plain.status_code == 200
                assert answers == [], "a long poll answered before anything changed"
                await anyio.to_thread.run_sync(lambda: _block_later(url, run, epoch, 0).join())
        assert len(answers) == polls
        assert {(a.status_code, a.headers["Waypost-Wait"]) for a in answers} == {
            (200, "reached")}

    with serving(url) as base:
        started = time.monotonic()
        anyio.run(scenario, base)
    assert time.monotonic() < started + GUARD
