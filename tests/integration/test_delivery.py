"""The relay with real file, exec and none targets, and a scripted fake target."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from tests.delivery_support import (
    PRIVATE,
    PUBLIC,
    approved_run,
    delivery_failed,
    drain_until_settled,
    fast,
)
from tests.helpers import Cli, FakeClock
from waypost.core import outbox
from waypost.core.targets import FORMS, Places, file_destination
from waypost.delivery import document
from waypost.delivery.base import Outgoing, RecordingTarget
from waypost.delivery.policy import Attempt, give_up, retry
from waypost.delivery.relay import Relay
from waypost.delivery.targets import FileTarget, resolve
from waypost.model import BlockerKind, DeliveryStatus, Kind, Purpose, State
from waypost.store import Store, open_store
from waypost.usecases import runs, starting

SECRETS_IN_PRIVATE = ("ACME-7731", "build-17.corp.internal", "bob@acme-corp.example")


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Store]:
    # in .waypost/, so the delivery root (where file: targets may write) is tmp_path
    with open_store(str(tmp_path / ".waypost" / "w.db")) as store:
        yield store


def relay(store: Store, clock: FakeClock, target: RecordingTarget | None = None,
          **settings: float) -> Relay:
    return Relay(store, settings=fast(**settings), relay_id="relay:t", clock=clock,
                 rand=lambda: 1.0, targets=target.resolver() if target else resolve)


def test_file_target_gets_one_markdown_result_with_the_public_parts_only(
        db: Store, clock: FakeClock, tmp_path: Path) -> None:
    out = tmp_path / "result.md"
    run_id = approved_run(db, clock, target=f"file:{out}")
    [done] = relay(db, clock).drain()
    text = out.read_text()
    assert PUBLIC in text
    assert "| e1 | passed | reported | test | pytest -q: 42 passed |" in text
    assert "| id | verdict | assurance | kind | summary |" in text
    for private in SECRETS_IN_PRIVATE:
        assert private not in text
    assert done.status is DeliveryStatus.SENT
    packet = db.get(run_id)
    assert packet.state is State.DELIVERED
    assert packet.receipt is not None
    assert packet.receipt.detail.startswith(f"wrote {out}")
    assert packet.receipt.attempts == 1


def test_a_json_path_gets_the_json_document(db: Store, clock: FakeClock,
                                            tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    run_id = approved_run(db, clock, target=f"file:{out}")
    relay(db, clock).drain()
    doc = json.loads(out.read_text())
    assert (doc["type"], doc["id"], doc["data"]["run"]) == ("final", f"{run_id}.final", run_id)
    assert doc["data"]["public_summary"] == PUBLIC
    assert doc["data"]["evidence"][0]["verdict"] == "passed"
    assert "summary" not in doc["data"]
    for private in SECRETS_IN_PRIVATE:
        assert private not in out.read_text()


def test_a_second_write_with_identical_content_is_a_no_op(db: Store, clock: FakeClock,
                                                          tmp_path: Path) -> None:
    out = tmp_path / "result.md"
    run_id = approved_run(db, clock, target=f"file:{out}")
    delivery = next(d for d in db.deliveries([run_id]) if d.purpose is Purpose.FINAL)
    outgoing = Outgoing(delivery=delivery, document=document.build(db.get(run_id), delivery))
    first = FileTarget(out, Places(root=str(tmp_path))).send(outgoing, at=clock())
    stat = out.stat()
    second = FileTarget(out, Places(root=str(tmp_path))).send(outgoing, at=clock())
    assert first.detail.startswith("wrote ")
    assert second.detail.startswith("already written: ")
    assert (out.stat().st_ino, out.stat().st_mtime_ns) == (stat.st_ino, stat.st_mtime_ns)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".result")] == []


def test_deliver_once_twice_sends_nothing_the_second_time(
        cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cli.ok("init")
    run_id = cli.ok("start", "Fix it", "--owner", "alice", "--kind", "long_running",
                    "--target", "file:result.md", "--max-silence", "1h")
    cli.ok("claim", run_id, actor="w1")
    cli.ok("evidence", "add", run_id, "--kind", "test", "--verdict", "passed", "--summary",
           "tests pass", actor="w1")
    cli.ok("ready", run_id, "--summary", PRIVATE, "--public-summary", PUBLIC, actor="w1")
    cli.ok("review", run_id)
    cli.ok("approve", run_id)
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")  # relative to the project (beside .waypost/), not here
    first = cli.ok("deliver", "--once")
    assert f"{run_id}.final → file:result.md: sent (wrote {tmp_path / 'result.md'} " in first
    written = (tmp_path / "result.md").stat().st_mtime_ns
    assert cli.ok("deliver", "--once") == "nothing due"
    assert (tmp_path / "result.md").stat().st_mtime_ns == written
    again = cli("deliver", "--once", "--json").json()
    assert again["attempted"] == []
    shown = cli("show", run_id, "--json").json()
    assert shown["state"] == "delivered"
    assert shown["receipt"]["key"] == f"{run_id}.final"
    assert shown["observed"]["delivery"].startswith("delivered to file:result.md at ")
    assert [d["status"] for d in shown["observed"]["deliveries"]] == ["sent"]
    assert cli("log", run_id, "--json").json()["events"][-1]["data"]["type"] == "delivered"
    cli.ok("verify")


def test_retries_back_off_exponentially_then_deliver(db: Store, clock: FakeClock) -> None:
    run_id = approved_run(db, clock, target="https://hooks.example/x")
    fake = RecordingTarget([retry("HTTP 500"), retry("HTTP 503"), retry("timed out")])
    r = relay(db, clock, fake, backoff_base=0.2)
    waits = []
    for _ in range(3):
        [row] = r.drain()
        assert row.status is DeliveryStatus.QUEUED
        assert row.last_attempt_at is not None
        waits.append((row.next_attempt_at - row.last_attempt_at).total_seconds())
        assert r.drain() == []  # not due yet: nothing is sent early
        clock.now = row.next_attempt_at
    assert waits == pytest.approx([0.2, 0.4, 0.8])
    [row] = r.drain()
    assert row.status is DeliveryStatus.SENT
    assert {o.delivery.key for o in fake.sent} == {outbox.final_key(run_id)}
    assert len(fake.sent) == 4
    receipt = db.get(run_id).receipt
    assert receipt is not None
    assert receipt.attempts == 4


def test_a_permanent_failure_blocks_the_run_and_unblock_requeues_the_same_key(
        db: Store, clock: FakeClock) -> None:
    target = "https://hooks.example/gone"
    run_id = approved_run(db, clock, target=target)
    fake = RecordingTarget([give_up("HTTP 410 Gone: the receiver asked not to be sent this again")])
    r = relay(db, clock, fake)
    [row] = r.drain()
    assert row.status is DeliveryStatus.FAILED
    blocker = delivery_failed(db, run_id)
    assert target in blocker.detail
    assert "HTTP 410 Gone" in blocker.detail
    assert r.drain() == []
    runs.Run(db, run_id, actor="alice", clock=clock).unblock(blocker.id, "endpoint restored")
    assert db.get(run_id).state is State.APPROVED
    [again] = r.drain()
    assert again.status is DeliveryStatus.SENT
    assert [o.delivery.key for o in fake.sent] == [outbox.final_key(run_id)] * 2
    assert db.get(run_id).state is State.DELIVERED


def test_an_exhausted_horizon_fails_for_good(db: Store, clock: FakeClock) -> None:
    run_id = approved_run(db, clock, target="https://hooks.example/down")
    fake = RecordingTarget([retry("HTTP 502")] * 20)
    drain_until_settled(relay(db, clock, fake, backoff_base=1.0, horizon=10.0), clock)
    packet = db.get(run_id)
    assert packet.state is State.BLOCKED
    detail = packet.open_blockers[0].detail
    assert "HTTP 502" in detail
    assert "retry horizon is exhausted" in detail
    assert 2 < len(fake.sent) < 6  # 1 + 2 + 4 s fit in the 10 s horizon, the next does not


def test_a_cancelled_run_is_not_delivered(db: Store, clock: FakeClock) -> None:
    run_id = approved_run(db, clock, target="https://hooks.example/x")
    runs.Run(db, run_id, actor="alice", clock=clock).cancel("not needed any more")
    fake = RecordingTarget()
    [row] = relay(db, clock, fake).drain()
    assert fake.sent == []
    assert row.status is DeliveryStatus.FAILED
    assert row.last_error is not None
    assert "cancelled" in row.last_error
    assert db.get(run_id).state is State.CANCELLED


def test_none_target_sends_nothing_and_says_so(db: Store, clock: FakeClock) -> None:
    run_id = approved_run(db, clock, target="none:")
    relay(db, clock).drain()
    packet = db.get(run_id)
    assert packet.state is State.DELIVERED
    assert packet.receipt is not None
    assert "nothing was sent" in packet.receipt.detail
    from waypost.core.observed import observe

    observed = observe(packet, clock(), deliveries=db.deliveries([run_id])).observed
    assert observed is not None
    assert "nothing was sent, nobody was told" in observed.delivery


def test_exec_target_gets_the_document_on_stdin_and_the_key_in_its_env(
        db: Store, clock: FakeClock, tmp_path: Path) -> None:
    seen = tmp_path / "seen.json"
    script = ("import json, os, sys; json.dump({'stdin': sys.stdin.read(), "
              "'id': os.environ['WAYPOST_DELIVERY_ID'], 'run': os.environ['WAYPOST_RUN_ID'],"
              f" 'type': os.environ['WAYPOST_DELIVERY_TYPE']}}, open({str(seen)!r}, 'w'))")
    run_id = approved_run(db, clock,
                          target=f"exec:{shlex.quote(sys.executable)} -c {shlex.quote(script)}")
    [row] = relay(db, clock).drain()
    assert row.status is DeliveryStatus.SENT
    got = json.loads(seen.read_text())
    assert (got["id"], got["run"], got["type"]) == (f"{run_id}.final", run_id, "final")
    assert json.loads(got["stdin"])["data"]["public_summary"] == PUBLIC


def test_exec_target_failing_is_retried_with_its_stderr(db: Store, clock: FakeClock) -> None:
    command = f"{shlex.quote(sys.executable)} -c 'import sys; sys.exit(\"chat API down\")'"
    approved_run(db, clock, target=f"exec:{command}")
    [row] = relay(db, clock).drain()
    assert row.status is DeliveryStatus.QUEUED
    assert row.last_error == "exec: exit 1: chat API down"


def test_notices_go_to_the_notify_file_once_each_and_never_move_the_run(
        db: Store, clock: FakeClock, tmp_path: Path) -> None:
    notices = tmp_path / "notices.jsonl"
    run, _ = starting.start(db, "t", actor="alice", owner="alice", target="none:",
                        notify=f"file:{notices}", kind=Kind.LONG_RUNNING,
                        max_silence=600, clock=clock)
    worker = runs.Run(db, run.id, actor="w1", clock=clock)
    worker.claim()
    _, blocker = worker.block(BlockerKind.MISSING_INPUT, "staging API key not in the vault")
    r = relay(db, clock)
    [row] = r.drain()
    assert row.purpose is Purpose.NOTICE
    runs.Run(db, run.id, actor="alice", clock=clock).unblock(blocker, "key added")
    version = db.get(run.id).version
    r.drain()
    lines = [json.loads(line) for line in notices.read_text().splitlines()]
    assert [(n["type"], n["topic"]) for n in lines] == [("notice", "blocked")]
    assert lines[0]["data"]["blocker"]["detail"] == "staging API key not in the vault"
    assert lines[0]["id"] == row.key
    assert db.get(run.id).version == version  # a notice never writes to the run
    outgoing = Outgoing(delivery=row, document=lines[0])
    again = FileTarget(notices, Places(root=str(tmp_path))).send(outgoing, at=clock())
    assert again.detail.startswith("already appended")
    assert len(notices.read_text().splitlines()) == 1


@pytest.mark.parametrize(("command", "status", "error"), [
    ("false", DeliveryStatus.QUEUED, "exec: exit 1"),
    ("/nonexistent/notify-me", DeliveryStatus.FAILED,
     "exec: command not found: /nonexistent/notify-me"),
])
def test_a_failing_notice_is_retried_or_failed_visibly_and_never_moves_the_run(
        db: Store, clock: FakeClock, command: str, status: DeliveryStatus, error: str) -> None:
    run, _ = starting.start(db, "t", actor="alice", owner="alice", target="none:",
                        notify=f"exec:{command}", kind=Kind.LONG_RUNNING,
                        max_silence=600, clock=clock)
    runs.Run(db, run.id, actor="alice", clock=clock).block(BlockerKind.OTHER, "the CI is red")
    version = db.get(run.id).version
    [row] = relay(db, clock).drain()
    assert row.status is status
    assert row.last_error is not None
    assert row.last_error.startswith(error)
    assert db.get(run.id).version == version
    from waypost.core.observed import row as shown_row

    assert error in shown_row(row, clock())


def test_show_and_ls_tell_the_delivery_as_it_goes(cli: Cli) -> None:
    cli.ok("init")
    run_id = cli.ok("start", "Ship it", "--owner", "alice", "--kind", "long_running",
                    "--target", "exec:false", "--max-silence", "1h")
    assert "will go once to exec:false after approval" in cli.ok("show", run_id)
    cli.ok("claim", run_id, actor="w1")
    cli.ok("evidence", "add", run_id, "--kind", "test", "--verdict", "passed", "--summary",
           "tests pass", actor="w1")
    cli.ok("ready", run_id, "--summary", "done", actor="w1")
    cli.ok("review", run_id)
    cli.ok("approve", run_id)
    shown = cli.ok("show", run_id)
    assert ("delivery   queued for exec:false; 0 attempts; due now; no relay is running: "
            "start one with `waypost deliver`") in shown
    assert "final  approved         queued → exec:false (0 attempts; due now)" in shown
    assert " queued " in cli.ok("ls")
    out = cli.ok("deliver", "--once", "--backoff-base", "1m")
    assert "attempt 1 failed (exec: exit 1); next in" in out
    shown = cli.ok("show", run_id)
    assert "queued for exec:false; 1 attempt, last error: exec: exit 1; next try in" in shown
    assert "retrying (1)" in cli.ok("ls")
    board = cli("ls", "--json").json()
    assert board["runs"][0]["observed"]["deliveries"][0]["attempts"] == 1


def test_relay_registration_is_stored_and_removed(db: Store, clock: FakeClock) -> None:
    r = relay(db, clock)
    info = r.beat()
    assert [x.id for x in db.relays(now=clock())] == ["relay:t"]
    assert info.expires_at > clock()
    r.leave()
    assert db.relays(now=clock()) == []


def test_file_path_forms(tmp_path: Path) -> None:
    places = Places(root=str(tmp_path))
    assert file_destination("file:out/result.md", places) == str(tmp_path / "out/result.md")
    assert file_destination(f"file://{tmp_path}/r.md", places) == str(tmp_path / "r.md")
    assert file_destination(f"file:{tmp_path}/r.md", places) == str(tmp_path / "r.md")


def test_an_unknown_scheme_stored_by_an_older_release_fails_for_good(
        db: Store, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(starting, "check_targets", lambda *args, **kwargs: None)
    run_id = approved_run(db, clock, target="ftp://files.example/x")
    relay(db, clock).drain()
    blocker = db.get(run_id).open_blockers[0]
    assert f"a target is {FORMS}" in blocker.detail
    assert "after 1 attempt" in blocker.detail


def test_a_relay_whose_lease_ran_out_leaves_the_delivery_to_its_successor(
        db: Store, clock: FakeClock) -> None:
    run_id = approved_run(db, clock, target="https://hooks.example/slow")
    slow = relay(db, clock, RecordingTarget([retry("HTTP 504 (too late)")]))
    quick = Relay(db, settings=fast(), relay_id="relay:2", clock=clock,
                  targets=RecordingTarget().resolver())
    [mine] = db.claim_deliveries(slow.id, now=clock(), lease_s=1)
    clock.advance(2)
    [taken] = quick.drain()
    assert taken.status is DeliveryStatus.SENT
    left = slow.attempt(mine)  # no crash: the successor's receipt stands
    assert (left.status, left.lease_owner, left.receipt) == (
        DeliveryStatus.SENT, None, "recorded: accepted")
    receipt = db.get(run_id).receipt
    assert receipt is not None
    assert receipt.relay == "relay:2"


class SlowTarget(RecordingTarget):
    def __init__(self, clock: FakeClock) -> None:
        super().__init__()
        self.clock = clock

    def send(self, outgoing: Outgoing, *, at: datetime) -> Attempt:
        self.clock.advance(30)
        return super().send(outgoing, at=at)


def test_a_long_drain_keeps_the_relay_registered(db: Store, clock: FakeClock) -> None:
    for i in range(3):
        approved_run(db, clock, title=f"run {i}")
    # one at a time: each send moves the one shared clock on by 30 s, so sends at once
    # would add up to more than a lease (no real send outlasts its timeout)
    r = relay(db, clock, SlowTarget(clock), concurrency=1)
    r.beat()
    assert len(r.drain()) == 3
    [info] = db.relays(now=clock())
    assert info.last_beat == clock()


def test_only_a_relay_records_the_final_delivery_and_only_under_its_key(
        db: Store, clock: FakeClock) -> None:
    from waypost.errors import InvalidInput, NotAuthorized
    from waypost.events import Delivered

    run_id = approved_run(db, clock)
    owner = runs.Run(db, run_id, actor="alice", clock=clock)
    with pytest.raises(NotAuthorized, match="only a delivery relay"):
        owner.write(lambda p: Delivered(key=outbox.final_key(run_id), detail="x", attempts=1))
    relay_handle = runs.Run(db, run_id, actor="relay:x", clock=clock)
    with pytest.raises(InvalidInput, match="is not the final delivery"):
        relay_handle.write(lambda p: Delivered(key="wp_other.final", detail="x", attempts=1))
    assert db.get(run_id).state is State.APPROVED
