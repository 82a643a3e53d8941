"""How a run's delivery stands, in words, for `show`, `ls` and the packet's `observed` view.

Pure: everything comes from the packet, its outbox rows and (when known) the live relays.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from waypost.durations import format_duration
from waypost.model import Delivery, DeliveryStatus, Packet, Purpose, RelayInfo, State

NOBODY = "target none: nobody will be told when this finishes"
NO_RELAY = "no relay is running: start one with `waypost deliver`"


def final_of(deliveries: Sequence[Delivery]) -> Delivery | None:
    return next((d for d in deliveries if d.purpose is Purpose.FINAL), None)


def line(packet: Packet, deliveries: Sequence[Delivery] = (), now: datetime | None = None,
         relays: Sequence[RelayInfo] | None = None) -> str:
    """One line: where the final delivery stands (queued / attempts / last error /
    delivered at, with the receipt)."""
    none = packet.target.startswith("none:")
    receipt = packet.receipt
    if receipt is not None:
        at = f"{receipt.delivered_at:%Y-%m-%d %H:%M:%S}Z"
        if none:
            return f"finished {at}; target none: nothing was sent, nobody was told"
        return (f"delivered to {packet.target} at {at} after {_attempts(receipt.attempts)}; "
                f"receipt: {receipt.detail}")
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
        return f"sent to {final.target} (receipt: {final.receipt}) but not recorded on the run"
    if final.status is DeliveryStatus.FAILED:
        return (f"FAILED for good to {final.target} after {tried}; resolve the "
                "delivery_failed blocker to send it again under the same key")
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
        details.append(f"sent {when}: {delivery.receipt}")
    elif delivery.last_error:
        details.append(f"last error: {delivery.last_error}")
    if delivery.status is DeliveryStatus.QUEUED:
        details.append(_next(delivery.next_attempt_at, now))
    return f"{head} ({'; '.join(details)})"


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
