"""What a parent waiting on a run waits for: the states that need the parent (a result to
review, a blocker only the owner resolves, the end of the run) or the states it named, and
how each wait ends (reached, ended otherwise, or still open). Pure: a function of packets."""

from __future__ import annotations

from collections.abc import Collection
from enum import StrEnum
from typing import Final

from waypost.core.authority import OWNER_RESOLVES
from waypost.model import TERMINAL, Packet, State

# the states that always need the parent; `blocked` needs it only on an owner's blocker
NEEDS_PARENT: Final = frozenset({State.READY_FOR_REVIEW, State.DELIVERED, State.CANCELLED})


class Outcome(StrEnum):
    REACHED = "reached"  # the run is in a state waited for
    ENDED = "ended"  # the run ended in another state: waiting longer cannot reach one
    WAITING = "waiting"  # not yet (the wait's deadline turns it into timed out)
    TIMED_OUT = "timed_out"


def needs_parent(packet: Packet) -> bool:
    """Whether only the parent can move the run on now, or it is over: a result to review,
    a blocker of a kind only the owner resolves (`authority.OWNER_RESOLVES`), delivered or
    cancelled. A worker's own obstacle, or a silent worker (anyone may resume), is not."""
    if packet.state in NEEDS_PARENT:
        return True
    return packet.state is State.BLOCKED and any(
        b.kind in OWNER_RESOLVES for b in packet.open_blockers)


def outcome(packet: Packet, until: Collection[State] | None) -> Outcome:
    """Where a wait for `until` (None: whatever needs the parent) stands at `packet`."""
    if needs_parent(packet) if until is None else packet.state in until:
        return Outcome.REACHED
    if packet.state in TERMINAL:
        return Outcome.ENDED
    return Outcome.WAITING
