"""The PostgreSQL backend beyond the conformance suite: URLs, errors that never leak the
driver, LISTEN/NOTIFY, advisory locks, concurrent first opens, and the CLI on PostgreSQL."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import psycopg
import pytest

from tests import pg
from tests.helpers import FakeClock
from waypost.cli import main
from waypost.core.history import make_event
from waypost.core.machine import apply
from waypost.errors import InvalidInput, StoreError, StoreUnreachable, VersionConflict
from waypost.events import Heartbeat
from waypost.model import BlockerKind, Kind, OutboxItem, Purpose, State
from waypost.store import open_store
from waypost.store.postgres.setup import latest_version, parse_url
from waypost.store.postgres.store import PostgresStore
from waypost.usecases import runs, starting

UNREACHABLE = "postgresql://postgres@127.0.0.1:1/test"


def _start(store: PostgresStore, clock: FakeClock) -> runs.Run:
    run, _ = starting.start(store, "t", actor="alice", target="none:", kind=Kind.LONG_RUNNING,
                        max_silence=60, clock=clock)
    return run


def _open(url: str) -> PostgresStore:
    store = open_store(url)
    assert isinstance(store, PostgresStore)
    return store


# --- URLs and errors ---------------------------------------------------------------------


def test_the_schema_option_is_split_off_and_the_password_hidden() -> None:
    target = parse_url("postgresql://bob:s3%40cret@db:5433/app?sslmode=require&schema=team_a")
    assert target.schema == "team_a"
    assert target.conninfo == ("postgresql://bob:s3%40cret@db:5433/app?sslmode=require"
                               "&application_name=waypost")
    assert target.display == "postgresql://bob:***@db:5433/app?sslmode=require&schema=team_a"
    assert parse_url("postgresql://db/app?password=pw").display == (
        "postgresql://db/app?password=***")
    assert "-c search_path=team_a" in target.options
    assert target.channel == "waypost_runs.team_a"
    assert parse_url("postgres://db/app").schema == "waypost"


@pytest.mark.parametrize("name", ["Team", "a-b", "x;drop", "1abc", "a" * 49])
def test_a_bad_schema_name_is_refused(name: str) -> None:
    with pytest.raises(InvalidInput, match="schema name"):
        parse_url(f"postgresql://db/app?schema={name}")


def test_an_unreachable_server_is_a_temporary_failure_with_the_driver_error_as_cause() -> None:
    with pytest.raises(StoreUnreachable, match="cannot open the PostgreSQL store") as caught:
        open_store(UNREACHABLE)
    assert isinstance(caught.value.__cause__, psycopg.Error)
    assert "waypost doctor" in caught.value.hint


def test_without_psycopg_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m.startswith(("waypost.store.postgres", "psycopg"))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(InvalidInput, match="needs psycopg") as caught:
        open_store("postgresql://db/app")
    assert "pip install 'waypost[postgres]'" in caught.value.hint


def test_a_driver_failure_mid_use_is_a_store_error(pg_url: str) -> None:
    with _open(pg_url) as store:
        run = _start(store, FakeClock())
        pg.drop_schema(store.schema)
        with pytest.raises(StoreError, match=f"cannot read run {run.id}") as caught:
            store.load(run.id)
        assert isinstance(caught.value.__cause__, psycopg.Error)


def test_both_url_schemes_open_the_same_store(pg_url: str) -> None:
    with _open(pg_url) as first, _open(pg_url.replace("postgresql://", "postgres://")) as same:
        run = _start(first, FakeClock())
        assert same.get(run.id) == first.get(run.id)


# --- schema on first open -----------------------------------------------------------------


def test_many_first_opens_at_once_migrate_once(pg_url: str) -> None:
    errors: list[BaseException] = []
    applied: list[list[int]] = []

    def open_once() -> None:
        try:
            with _open(pg_url) as store:
                applied.append(store.migrated_now)
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    threads = [threading.Thread(target=open_once) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    everything = list(range(1, latest_version() + 1))
    assert sorted(applied) == [[]] * 5 + [everything]
    with _open(pg_url) as store:
        state = store.schema_state()
        assert (state.version, state.latest) == (everything[-1], latest_version())
        assert state.applied_now == ()  # every migration was applied by the racing openers


# --- documents jsonb cannot hold exactly ---------------------------------------------------


def test_a_nul_character_keeps_an_exact_copy_beside_the_jsonb(pg_url: str) -> None:
    with _open(pg_url) as store:
        run = _start(store, FakeClock())
        run.heartbeat(note="before\x00after")
        assert store.get(run.id).progress.note == "before\x00after"
        with psycopg.connect(pg_url.split("?", maxsplit=1)[0]) as conn:
            row = conn.execute(
                f"SELECT packet->'progress'->>'note', packet_text IS NOT NULL"
                f" FROM {store.schema}.runs").fetchone()
        assert row == ("before\ufffdafter", True)


# --- LISTEN / NOTIFY ------------------------------------------------------------------------


def test_listeners_hear_committed_starts_and_changes_of_state_only(pg_url: str) -> None:
    """A heartbeat announces nothing (a notification holds a server-wide lock through the
    commit): starts and changes of state do, once committed."""
    clock = FakeClock()
    with _open(pg_url) as store, store.listen() as listener:
        run = _start(store, clock)
        run.heartbeat(note="one")
        snap = store.load(run.id)
        stale = make_event(snap.packet, run.id, Heartbeat(), actor="alice", at=clock(),
                           prev_hash=snap.head_hash)
        with pytest.raises(VersionConflict):
            store.commit(run.id, 1, [stale], apply(snap.packet, stale))
        run.block(BlockerKind.MISSING_INPUT, "which port?")
        heard = listener.poll(timeout=5) + listener.poll(timeout=0.5)
        assert [(c.run_id, c.version, c.state) for c in heard] == [
            (run.id, 1, State.IN_PROGRESS), (run.id, 3, State.BLOCKED)]
        assert listener.poll(timeout=0.1) == []


def test_a_listener_hears_only_its_own_store(pg_url: str) -> None:
    with pg.fresh_schema() as other_url, _open(pg_url) as mine, _open(other_url) as other, \
            mine.listen() as listener:
        _start(other, FakeClock())
        assert listener.poll(timeout=0.3) == []
        run = _start(mine, FakeClock())
        assert [c.run_id for c in listener.poll(timeout=5)] == [run.id]


# --- advisory locks ---------------------------------------------------------------------------


def test_one_holder_at_a_time_and_release_hands_over(pg_url: str) -> None:
    with _open(pg_url) as store, store.advisory_lock("sweeper") as first, \
            store.advisory_lock("sweeper") as second, store.advisory_lock("other") as other:
        assert first.try_acquire()
        assert first.try_acquire()  # holding it already
        assert not second.try_acquire()
        assert other.try_acquire()  # another name is another lock
        first.release()
        assert not first.is_held()
        assert second.try_acquire()
        assert second.is_held()
        second.close()
        assert first.try_acquire()


def test_a_killed_holder_frees_the_lock(pg_url: str) -> None:
    with subprocess.Popen([sys.executable, "-c", _HOLD_AND_WAIT, pg_url],
                          stdout=subprocess.PIPE, text=True) as holder:
        try:
            assert holder.stdout is not None
            assert holder.stdout.readline().strip() == "held"
            with _open(pg_url) as store, store.advisory_lock("sweeper") as standby:
                assert not standby.try_acquire()
                holder.kill()
                holder.wait(timeout=10)
                assert _eventually(standby.try_acquire)
        finally:
            holder.kill()


_HOLD_AND_WAIT = """
import sys, time
from waypost.store import open_store
store = open_store(sys.argv[1])
lock = store.advisory_lock("sweeper")
assert lock.try_acquire()
print("held", flush=True)
time.sleep(60)
"""


def _eventually(check: Callable[[], bool], tries: int = 50) -> bool:
    for _ in range(tries):
        if check():
            return True
        time.sleep(0.1)
    return False


# --- relays on many hosts --------------------------------------------------------------------


def _queue_notices(store: PostgresStore, clock: FakeClock, count: int) -> set[str]:
    run = _start(store, clock)
    keys = set()
    for index in range(count):
        snap = store.load(run.id)
        event = make_event(snap.packet, run.id, Heartbeat(note=str(index)), actor="alice",
                           at=clock(), prev_hash=snap.head_hash)
        item = OutboxItem(key=f"{run.id}.{event.seq}.test", run_id=run.id,
                          purpose=Purpose.NOTICE, topic="test", target="file:n.jsonl",
                          event_seq=event.seq, created_at=clock())
        store.commit(run.id, snap.packet.version, [event], apply(snap.packet, event), [item])
        keys.add(item.key)
    return keys


def test_concurrent_relays_never_claim_the_same_delivery(pg_url: str) -> None:
    clock = FakeClock()
    with _open(pg_url) as store:
        keys = set().union(*(_queue_notices(store, clock, 3) for _ in range(20)))
    claimed: dict[str, list[str]] = {"relay-1": [], "relay-2": [], "relay-3": []}

    def relay(name: str) -> None:  # each settles its batch before it claims the next
        with _open(pg_url) as store:
            while batch := store.claim_deliveries(name, now=clock(), lease_s=600, limit=3):
                claimed[name].extend(d.key for d in batch)
                for row in batch:
                    store.finish_delivery(row.key, name, at=clock(), receipt="ok",
                                          attempt=row.attempts)

    threads = [threading.Thread(target=relay, args=(name,)) for name in claimed]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [key for taken in claimed.values() for key in taken]
    assert sorted(every) == sorted(keys)  # each delivery claimed once, none left behind


# --- the CLI on PostgreSQL ------------------------------------------------------------------


def _waypost(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def test_the_cli_works_on_postgres(pg_url: str) -> None:
    code, run_id, err = _waypost("start", "Fix it", "--store", pg_url, "--as", "alice",
                                 "--kind", "long_running", "--target", "none:",
                                 "--max-silence", "30m")
    assert code == 0, err
    run_id = run_id.strip()
    assert _waypost("claim", run_id, "--store", pg_url, "--as", "w1")[0] == 0
    assert _waypost("heartbeat", run_id, "--store", pg_url, "--as", "w1")[0] == 0
    code, out, _ = _waypost("ls", "--store", pg_url, "--json")
    assert code == 0
    assert run_id in out
    code, out, _ = _waypost("verify", "--store", pg_url)
    assert (code, out.strip()) == (0, "ok: 1 run(s) verified")
    code, _, err = _waypost("show", "wp_missing", "--store", pg_url, "--json")
    assert code == 4
    assert '"not_found"' in err


def test_the_demo_runs_on_postgres_only_when_told(pg_url: str, tmp_path: Path) -> None:
    """WAYPOST_URL alone leaves the PostgreSQL store alone; an explicit --store runs the
    whole story (its watchdog, relay and workers too) on it."""
    env = {**os.environ, "WAYPOST_URL": pg_url}
    alone = subprocess.run([sys.executable, "-m", "waypost", "demo", "--dir",
                            str(tmp_path / "own")], capture_output=True, text=True, env=env,
                           check=False, timeout=120)
    assert alone.returncode == 0, alone.stderr
    with _open(pg_url) as store:
        assert store.run_ids() == []
    told = subprocess.run([sys.executable, "-m", "waypost", "demo", "--store", pg_url,
                           "--dir", str(tmp_path / "pg")], capture_output=True, text=True,
                          env=env, check=False, timeout=120)
    assert told.returncode == 0, told.stderr
    assert "ok: 1 run(s) verified" in told.stdout
    with _open(pg_url) as store:
        (run_id,) = store.run_ids()
        assert store.get(run_id).state is State.DELIVERED
    assert not (tmp_path / "pg" / ".waypost").exists()  # the demo used the PostgreSQL store
