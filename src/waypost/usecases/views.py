"""The read side every adapter needs: packets with their observed view (liveness, watch
coverage, deliveries, relays), read in a fixed number of queries however many packets.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from waypost.core import observed
from waypost.durations import format_duration, utcnow
from waypost.model import Evidence, Packet
from waypost.store.base import Store

if TYPE_CHECKING:
    from waypost.events import EventData, Retargeted


def observe_runs(store: Store, packets: Sequence[Packet], now: datetime) -> list[Packet]:
    """`packets` as `show`, `ls` and the board print them: each with its observed view at
    `now` (`core.observed.observe`), from four queries at most."""
    watchers = store.watchers(now=now)
    deliveries = store.deliveries([p.id for p in packets])
    relays = store.relays(now=now) if observed.waiting(deliveries) else None
    by_run = observed.by_run(deliveries)
    origins = store.origins([p.id for p in packets])
    return [observed.observe(p, now, watchers, by_run.get(p.id, ()), relays, origins.get(p.id))
            for p in packets]


def observe_run(store: Store, packet: Packet, now: datetime | None = None) -> Packet:
    """One packet with its observed view (now, unless told)."""
    return observe_runs(store, [packet], now or utcnow())[0]


def event_gist(data: EventData) -> str:
    """What an event said, in a few words (raw: each view escapes it its own way)."""
    from waypost.events import (  # `show` reads none
        Approved,
        Claimed,
        GateAdded,
        GateAdopted,
        Retargeted,
        Reviewed,
    )

    if isinstance(data, GateAdded):
        return f"{data.name}={data.check}" + ("" if data.required else " (optional)")
    if isinstance(data, GateAdopted):
        return f"adopted gate {data.name}"
    if isinstance(data, Reviewed):
        return f"{data.review_id}: " + gates_by_verdict(data.evidence)
    if isinstance(data, Approved):
        return ("waived " + "; ".join(f"{w.gate} ({w.reason})" for w in data.waivers)
                if data.waivers else "no gate waived")
    if isinstance(data, Claimed):
        took = f", took over from {data.took_over_from}" if data.took_over_from else ""
        return f"epoch {data.epoch}{took}"
    if isinstance(data, Retargeted):
        return retarget_gist(data)
    for field in ("detail", "reason", "resolution", "note", "summary", "title"):
        value = getattr(data, field, None)
        if value:
            return str(value)
    for field in ("artifact", "evidence"):
        value = getattr(data, field, None)
        if value is not None:
            return str(getattr(value, "name", None) or getattr(value, "summary", ""))
    return ""


def retarget_gist(data: Retargeted) -> str:
    """`target → file:out.md; notify → …`, after the owner's acceptance of a duplicate."""
    said = "; ".join(f"{field} → {value}" for field, value in
                     (("target", data.target), ("notify", data.notify)) if value is not None)
    if data.accept_duplicate:  # first: a long target must not cut it off
        return f"duplicate accepted (the old target may already have the result); {said}"
    return said


def gates_by_verdict(evidence: Sequence[Evidence]) -> str:
    """`passed: tests, build; failed: lint` — which gates the review ran, and how each did."""
    verdicts: dict[str, list[str]] = {}
    for e in evidence:
        verdicts.setdefault(str(e.verdict), []).append(e.gate or e.id)
    return "; ".join(f"{v}: {', '.join(gates)}" for v, gates in verdicts.items()) or "no gates"


def when(moment: datetime | None) -> str:
    """A moment as every view shows it (UTC, to the second); `-` for none."""
    return moment.strftime("%Y-%m-%d %H:%M:%SZ") if moment else "-"


def ago(moment: datetime | None, now: datetime) -> str:
    """How long before `now` (never negative: a clock behind another's says 0s ago)."""
    if moment is None:
        return "never"
    return f"{format_duration(max(0.0, (now - moment).total_seconds()))} ago"
