"""The outbox relay: claim due deliveries with a lease, send them, record what happened.

At-least-once with one idempotency key: a relay that dies mid-send leaves its lease to
expire, and the next relay sends again under the same key (`webhook-id`), which receivers
dedupe. A final delivery's receipt and the run's move to `delivered` (or to `blocked`,
when it failed for good) are committed in one transaction, guarded by the lease and the
claim's attempt (its fencing token), so two relays, or two claims, can never both record
it. Notices never change the run's state.

Throughput: deliveries are claimed in batches of up to `concurrency` (one per run: a run's
deliveries go one after another) and sent at once by as many threads, each settling its
own result as it comes, on connections kept alive between sends (`delivery.connections`).
A batch is claimed only when that many threads are free, so every claimed delivery starts
at once and its send ends (by the timeout) well inside its lease.
"""

from __future__ import annotations

import os
import random
import socket
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from datetime import datetime, timedelta
from functools import partial
from types import TracebackType
from typing import Self

import msgspec

from waypost.core import receipts
from waypost.core.authority import RELAY_PREFIX
from waypost.core.history import prepare
from waypost.core.machine import next_blocker_id
from waypost.core.reviewed import result_digest
from waypost.core.writes import RunWrite, Snapshot
from waypost.delivery import document, policy
from waypost.delivery.base import Outgoing, Resolver
from waypost.delivery.connections import Connections
from waypost.delivery.settings import DeliverySettings, delivery_root
from waypost.delivery.targets import resolve
from waypost.durations import Clock, utcnow
from waypost.errors import Refused, StaleLease
from waypost.events import AnyEventData, Delivered, DeliveryFailed, Event
from waypost.model import Delivery, DeliveryAssurance, Packet, Purpose, RelayInfo, State
from waypost.store.base import Store, retry_conflicts

BEAT_EVERY = 10.0  # seconds between registration renewals while draining


def new_relay_id() -> str:
    return f"{RELAY_PREFIX}{socket.gethostname()}:{os.getpid()}:{random.getrandbits(16):04x}"


def relay_name(given: str | None) -> str:
    """A relay's actor name always starts with `relay:` (the machine checks it)."""
    if not given:
        return new_relay_id()
    return given if given.startswith(RELAY_PREFIX) else RELAY_PREFIX + given


class Relay:
    """One relay process (or thread): `drain` once, or `serve` until told to stop.

    Its HTTP connections stay alive for one `drain`, or, inside `with relay:` (and while it
    serves), until the block ends. `targets` (default: `targets.resolve` on those
    connections) names the target of each recorded URI."""

    def __init__(self, store: Store, *, settings: DeliverySettings | None = None,
                 relay_id: str | None = None, clock: Clock = utcnow,
                 rand: Callable[[], float] = random.random, targets: Resolver | None = None,
                 deny: Sequence[str] = (), allow: Sequence[str] = (),
                 report: Callable[[Delivery], None] | None = None) -> None:
        self.store = store
        self.settings = with_root(settings or DeliverySettings(), store)
        self.id = relay_name(relay_id)
        self.clock = clock
        self.rand = rand
        self.connections = Connections(most=self.settings.concurrency,
                                       timeout=self.settings.timeout)
        self.targets = targets or partial(resolve, connections=self.connections)
        self.terms = (tuple(deny), tuple(allow))
        self.report = report
        self.started_at = clock()
        self.last_beat: datetime | None = None
        self._kept = 0  # `with` blocks open: while any is, connections outlive each drain

    def __repr__(self) -> str:
        return f"Relay({self.id!r})"

    def __enter__(self) -> Self:
        self._kept += 1
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._kept -= 1
        if not self._kept:
            self.connections.close()

    # --- registration -------------------------------------------------------------------

    def beat(self) -> RelayInfo:
        """Register, or renew the registration: the relay counts as running until it expires."""
        now = self.clock()
        info = RelayInfo(id=self.id, host=socket.gethostname(), pid=os.getpid(),
                         started_at=self.started_at, last_beat=now,
                         expires_at=now + timedelta(seconds=self.settings.lease + 30))
        self.store.beat_relay(info)
        self.last_beat = now
        return info

    def leave(self) -> None:
        self.store.remove_relay(self.id)

    # --- the loop -----------------------------------------------------------------------

    def drain(self, stop: threading.Event | None = None) -> list[Delivery]:
        """Attempt every delivery that is due, up to `concurrency` at once; return them as
        recorded, in the order they were claimed."""
        most = self.settings.concurrency
        try:
            with ThreadPoolExecutor(max_workers=most,
                                    thread_name_prefix=f"waypost-{self.id}") as senders:
                return self._drain(senders, most, stop)
        finally:
            if not self._kept:
                self.connections.close()

    def _drain(self, senders: ThreadPoolExecutor, most: int,
               stop: threading.Event | None) -> list[Delivery]:
        sending: dict[Future[Delivery], int] = {}  # each send, by its place in claim order
        done: list[tuple[int, Delivery]] = []
        dry = False  # the last claim found nothing due; claim again once a send ends
        while True:
            free = most - len(sending)
            # claim a batch once half the senders are free (or none is busy), so a claim
            # serves several sends, and each delivery claimed is sent at once
            if not dry and (stop is None or not stop.is_set()) and \
                    (not sending or free >= max(1, most // 2)):
                claimed = self.store.claim_deliveries(self.id, now=self.clock(),
                                                      lease_s=self.settings.lease, limit=free)
                rows = self.store.deliveries([d.run_id for d in claimed]) if claimed else []
                for delivery in claimed:
                    earlier = [d for d in rows if d.run_id == delivery.run_id]
                    sending[senders.submit(self.attempt, delivery, earlier)] = \
                        len(done) + len(sending)
                dry = not claimed
            if not sending:
                break
            ended, _ = wait(sending, return_when=FIRST_COMPLETED)
            for send in ended:
                done.append((sending.pop(send), send.result()))
                if self.report is not None:
                    self.report(done[-1][1])
            dry = False
            self._renew()
        return [delivery for _, delivery in sorted(done, key=lambda placed: placed[0])]

    def _renew(self) -> None:
        """Keep a registered relay registered through a long drain."""
        if self.last_beat is not None and \
                (self.clock() - self.last_beat).total_seconds() >= BEAT_EVERY:
            self.beat()

    def serve(self, stop: threading.Event, *, poll: float = 1.0) -> None:
        """Drain, sleep until the next delivery is due (at most `poll`), repeat until `stop`;
        the connections stay alive meanwhile, and close when it stops."""
        self.beat()
        try:
            with self:
                while not stop.is_set():
                    self.drain(stop)
                    self._renew()
                    stop.wait(self._pause(poll))
        finally:
            self.leave()

    def _pause(self, poll: float) -> float:
        due = self.store.next_delivery_due()
        if due is None:
            return poll
        return min(poll, max(0.01, (due - self.clock()).total_seconds()))

    # --- one delivery -------------------------------------------------------------------

    def attempt(self, delivery: Delivery, rows: Sequence[Delivery] | None = None) -> Delivery:
        """Send one claimed delivery and record the outcome (as it then stands); `rows`:
        its run's deliveries as read when it was claimed (else they are read now)."""
        try:
            return self._attempt(delivery, rows)
        except StaleLease:  # our lease ran out mid-send and another relay took it over
            return next(d for d in self.store.deliveries([delivery.run_id])
                        if d.key == delivery.key)

    def _attempt(self, delivery: Delivery, rows: Sequence[Delivery] | None) -> Delivery:
        read = self.store.load(delivery.run_id)
        packet = read.packet
        if delivery.purpose is Purpose.FINAL and packet.state is not State.APPROVED:
            return self._settle(delivery, error=f"run {packet.id} is {packet.state}, not "
                                "approved: the final delivery was not sent")
        changed = not_approved(packet) if delivery.purpose is Purpose.FINAL else None
        if changed is not None:  # never sent: the run is blocked, naming why
            return self.record(delivery, policy.give_up(changed), read)
        event = None if delivery.purpose is Purpose.FINAL else self._event(delivery)
        deny, allow = self.terms
        if rows is None:
            rows = self.store.deliveries([delivery.run_id])
        earlier = tuple(d for d in rows if d.key != delivery.key)
        outgoing = Outgoing(delivery=delivery, earlier=earlier, owner=packet.owner,
                            document=document.build(packet, delivery, event=event, deny=deny,
                                                    allow=allow))
        try:
            result = self.targets(delivery.target, self.settings).send(outgoing,
                                                                      at=self.clock())
        except Exception as exc:  # a target's own bug must not stop the relay
            result = policy.unexpected(exc)
        return self.record(delivery, result, read)

    def _event(self, delivery: Delivery) -> Event | None:
        return next((e for e in self.store.events(delivery.run_id)
                     if e.seq == delivery.event_seq), None)

    def record(self, delivery: Delivery, result: policy.Attempt,
               read: Snapshot | None = None) -> Delivery:
        """Store what one attempt did: the receipt, a retry time, or the failure for good;
        `read`: the run as read before the attempt (a final delivery's event is decided
        from it first, and from the run read again if it has moved since)."""
        if result.outcome is policy.Outcome.SENT:
            return self._settle(delivery, receipt=result.detail, assurance=result.assurance,
                                refs=result.refs, read=read)
        s = self.settings
        retry_at = policy.next_try(result, attempts=delivery.attempts, now=self.clock(),
                                   queued_at=delivery.queued_at, base=s.backoff_base,
                                   cap=s.max_delay, horizon=s.horizon, rand=self.rand)
        unknown = result.outcome_unknown  # recorded on the row: a retarget must respect it
        if retry_at is not None:
            return self.store.retry_delivery(delivery.key, self.id, error=result.detail,
                                             retry_at=retry_at, outcome_unknown=unknown,
                                             attempt=delivery.attempts)
        error = result.detail
        if result.outcome is policy.Outcome.RETRY:
            error = policy.exhausted(error, delivery.attempts, s.horizon)
        else:
            error = f"{error} (permanent: retrying would not help, so it was not retried)"
        return self._settle(delivery, error=error, outcome_unknown=unknown, read=read)

    def _settle(self, delivery: Delivery, *, receipt: str | None = None,
                error: str | None = None, outcome_unknown: bool = False,
                assurance: DeliveryAssurance | None = None,
                refs: dict[str, str] | None = None, read: Snapshot | None = None) -> Delivery:
        """Finish the row; for the final delivery, with the run's event in the same commit.
        The row keeps the structured receipt (`core.receipts`), the run what was said."""
        at = self.clock()
        stored = None if receipt is None else receipts.encode(
            receipts.SentReceipt(said=receipt, assurance=assurance, refs=refs or {}))
        if delivery.purpose is not Purpose.FINAL:
            return self.store.finish_delivery(delivery.key, self.id, at=at, receipt=stored,
                                              error=error, outcome_unknown=outcome_unknown,
                                              attempt=delivery.attempts)
        # the run may change meanwhile (a transfer, a cancel): then it is decided again,
        # from the run read again (the version guard says whether `read` still stands)
        reads = [read] if read is not None else []

        def settle() -> Delivery:
            snap = reads.pop() if reads else self.store.load(delivery.run_id)
            return self.store.finish_delivery(
                delivery.key, self.id, at=at, receipt=stored, error=error,
                write=self._run_write(delivery, snap, at, receipt, error, assurance),
                outcome_unknown=outcome_unknown, attempt=delivery.attempts)

        return retry_conflicts(settle, what=delivery.key)

    def _run_write(self, delivery: Delivery, snap: Snapshot, at: datetime,
                   receipt: str | None, error: str | None,
                   assurance: DeliveryAssurance | None = None) -> RunWrite | None:
        """The run's `delivered` / `delivery_failed` event, or None when the run can no longer
        take it (it was cancelled meanwhile): then only the row is settled."""
        before = snap.packet
        data: AnyEventData
        if receipt is not None:
            data = Delivered(key=delivery.key, detail=receipt, attempts=delivery.attempts,
                             assurance=assurance)
        else:
            data = DeliveryFailed(key=delivery.key, blocker_id=next_blocker_id(before),
                                  detail=failure_detail(delivery, error or "unknown"),
                                  attempts=delivery.attempts)
        try:
            return prepare(snap, [(data, None)], actor=self.id, at=at)
        except Refused:
            return None


def with_root(settings: DeliverySettings, store: Store) -> DeliverySettings:
    """`settings` with the delivery root filled in when none was given (`--dir`): the
    folder holding the embedded store's `.waypost/`, else the current folder."""
    if settings.files_root is not None:
        return settings
    root = delivery_root(getattr(store, "path", None), None)
    return msgspec.structs.replace(settings, files_root=root)


def not_approved(packet: Packet) -> str | None:
    """Why the run's result may not be sent as approved: its reviewed-result digest
    (`core.reviewed`) is not the one the approval recorded; None when it is (or when the
    approval predates the digest and recorded none)."""
    approval = packet.approval
    if approval is None or approval.reviewed is None:
        return None
    now = result_digest(packet)
    if now == approval.reviewed:
        return None
    return (f"the result changed after approval: approved {approval.reviewed}, now "
            f"{now or 'no result'}; it was not sent (`waypost verify {packet.id}` says "
            "whether the store was changed behind waypost)")


def failure_detail(delivery: Delivery, error: str) -> str:
    """The delivery_failed blocker's detail: the target, the last error, what resolving does."""
    plural = "s" if delivery.attempts != 1 else ""
    return (f"final delivery to {delivery.target} failed after {delivery.attempts} "
            f"attempt{plural}: {error}. Resolving this blocker queues the same delivery "
            f"again (key {delivery.key}); to send it elsewhere: waypost retarget "
            f"{delivery.run_id} URI.")
