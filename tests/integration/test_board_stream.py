"""The board's live feed: `id:` is the store's change cursor, so a client that reconnects
with Last-Event-ID is told of every change it missed, on both backends; a revoked token's
stream is closed; every loop of the stream is bounded."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timedelta
from pathlib import Path

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

import waypost
from tests import pg
from tests.board_support import Message, read_messages, serving
from tests.http_support import issue, serve_process
from waypost.errors import InvalidInput
from waypost.http import stream
from waypost.model import Packet
from waypost.store import Store, open_store
from waypost.store.postgres.store import PostgresStore
from waypost.usecases import starting, tokens

READ_TIMEOUT = 20.0  # seconds a test waits for the stream to say something
HANG_S = 60.0  # hang guard: a change the stream never names fails the test by then


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "postgres":
        with pg.fresh_schema() as url:
            yield url
    else:
        yield f"sqlite:///{tmp_path / 'store.db'}"


def _start(store: Store, title: str) -> str:
    run, _ = waypost.start(store, title, actor="alice", owner="alice", target="none:",
                           kind=waypost.Kind.LONG_RUNNING, max_silence=3600)
    return run.id


def _everyone(packets: Iterable[Packet]) -> list[Packet]:
    return list(packets)


@contextlib.contextmanager
def _stream(url: str, secret: str, last_event_id: str | None = None,
            after: str | None = None) -> Iterator[Iterator[str]]:
    headers = {"Authorization": f"Bearer {secret}"}
    if last_event_id is not None:
        headers["Last-Event-ID"] = last_event_id
    params = {"after": after} if after is not None else {}
    timeout = httpx.Timeout(READ_TIMEOUT, connect=5.0)
    with httpx.stream("GET", f"{url}/events", headers=headers, params=params,
                      timeout=timeout) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        yield response.iter_lines()


def _runs_until(lines: Iterator[str], wanted: set[str]) -> tuple[set[str], str]:
    """Read `runs` messages until every run in `wanted` was named; the last id seen."""
    seen: set[str] = set()
    last = ""
    for message in read_messages(lines, until=1000, within=HANG_S):
        if message.id is not None:
            last = message.id
        if message.event == "runs":
            seen |= {r["id"] for r in json.loads(message.data)["runs"]}
        if wanted <= seen:
            break
    return seen, last


def test_a_reconnect_with_last_event_id_misses_no_change(store_url: str,
                                                         tmp_path: Path) -> None:
    """As a browser does: the page's cursor in the URL, then Last-Event-ID on a reconnect;
    the reconnect is told of exactly what changed since its last id."""
    with open_store(store_url) as store:
        page_cursor = str(store.change_cursor())
        early, first = _start(store, "early"), _start(store, "first")
        secret, _ = tokens.issue(store, holder="alice", role="viewer", run_id=None, ttl=None,
                                 by="test")
        with serving(store_url, log=tmp_path / "serve.log") as server:
            with _stream(server.url, secret, after=page_cursor) as lines:
                seen, resume_at = _runs_until(lines, {early, first})
            assert {early, first} <= seen
            missed = {_start(store, f"while away {i}") for i in range(3)}
            waypost.Run(store, first, actor="alice").cancel("changed while away")
            missed.add(first)
            with _stream(server.url, secret, last_event_id=resume_at,
                         after=page_cursor) as lines:
                seen, _ = _runs_until(lines, missed)
            assert seen == missed  # all it missed, and nothing it had been told (early)
            # a new stream without Last-Event-ID starts at its page's cursor
            now = str(store.change_cursor())
            later = _start(store, "after the reconnect")
            with _stream(server.url, secret, after=now) as lines:
                seen, _ = _runs_until(lines, {later})
            assert seen == {later}


def test_postgres_the_board_hears_of_a_change_while_other_sessions_stay_open(
        tmp_path: Path) -> None:
    """Other applications' transactions held open on the same server (in another database;
    in the store's own, writing elsewhere or only reading the store) do not hold the board
    back: a change is streamed while every one of them is still open."""
    with pg.fresh_schema() as url, open_store(url) as store:
        assert isinstance(store, PostgresStore)
        secret, _ = tokens.issue(store, holder="alice", role="viewer", run_id=None, ttl=None,
                                 by="test")
        with serving(url, log=tmp_path / "serve.log") as server, \
                pg.open_transactions(store.schema) as others:
            page_cursor = str(store.change_cursor())
            with _stream(server.url, secret, after=page_cursor) as lines:
                changed = _start(store, "while others stay open")
                seen: set[str] = set()
                for message in read_messages(lines, until=1000, within=READ_TIMEOUT):
                    if message.event == "runs":
                        seen |= {r["id"] for r in json.loads(message.data)["runs"]}
                    if changed in seen:
                        break
            assert changed in seen
            assert pg.still_running(others)


def test_a_runs_token_streams_only_its_run(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with open_store(url) as store:
        mine, other = _start(store, "mine"), _start(store, "other")
        secret, _ = tokens.issue(store, holder="bob", role="viewer", run_id=mine, ttl=None,
                                 by="test")
        batch = stream.next_batch(store, 0, lambda ps: [p for p in ps if p.id == mine])
        assert batch.message is not None
        assert batch.message.event == "runs"
        assert [r["id"] for r in json.loads(str(batch.message.data))["runs"]] == [mine]
        hidden = stream.next_batch(store, batch.cursor, _everyone)
        assert hidden.message is None  # nothing new at all: nothing said
        waypost.Run(store, other, actor="alice").cancel("not bob's business")
        quiet = stream.next_batch(store, batch.cursor, lambda ps: [p for p in ps if p.id == mine])
        assert quiet.message is not None
        assert quiet.message.event is None
        assert quiet.message.data is None
        assert quiet.message.id == quiet.cursor > batch.cursor
        with serving(url) as server, _stream(server.url, secret, after="0") as lines:
            waypost.Run(store, mine, actor="alice").cancel("done")
            seen, _ = _runs_until(lines, {mine})
        assert seen == {mine}


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds


async def _inline(work: Callable[[], object]) -> object:
    return work()


def _collect(store: Store, still_allowed: Callable[[], None], *, lifetime: float,
             on_sleep: Callable[[float], None] | None = None,
             closing: Callable[[], bool] = lambda: False) -> list[Message]:
    clock = _Clock()

    async def sleep(seconds: float) -> None:
        await clock.sleep(seconds)
        if on_sleep is not None:
            on_sleep(clock.now)

    feed = stream.Feed(store=store, visible=_everyone, still_allowed=still_allowed,
                       call=_inline, sleep=sleep, clock=clock,  # type: ignore[arg-type]
                       closing=closing)

    async def run() -> list[Message]:
        return [Message(id=None if m.id is None else str(m.id), event=m.event,
                        data=str(m.data)) async for m in stream.messages(feed, 0,
                                                                          lifetime=lifetime)]

    return asyncio.run(run())


def _authenticated(store: Store, secret: str, now: datetime | None = None) -> None:
    tokens.authenticate(store, secret, now=now)


def test_a_revoked_token_is_told_closed_and_its_stream_ends(tmp_path: Path) -> None:
    with open_store(str(tmp_path / "store.db")) as store:
        secret, grant = tokens.issue(store, holder="carol", role="viewer", run_id=None,
                                     ttl=None, by="test")

        def revoke_later(now: float) -> None:
            if now >= 2 * stream.RECHECK_S:
                with contextlib.suppress(Exception):
                    tokens.revoke(store, grant.id)

        said = _collect(store, lambda: _authenticated(store, secret), lifetime=10_000.0,
                        on_sleep=revoke_later)
        assert said[-1].event == "closed"
        assert len(said) < 10  # closed at the next re-check, not at the end of its life


def test_an_expired_token_is_closed_too(tmp_path: Path) -> None:
    with open_store(str(tmp_path / "store.db")) as store:
        secret, grant = tokens.issue(store, holder="carol", role="viewer", run_id=None,
                                     ttl=timedelta(hours=1), by="test")
        assert grant.expires_at is not None
        later = grant.expires_at + timedelta(seconds=1)
        said = _collect(store, lambda: _authenticated(store, secret, now=later),
                        lifetime=10_000.0)
        assert said[-1].event == "closed"


def test_an_idle_stream_pings_and_ends_after_its_lifetime(tmp_path: Path) -> None:
    with open_store(str(tmp_path / "store.db")) as store:
        said = _collect(store, lambda: None, lifetime=4 * stream.TICK_S)
        pings = [m for m in said if m.event is None and m.id is None]
        assert len(pings) >= 4  # the opening comment, then a ping every PING_S
        ticks = [m for m in said if m.event == "tick"]
        assert 3 <= len(ticks) <= 4  # one every TICK_S
        assert not any(m.event in ("closed", "runs") for m in said)


def test_a_stopping_server_ends_its_streams_at_the_next_poll(tmp_path: Path) -> None:
    with open_store(str(tmp_path / "store.db")) as store:
        polls: list[float] = []
        said = _collect(store, lambda: None, lifetime=10_000.0, on_sleep=polls.append,
                        closing=lambda: len(polls) >= 3)
        assert len(polls) == 3
        assert not any(m.event == "closed" for m in said)  # not the token's fault: no word


def test_streams_at_one_cursor_share_one_scan_and_miss_nothing(store_url: str) -> None:
    """Fifty streams waiting at the same cursor cost one change scan and one read of where
    the feed stands per poll; a scan that is reused while a later change commits only
    delays that change to the next poll."""
    with open_store(store_url) as store:
        scanned: list[int] = []
        horizons: list[int] = []
        real, real_cursor = store.changes_since, store.change_cursor

        def counting(cursor: int, *, limit: int = 500) -> tuple[list[Packet], int]:
            scanned.append(cursor)
            return real(cursor, limit=limit)

        def counting_cursor() -> int:
            horizons.append(real_cursor())
            return horizons[-1]

        store.changes_since = counting  # type: ignore[method-assign]
        clock = _Clock()
        scans = stream.SharedScans(clock=clock)
        cursor = store.change_cursor()
        first = _start(store, "first")
        store.change_cursor = counting_cursor  # type: ignore[method-assign]
        batches = [stream.next_batch(store, cursor, _everyone, scans) for _ in range(50)]
        assert len(scanned) == len(horizons) == 1
        assert {b.cursor for b in batches} == {batches[0].cursor}
        second = _start(store, "second")  # commits while the scan is still fresh
        again = stream.next_batch(store, cursor, _everyone, scans)
        assert again.cursor == batches[0].cursor  # the reused scan: not yet seen
        clock.now += stream.POLL_S
        later = stream.next_batch(store, again.cursor, _everyone, scans)
        named = {r["id"] for b in (batches[0], later) if b.message is not None
                 for r in json.loads(str(b.message.data))["runs"]}
        assert named == {first, second}


def test_a_cursor_from_the_client_is_decided_before_use(tmp_path: Path) -> None:
    with open_store(str(tmp_path / "store.db")) as store:
        for i in range(20):
            _start(store, f"run {i}")
        assert stream.start_cursor(store, "17", "3") == 17  # Last-Event-ID wins
        assert stream.start_cursor(store, None, "3") == 3
        now = store.change_cursor()
        assert stream.start_cursor(store, " ", None) == now
        assert stream.start_cursor(store, str(now + 10**6), None) == now  # not for ever
        for bad in ("-1", "1e3", "٣", "9" * 20, "0x10", str(2**63)):
            with pytest.raises(InvalidInput):
                stream.start_cursor(store, bad, None)


@given(text=st.text(max_size=30))
def test_any_last_event_id_is_a_cursor_or_a_clear_refusal(text: str) -> None:
    refused: str | None = None
    cursor: int | None = None
    try:
        cursor = stream.parse_cursor(text, "Last-Event-ID")
    except InvalidInput as exc:
        refused = exc.message
    if refused is not None:
        assert "Last-Event-ID" in refused
    elif cursor is not None:
        assert 0 <= cursor <= stream.MAX_CURSOR
        assert cursor == int(text.strip())
    else:
        assert not text.strip()


def test_the_feed_refuses_a_request_without_a_token(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with open_store(url), serving(url) as server:
        assert httpx.get(f"{server.url}/events", timeout=10).status_code == 401
        bad = httpx.get(f"{server.url}/events", timeout=10,
                        headers={"Authorization": "Bearer wpt_nope_nope"})
        assert bad.status_code == 401
        bad = httpx.get(f"{server.url}/events", timeout=10,
                        headers={"Last-Event-ID": "soon", "Authorization": "Bearer x"})
        assert bad.status_code == 401  # the token is decided first


def test_the_openapi_document_says_the_feed_is_an_event_stream(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with open_store(url), serving(url) as server:
        document = httpx.get(f"{server.url}/schema/openapi.json", timeout=10).json()
    operation = document["paths"]["/events"]["get"]
    assert "text/event-stream" in operation["responses"]["200"]["content"]
    assert "/" not in document["paths"]
    assert "/login" not in document["paths"]



def test_revoking_a_token_closes_its_open_stream_over_http(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with open_store(url) as store, serving(url) as server:
        secret, grant = tokens.issue(store, holder="dave", role="viewer", run_id=None,
                                     ttl=None, by="test")
        with _stream(server.url, secret) as lines:
            tokens.revoke(store, grant.id)
            said = list(read_messages(lines, until=100, within=3 * stream.RECHECK_S))
        assert said[-1].event == "closed"  # within a re-check or two, not at end of life
        again = httpx.get(f"{server.url}/events", timeout=10,
                          headers={"Authorization": f"Bearer {secret}"})
        assert again.status_code == 401


def test_a_stopping_server_ends_open_streams_instead_of_waiting_them_out(
        tmp_path: Path) -> None:
    """SIGTERM with a board's stream open: the stream ends and the server exits cleanly
    (no cancelled task's traceback), the browser reconnecting with its Last-Event-ID."""
    store_url = str(tmp_path / "s.db")
    with open_store(store_url, create=True) as store:
        starting.start(store, "open stream", actor="alice", target="none:")
    secret = issue(store_url, "alice", "viewer")
    with serve_process(store_url) as (process, url):
        with httpx.stream("GET", f"{url}/events", timeout=30,
                          headers={"Authorization": f"Bearer {secret}"}) as stream:
            assert stream.status_code == 200
            process.send_signal(signal.SIGTERM)
            ended = list(stream.iter_lines())  # ends: the server closed it
        # uvicorn shuts down gracefully, then raises the signal again for its exit status
        assert process.wait(timeout=30) in (0, -signal.SIGTERM)
        assert process.stderr is not None
        said = process.stderr.read()
    assert "Traceback" not in said, said
    assert all(not line.startswith("data: {\"error") for line in ended)
