"""The observed view of a packet (`Observed`): derived each time it is read, never stored
and never part of the fold. Liveness, who watches it, where its delivery stands, in words
for `show`, `ls`, the board and every adapter.

Pure: everything comes from the packet, the registered watchers, its outbox rows and
(when known) the live relays.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import msgspec

from waypost.core.due import last_sign_of_life, liveness
from waypost.durations import format_duration
from waypost.model import (
    TERMINAL,
    BlockerKind,
    Delivery,
    DeliveryAssurance,
    DeliveryStatus,
    Kind,
    Observed,
    Origin,
    Packet,
    Purpose,
    RelayInfo,
    State,
    Watcher,
    WatcherRole,
)

UNWATCHED = "unwatched: nobody will notice silence; check back later"
NOBODY = "target none: nobody will be told when this finishes"
NO_RELAY = "no relay is running: start one with `waypost deliver`"


def final_of(deliveries: Sequence[Delivery]) -> Delivery | None:
    return next((d for d in deliveries if d.purpose is Purpose.FINAL), None)


def delivery_line(packet: Packet, deliveries: Sequence[Delivery] = (),
                  now: datetime | None = None,
                  relays: Sequence[RelayInfo] | None = None) -> str:
    """One line: where the final delivery stands (queued / attempts / last error /
    delivered at, with the receipt); `deliveries` are the run's outbox rows and `relays`
    the live relays (None: not looked up)."""
    none = packet.target.startswith("none:")
    receipt = packet.receipt
    if receipt is not None:
        at = f"{receipt.delivered_at:%Y-%m-%d %H:%M:%S}Z"
        if none:
            return f"finished {at}; target none: nothing was sent, nobody was told"
        return (f"delivered to {packet.target} at {at} after {_attempts(receipt.attempts)}; "
                f"receipt: {receipt.detail}; {assurance_text(receipt.assurance)}")
    final = final_of(deliveries)
    if final is None:
        if none:
            return NOBODY
        if packet.state is State.CANCELLED:
            return "cancelled: nothing will be delivered"
        return f"not yet queued; will go once to {packet.target} after approval"
    return _row_line(final, now, relays)


def _row_line(final: Delivery, now: datetime | None,
              relays: Sequence[RelayInfo] | None) -> str:
    tried = (f"{_attempts(final.attempts)}, last error: {final.last_error}"
             if final.last_error else _attempts(final.attempts))
    if final.status is DeliveryStatus.SENT:
        from waypost.core import receipts

        return (f"sent to {final.target} (receipt: {receipts.shown(final.receipt)}) but not "
                "recorded on the run")
    if final.status is DeliveryStatus.FAILED:
        return (f"FAILED for good to {final.target} after {tried}; resolve the "
                "delivery_failed blocker to send it again under the same key, or send it "
                f"elsewhere: waypost retarget {final.run_id} URI")
    parts = [f"queued for {final.target}", tried]
    if now is not None and final.lease_expires_at is not None and final.lease_expires_at > now:
        parts.append(f"being sent now by {final.lease_owner}")
    elif now is not None:
        parts.append(_next(final.next_attempt_at, now))
    if relays is not None and not relays:
        parts.append(NO_RELAY)
    return "; ".join(parts)


def short(packet: Packet, deliveries: Sequence[Delivery] = ()) -> str:
    """A board cell: -, none, queued, retrying (N), sent, delivered, FAILED."""
    if packet.receipt is not None:
        return "none" if packet.target.startswith("none:") else "delivered"
    final = final_of(deliveries)
    if final is None:
        return "none" if packet.target.startswith("none:") else "-"
    if final.status is DeliveryStatus.QUEUED:
        return f"retrying ({final.attempts})" if final.last_error else "queued"
    return "FAILED" if final.status is DeliveryStatus.FAILED else "sent"


def row(delivery: Delivery, now: datetime) -> str:
    """One outbox row for `show`: final or notice, its state, attempts and receipt."""
    head = f"{delivery.purpose:<6} {delivery.topic:<16} {delivery.status:<6} → {delivery.target}"
    details = [_attempts(delivery.attempts)]
    if delivery.status is DeliveryStatus.SENT:
        when = f"{delivery.sent_at:%Y-%m-%d %H:%M:%S}Z" if delivery.sent_at else "?"
        from waypost.core import receipts

        details.append(f"sent {when}: {receipts.shown(delivery.receipt)}")
    elif delivery.last_error:
        details.append(f"last error: {delivery.last_error}")
    if delivery.status is DeliveryStatus.QUEUED:
        details.append(_next(delivery.next_attempt_at, now))
    details.extend(_maybe_delivered(delivery))
    return f"{head} ({'; '.join(details)})"


def _maybe_delivered(delivery: Delivery) -> list[str]:
    """Where it may already be although no receipt says so (an outcome was unknown)."""
    said = []
    if delivery.outcome_unknown_at is not None and delivery.status is not DeliveryStatus.SENT:
        said.append(f"outcome unknown since {delivery.outcome_unknown_at:%Y-%m-%d %H:%M:%S}Z:"
                    f" {delivery.target} may already have it")
    if delivery.maybe_delivered_to:
        said.append("retargeted with a duplicate accepted: "
                    f"{', '.join(delivery.maybe_delivered_to)} may already have the result")
    return said


ASSURANCES = {
    DeliveryAssurance.KEYED: "keyed: the receiver got a stable key to apply it once",
    DeliveryAssurance.IDEMPOTENT: "idempotent: writing it again changes nothing",
    DeliveryAssurance.UPSERT: "upsert: found and updated in place, never posted twice",
    DeliveryAssurance.AT_LEAST_ONCE: "at least once: a retry may have made a duplicate",
    DeliveryAssurance.NONE: "none: nothing was sent",
}


def assurance_text(assurance: DeliveryAssurance | None) -> str:
    """The receipt's assurance in words (an older receipt did not record one)."""
    if assurance is None:
        return "assurance not recorded"
    return f"assurance {ASSURANCES[assurance]}"


def _attempts(count: int) -> str:
    return f"{count} attempt{'s' if count != 1 else ''}"


def _next(at: datetime, now: datetime) -> str:
    wait = (at - now).total_seconds()
    return "due now" if wait <= 0 else f"next try in {format_duration(wait)}"


def waiting(deliveries: Sequence[Delivery]) -> bool:
    """Whether a final delivery is queued (then it matters whether any relay is running)."""
    return any(d.purpose is Purpose.FINAL and d.status is DeliveryStatus.QUEUED
               for d in deliveries)


def by_run(deliveries: Sequence[Delivery]) -> dict[str, list[Delivery]]:
    grouped: dict[str, list[Delivery]] = {}
    for delivery in deliveries:
        grouped.setdefault(delivery.run_id, []).append(delivery)
    return grouped


# --- watch coverage and the whole view ------------------------------------------------


def covering(packet: Packet, watchers: Sequence[Watcher], now: datetime) -> Watcher | None:
    """The live active watcher whose scope covers the run (the most recent sweep wins). A
    standby sweeps nothing, so it does not count, however ready it is to take over."""
    live = [w for w in _in_scope(packet, watchers, now) if w.role is WatcherRole.ACTIVE]
    return max(live, key=lambda w: (w.last_sweep or w.started_at, w.id), default=None)


def standing_by(packet: Packet, watchers: Sequence[Watcher], now: datetime) -> list[str]:
    """The live standbys whose scope covers the run: they take over if its sweeper goes."""
    return sorted(w.id for w in _in_scope(packet, watchers, now)
                  if w.role is WatcherRole.STANDBY)


def _in_scope(packet: Packet, watchers: Sequence[Watcher], now: datetime) -> list[Watcher]:
    return [w for w in watchers if w.expires_at > now and w.owner in (None, packet.owner)]


def interval_text(seconds: float) -> str:
    """`30s`, `0.5s`, `5m`: short intervals keep their fraction."""
    return f"{seconds:g}s" if seconds < 90 else format_duration(seconds)


def watch_line(packet: Packet, now: datetime, watcher: Watcher | None,
               standbys: Sequence[str] = ()) -> str:
    if packet.state in TERMINAL:
        return "finished: nothing to watch"
    if packet.kind is Kind.BOUNDED:
        return "bounded: runs inline, no watcher expected"
    backup = f"; standby: {', '.join(standbys)}" if standbys else ""
    if watcher is None:
        if standbys:
            return (f"unwatched: no active sweeper (standby: {', '.join(standbys)}, waiting "
                    "for the sweeper lock); check back later")
        return UNWATCHED
    every = interval_text(watcher.interval_s)
    if watcher.last_sweep is None:
        return f"watched by {watcher.id} (no sweep yet, interval {every}{backup})"
    ago = max(0.0, (now - watcher.last_sweep).total_seconds())
    return f"watched by {watcher.id} (last sweep {ago:.0f} s ago, interval {every}{backup})"


def _silent_since(packet: Packet) -> datetime:
    """The last sign of life; for a run blocked as worker_silent, no later than the moment
    the silence was recorded: a heartbeat since does not end it (`due.liveness`), so the
    view does not call it quiet for less."""
    since = last_sign_of_life(packet)
    for b in packet.open_blockers:
        if b.kind is BlockerKind.WORKER_SILENT and b.opened_at < since:
            since = b.opened_at
    return since


def observe(packet: Packet, now: datetime, watchers: Sequence[Watcher] = (),
            deliveries: Sequence[Delivery] = (),
            relays: Sequence[RelayInfo] | None = None, origin: Origin | None = None) -> Packet:
    """The packet with its derived `observed` view filled in for `now`; `watchers` are the
    registered watchers (`Store.watchers`): only a live active one covering it counts
    (standbys are named beside it);
    `deliveries` are its outbox rows and `relays` the live relays (`Store.relays`);
    `origin` where it came from, for a run imported from a bundle (nothing watches it)."""
    quiet = None
    if packet.state in (State.IN_PROGRESS, State.BLOCKED):
        quiet = round((now - _silent_since(packet)).total_seconds(), 3)
    watcher, standbys = None, list[str]()
    if packet.state not in TERMINAL and packet.kind is Kind.LONG_RUNNING:
        watcher = covering(packet, watchers, now)
        standbys = standing_by(packet, watchers, now)
    observed = Observed(as_of=now, liveness=liveness(packet, now), silent_for_s=quiet,
                        watch=watch_line(packet, now, watcher, standbys) if origin is None
                        else f"imported, read-only here: from {origin.said()}",
                        watched_by=watcher.id if watcher else None,
                        delivery=delivery_line(packet, deliveries, now, relays),
                        deliveries=tuple(d for d in deliveries if d.run_id == packet.id),
                        imported=origin)
    return msgspec.structs.replace(packet, observed=observed)
