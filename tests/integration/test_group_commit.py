"""Group commit on SQLite: the writes threads hand in while another group is being made
durable commit together, and each keeps its own guard, its own answer and its own
durability: no acknowledged write lost, no refused write applied, every chain verifies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.http_support import Api, serving_app
from waypost.config import load_config
from waypost.core.history import make_event, verify_run
from waypost.core.machine import apply
from waypost.core.writes import RunWrite
from waypost.errors import StaleLease, VersionConflict, WaypostError
from waypost.events import Heartbeat
from waypost.http.settings import ServerConfig
from waypost.model import Authority
from waypost.store.sqlite.store import SqliteStore
from waypost.usecases import starting, tokens
from waypost.usecases.runs import Run


def _claimed(store: SqliteStore, count: int) -> list[Run]:
    made = []
    for i in range(count):
        packet, _ = starting.start(store, f"r{i}", actor="alice", target="none:")
        run = Run(store, packet.id, actor=f"w{i}")
        run.claim()
        made.append(run)
    return made


def _beat(store: SqliteStore, run_id: str, note: str) -> RunWrite:
    """A heartbeat decided from the run as it stands now (its guard: this version)."""
    snap = store.load(run_id)
    packet = snap.packet
    assert packet.worker is not None
    event = make_event(packet, run_id, Heartbeat(note=note), actor=packet.worker.actor,
                       at=packet.updated_at, epoch=packet.worker.epoch,
                       prev_hash=snap.head_hash)
    return RunWrite(run_id=run_id, expected_version=packet.version, events=(event,),
                    packet=apply(packet, event))


def _verified(store: SqliteStore) -> None:
    for run_id in store.run_ids():
        verify_run(run_id, store.events(run_id), store.get(run_id))


def _held_while(store: SqliteStore, pending: int, writers: list[Callable[[], None]]) -> None:
    """Start `writers` while this thread holds the store's file lock, so the first leads a
    group of one that waits and the rest queue behind it; let go once `pending` wait."""
    threads = [threading.Thread(target=w) for w in writers]
    with store._file.held("hold the store for the test"):
        for t in threads:
            t.start()
        deadline = time.monotonic() + 30
        while len(store.group._waiting) < pending:
            assert time.monotonic() < deadline, "the writers never queued"
            time.sleep(0.005)
    for t in threads:
        t.join(timeout=60)
        assert not t.is_alive()


def test_writes_that_wait_commit_as_one_group(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "s.db") as store:
        made = _claimed(store, 16)
        # the first write led a group of its own; the 15 that waited went in one more
        assert _grouped_heartbeats(store, made) == (2, 16)
        _verified(store)


def test_without_group_commit_every_write_commits_alone(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "s.db", group_commit=False) as store:
        made = _claimed(store, 16)
        assert _grouped_heartbeats(store, made) == (16, 16)
        _verified(store)


def _grouped_heartbeats(store: SqliteStore, made: list[Run]) -> tuple[int, int]:
    """A heartbeat of each run, handed in while the store is held so all but the first
    wait; every one applied; the groups and writes they were committed in."""
    before = (store.group.groups, store.group.writes)
    errors: list[BaseException] = []

    def beat(run: Run) -> Callable[[], None]:
        def go() -> None:
            try:
                run.heartbeat(note="grouped")
            except BaseException as exc:
                errors.append(exc)
        return go

    _held_while(store, len(made) - 1, [beat(r) for r in made])
    assert errors == []
    last = [store.events(r.id)[-1].data for r in made]
    assert all(isinstance(d, Heartbeat) and d.note == "grouped" for d in last)
    return store.group.groups - before[0], store.group.writes - before[1]


@pytest.mark.parametrize("grouping", [True, False])
def test_the_server_opens_its_store_grouping_as_waypost_toml_says(tmp_path: Path,
                                                                 grouping: bool) -> None:
    (tmp_path / "waypost.toml").write_text(f"[store]\ngroup_commit = {str(grouping).lower()}\n")
    config = ServerConfig(store_url=str(tmp_path / "s.db"), project=load_config(tmp_path))
    with serving_app(config) as (app, url):
        store = app.state.store
        assert isinstance(store, SqliteStore)
        made = _claimed(store, 16)
        assert _grouped_heartbeats(store, made) == ((2, 16) if grouping else (16, 16))
        secret, _ = tokens.issue(store, holder="w0", role="worker", run_id=made[0].id,
                                 ttl=None, by="test")
        Api(url, secret).ok(f"/api/runs/{made[0].id}/heartbeat", {"epoch": 1})
        assert store.group.writes == 16 + 16 + 1  # its claims, the beats, the request's
        _verified(store)


def test_serve_refuses_a_group_commit_setting_that_is_not_true_or_false(
        tmp_path: Path) -> None:
    (tmp_path / "waypost.toml").write_text('[store]\ngroup_commit = "off"\n')
    done = subprocess.run([sys.executable, "-m", "waypost", "serve", "--port", "0"],
                          cwd=tmp_path, env={**os.environ, "WAYPOST_URL": str(tmp_path / "s.db")},
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "[store] group_commit must be true or false" in done.stderr


def test_a_conflict_or_a_stale_lease_in_a_group_refuses_that_write_alone(
        tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "s.db") as store:
        made = _claimed(store, 6)
        clash = made[0].id
        # two writes decided from the same version of one run: the first in the group wins
        first, second = _beat(store, clash, "first"), _beat(store, clash, "second")
        # a worker whose lease is taken over while it works: it decides from the packet its
        # own claim left (no read), so its write reaches the group and conflicts there
        stale = made[1]
        Run(store, stale.id, actor="alice").transfer(Authority.TAKEOVER, "w9")
        Run(store, stale.id, actor="w9").claim()
        results: dict[str, object] = {}

        def commit(name: str, write: RunWrite) -> Callable[[], None]:
            def go() -> None:
                try:
                    store.commit_write(write)
                    results[name] = "ok"
                except WaypostError as exc:
                    results[name] = exc
            return go

        def stale_beat() -> None:
            try:
                stale.heartbeat(note="late")
                results["stale"] = "ok"
            except WaypostError as exc:
                results["stale"] = exc

        others = {f"other{i}": _beat(store, made[i].id, "other") for i in range(2, 6)}
        writers = [commit("first", first), stale_beat, commit("second", second),
                   *(commit(n, w) for n, w in others.items())]
        _held_while(store, len(writers) - 1, writers)
        outcomes = {n: type(r).__name__ if isinstance(r, BaseException) else str(r)
                    for n, r in results.items()}
        # exactly one of the two clashing writes applied, whichever led; the other conflicted
        assert sorted([outcomes["first"], outcomes["second"]]) == ["VersionConflict", "ok"]
        assert isinstance(results["stale"], StaleLease)
        assert all(outcomes[n] == "ok" for n in others)
        notes = [e.type for e in store.events(clash)].count("heartbeat")
        assert notes == 1
        assert [e.actor for e in store.events(stale.id)].count("w1") == 1  # its claim only
        _verified(store)


def test_a_group_that_cannot_commit_fails_every_write_in_it(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "s.db") as store:
        made = _claimed(store, 4)
        writes = [_beat(store, r.id, "doomed") for r in made]
        # the last repeats the first's event rows: the group's transaction cannot commit
        writes.append(RunWrite(run_id=made[0].id, expected_version=writes[0].packet.version,
                               events=writes[0].events, packet=writes[0].packet))
        before = {r.id: store.load(r.id) for r in made}
        failed: list[BaseException] = []

        def commit(write: RunWrite) -> Callable[[], None]:
            def go() -> None:
                try:
                    store.commit_write(write)
                except BaseException as exc:
                    failed.append(exc)
            return go

        # hold the lock so all five queue, then let the first lead alone and the rest group
        _held_while(store, 4, [commit(w) for w in writes])
        for r in made[1:]:
            assert store.load(r.id).packet == before[r.id].packet
        assert len(failed) == 4  # every write of the failed group; the first led alone
        _verified(store)


KILLED_WRITER = textwrap.dedent("""
    import sys, threading
    from waypost.usecases.runs import Run
    from waypost.store.sqlite.store import SqliteStore
    store = SqliteStore(sys.argv[1])
    ids = sys.argv[2:]
    lock = threading.Lock()
    def work(run_id, index):
        run = Run(store, run_id, actor=f"w{index}")
        while True:
            packet = run.heartbeat(note="beat")
            with lock:  # printed only once the write is durable, in one write(2): a
                # line shorter than PIPE_BUF reaches the pipe whole or not at all
                sys.stdout.write(f"{run_id} {packet.version}\\n")
                sys.stdout.flush()
    for index, run_id in enumerate(ids):
        threading.Thread(target=work, args=(run_id, index), daemon=True).start()
    threading.Event().wait()
""")


def test_sigkill_in_the_middle_of_groups_loses_no_acknowledged_write(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SqliteStore(path) as store:
        ids = [r.id for r in _claimed(store, 16)]
    writer = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(path), *ids],
                              stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert writer.stdout is not None
    acknowledged: dict[str, int] = {}
    deadline = time.monotonic() + 60
    while len(acknowledged) < 16 or sum(acknowledged.values()) < 16 * 6:
        assert time.monotonic() < deadline, "the writers made no progress"
        line = writer.stdout.readline()
        run_id, version = line.split()
        acknowledged[run_id] = max(acknowledged.get(run_id, 0), int(version))
    os.kill(writer.pid, signal.SIGKILL)
    rest = writer.stdout.read()
    writer.wait()
    writer.stdout.close()
    for line in rest.splitlines(keepends=True):
        assert line.endswith("\n"), f"a torn acknowledgement: {line!r}"
        run_id, version = line.split()
        acknowledged[run_id] = max(acknowledged[run_id], int(version))
    with SqliteStore(path) as store:
        for run_id, durable in acknowledged.items():
            assert store.get(run_id).version >= durable
        _verified(store)
        assert store.group.groups == 0  # this process wrote nothing


def test_a_lone_writer_leads_at_once(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "s.db") as store:
        [run] = _claimed(store, 1)
        before = (store.group.groups, store.group.writes)
        for i in range(5):
            run.heartbeat(note=str(i))
        assert (store.group.groups - before[0], store.group.writes - before[1]) == (5, 5)
        with pytest.raises(VersionConflict):
            store.commit_write(_beat_at(store, run.id, version=1))


def _beat_at(store: SqliteStore, run_id: str, *, version: int) -> RunWrite:
    write = _beat(store, run_id, "late")
    return RunWrite(run_id=run_id, expected_version=version, events=write.events,
                    packet=write.packet)


def test_the_server_runs_as_many_store_calls_at_once_as_it_has_threads(
        tmp_path: Path) -> None:
    # asyncio's own pool (CPUs + 4 threads) would leave most requests waiting for a thread
    # while a group commits, and so out of the next group
    config = ServerConfig(store_url=str(tmp_path / "s.db"), threads=24)
    with serving_app(config) as (app, url):
        store = app.state.store
        assert isinstance(store, SqliteStore)
        made = _claimed(store, 20)
        secrets = [tokens.issue(store, holder=f"w{i}", role="worker", run_id=run.id,
                                ttl=None, by="test")[0] for i, run in enumerate(made)]
        answers: list[int] = []

        def beat(i: int) -> None:
            answer = Api(url, secrets[i]).post(f"/api/runs/{made[i].id}/heartbeat",
                                               {"epoch": 1})
            answers.append(answer.status_code)

        clients = [threading.Thread(target=beat, args=(i,)) for i in range(20)]
        with store._file.held("hold the store for the test"):
            for client in clients:
                client.start()
            deadline = time.monotonic() + 20
            while _request_threads() < 20:  # each request waits in a thread of its own
                assert time.monotonic() < deadline, "the requests never all waited at once"
                time.sleep(0.01)
        for client in clients:
            client.join(60)
        assert answers == [200] * 20
        assert _request_threads() <= 24


def _request_threads() -> int:
    return sum(t.name.startswith("waypost-request") for t in threading.enumerate())
