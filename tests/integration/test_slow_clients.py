"""Slow clients against a real `waypost serve`: a request's head and its body each have a
deadline (`--header-timeout`, `--body-timeout`), an idle connection a keep-alive bound,
and the server a connection limit (`--max-connections`, streams included); none of them
cuts an answer that streams, and a normal client keeps getting answers meanwhile.

Every time below is a hang guard or the documented deadline itself, never a speed claim:
a connection must not be cut before its deadline, and must be cut by it plus SLACK.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

import waypost
from tests.http_support import issue, serve_process
from waypost.store import open_store
from waypost.system.deadlines import FULL, LATE
from waypost.usecases import runs

HEAD_S = 2.0  # --header-timeout in these tests
BODY_S = 3.0  # --body-timeout
SLACK = 15.0  # hang guard past a deadline: the machine may be busy, the server must not hang
EARLY = 0.05  # clock slack below a deadline (the client starts its clock first)
DRIBBLE_S = 0.4  # seconds between a slow client's bytes
UVICORN_KEEP_ALIVE_S = 5.0  # uvicorn's keep-alive when none is given


@dataclass(frozen=True)
class World:
    url: str
    host: str
    port: int
    token: str
    run: str


@contextlib.contextmanager
def world(tmp_path: Path, *args: str) -> Iterator[World]:
    store_url = f"sqlite:///{tmp_path / 'store.db'}"
    with open_store(store_url) as store:
        run, _ = waypost.start(store, "slow", actor="alice", owner="alice", target="none:",
                               kind=waypost.Kind.LONG_RUNNING, max_silence=3600)
    token = issue(store_url, "alice", "owner")
    with serve_process(store_url, "--header-timeout", f"{HEAD_S}s", "--body-timeout",
                       f"{BODY_S}s", *args) as (_, url):
        host, _, port = url.removeprefix("http://").rpartition(":")
        yield World(url, host, int(port), token, run.id)


def head(w: World, *, body: bool, token: bool, length: int = 1000) -> bytes:
    method, path = ("POST", f"/api/runs/{w.run}/heartbeat") if body else ("GET", "/api/runs")
    lines = [f"{method} {path} HTTP/1.1", f"Host: {w.host}:{w.port}"]
    if token:
        lines.append(f"Authorization: Bearer {w.token}")
    if body:
        lines += ["Content-Type: application/json", f"Content-Length: {length}"]
    return ("\r\n".join(lines) + "\r\n").encode()


@dataclass(frozen=True)
class Cut:
    kind: str
    after: float  # seconds from the start of what the deadline bounds to the close
    answer: bytes


async def dribble(w: World, kind: str, *, token: bool, piece: bytes = b"x",
                  every: float = DRIBBLE_S) -> Cut:
    """One slow client: `head` sends its request head one header line at a time and never
    ends it; `body` sends a whole head, then its body `piece` by `piece`, never all of it.
    Returns once the server closed the connection."""
    loop = asyncio.get_running_loop()
    first = head(w, body=kind == "body", token=token)
    started = loop.time()  # before the server can have started its clock
    reader, writer = await asyncio.open_connection(w.host, w.port)
    if kind == "body":
        started = loop.time()
        writer.write(first + b"\r\n")
        pieces: Iterator[bytes] = itertools.repeat(piece)
    else:
        pieces = itertools.chain(first.splitlines(keepends=True),
                                 itertools.repeat(b"X-Slow: 1\r\n"))
    answer = asyncio.ensure_future(_read_all(reader))
    while not answer.done():
        with contextlib.suppress(ConnectionError):
            writer.write(next(pieces))
            await writer.drain()
        await asyncio.wait([answer], timeout=every)
        assert loop.time() - started < (HEAD_S if kind == "head" else BODY_S) + SLACK, \
            f"a slow {kind} was not cut"
    writer.close()
    with contextlib.suppress(ConnectionError):
        await writer.wait_closed()
    return Cut(kind, loop.time() - started, answer.result())


async def _read_all(reader: asyncio.StreamReader) -> bytes:
    try:
        return await reader.read()
    except ConnectionError:
        return b""


async def normal_client(w: World, until: asyncio.Event) -> int:
    """Lists the runs every 0.2 s until told to stop; every answer must be a 200."""
    answered = 0
    headers = {"Authorization": f"Bearer {w.token}"}
    async with httpx.AsyncClient(base_url=w.url, headers=headers, timeout=SLACK) as client:
        while not until.is_set():
            response = await client.get("/api/runs")
            assert response.status_code == 200, response.text
            answered += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(until.wait(), 0.2)
    return answered


def assert_cut_in_time(cut: Cut) -> None:
    deadline = HEAD_S if cut.kind == "head" else BODY_S
    assert deadline - EARLY <= cut.after <= deadline + SLACK, cut
    # nothing, 408, or the handler's own refusal before it read the body; never an answer
    assert cut.answer == b"" or cut.answer.startswith(b"HTTP/1.1 4"), cut


def test_200_slow_clients_are_cut_at_their_deadlines_while_others_are_answered(
        tmp_path: Path) -> None:
    """50 each: headers and bodies dribbled, with and without a token."""
    async def main(w: World) -> tuple[list[Cut], int]:
        stop = asyncio.Event()
        normal = asyncio.ensure_future(normal_client(w, stop))
        await asyncio.sleep(0.3)
        slow = [dribble(w, kind, token=token)
                for kind in ("head", "body") for token in (False, True) for _ in range(50)]
        cuts = await asyncio.gather(*slow)
        stop.set()
        return cuts, await normal

    with world(tmp_path, "--max-connections", "400") as w:
        cuts, answered = asyncio.run(main(w))
    assert len(cuts) == 200
    for cut in cuts:
        assert_cut_in_time(cut)
    assert any(c.answer.startswith(b"HTTP/1.1 408") for c in cuts if c.kind == "head")
    assert answered >= 5  # it was answered before, during and after the slow ones


def test_a_connection_past_the_limit_is_refused_at_once_and_streams_count(
        tmp_path: Path) -> None:
    """With room for 4: an event stream and 3 idle connections fill it; a fifth is
    answered 503 without waiting for any deadline; once they go, it is served."""
    async def main(w: World) -> None:
        held: list[asyncio.StreamWriter] = []
        async with _events(w) as _stream_open:
            for _ in range(3):
                _, writer = await asyncio.open_connection(w.host, w.port)
                held.append(writer)
            await asyncio.sleep(0.3)  # the server has made all four
            reader, writer = await asyncio.open_connection(w.host, w.port)
            writer.write(head(w, body=False, token=True) + b"\r\n")
            answer = await asyncio.wait_for(_read_all(reader), HEAD_S)  # before any deadline
            assert answer == FULL, answer
            writer.close()
            for writer in held:
                writer.close()
        await asyncio.sleep(0.5)
        async with httpx.AsyncClient(base_url=w.url, timeout=SLACK) as client:
            answered = await client.get("/api/runs",
                                        headers={"Authorization": f"Bearer {w.token}"})
        assert answered.status_code == 200

    with world(tmp_path, "--max-connections", "4", "--header-timeout", "60s") as w:
        asyncio.run(main(w))


@contextlib.asynccontextmanager
async def _events(w: World) -> AsyncIterator[httpx.Response]:
    headers = {"Authorization": f"Bearer {w.token}"}
    async with httpx.AsyncClient(base_url=w.url, timeout=SLACK) as client, \
            client.stream("GET", "/events", headers=headers) as response:
        assert response.status_code == 200
        yield response


def test_an_event_stream_outlives_every_deadline(tmp_path: Path) -> None:
    """The deadlines bound reading the request: a stream open for longer than the head,
    body and keep-alive deadlines together still tells of a change made afterwards."""
    async def main(w: World) -> None:
        async with _events(w) as response:
            lines = response.aiter_lines()
            await asyncio.sleep(HEAD_S + BODY_S + 1.5)
            async with httpx.AsyncClient(base_url=w.url, timeout=SLACK) as client:
                answer = await client.post(
                    f"/api/runs/{w.run}/cancel", json={"reason": "seen on the stream?"},
                    headers={"Authorization": f"Bearer {w.token}"})
            assert answer.status_code == 200, answer.text
            seen = await asyncio.wait_for(_cancelled_seen(lines, w.run), SLACK)
            assert seen

    with world(tmp_path, "--keep-alive", "1s") as w:
        asyncio.run(main(w))


async def _cancelled_seen(lines: AsyncIterator[str], run: str) -> bool:
    async for line in lines:
        if line.startswith("data:") and run in line:
            data = json.loads(line.removeprefix("data:"))
            if any(r.get("id") == run and r.get("state") == "cancelled"
                   for r in data.get("runs", [])):
                return True
    return False


async def _one_answer(w: World, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
    """One request on the connection, its answer read whole (the connection kept)."""
    writer.write(head(w, body=False, token=True) + b"\r\n")
    first = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), SLACK)
    assert first.startswith(b"HTTP/1.1 200"), first
    length = next(int(line.partition(b":")[2]) for line in first.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    await asyncio.wait_for(reader.readexactly(length), SLACK)


def test_an_idle_connection_is_closed_after_keep_alive_and_a_next_head_has_its_deadline(
        tmp_path: Path) -> None:
    async def main(w: World) -> None:
        loop = asyncio.get_running_loop()
        reader, writer = await asyncio.open_connection(w.host, w.port)
        idle = loop.time()  # before the server can have started its clock
        await _one_answer(w, reader, writer)
        assert await asyncio.wait_for(_read_all(reader), 1.0 + SLACK) == b""
        assert loop.time() - idle >= 1.0 - EARLY
        writer.close()
        # a kept-alive connection's next request, dribbled, is cut at the head deadline
        reader, writer = await asyncio.open_connection(w.host, w.port)
        await _one_answer(w, reader, writer)
        began = loop.time()
        answer = asyncio.ensure_future(_read_all(reader))
        for piece in itertools.cycle([b"G", b"E", b"T"]):
            writer.write(piece)
            await asyncio.wait([answer], timeout=0.3)  # within the keep-alive bound
            assert loop.time() - began < HEAD_S + SLACK
            if answer.done():
                break
        assert loop.time() - began >= HEAD_S - EARLY
        # 408, unless the close overtook it (a byte sent after it resets the connection)
        assert answer.result() in (b"", LATE), answer.result()
        writer.close()

    with world(tmp_path, "--keep-alive", "1s") as w:
        asyncio.run(main(w))


def test_an_idle_connection_is_kept_for_the_whole_keep_alive_given(tmp_path: Path) -> None:
    """--keep-alive is the server's bound, not uvicorn's own (5 s): a connection idle past
    that but within the bound given still takes its next request."""
    async def main(w: World) -> None:
        reader, writer = await asyncio.open_connection(w.host, w.port)
        await _one_answer(w, reader, writer)
        await asyncio.sleep(UVICORN_KEEP_ALIVE_S + 2.0)  # idle, well within --keep-alive
        await _one_answer(w, reader, writer)  # the same connection, still open
        writer.close()

    with world(tmp_path, "--keep-alive", "60s") as w:
        asyncio.run(main(w))


def test_a_large_body_may_outlast_the_body_deadline_only_at_the_documented_rate(
        tmp_path: Path) -> None:
    """--body-timeout 1s: an upload of 768 KiB sent at 256 KiB/s (3 s, four times the
    64 KiB/s that buys time past the deadline) is recorded whole; the same upload at
    16 KiB/s is cut at the deadline and records nothing."""
    size = 768 * 1024

    async def upload(w: World, name: str, chunk: int, every: float) -> bytes:
        path = f"/api/runs/{w.run}/artifacts/{name}?role=report&epoch=1"
        lines = [f"POST {path} HTTP/1.1", f"Host: {w.host}:{w.port}",
                 f"Authorization: Bearer {w.token}", "Content-Type: application/octet-stream",
                 f"Content-Length: {size}"]
        reader, writer = await asyncio.open_connection(w.host, w.port)
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        answer = asyncio.ensure_future(_read_all(reader))
        sent = 0
        while sent < size and not answer.done():
            with contextlib.suppress(ConnectionError):
                writer.write(b"z" * min(chunk, size - sent))
                await writer.drain()
            sent += chunk
            await asyncio.wait([answer], timeout=every)
        result = await asyncio.wait_for(answer, 1.0 + SLACK)
        writer.close()
        return result

    with world(tmp_path, "--body-timeout", "1s") as w:
        with open_store(f"sqlite:///{tmp_path / 'store.db'}") as store:
            runs.Run(store, w.run, actor="alice").claim()  # epoch 1
        steady = asyncio.run(upload(w, "steady.bin", 16 * 1024, 1 / 16))
        assert steady.startswith(b"HTTP/1.1 200"), steady[:300]
        dribbled = asyncio.run(upload(w, "dribbled.bin", 4 * 1024, 1 / 4))
        assert dribbled in (b"", LATE), dribbled[:300]
        auth = {"Authorization": f"Bearer {w.token}"}
        stored = httpx.get(f"{w.url}/api/runs/{w.run}/artifacts/steady.bin", headers=auth,
                           timeout=SLACK)
        assert stored.content == b"z" * size
        missing = httpx.get(f"{w.url}/api/runs/{w.run}/artifacts/dribbled.bin", headers=auth,
                            timeout=SLACK)
        assert missing.status_code == 404


@pytest.mark.parametrize("option", [("--header-timeout", "0s"), ("--body-timeout", "-1"),
                                    ("--keep-alive", "soon"), ("--max-connections", "0")])
def test_a_bound_that_is_no_bound_is_refused_before_serving(
        tmp_path: Path, option: tuple[str, str]) -> None:
    done = subprocess.run([sys.executable, "-m", "waypost", "serve", "--port", "0",
                           "--store", str(tmp_path / "store.db"), *option],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert "serving on" not in done.stderr
    assert option[0] in done.stderr
