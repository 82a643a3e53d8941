"""A real `waypost serve` for tests: the app under uvicorn on 127.0.0.1, port 0, in a
thread of the test's process (or `waypost serve` in a process of its own), and a small
client that sends a bearer token."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import httpx
import uvicorn
from litestar import Litestar

from waypost.http.app import create_app
from waypost.http.settings import ServerConfig
from waypost.store import open_store
from waypost.system.deadlines import Limits, protocol
from waypost.system.sockets import listening_socket
from waypost.usecases import tokens

START_WAIT = 20.0  # seconds a server may take to listen


@contextmanager
def serving(store_url: str, **settings: Any) -> Iterator[str]:
    """The app serving `store_url` (with `settings` of ServerConfig); yields its base URL."""
    with serving_app(ServerConfig(store_url=store_url, **settings)) as (_, url):
        yield url


@contextmanager
def serving_app(config: ServerConfig) -> Iterator[tuple[Litestar, str]]:
    """The app made from `config`, served; yields it (its state holds the store it opened)
    and its base URL."""
    app = create_app(config)
    # the connection protocol `waypost serve` runs (read deadlines, connection limit)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2,
                                           http=protocol(Limits())))
    sock = listening_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + START_WAIT
    while not server.started:
        assert thread.is_alive(), "the server thread ended before it listened"
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.01)
    try:
        yield app, f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


@contextmanager
def serve_process(store_url: str, *args: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """`waypost serve --port 0` in a process of its own; yields it and its base URL."""
    env = {**os.environ, "WAYPOST_URL": store_url}
    proc = subprocess.Popen([sys.executable, "-m", "waypost", "serve", "--port", "0", *args],
                            env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        found = re.search(r"http://127\.0\.0\.1:\d+", line)
        assert found, f"waypost serve said: {line}{proc.stderr.read() if proc.poll() else ''}"
        yield proc, found.group(0)
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        if proc.stderr is not None:
            proc.stderr.close()


def issue(store_url: str, holder: str, role: str, run_id: str | None = None,
          ttl: timedelta | None = None) -> str:
    """A token's secret, issued straight into the store (as `waypost token issue` does)."""
    with open_store(store_url) as store:
        secret, _ = tokens.issue(store, holder=holder, role=role, run_id=run_id, ttl=ttl,
                                 by="test")
    return secret


@dataclass
class Api:
    """A client of one server, as one token's holder."""

    url: str
    token: str | None = None

    def _headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        return {**headers, **(extra or {})}

    def get(self, path: str, **params: Any) -> httpx.Response:
        return httpx.get(self.url + path, params=params, headers=self._headers(), timeout=30)

    def post(self, path: str, body: Any = None, *, headers: dict[str, str] | None = None,
             content: bytes | None = None, **params: Any) -> httpx.Response:
        if content is not None:
            return httpx.post(self.url + path, content=content, params=params,
                              headers=self._headers(headers), timeout=60)
        return httpx.post(self.url + path, json={} if body is None else body, params=params,
                          headers=self._headers(headers), timeout=60)

    def ok(self, path: str, body: Any = None, **params: Any) -> Any:
        response = self.post(path, body, **params)
        assert response.status_code in (200, 201), f"{path}: {response.text}"
        return response.json()
