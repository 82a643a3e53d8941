"""The reviewed-result digest: one name for exactly what an owner saw when they answered.

An answer (approve, request changes) names the result it answers by this digest, never by
the packet's version: a heartbeat or a watchdog's nudge bumps the version while the owner
reads, and changes nothing the owner reviewed. The digest covers the result as submitted
(its private and public summary), every artifact's name and sha256 (or URL, which has no
digest), every evidence id, the review it was judged by, and each gate with its verdict in
that review. The target is not in it: a retarget after approval sends the same result.

The signed bundle's approval statement reuses it, so it is defined here once and only here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final

from waypost.core.gates import current_review, verdicts
from waypost.events import Event
from waypost.model import Packet, to_json
from waypost.model.packet import WITHHELD

PREFIX: Final = "sha256:"
SHORT: Final = 12  # hex digits shown, and the fewest a typed digest may give
_TYPED: Final = re.compile(r"(?:sha256:)?([0-9a-f]{12,64})")


def reviewed_result(packet: Packet) -> dict[str, Any] | None:
    """What the digest covers, as plain data; None while no result is submitted."""
    result = packet.result
    if result is None:
        return None
    review = current_review(packet)
    return {
        "summary": result.summary,
        "public_summary": result.public_summary,
        "artifacts": [[a.name, a.sha256 or a.url or ""] for a in packet.artifacts],
        "evidence": [e.id for e in packet.evidence],
        "review": review.id if review is not None else None,
        "gates": [[v.gate, v.required, str(v.verdict) if v.verdict else None]
                  for v in verdicts(packet, review)],
    }


def result_digest(packet: Packet) -> str | None:
    """`sha256:` and 64 hex digits over `reviewed_result`; None while no result is
    submitted."""
    from waypost.core.history import sha256

    covered = reviewed_result(packet)
    if covered is None:
        return None
    return PREFIX + sha256(to_json(covered)).hexdigest()


def shown(packet: Packet) -> str | None:
    """The run's reviewed-result digest as a reader is shown it: None while no result is
    submitted, or when the private summary is withheld from this reader (a digest of the
    public view names no result)."""
    if packet.result is None or packet.result.summary == WITHHELD:
        return None
    return result_digest(packet)


def short(digest: str) -> str:
    """The digest as people read it: its first twelve hex digits."""
    return digest.removeprefix(PREFIX)[:SHORT]


def typed(text: str) -> str | None:
    """A digest as someone typed or pasted it (`sha256:…`, or at least twelve hex digits),
    normalised to lower-case hex without the prefix; None when `text` is not one."""
    found = _TYPED.fullmatch(text.strip().lower())
    return found.group(1) if found else None


def matches(given: str, digest: str | None) -> bool:
    """Whether `given` (whole, or its first twelve or more hex digits) names `digest`."""
    hexes = typed(given)
    return digest is not None and hexes is not None and \
        digest.removeprefix(PREFIX).startswith(hexes)


def changes_since(events: Sequence[Event], given: str) -> list[str] | None:
    """What changed in the reviewed result since it had the digest `given`: one line per
    event that changed it, oldest first (empty: nothing has). None when the run's result
    never had that digest."""
    from waypost.core.machine import apply

    packet: Packet | None = None
    seen = False
    lines: list[str] = []
    last = None
    for event in events:
        packet = apply(packet, event)
        digest = result_digest(packet)
        if matches(given, digest):
            seen, lines = True, []
        elif seen and digest != last:
            lines.append(describe(event))
        last = digest
    return lines if seen else None


def describe(event: Event) -> str:
    """One line for an event that changed the reviewed result."""
    kind = event.data.__struct_config__.tag
    what = {"marked_ready": "submitted a new result", "reviewed": "ran a review",
            "changes_requested": "requested changes", "artifact_recorded": "recorded an artifact",
            "evidence_recorded": "recorded evidence", "gate_added": "added a gate"}
    return f"{event.actor} {what.get(str(kind), str(kind).replace('_', ' '))} " \
        f"(event {event.seq}, {event.at.isoformat(timespec='seconds')})"
