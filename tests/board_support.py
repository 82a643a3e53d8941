"""A real `waypost serve` process for the board's tests, and a reader of its event stream."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import httpx

START_TIMEOUT = 30.0  # seconds for a server to answer after it was started


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Server:
    store_url: str
    port: int = field(default_factory=free_port)
    args: tuple[str, ...] = ()
    log: Path | None = None
    process: subprocess.Popen[bytes] | None = None
    _out: IO[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Server:
        env = {**os.environ, "WAYPOST_URL": self.store_url}
        if self.log is not None and self._out is None:
            self._out = open(self.log, "ab")  # noqa: SIM115 (closed by stop)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "waypost", "serve", "--port", str(self.port), *self.args],
            env=env, stdout=self._out or subprocess.DEVNULL, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            assert self.process.poll() is None, f"waypost serve exited {self.process.returncode}"
            try:
                httpx.get(f"{self.url}/login", timeout=1.0)
                return self
            except httpx.TransportError:
                time.sleep(0.1)
        raise AssertionError(f"waypost serve did not answer within {START_TIMEOUT} s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=15)
        self.process = None
        if self._out is not None:
            self._out.close()
            self._out = None


@contextmanager
def serving(store_url: str, *args: str, log: Path | None = None) -> Iterator[Server]:
    server = Server(store_url, args=args, log=log).start()
    try:
        yield server
    finally:
        server.stop()


@dataclass(frozen=True)
class Message:
    id: str | None
    event: str | None
    data: str


def read_messages(lines: Iterator[str], *, until: int,
                  within: float | None = None) -> Iterator[Message]:
    """Server-sent events as the browser parses them (comments skipped), at most `until`,
    and none once `within` seconds have passed (checked as lines arrive)."""
    deadline = None if within is None else time.monotonic() + within
    seen = 0
    event_id: str | None = None
    event: str | None = None
    data: list[str] = []
    for line in lines:
        if deadline is not None and time.monotonic() > deadline:
            return
        if line == "":
            if data or event_id is not None or event is not None:
                yield Message(id=event_id, event=event, data="\n".join(data))
                seen += 1
                if seen >= until:
                    return
            event_id, event, data = None, None, []
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "id":
            event_id = value
        elif name == "event":
            event = value
        elif name == "data":
            data.append(value)
