"""Many processes on one PostgreSQL store, as on many hosts: two `waypost watch` daemons
(one sweeps, the other stands by and takes over when the sweeper is killed or stuck) and
two `waypost deliver` relays (every approved run delivered once)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from tests.delivery_support import Request, WebhookServer, approved_run, new_secret
from tests.helpers import FakeClock, Spawn, waypost_processes
from waypost.core import outbox
from waypost.durations import utcnow
from waypost.model import BlockerKind, Kind, State
from waypost.store import Store, open_store
from waypost.usecases import runs, starting

INTERVAL = 1.0  # each watcher's --interval; its lease is three of them


@pytest.fixture
def store(pg_url: str) -> Iterator[Store]:
    with open_store(pg_url) as opened:
        yield opened


@pytest.fixture
def spawn(pg_url: str) -> Iterator[Spawn]:
    with waypost_processes(pg_url) as run:
        yield run


def _wait_for(check: Callable[[], bool], seconds: float, what: str) -> float:
    """Poll `check` until it holds; the seconds it took (fails after `seconds`)."""
    began = time.monotonic()
    while not check():
        assert time.monotonic() - began < seconds, f"not within {seconds} s: {what}"
        time.sleep(0.05)
    return time.monotonic() - began


def _watcher(spawn: Spawn, name: str) -> subprocess.Popen[str]:
    return spawn("watch", "--interval", f"{INTERVAL:g}s", "--id", name, "--json")


def _roles(store: Store) -> dict[str, str]:
    return {w.id: w.role.value for w in store.watchers(now=utcnow())}


def _silent_runs(store: Store, count: int) -> list[str]:
    """Runs whose worker claims them and then says nothing: silent after one second."""
    ids = []
    for index in range(count):
        run, _ = starting.start(store, f"quiet worker {index}", actor="alice", owner="alice",
                            target="none:", kind=Kind.LONG_RUNNING, max_silence=1.0)
        runs.Run(store, run.id, actor="w1").claim()
        ids.append(run.id)
    return ids


def _blocked(store: Store, run_ids: list[str]) -> Callable[[], bool]:
    return lambda: all(store.get(r).state is State.BLOCKED for r in run_ids)


def _silence_recorded_by(store: Store, run_ids: list[str]) -> list[str]:
    """Who recorded each run's worker_silent blocker; fails unless each has exactly one."""
    actors = []
    for run_id in run_ids:
        (blocker,) = [b for b in store.get(run_id).blockers
                      if b.kind is BlockerKind.WORKER_SILENT]
        actors.append(blocker.opened_by)
    return actors


def _reports(proc: subprocess.Popen[str], early: Sequence[str] = ()) -> list[dict[str, Any]]:
    """A stopped watcher's JSON reports, one per interval (after the `early` lines read
    while it ran)."""
    out, err = proc.communicate(timeout=15)
    assert "Traceback" not in err, err
    return [json.loads(line) for line in [*early, *out.splitlines()] if line.strip()]


def _reported(proc: subprocess.Popen[str], actions: int, seconds: float) -> list[str]:
    """A running watcher's report lines, read until they tell of `actions` actions: the
    store sees a sweep's writes a moment before its report is printed, and a watcher
    killed in that moment never prints it (a hang guard, not a speed claim)."""
    lines: list[str] = []
    told = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if sum(len(json.loads(x)["actions"]) for x in lines if x.strip()) >= actions:
                told.set()
                return

    threading.Thread(target=read, daemon=True).start()
    assert told.wait(seconds), f"the watcher reported {lines}"
    return lines


def test_one_watcher_sweeps_and_the_standby_takes_over_when_it_is_killed(
        store: Store, spawn: Spawn) -> None:
    first = _watcher(spawn, "A")
    _wait_for(lambda: _roles(store) == {"A": "active"}, 20, "A sweeping")
    second = _watcher(spawn, "B")
    _wait_for(lambda: _roles(store) == {"A": "active", "B": "standby"}, 20, "B standing by")
    before = _silent_runs(store, 8)
    _wait_for(_blocked(store, before), 15, "the silent runs blocked")
    assert _silence_recorded_by(store, before) == ["watchdog:A"] * 8
    early = _reported(first, 8, 15)

    first.kill()
    first.wait(timeout=10)
    _wait_for(lambda: _roles(store).get("B") == "active", 3 * INTERVAL,
              "B active within one lease period")
    after = _silent_runs(store, 8)
    _wait_for(_blocked(store, after), 15, "the new silent runs blocked")
    assert _silence_recorded_by(store, after) == ["watchdog:B"] * 8
    assert _silence_recorded_by(store, before) == ["watchdog:A"] * 8  # still one each

    second.send_signal(signal.SIGTERM)
    a_reports, b_reports = _reports(first, early), _reports(second)
    assert second.returncode == 0
    assert {r["role"] for r in a_reports} == {"active"}
    assert sum(len(r["actions"]) for r in a_reports) == 8
    roles = [r["role"] for r in b_reports]
    takeover = roles.index("active")
    assert set(roles[:takeover]) == {"standby"}
    assert set(roles[takeover:]) == {"active"}  # once it took over, it kept sweeping
    assert b_reports[:takeover], "B never stood by"
    assert all(r["examined"] == 0 and r["sweeper"] == "A" for r in b_reports[:takeover])
    assert sum(len(r["actions"]) for r in b_reports) == 8
    assert "B" not in _roles(store)  # it left cleanly


def test_a_stuck_sweeper_is_replaced_once_its_lease_ends(store: Store, spawn: Spawn) -> None:
    first = _watcher(spawn, "A")
    _wait_for(lambda: _roles(store) == {"A": "active"}, 20, "A sweeping")
    second = _watcher(spawn, "B")
    _wait_for(lambda: _roles(store) == {"A": "active", "B": "standby"}, 20, "B standing by")
    os.kill(first.pid, signal.SIGSTOP)  # alive, holding the lock, renewing nothing
    run_ids = _silent_runs(store, 4)
    # A's lease (3 intervals) lapses, then B looks twice before it ends A's hold
    _wait_for(lambda: _roles(store).get("B") == "active", 6 * INTERVAL + 3, "B taking over")
    _wait_for(_blocked(store, run_ids), 10, "the silent runs blocked")
    assert _silence_recorded_by(store, run_ids) == ["watchdog:B"] * 4
    os.kill(first.pid, signal.SIGCONT)
    _wait_for(lambda: _roles(store).get("A") == "standby", 3 * INTERVAL + 2,
              "A standing by after it woke")
    for proc in (first, second):
        proc.send_signal(signal.SIGTERM)
    a_reports, b_reports = _reports(first), _reports(second)
    assert (first.returncode, second.returncode) == (0, 0)
    assert [r["role"] for r in a_reports][-1] == "standby"
    assert [r["took_over"] for r in b_reports].count(True) == 1
    assert sum(len(r["actions"]) for r in a_reports) == 0


def test_two_relays_deliver_every_approved_run_once(store: Store, spawn: Spawn) -> None:
    secret = new_secret()
    both_running = threading.Event()
    relays: list[subprocess.Popen[str]] = []

    def racing() -> bool:
        # both relays registered; or one has already ended: its claim, made while the
        # other's held every due row (SKIP LOCKED), found nothing, as `--once` may
        return len(store.relays(now=utcnow())) >= 2 or any(
            proc.poll() is not None for proc in relays)

    def respond(request: Request) -> tuple[int, bytes]:
        # the first answers wait until both relays run, so that they really race
        if not both_running.is_set():
            _wait_for(racing, 15, "both relays")
            both_running.set()
        time.sleep(0.01)
        return 200, b"ok"

    with WebhookServer(secret, respond).running() as server:
        clock = FakeClock(utcnow())
        run_ids = [approved_run(store, clock, target=server.url, title=f"run {i}")
                   for i in range(40)]
        env = {**os.environ, "WAYPOST_WEBHOOK_SECRET": secret}
        relays += [spawn("deliver", "--once", env=env) for _ in range(2)]
        outputs = [proc.communicate(timeout=60) for proc in relays]
    assert [proc.returncode for proc in relays] == [0, 0], [err for _, err in outputs]
    ids = server.ids()
    assert sorted(ids) == sorted(outbox.final_key(r) for r in run_ids), outputs  # once each
    assert server.rejected == []
    assert {store.get(r).state for r in run_ids} == {State.DELIVERED}
    sent = [out.count(": sent (HTTP 200") for out, _ in outputs]
    assert sum(sent) == 40  # between them; usually both send some, but one may find none
