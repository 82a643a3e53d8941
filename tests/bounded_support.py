"""Helpers for the bounded-commands and bounded-reads tests: `waypost` as a real process
under a hang guard, a server on 127.0.0.1 that answers one byte at a time, and whether a
process is gone."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar, cast

import pytest

T = TypeVar("T")
GUARD = 30.0  # a hang guard, far above what any of these calls needs


def waypost(cwd: Path, *args: str, actor: str = "w1") -> subprocess.CompletedProcess[str]:
    """`waypost ARGS` in `cwd` as a real process; fails the test if it outlives `GUARD`."""
    env = {**os.environ, "WAYPOST_ACTOR": actor}
    env.pop("WAYPOST_URL", None)
    try:
        return subprocess.run([sys.executable, "-m", "waypost", *args], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=GUARD, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"waypost {' '.join(args)} still running after {GUARD:g}s")


def started_run(cwd: Path) -> str:
    """A fresh store in `cwd` with a run claimed by w1."""
    for args, actor in ((("init",), "alice"), (("start", "Bounded", "--owner", "alice"), "alice")):
        done = waypost(cwd, *args, actor=actor)
        assert done.returncode == 0, done.stderr
    run_id = done.stdout.strip()
    assert waypost(cwd, "claim", run_id).returncode == 0
    return run_id


def evidence(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)["evidence"]
    return found


def gone(pid: int, within: float = 10.0) -> bool:
    """The process has ended (a zombie waiting for its reaper counts as ended)."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        if _state(pid) in ("Z", "X", None):
            return True
        time.sleep(0.05)
    return False


def _state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


@contextmanager
def trickling_server(interval: float = 0.3, lifetime: float = 60.0) -> Iterator[str]:
    """An HTTP server on 127.0.0.1 that sends its answer, headers included, one byte every
    `interval` seconds; it stops by itself after `lifetime` seconds or when the test ends."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()
    answer = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100000\r\n\r\n"
    answer += b"x" * 100000

    def serve() -> None:
        end = time.monotonic() + lifetime
        while not stop.is_set() and time.monotonic() < end:
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                for byte in answer:
                    if stop.wait(interval) or time.monotonic() >= end:
                        break
                    try:
                        conn.sendall(bytes([byte]))
                    except OSError:  # the client gave up: good
                        break

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()


def finishes(target: Callable[[], T], within: float = GUARD) -> T:
    """`target()` in a thread; fails the test if it has not returned `within` seconds."""
    box: dict[str, Any] = {}

    def call() -> None:
        try:
            box["value"] = target()
        except BaseException as exc:  # handed to the test below
            box["error"] = exc

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(timeout=within)
    if thread.is_alive():
        pytest.fail(f"still running after {within:g}s")
    if "error" in box:
        raise box["error"]
    return cast(T, box["value"])
