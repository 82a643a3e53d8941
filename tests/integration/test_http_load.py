"""50 clients heartbeating their own runs over HTTP at once (5 s; 20 s with
WAYPOST_CAMPAIGN=long): no errors. Then the server is SIGKILLed in the middle of that: every
heartbeat that got a 2xx is in the store afterwards, and `verify` is clean."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

import waypost
from tests import pg
from tests.http_support import issue, serve_process
from waypost.events import Heartbeat

CLIENTS = 50
SECONDS = 20.0 if os.environ.get("WAYPOST_CAMPAIGN") == "long" else 5.0


@dataclass
class Client:
    run: str
    token: str
    acknowledged: list[str] = field(default_factory=list)  # notes that got a 2xx
    errors: list[str] = field(default_factory=list)

    def beat(self, url: str, until: float, stop: threading.Event) -> None:
        with httpx.Client(base_url=url, timeout=30,
                          headers={"Authorization": f"Bearer {self.token}"}) as http:
            n = 0
            while time.monotonic() < until and not stop.is_set():
                note = f"{self.run} beat {n}"
                n += 1
                try:
                    response = http.post(f"/api/runs/{self.run}/heartbeat",
                                         json={"note": note, "epoch": 1})
                except httpx.HTTPError as exc:
                    self.errors.append(f"{type(exc).__name__}: {exc}")
                    return
                if response.status_code == 200:
                    self.acknowledged.append(note)
                else:
                    self.errors.append(f"{response.status_code}: {response.text[:200]}")


def clients(store_path: str) -> list[Client]:
    made = []
    with waypost.open_store(store_path) as store:
        for n in range(CLIENTS):
            run, _ = waypost.start(store, f"load {n}", actor="alice", owner="alice",
                                   target="none:", worker=f"worker-{n}")
            made.append(Client(run.id, ""))
    for client, n in zip(made, range(CLIENTS), strict=True):
        client.token = issue(store_path, f"worker-{n}", "worker", run_id=client.run)
    return made


def run_all(team: list[Client], url: str, seconds: float,
            stop: threading.Event) -> list[threading.Thread]:
    until = time.monotonic() + seconds
    threads = [threading.Thread(target=c.beat, args=(url, until, stop)) for c in team]
    for thread in threads:
        thread.start()
    return threads


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_fifty_clients_heartbeat_without_errors_and_a_killed_server_loses_no_ack(
        backend: str, tmp_path: Path) -> None:
    with pg.fresh_schema() if backend == "postgres" else contextlib.nullcontext(
            str(tmp_path / "w.db")) as url:
        heartbeat_and_kill(url)


def heartbeat_and_kill(store_path: str) -> None:
    team = clients(store_path)
    with serve_process(store_path) as (_, url):
        began = time.monotonic()
        for thread in run_all(team, url, SECONDS, threading.Event()):
            thread.join(SECONDS + 60)
        elapsed = time.monotonic() - began
    assert [e for c in team for e in c.errors] == []
    beats = sum(len(c.acknowledged) for c in team)
    assert beats > CLIENTS
    backend = "postgresql" if "://" in store_path else "sqlite"
    print(f"{beats / elapsed:.0f} heartbeats/s over HTTP, {CLIENTS} clients, {backend}")

    for client in team:
        client.acknowledged.clear()
    with serve_process(store_path) as (server, url):
        stop = threading.Event()
        threads = run_all(team, url, SECONDS, stop)
        time.sleep(SECONDS / 2)
        os.kill(server.pid, signal.SIGKILL)
        server.wait(10)
        stop.set()
        for thread in threads:
            thread.join(60)
    assert sum(len(c.acknowledged) for c in team) > CLIENTS
    with waypost.open_store(store_path) as store:
        for client in team:
            stored = {e.data.note for e in store.events(client.run)
                      if isinstance(e.data, Heartbeat)}
            assert set(client.acknowledged) <= stored, client.run
    verify = subprocess.run([sys.executable, "-m", "waypost", "verify"],
                            env={**os.environ, "WAYPOST_URL": store_path},
                            capture_output=True, text=True, timeout=120, check=False)
    assert verify.returncode == 0, verify.stdout + verify.stderr
