"""`checkpoint_wait` over MCP, driven by the official client: it answers once another
writer makes the run need the parent, at most 50 s after it was called (a longer timeout is
cut, so the host's tool timeout never fires first: the model calls again), refuses an
unknown run before waiting, and over HTTP waits only on runs the token may read."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import anyio

from tests.helpers import claimed_run
from tests.integration.test_mcp import call, drive, refused, server
from tests.integration.test_mcp_http import client, issue, mcp_server
from waypost.model import BlockerKind
from waypost.store import open_store
from waypost.usecases import runs

GUARD = 30.0


def _claimed(store: Path) -> tuple[str, int]:
    with open_store(str(store), create=True) as opened:
        return claimed_run(opened)


def _block_later(store: Path, run: str, epoch: int, after: float) -> threading.Thread:
    def block() -> None:
        time.sleep(after)
        with open_store(str(store)) as opened:
            runs.Run(opened, run, actor="w1", epoch=epoch).block(
                BlockerKind.PERMISSION_BOUNDARY, "may I push?")

    thread = threading.Thread(target=block)
    thread.start()
    return thread


def test_checkpoint_wait_answers_once_the_run_needs_the_owner(tmp_path: Path) -> None:
    store = tmp_path / "w.db"
    run, epoch = _claimed(store)

    async def scenario() -> None:
        async with server(store, "alice") as session:
            quiet = await call(session, "checkpoint_wait", runs=[run], timeout=0.3)
            assert quiet["outcome"] == "timed_out"
            assert quiet["next"] == "checkpoint_wait again"
            writer = _block_later(store, run, epoch, after=1.0)
            started = time.monotonic()
            with anyio.fail_after(GUARD):
                waited = await call(session, "checkpoint_wait", runs=[run], timeout=3600)
            assert time.monotonic() < started + GUARD
            writer.join(GUARD)
            assert waited["outcome"] == "reached"
            assert waited["outcomes"] == {run: "reached"}
            assert [(p["id"], p["state"]) for p in waited["runs"]] == [(run, "blocked")]
            said = await refused(session, "checkpoint_wait", runs=[run, "wp_nosuchrun"],
                                 timeout=40)
            assert "no run wp_nosuchrun" in said
            ended = await call(session, "checkpoint_wait", runs=[run],
                               until=["ready_for_review"], timeout=0)
            assert ended["outcome"] == "timed_out"

    drive(scenario)


def test_checkpoint_wait_says_it_waits_fifty_seconds_at_most(tmp_path: Path) -> None:
    """A model reads the cap in the description, and that the tool only reads."""

    async def scenario() -> None:
        async with server(tmp_path / "w.db", "alice") as session:
            tools = {t.name: t for t in (await session.list_tools()).tools}
            wait = tools["checkpoint_wait"]
            assert "50 s" in (wait.description or "")
            assert wait.annotations is not None
            assert wait.annotations.read_only_hint

    _claimed(tmp_path / "w.db")
    drive(scenario)


def test_over_http_a_token_waits_only_on_runs_it_may_read(tmp_path: Path) -> None:
    store = tmp_path / "w.db"
    run, epoch = _claimed(store)
    other, _ = _claimed(store)
    narrow = issue(store, "alice", "owner", other)
    owner = issue(store, "alice", "owner")

    async def scenario() -> None:
        with mcp_server(store) as url:
            async with client(url, narrow) as session:
                started = time.monotonic()
                said = await refused(session, "checkpoint_wait", runs=[run], timeout=40)
                assert time.monotonic() < started + GUARD
                assert f"token is for run {other}" in said, said
            async with client(url, owner) as session:
                writer = _block_later(store, run, epoch, after=1.0)
                with anyio.fail_after(GUARD):
                    waited = await call(session, "checkpoint_wait", runs=[run], timeout=40)
                writer.join(GUARD)
                assert waited["outcome"] == "reached"

    drive(scenario)
