"""What each reader of a run may see: one rule, which every authenticated door applies
through `waypost.usecases.reading` (the HTTP API's packet, events and A2A routes, the
board and its stream, MCP over HTTP).

    reader (on an authenticated door)                  sees
    the run's owner, its lease holder, and whom the    everything
      owner named with `transfer` (holding a worker
      or owner token)
    a watcher token                                     the public view, with liveness
    a viewer token, or any other holder's token         the public view

The public view is the packet as `waypost show --public` prints it (the private summary
withheld, every string through the sanitizer, `core.sanitize.public_packet`), without the
evidence's output and logs (the output tail, the full log's hash), and without liveness
(the observed liveness, how long the run has been quiet, the last heartbeat's time, and
the heartbeat events themselves) unless the reader is a watcher. Its events are the
stored ones told the same way: the private summary withheld, every string sanitized, no
output or logs. Artifact bytes are not part of it (`may_fetch`).

A public event keeps the stored event's `hash` and `prev_hash`: they name the stored
event, which a redacted copy does not re-hash to; `verify` checks the stored chain. What a
reader sees changes nothing stored.

On a local store (the CLI, the SDK, MCP over stdio) nobody is authenticated: the reader is
whoever the caller says it is (`--as`), the store's file is readable to them anyway, and
the rule does not pretend otherwise: no grant, everything (`Sight.ALL`).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from datetime import datetime

import msgspec

from waypost.core.access import Caller
from waypost.core.sanitize import WITHHELD, public_packet, redact, redact_tree
from waypost.errors import NotAuthorized
from waypost.events import (
    Event,
    EventData,
    EvidenceRecorded,
    Heartbeat,
    MarkedReady,
    Reviewed,
)
from waypost.model import Evidence, Packet, from_json, to_json


class Sight(enum.StrEnum):
    ALL = "all"  # everything stored
    LIVE = "public_live"  # the public view, with liveness (a watcher)
    PUBLIC = "public"  # the public view


TAG = frozenset({"type"})  # an event's tag: its redacted copy still decodes by it
INSIDER_ROLES = frozenset({"owner", "worker"})  # the roles that may see everything


def insiders(packet: Packet) -> frozenset[str]:
    """Who sees everything of `packet`: its owner, its lease holder, its transferees."""
    names = {packet.owner, *(t.to for t in packet.transfers)}
    if packet.worker is not None:
        names.add(packet.worker.actor)
    return frozenset(names)


def sight(caller: Caller | None, packet: Packet) -> Sight:
    """What `caller` sees of `packet`; None: a local store's self-asserted reader."""
    if caller is None:
        return Sight.ALL
    if caller.role in INSIDER_ROLES and caller.holder in insiders(packet):
        return Sight.ALL
    return Sight.LIVE if caller.role == "watcher" else Sight.PUBLIC


def may_fetch(caller: Caller | None, packet: Packet, name: str) -> None:
    """Refuse (NotAuthorized: 403) the bytes of an artifact to a reader of the public view."""
    if sight(caller, packet) is Sight.ALL:
        return
    assert caller is not None
    raise NotAuthorized(
        f"{caller.holder}'s {caller.role} token sees run {packet.id}'s public view, which "
        f"holds no artifact bytes ({name[:80]!r})",
        hint=f"ask {packet.owner} (the owner) or the run's worker for it")


def packet_seen(packet: Packet, seen: Sight, *, deny: Sequence[str] = (),
                allow: Sequence[str] = ()) -> Packet:
    """`packet` (with its observed view, if read with one) as a reader of `seen` sees it."""
    if seen is Sight.ALL:
        return packet
    shown = public_packet(packet, deny=deny, allow=allow)
    shown = msgspec.structs.replace(shown, evidence=tuple(_quiet(e) for e in shown.evidence))
    if seen is Sight.LIVE:
        return shown
    observed = shown.observed
    if observed is not None:
        observed = msgspec.structs.replace(observed, liveness=None, silent_for_s=None)
    return msgspec.structs.replace(
        shown, observed=observed,
        progress=msgspec.structs.replace(shown.progress, last_heartbeat=None))


def events_seen(events: Iterable[Event], seen: Sight, *, deny: Sequence[str] = (),
                allow: Sequence[str] = (), fold: bool = False) -> list[Event]:
    """The events of a run as a reader of `seen` sees them (in order; a viewer's without
    the heartbeats, which are liveness). `fold`: every event is kept, for a use case that
    folds them again (the handoff brief) and shows no heartbeat of its own."""
    if seen is Sight.ALL:
        return list(events)
    return [msgspec.structs.replace(e, actor=redact(e.actor, deny=deny, allow=allow),
                                    data=_data_seen(e.data, deny, allow))
            for e in events
            if fold or seen is Sight.LIVE or not isinstance(e.data, Heartbeat)]


def _data_seen(data: EventData, deny: Sequence[str], allow: Sequence[str]) -> EventData:
    if isinstance(data, MarkedReady):
        data = msgspec.structs.replace(data, summary=WITHHELD)
    elif isinstance(data, EvidenceRecorded):
        data = msgspec.structs.replace(data, evidence=_quiet(data.evidence))
    elif isinstance(data, Reviewed):
        data = msgspec.structs.replace(data, evidence=tuple(_quiet(e) for e in data.evidence))
    document = msgspec.to_builtins(data, builtin_types=(datetime,))
    return from_json(to_json(redact_tree(document, deny, allow, keep=TAG)), type(data))


def _quiet(evidence: Evidence) -> Evidence:
    """Evidence without its output and logs (the verdict, summary and command stay)."""
    return msgspec.structs.replace(evidence, output_tail=None, log_sha256=None)


