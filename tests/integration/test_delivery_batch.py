"""The relay's batches: claimed together, sent at once on kept-alive connections, each
settled on its own, and still "once": a real webhook receiver on 127.0.0.1, real stores."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import pytest

from tests import pg
from tests.delivery_support import (
    Request,
    WebhookServer,
    approved_run,
    drain_until_settled,
    fast,
    new_secret,
)
from tests.helpers import FakeClock
from waypost.core import outbox
from waypost.core.history import verify_run
from waypost.delivery.relay import Relay
from waypost.durations import utcnow
from waypost.errors import StaleLease
from waypost.model import Delivery, DeliveryStatus, State
from waypost.store import Store, open_store
from waypost.store.sqlite.store import SqliteStore

ROOT = Path(__file__).resolve().parents[2]
WAIT = 30.0  # seconds any wait for the other side may take before the test fails


def until(condition: Callable[[], bool], what: str) -> None:
    began = time.monotonic()
    while not condition():
        assert time.monotonic() - began < WAIT, f"still waiting for {what}"
        time.sleep(0.01)


def delivered_events(store: Store, run_id: str) -> int:
    return sum(1 for e in store.events(run_id) if e.type == "delivered")


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Store]:
    with open_store(str(tmp_path / ".waypost" / "w.db")) as store:
        yield store


class Held:
    """A responder that holds each request whose id it is told to hold until the test lets
    it go (in arrival order), and answers every other at once."""

    def __init__(self, hold: Callable[[Request], bool]) -> None:
        self.hold = hold
        self.waiting: list[threading.Event] = []
        self._lock = threading.Lock()

    def __call__(self, request: Request) -> tuple[int, bytes]:
        if not self.hold(request):
            return 200, b"ok"
        gate = threading.Event()
        with self._lock:
            self.waiting.append(gate)
        gate.wait(WAIT)
        return 200, b"ok, late"

    def held(self) -> int:
        with self._lock:
            return len(self.waiting)

    def release(self, index: int | None = None) -> None:
        with self._lock:
            gates = self.waiting if index is None else [self.waiting[index]]
        for gate in gates:
            gate.set()


def test_a_batch_goes_out_at_once_on_kept_connections(db: Store) -> None:
    secret, clock = new_secret(), FakeClock(utcnow())
    barrier = threading.Barrier(4, timeout=10)

    def together(request: Request) -> tuple[int, bytes]:
        if barrier.n_waiting == 0 and barrier.broken is False and len(hook.requests) > 4:
            return 200, b"ok"  # past the first batch: at once
        try:  # the first batch: answered only once all four are in flight at one moment
            barrier.wait()
        except threading.BrokenBarrierError:
            return 503, b"alone"
        return 200, b"ok"

    with WebhookServer(secret, together, keep_alive=True).running() as hook:
        run_ids = [approved_run(db, clock, target=hook.url, title=f"r{i}") for i in range(4)]
        with Relay(db, settings=fast(webhook_secret=secret, concurrency=4), clock=clock,
                   relay_id="relay:t") as relay:
            done = relay.drain()
            run_ids += [approved_run(db, clock, target=hook.url, title=f"s{i}")
                        for i in range(12)]
            done += relay.drain()  # the connections outlive a drain inside `with`
        ports = Counter(r.port for r in hook.requests)
    assert [d.status for d in done] == [DeliveryStatus.SENT] * 16, [d.last_error for d in done]
    assert [d.attempts for d in done] == [1] * 16
    assert sorted(hook.ids()) == sorted(outbox.final_key(r) for r in run_ids)
    assert len(ports) <= 4  # four kept-alive connections carried all sixteen


def test_a_failed_send_is_retried_without_its_batch_mates(db: Store) -> None:
    secret, clock = new_secret(), FakeClock(utcnow())
    failing: set[str] = set()

    def once_unavailable(request: Request) -> tuple[int, bytes]:
        if request.id in failing:
            failing.discard(request.id)
            return 503, b"try later"
        return 200, b"ok"

    with WebhookServer(secret, once_unavailable).running() as hook:
        run_ids = [approved_run(db, clock, target=hook.url, title=f"r{i}") for i in range(6)]
        failing.add(outbox.final_key(run_ids[2]))
        relay = Relay(db, settings=fast(webhook_secret=secret, concurrency=6), clock=clock,
                      relay_id="relay:t", rand=lambda: 1.0)
        first = {d.run_id: d.status for d in relay.drain()}
        assert first == {r: DeliveryStatus.QUEUED if i == 2 else DeliveryStatus.SENT
                         for i, r in enumerate(run_ids)}
        drain_until_settled(relay, clock)
        sent = Counter(hook.ids())
    assert sent == {outbox.final_key(r): 2 if i == 2 else 1 for i, r in enumerate(run_ids)}
    assert all(db.get(r).state is State.DELIVERED for r in run_ids)
    assert [delivered_events(db, r) for r in run_ids] == [1] * 6


@contextmanager
def store_url(backend: str, tmp_path: Path) -> Iterator[str]:
    """A store's URL, which two stores open apart (on PostgreSQL, a fresh schema)."""
    if backend == "postgres":
        with pg.fresh_schema() as url:
            yield url
    else:
        yield str(tmp_path / "race.db")


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_two_relays_racing_over_one_outbox_send_each_delivery_once(
        backend: str, tmp_path: Path) -> None:
    secret, clock = new_secret(), FakeClock(utcnow())
    with store_url(backend, tmp_path) as url, WebhookServer(secret).running() as hook, \
            open_store(url) as one, open_store(url) as other:
        run_ids = [approved_run(one, clock, target=hook.url, title=f"r{i}") for i in range(24)]
        relays = [Relay(store, settings=fast(webhook_secret=secret, concurrency=4),
                        relay_id=f"relay:{n}", clock=utcnow)
                  for n, store in enumerate((one, other))]
        drained: list[int] = []

        def drain(relay: Relay) -> None:
            drained.append(len(relay.drain()))

        threads = [threading.Thread(target=drain, args=(relay,)) for relay in relays]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(WAIT)
        sent = Counter(hook.ids())
        assert sent == {outbox.final_key(r): 1 for r in run_ids}
        assert sum(drained) == 24
        assert all(one.get(r).state is State.DELIVERED for r in run_ids)
        assert [delivered_events(one, r) for r in run_ids] == [1] * 24


def test_a_lease_lapsed_mid_batch_is_settled_once_by_its_new_holder(db: Store) -> None:
    secret, clock = new_secret(), FakeClock(utcnow())
    first_round = Held(lambda request: True)
    with WebhookServer(secret, first_round).running() as hook:
        run_ids = [approved_run(db, clock, target=hook.url, title=f"r{i}") for i in range(3)]
        slow = Relay(db, settings=fast(webhook_secret=secret), relay_id="relay:slow",
                     clock=clock)
        outcome: list[list[object]] = []
        sending = threading.Thread(target=lambda: outcome.append(list(slow.drain())))
        sending.start()
        until(lambda: first_round.held() == 3, "the slow relay's three requests")
        first_round.hold = lambda request: False  # the next relay's go through
        taken_at = clock.advance(fast().lease + 1)  # the slow relay's leases lapse
        quick = Relay(db, settings=fast(webhook_secret=secret), relay_id="relay:quick",
                      clock=clock)
        assert [d.status for d in quick.drain()] == [DeliveryStatus.SENT] * 3
        clock.advance(5)
        first_round.release()  # the slow relay's answers come back: too late to count
        sending.join(WAIT)
    assert [getattr(d, "status", None) for d in outcome[0]] == [DeliveryStatus.SENT] * 3
    for run_id in run_ids:
        [row] = db.deliveries([run_id])
        assert (row.sent_at, row.attempts) == (taken_at, 2)  # settled by the new holder
        packet = db.get(run_id)
        assert packet.receipt is not None
        assert (packet.receipt.relay, delivered_events(db, run_id)) == ("relay:quick", 1)


def test_an_older_claim_of_the_same_relay_id_cannot_settle_over_a_newer_one(
        db: Store) -> None:
    secret, clock = new_secret(), FakeClock(utcnow())
    held = Held(lambda request: True)
    with WebhookServer(secret, held).running() as hook:
        run_id = approved_run(db, clock, target=hook.url)
        # a relay restarted under the same --relay-id while the old one hangs mid-send
        old, new = (Relay(db, settings=fast(webhook_secret=secret), relay_id="relay:same",
                          clock=clock) for _ in range(2))
        threads = [threading.Thread(target=old.drain)]
        threads[0].start()
        until(lambda: held.held() == 1, "the old claim's request")
        clock.advance(fast().lease + 1)
        threads.append(threading.Thread(target=new.drain))
        threads[1].start()
        until(lambda: held.held() == 2, "the new claim's request")
        held.release(0)  # the old claim's answer comes first: it must not settle
        threads[0].join(WAIT)
        [row] = db.deliveries([run_id])
        assert (row.status, row.attempts, row.lease_owner) == (
            DeliveryStatus.QUEUED, 2, "relay:same")
        held.release(1)
        threads[1].join(WAIT)
    packet = db.get(run_id)
    assert packet.receipt is not None
    assert (packet.state, packet.receipt.attempts) == (State.DELIVERED, 2)
    assert delivered_events(db, run_id) == 1


def test_a_relay_killed_mid_batch_sends_again_only_what_it_had_not_settled(
        tmp_path: Path) -> None:
    secret = new_secret()
    store_path = tmp_path / ".waypost" / "w.db"
    clock_file = tmp_path / "clock"
    clock_file.write_text("0")
    clock = FakeClock(utcnow())
    with open_store(str(store_path)) as store:
        hung: set[str] = set()
        held = Held(lambda request: request.id in hung)
        with WebhookServer(secret, held).running() as hook:
            run_ids = [approved_run(store, clock, target=hook.url, title=f"r{i}")
                       for i in range(4)]
            hung.update(outbox.final_key(r) for r in run_ids[2:])
            relay = subprocess.Popen(
                [sys.executable, "-m", "tests.campaign_relay", str(store_path),
                 str(clock_file), str(tmp_path), "20"],
                env={"WAYPOST_WEBHOOK_SECRET": secret, "PYTHONPATH": str(ROOT),
                     "PATH": "/usr/bin:/bin"}, cwd=ROOT,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                until(lambda: held.held() == 2 and sum(
                    d.status is DeliveryStatus.SENT for d in store.deliveries(run_ids)) == 2,
                    "two deliveries settled and two in flight")
            finally:
                relay.send_signal(signal.SIGKILL)
                relay.wait(WAIT)
            hung.clear()
            held.release()
            clock.now = utcnow() + timedelta(seconds=fast(timeout=20).lease + 1)
            after = Relay(store, settings=fast(webhook_secret=secret), relay_id="relay:after",
                          clock=clock)
            assert [d.status for d in after.drain()] == [DeliveryStatus.SENT] * 2
            sent = Counter(hook.ids())
        assert sent == {outbox.final_key(r): 1 if i < 2 else 2 for i, r in enumerate(run_ids)}
        assert all(store.get(r).state is State.DELIVERED for r in run_ids)
        assert [delivered_events(store, r) for r in run_ids] == [1] * 4


def test_settles_that_wait_commit_as_one_group_each_under_its_own_guards(
        tmp_path: Path) -> None:
    clock = FakeClock(utcnow())
    with SqliteStore(tmp_path / "s.db") as store:
        run_ids = [approved_run(store, clock, title=f"r{i}") for i in range(8)]
        claimed = store.claim_deliveries("relay:t", now=clock(), lease_s=60, limit=8)
        relay = Relay(store, relay_id="relay:t", clock=clock)
        stale = claimed[0]  # settled under an attempt it no longer holds: refused alone
        errors: dict[str, BaseException] = {}

        def settle(row: Delivery) -> Callable[[], None]:
            write = relay._run_write(row, store.load(row.run_id), clock(), "ok", None)
            fence = row.attempts + 1 if row is stale else row.attempts

            def go() -> None:
                try:
                    store.finish_delivery(row.key, "relay:t", at=clock(), receipt="ok",
                                          write=write, attempt=fence)
                except BaseException as exc:
                    errors[row.run_id] = exc
            return go

        before = (store.settles.groups, store.settles.writes)
        threads = [threading.Thread(target=settle(row)) for row in claimed]
        with store._file.held("hold the store for the test"):
            for thread in threads:
                thread.start()
            until(lambda: len(store.settles._waiting) == 7, "seven settles waiting")
        for thread in threads:
            thread.join(WAIT)
        # the first led a group of its own; the seven that waited went in one more
        assert (store.settles.groups - before[0], store.settles.writes - before[1]) == (2, 8)
        assert list(errors) == [stale.run_id]
        assert isinstance(errors[stale.run_id], StaleLease)
        states = {r: store.get(r).state for r in run_ids}
        assert states == {r: State.APPROVED if r == stale.run_id else State.DELIVERED
                          for r in run_ids}
        for run_id in run_ids:
            verify_run(run_id, store.events(run_id), store.get(run_id))
