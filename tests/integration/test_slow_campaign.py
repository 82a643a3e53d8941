"""The bad-input campaign's slow rows: many connections to a real `waypost serve`, each
dribbling a request's head or body in random pieces at random pace, to every kind of
route (the API's reads and writes, uploads, the hook endpoint, the board and its stream),
with a valid token, a wrong one or none, in several content types and framings.

Each must be closed by its deadline plus SLACK (a hang guard), answered nothing, 408 or
a 4xx refusal (never a success: no request ever completed), the store unchanged, the
server alive and answering, and its log free of tracebacks.

CI runs a short campaign; `WAYPOST_CAMPAIGN=long` runs a long one (more connections, more
rounds, slower pieces).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

import waypost
from tests.http_support import START_WAIT, issue
from waypost.store import open_store

LONG = os.environ.get("WAYPOST_CAMPAIGN") == "long"
CONNECTIONS = 300 if LONG else 60  # per round
ROUNDS = 5 if LONG else 1
SLOWEST = 2.5 if LONG else 0.8  # seconds, the longest pause between two pieces
HEAD_S = 2.0
BODY_S = 2.0
SLACK = 15.0  # hang guard past a deadline


@dataclass(frozen=True)
class Server:
    url: str
    host: str
    port: int
    token: str
    run: str
    log: Path


@contextlib.contextmanager
def server(tmp_path: Path) -> Iterator[Server]:
    store_url = f"sqlite:///{tmp_path / 'store.db'}"
    with open_store(store_url) as store:
        run, _ = waypost.start(store, "slow", actor="alice", owner="alice", target="none:",
                               kind=waypost.Kind.LONG_RUNNING, max_silence=3600)
    token = issue(store_url, "alice", "owner")
    log = tmp_path / "serve.log"
    with log.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "waypost", "serve", "--port", "0", "--header-timeout",
             f"{HEAD_S}s", "--body-timeout", f"{BODY_S}s", "--keep-alive", "1s",
             "--max-connections", str(CONNECTIONS + 50)],
            env={**os.environ, "WAYPOST_URL": store_url}, stderr=err)
    try:
        deadline = time.monotonic() + START_WAIT
        while not (found := re.search(r"http://127\.0\.0\.1:(\d+)", log.read_text())):
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "waypost serve did not start"
            time.sleep(0.05)
        yield Server(found.group(0), "127.0.0.1", int(found.group(1)), token, run.id, log)
        assert proc.poll() is None, f"the server died: {log.read_text()}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


ROUTES = (("GET", "/api/runs"), ("GET", "/"), ("GET", "/events"), ("GET", "/api/runs/{run}"),
          ("POST", "/api/runs"), ("POST", "/api/runs/{run}/heartbeat"),
          ("POST", "/api/runs/{run}/cancel"), ("POST", "/api/runs/{run}/artifacts/x.md"),
          ("POST", "/hooks/claude/Stop"), ("POST", "/runs/{run}/cancel"))
TYPES = ("application/json", "text/plain", "application/x-www-form-urlencoded",
         "application/octet-stream", "multipart/form-data; boundary=x")


@dataclass(frozen=True)
class Shape:
    """One slow client, as drawn."""

    kind: str  # "head": the head never ends; "body": a whole head, a body never ending
    method: str
    path: str
    auth: str  # "good", "wrong", "none"
    framing: str  # "length" or "chunked"
    content_type: str
    piece: int  # bytes per write
    pause: float  # seconds between writes

    def head(self, s: Server) -> bytes:
        lines = [f"{self.method} {self.path.format(run=s.run)} HTTP/1.1", f"Host: {s.host}"]
        secret = {"good": s.token, "wrong": "wp_tok_wrong", "none": ""}[self.auth]
        if secret:
            lines.append(f"Authorization: Bearer {secret}")
        if self.kind == "body":
            lines.append(f"Content-Type: {self.content_type}")
            lines.append("Transfer-Encoding: chunked" if self.framing == "chunked"
                         else "Content-Length: 100000")
        return ("\r\n".join(lines) + "\r\n").encode()

    def stream(self, s: Server) -> Iterator[bytes]:
        """The bytes in order, cut into pieces: never a whole request."""
        if self.kind == "body":
            yield self.head(s) + b"\r\n"
            filler = b"1\r\n{\r\n" if self.framing == "chunked" else b'{"note": "' + b"x" * 64
        else:
            yield from _cut(self.head(s), self.piece)
            filler = b"X-Slow: " + b"y" * 20 + b"\r\n"
        while True:
            yield from _cut(filler, self.piece)


def _cut(data: bytes, size: int) -> Iterator[bytes]:
    for at in range(0, len(data), size):
        yield data[at:at + size]


def draw(rng: random.Random) -> Shape:
    kind = rng.choice(("head", "body"))
    method, path = rng.choice([r for r in ROUTES if kind == "head" or r[0] == "POST"])
    return Shape(kind=kind, method=method, path=path, auth=rng.choice(("good", "wrong", "none")),
                 framing=rng.choice(("length", "chunked")), content_type=rng.choice(TYPES),
                 piece=rng.choice((1, 1, 2, 7, 30)), pause=rng.uniform(0.05, SLOWEST))


async def slow(s: Server, shape: Shape) -> tuple[Shape, float, bytes]:
    loop = asyncio.get_running_loop()
    started = loop.time()
    reader, writer = await asyncio.open_connection(s.host, s.port)
    answer = asyncio.ensure_future(_read_all(reader))
    for piece in shape.stream(s):
        if answer.done():
            break
        with contextlib.suppress(ConnectionError):
            writer.write(piece)
            await writer.drain()
        await asyncio.wait([answer], timeout=shape.pause)
        assert loop.time() - started < HEAD_S + BODY_S + SLACK, f"not cut: {shape}"
    writer.close()
    with contextlib.suppress(ConnectionError):
        await writer.wait_closed()
    return shape, loop.time() - started, answer.result()


async def _read_all(reader: asyncio.StreamReader) -> bytes:
    try:
        return await reader.read()
    except ConnectionError:
        return b""


def refused(answer: bytes) -> bool:
    """A 4xx, the board sending an unsigned-in browser to its sign-in page, or a hook
    route's refusal (200, the host's "block" answer: a hook is always answered 200)."""
    found = re.match(rb"HTTP/1\.1 (\d{3}) ", answer)
    status = int(found.group(1)) if found else 0
    head, _, body = answer.partition(b"\r\n\r\n")
    hook_refused = status == 200 and b'"decision":"block"' in body.replace(b" ", b"")
    return (400 <= status < 500 or (status == 303 and b"\r\nlocation: /login" in head)
            or hook_refused)


def test_slow_clients_of_every_shape_are_cut_and_change_nothing(tmp_path: Path) -> None:
    rng = random.Random(int(time.time()) if LONG else 32)
    with server(tmp_path) as s:
        auth = {"Authorization": f"Bearer {s.token}"}
        before = httpx.get(f"{s.url}/api/runs/{s.run}/events", headers=auth, timeout=SLACK)
        assert before.status_code == 200
        for _ in range(ROUNDS):
            shapes = [draw(rng) for _ in range(CONNECTIONS)]

            async def round_of(shapes: list[Shape]) -> list[tuple[Shape, float, bytes]]:
                return await asyncio.gather(*(slow(s, shape) for shape in shapes))

            for shape, took, answer in asyncio.run(round_of(shapes)):
                deadline = HEAD_S if shape.kind == "head" else BODY_S
                assert took <= deadline + SLACK, (shape, took)
                # nothing, or a refusal: no request was ever whole (a stream's head never
                # ends either), so nothing succeeded
                assert answer == b"" or refused(answer), (shape, answer[:300])
            listed = httpx.get(f"{s.url}/api/runs", headers=auth, timeout=SLACK)
            assert listed.status_code == 200, listed.text
        after = httpx.get(f"{s.url}/api/runs/{s.run}/events", headers=auth, timeout=SLACK)
        assert after.json() == before.json()
    log = s.log.read_text()
    assert "Traceback" not in log, log[-3000:]
    assert "Exception" not in log, log[-3000:]
