"""Targets decided at start (a bad one stores nothing), file: targets held inside the
delivery root at delivery too, and one classifier of delivery errors: a permanent error
blocks the run within one relay pass, a transient one backs off."""

from __future__ import annotations

import os
import shlex
import sqlite3
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.delivery_support import WebhookServer, approved_run, delivery_failed, fast, new_secret
from tests.helpers import Cli, FakeClock
from waypost.cli import main
from waypost.core.targets import FORMS
from waypost.delivery.relay import Relay
from waypost.durations import utcnow
from waypost.errors import InvalidInput
from waypost.model import BlockerKind, DeliveryStatus, Kind, State
from waypost.store import Store, open_store
from waypost.usecases import runs, starting

BAD_TARGETS = [
    ("file:", "names no file"),
    ("https://", "names no host"),
    ("http://127.0.0.1:abc/", "names no host, or a bad one"),
    ("javascript:alert(1)", "not a target waypost can deliver to"),
    ("ftp://files.example/x", "not a target waypost can deliver to"),
    ("exec:", "names no command"),
    ("exec:  ", "names no command"),
    ("file:../../x", ".. may lead out"),
    ("file:~/x", "~ is the home"),
    ("file:/etc/waypost-result.md", "outside the delivery root"),
    ("file:///tmp/waypost-result.md", "outside the delivery root"),
    ("file:.waypost/waypost.db", "the store's own folder"),
    ("file:out/", "names a folder"),
    ("https://bob:hunter2@hooks.example/x", "credentials do not belong"),
    ("slack:#general", "write the channel's ID"),
    ("mailto:alice", "one address"),
    ("github:owner/repo", "write github:OWNER/REPO#NUMBER"),
]


def dump(path: Path) -> dict[str, list[tuple[object, ...]]]:
    """Every row of every table of a SQLite store (the store's whole state)."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = "
                                           "'table' ORDER BY name")]
        return {t: sorted(db.execute(f'SELECT * FROM "{t}"').fetchall(), key=repr)
                for t in tables}


@pytest.mark.parametrize("flag", ["--target", "--notify"])
@pytest.mark.parametrize(("uri", "why"), BAD_TARGETS)
def test_a_bad_target_or_notify_is_refused_at_start_and_nothing_is_stored(
        cli: Cli, flag: str, uri: str, why: str) -> None:
    cli.ok("init")
    cli.ok("start", "A good run", "--owner", "alice", "--target", "file:result.md")
    before = dump(cli.store)
    uris = {"--target": "file:result.md", flag: uri}
    refused = cli("start", "Fix it", "--owner", "alice", "--kind", "long_running",
                  "--max-silence", "1h", "--target", uris["--target"],
                  *(["--notify", uri] if flag == "--notify" else []), "--json")
    assert refused.code == 2, refused.err
    error = refused.error()
    assert error["code"] == "invalid_input"
    assert why in error["message"]
    assert error["message"].startswith(f"{flag.removeprefix('--')} ")
    assert FORMS in error["hint"]
    assert dump(cli.store) == before


def test_the_accepted_forms_start(cli: Cli, tmp_path: Path) -> None:
    cli.ok("init")
    for target in ("file:result.md", f"file:{tmp_path}/out/r.json", "none:", "exec:true",
                   "http://127.0.0.1:8080/hook", "https://hooks.example/x?run=1"):
        cli.ok("start", "Fix it", "--owner", "alice", "--target", target,
               "--notify", "file:notices.jsonl")


def test_allow_paths_in_waypost_toml_admits_a_place_outside_the_root(
        cli: Cli, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    elsewhere = tmp_path_factory.mktemp("reports")
    cli.ok("init")
    target = f"file:{elsewhere}/result.md"
    assert cli("start", "Fix it", "--owner", "alice", "--target", target).code == 2
    (tmp_path / "waypost.toml").write_text(f'[delivery]\nallow_paths = ["{elsewhere}"]\n')
    run_id = cli.ok("start", "Fix it", "--owner", "alice", "--target", target,
                    "--kind", "long_running", "--max-silence", "1h")
    take_to_approved(cli, run_id)
    assert "sent (wrote" in cli.ok("deliver", "--once")
    assert "Fix it" in (elsewhere / "result.md").read_text()


def take_to_approved(cli: Cli, run_id: str) -> None:
    cli.ok("claim", run_id, actor="w1")
    cli.ok("evidence", "add", run_id, "--kind", "test", "--verdict", "passed", "--summary",
           "tests pass", actor="w1")
    cli.ok("ready", run_id, "--summary", "done", actor="w1")
    cli.ok("review", run_id)
    cli.ok("approve", run_id)


# --- at delivery --------------------------------------------------------------------------


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Store]:
    """A store in tmp_path/.waypost/: the delivery root is tmp_path."""
    with open_store(str(tmp_path / ".waypost" / "w.db")) as store:
        yield store


def one_pass(store: Store, clock: FakeClock, secret: str | None = None) -> DeliveryStatus:
    relay = Relay(store, settings=fast(webhook_secret=secret), relay_id="relay:t",
                  clock=clock, rand=lambda: 1.0)
    [row] = relay.drain()
    return row.status


def blocked_for(store: Store, run_id: str) -> str:
    """The run is blocked by delivery_failed after one attempt: its detail."""
    detail = delivery_failed(store, run_id).detail
    assert "after 1 attempt" in detail
    return detail


@pytest.mark.parametrize("plant", ["folder", "file"])
def test_a_symlink_planted_after_start_that_leads_outside_blocks_at_delivery(
        db: Store, clock: FakeClock, tmp_path: Path,
        tmp_path_factory: pytest.TempPathFactory, plant: str) -> None:
    outside = tmp_path_factory.mktemp("outside")
    run_id = approved_run(db, clock, target="file:out/result.md")
    if plant == "folder":
        (tmp_path / "out").symlink_to(outside, target_is_directory=True)
    else:
        (tmp_path / "out").mkdir()
        (tmp_path / "out" / "result.md").symlink_to(outside / "result.md")
    assert one_pass(db, clock) is DeliveryStatus.FAILED
    detail = blocked_for(db, run_id)
    assert f"resolves to {outside}" in detail
    assert "outside the delivery root" in detail
    assert "permanent" in detail
    assert list(outside.iterdir()) == []


def test_a_symlink_into_the_store_folder_is_refused(db: Store, clock: FakeClock,
                                                   tmp_path: Path) -> None:
    run_id = approved_run(db, clock, target="file:db-copy.md")
    (tmp_path / "db-copy.md").symlink_to(tmp_path / ".waypost" / "w.db")
    before = (tmp_path / ".waypost" / "w.db").stat().st_size
    assert one_pass(db, clock) is DeliveryStatus.FAILED
    assert "inside the store's own .waypost/" in blocked_for(db, run_id)
    assert (tmp_path / ".waypost" / "w.db").stat().st_size >= before


def test_a_symlink_that_stays_inside_the_root_is_followed(
        db: Store, clock: FakeClock, tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "out").symlink_to(tmp_path / "real", target_is_directory=True)
    run_id = approved_run(db, clock, target="file:out/result.md")
    assert one_pass(db, clock) is DeliveryStatus.SENT
    assert db.get(run_id).state is State.DELIVERED
    assert (tmp_path / "real" / "result.md").is_file()


def test_a_file_where_a_folder_should_be_blocks_at_once(
        db: Store, clock: FakeClock, tmp_path: Path) -> None:
    (tmp_path / "out").write_text("a file, not a folder")
    run_id = approved_run(db, clock, target="file:out/sub/result.md")
    assert one_pass(db, clock) is DeliveryStatus.FAILED
    assert "cannot write" in blocked_for(db, run_id)


def test_a_target_stored_by_an_older_release_is_decided_again_at_delivery(
        db: Store, clock: FakeClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(starting, "check_targets", lambda *args, **kwargs: None)
    run_id = approved_run(db, clock, target="file:../escaped.md")
    assert one_pass(db, clock) is DeliveryStatus.FAILED
    assert ".. may lead out" in blocked_for(db, run_id)
    assert not (tmp_path.parent / "escaped.md").exists()


def test_start_refuses_an_escape_on_every_backend(store: Store, clock: FakeClock) -> None:
    for target in ("file:../x.md", "file:~/x.md", "file:/etc/x.md", "exec:"):
        with pytest.raises(InvalidInput):
            starting.start(store, "t", actor="alice", target=target, clock=clock)
    assert store.run_ids() == []


@pytest.mark.parametrize(("status", "outcome"), [
    (404, DeliveryStatus.FAILED), (410, DeliveryStatus.FAILED), (301, DeliveryStatus.FAILED),
    (503, DeliveryStatus.QUEUED), (425, DeliveryStatus.QUEUED), (429, DeliveryStatus.QUEUED),
])
def test_http_answers_from_a_real_server(db: Store, status: int,
                                         outcome: DeliveryStatus) -> None:
    secret = new_secret()
    clock = FakeClock(utcnow())  # the receiver checks webhook-timestamp against its clock
    with WebhookServer(secret, lambda request: (status, b"no")).running() as server:
        run_id = approved_run(db, clock, target=server.url)
        assert one_pass(db, clock, secret) is outcome
        assert len(server.ids()) == 1
    assert server.rejected == []
    if outcome is DeliveryStatus.FAILED:
        assert f"HTTP {status}" in blocked_for(db, run_id)
        return
    [row] = db.deliveries([run_id])
    assert row.attempts == 1
    assert row.next_attempt_at > clock()  # backed off, not failed
    assert db.get(run_id).state is State.APPROVED


@pytest.mark.parametrize(("code", "outcome"), [
    (127, DeliveryStatus.FAILED), (126, DeliveryStatus.FAILED), (78, DeliveryStatus.FAILED),
    (1, DeliveryStatus.QUEUED), (75, DeliveryStatus.QUEUED),
])
def test_exec_exit_statuses(db: Store, clock: FakeClock, code: int,
                            outcome: DeliveryStatus) -> None:
    command = f"{shlex.quote(sys.executable)} -c 'import sys; sys.exit({code})'"
    run_id = approved_run(db, clock, target=f"exec:{command}")
    assert one_pass(db, clock) is outcome
    if outcome is DeliveryStatus.FAILED:
        assert f"exec: exit {code} (" in blocked_for(db, run_id)


def test_a_notice_that_fails_for_good_never_moves_the_run(
        db: Store, clock: FakeClock, tmp_path: Path,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    outside = tmp_path_factory.mktemp("outside")
    (tmp_path / "logs").symlink_to(outside, target_is_directory=True)
    run, _ = starting.start(db, "t", actor="alice", target="none:", notify="file:logs/n.jsonl",
                        kind=Kind.LONG_RUNNING, max_silence=600, clock=clock)
    runs.Run(db, run.id, actor="alice", clock=clock).block(BlockerKind.OTHER, "CI is red")
    version = db.get(run.id).version
    assert one_pass(db, clock) is DeliveryStatus.FAILED
    assert db.get(run.id).version == version
    assert list(outside.iterdir()) == []
    assert os.path.islink(tmp_path / "logs")


@pytest.mark.parametrize("root_from", ["--dir", "waypost.toml"])
def test_a_postgres_relay_writes_under_dir_or_the_config_folder(
        pg_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, root_from: str) -> None:
    with open_store(pg_url) as store:
        run_id = approved_run(store, FakeClock(utcnow()), target="file:reports/result.md")
    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    monkeypatch.chdir(project / "sub")
    monkeypatch.setenv("WAYPOST_ACTOR", "alice")
    args = ["deliver", "--once", "--store", pg_url]
    if root_from == "--dir":
        args += ["--dir", str(project)]
    else:
        (project / "waypost.toml").write_text("[delivery]\nhorizon = \"1h\"\n")
    assert main(args) == 0, capsys.readouterr().err
    assert run_id in (project / "reports" / "result.md").read_text()
    assert not (project / "sub" / "reports").exists()


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie nobody reaped does not count)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_an_exec_target_past_its_timeout_is_killed_with_everything_it_started(
        db: Store, clock: FakeClock, tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    script = f"sleep 60 & echo $! > {shlex.quote(str(pidfile))}; echo started; sleep 60"
    approved_run(db, clock, target=f"exec:sh -c {shlex.quote(script)}")
    relay = Relay(db, settings=fast(timeout=1.0), relay_id="relay:t", clock=clock,
                  rand=lambda: 1.0)
    [row] = relay.drain()  # a hang guard, not a speed test: the sleeps would take 60 s
    assert row.status is DeliveryStatus.QUEUED
    assert row.last_error is not None
    assert "did not finish within 1s" in row.last_error
    pid = int(pidfile.read_text())
    for _ in range(200):  # SIGKILL lands at once but a busy machine may report it late
        if not _alive(pid):
            break
        time.sleep(0.05)
    assert not _alive(pid)


def test_an_exec_target_that_floods_its_output_keeps_only_the_tail(
        db: Store, clock: FakeClock) -> None:
    command = (f"{shlex.quote(sys.executable)} -c "
               "'import sys; sys.stdout.write(\"x\" * 5_000_000 + \" the end\"); sys.exit(1)'")
    approved_run(db, clock, target=f"exec:{command}")
    [row] = Relay(db, settings=fast(), relay_id="relay:t", clock=clock,
                  rand=lambda: 1.0).drain()
    assert row.status is DeliveryStatus.QUEUED
    assert row.last_error is not None
    assert row.last_error.endswith(" the end")
    assert len(row.last_error) < 400
