"""Honest coverage: a run is `watched by W` only while W's registration is live and covers
it; otherwise `show`, `ls` and the JSON packet say unwatched."""

from __future__ import annotations

import functools
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import msgspec
import pytest

from tests.helpers import Cli, FakeClock, Spawn, waypost_processes
from waypost.core.observed import UNWATCHED, observe
from waypost.model import Kind, Packet, State, Watcher
from waypost.store import open_store
from waypost.usecases.starting import start


def _packet(clock: FakeClock, tmp_path: Path, *, kind: Kind = Kind.LONG_RUNNING) -> Packet:
    with open_store(str(tmp_path / "p.db")) as store:
        run, _ = start(store, "t", actor="alice", owner="alice", target="none:", kind=kind,
                       max_silence=60, clock=clock)
        return run.packet


def _watcher(clock: FakeClock, *, owner: str | None = None, swept: bool = True) -> Watcher:
    now = clock()
    return Watcher(id="box-42", host="box", pid=42, interval_s=30, owner=owner,
                   started_at=now, last_beat=now, last_sweep=now if swept else None,
                   expires_at=now + timedelta(seconds=90))


def test_coverage_is_claimed_only_for_a_live_watcher_whose_scope_covers_the_run(
        clock: FakeClock, tmp_path: Path) -> None:
    packet = _packet(clock, tmp_path)
    assert observe(packet, clock()).observed.watch == UNWATCHED  # type: ignore[union-attr]
    watcher = _watcher(clock)
    seen = observe(packet, clock.advance(12), [watcher]).observed
    assert seen is not None
    assert seen.watch == "watched by box-42 (last sweep 12 s ago, interval 30s)"
    assert seen.watched_by == "box-42"
    stale = observe(packet, clock.advance(78), [watcher]).observed  # its lease ran out
    assert stale is not None
    assert (stale.watch, stale.watched_by) == (UNWATCHED, None)
    others = _watcher(clock, owner="bob")
    assert observe(packet, clock(), [others]).observed.watch == UNWATCHED  # type: ignore[union-attr]
    fresh = _watcher(clock, swept=False)
    assert observe(packet, clock(), [fresh]).observed.watch.startswith(  # type: ignore[union-attr]
        "watched by box-42 (no sweep yet")


def test_finished_and_bounded_runs_need_no_watcher(clock: FakeClock, tmp_path: Path) -> None:
    bounded = _packet(clock, tmp_path, kind=Kind.BOUNDED)
    seen = observe(bounded, clock(), [_watcher(clock)]).observed
    assert seen is not None
    assert seen.watch == "bounded: runs inline, no watcher expected"
    done = msgspec.structs.replace(_packet(clock, tmp_path), state=State.CANCELLED)
    assert observe(done, clock()).observed.watch == "finished: nothing to watch"  # type: ignore[union-attr]


def _long_run(cli: Cli) -> str:
    cli.ok("init")
    return cli.ok("start", "Fix the flaky test", "--kind", "long_running", "--target",
                  "file:result.md", "--max-silence", "30m")


def test_show_ls_and_json_say_unwatched_until_a_cron_sweep_registers(cli: Cli) -> None:
    run = _long_run(cli)
    assert f"watch      {UNWATCHED}" in cli.ok("show", run)
    assert cli("show", run, "--json").json()["observed"]["watch"] == UNWATCHED
    assert "unwatched" in cli.ok("ls")
    report = cli("watch", "--once", "--id", "cron-a", "--interval", "1m", "--json").json()
    assert (report["watcher"], report["examined"]) == ("cron-a", 0)
    shown = cli("show", run, "--json").json()["observed"]
    assert shown["watched_by"] == "cron-a"
    assert shown["watch"].startswith("watched by cron-a (last sweep ")
    assert shown["watch"].endswith(", interval 60s)")
    assert "watched by cron-a" in cli.ok("ls")
    assert cli("ls", "--json").json()["runs"][0]["observed"]["watched_by"] == "cron-a"


# --- a real watcher process ------------------------------------------------------------


@pytest.fixture
def spawn(cli: Cli) -> Iterator[Spawn]:
    """Starts `waypost watch …` on the test's store."""
    with waypost_processes(str(cli.store)) as run:
        yield functools.partial(run, "watch")


def _watched_by(cli: Cli, run: str) -> str | None:
    observed = cli("show", run, "--json").json()["observed"]
    assert observed["watch"] == UNWATCHED or observed["watch"].startswith("watched by ")
    watcher: str | None = observed["watched_by"]
    return watcher


def _wait_for(check: Callable[[], bool], seconds: float) -> float:
    began = time.monotonic()
    while not check():
        assert time.monotonic() - began < seconds, "timed out"
        time.sleep(0.05)
    return time.monotonic() - began


def test_a_killed_watcher_stops_counting_once_its_lease_passes(
        cli: Cli, spawn: Callable[..., subprocess.Popen[str]]) -> None:
    run = _long_run(cli)
    assert _watched_by(cli, run) is None
    proc = spawn("--interval", "1s")
    name = f"{socket.gethostname()}-{proc.pid}"
    _wait_for(lambda: _watched_by(cli, run) == name, 20)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert _watched_by(cli, run) == name  # its lease (3 intervals) has not passed yet
    waited = _wait_for(lambda: _watched_by(cli, run) is None, 10)
    assert waited > 0.5
    assert f"watch      {UNWATCHED}" in cli.ok("show", run)


def test_sigterm_releases_the_watcher_at_once(
        cli: Cli, spawn: Callable[..., subprocess.Popen[str]]) -> None:
    run = _long_run(cli)
    proc = spawn("--interval", "30s", "--id", "daemon-a")
    _wait_for(lambda: _watched_by(cli, run) == "daemon-a", 20)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=10)
    assert proc.returncode == 0
    assert "watching every run as daemon-a" in out
    assert _watched_by(cli, run) is None


def test_a_daemon_sweep_blocks_a_silent_run(
        cli: Cli, spawn: Callable[..., subprocess.Popen[str]]) -> None:
    cli.ok("init")
    run = cli.ok("start", "Quiet worker", "--kind", "long_running", "--target", "none:",
                 "--max-silence", "1s")
    cli.ok("claim", run, actor="w1")
    spawn("--interval", "0.2s", "--json")
    _wait_for(lambda: cli("show", run, "--json").json()["state"] == "blocked", 20)
    (blocker,) = cli("show", run, "--json").json()["blockers"]
    assert blocker["kind"] == "worker_silent"
    assert blocker["opened_by"].startswith("watchdog:")
