"""The append-only history: building hash-chained events and verifying a run's chain.

Events are chained with SHA-256: OpenSSL's, or Python's own in a one-shot process
(`prefer_quick_start`, which a hot verb's process calls before anything hashes)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from math import isfinite
from typing import Protocol, cast

import msgspec

from waypost.core import outbox
from waypost.core.growing import growing, settled
from waypost.core.machine import apply
from waypost.core.writes import RunWrite, Snapshot
from waypost.errors import IntegrityError, RuleViolation, WaypostError, step
from waypost.events import AnyEventData, BlockerOpened, Event, Heartbeat, Nudged, Started
from waypost.model import (
    BlockerKind,
    NudgeTopic,
    Origin,
    OutboxItem,
    Packet,
    from_json,
    json_decoder,
    to_json,
)

GENESIS = "0" * 64


class _Hash(Protocol):
    def hexdigest(self) -> str: ...


Hasher = Callable[[bytes], _Hash]
_sha256: Hasher | None = None  # chosen on first use, or by `prefer_quick_start`


def prefer_quick_start() -> None:
    """Hash with Python's own SHA-256 in this process: OpenSSL's (hashlib) is ~3x faster per
    event, but loading it costs ~3 ms, a twentieth of a one-shot CLI process that hashes one
    event and exits. The digest is the same. A no-op where this Python has no such module."""
    global _sha256  # noqa: PLW0603
    for name in ("_sha2", "_sha256"):  # Python 3.12+, 3.11
        try:
            _sha256 = cast(Hasher, __import__(name).sha256)
            return
        except ImportError:
            pass


def sha256(data: bytes) -> _Hash:
    """SHA-256 of `data`: OpenSSL's unless `prefer_quick_start` chose Python's own."""
    global _sha256  # noqa: PLW0603
    if _sha256 is None:
        from hashlib import sha256 as openssl_sha256

        _sha256 = openssl_sha256
    return _sha256(data)


def event_hash(
    *, prev_hash: str, run_id: str, seq: int, at: datetime, actor: str, epoch: int | None,
    data: AnyEventData,
) -> str:
    body = to_json([prev_hash, run_id, seq, at, actor, epoch, data])
    return sha256(body).hexdigest()


def make_event(
    packet: Packet | None, run_id: str, data: AnyEventData, *, actor: str, at: datetime,
    epoch: int | None = None, prev_hash: str = GENESIS,
) -> Event:
    """The next event of `packet` (None for a new run), chained to `prev_hash`."""
    seq = 1 if packet is None else packet.version + 1
    data = _canonical(data)
    digest = event_hash(prev_hash=prev_hash, run_id=run_id, seq=seq, at=at, actor=actor,
                        epoch=epoch, data=data)
    return Event(run_id=run_id, seq=seq, at=at, actor=actor, epoch=epoch, data=data,
                 prev_hash=prev_hash, hash=digest)


Step = tuple[AnyEventData, int | None]  # an event body and the lease epoch it is written under


def prepare(snap: Snapshot, steps: Sequence[Step], *, actor: str, at: datetime) -> RunWrite:
    """Decide a write: chain `steps` onto `snap` as events, apply each (the rules raise
    here, before anything is written), and plan the outbox rows they cause.

    Every writer (workers and owners, the watchdog, resume, the relay) goes through this,
    then `Store.commit_write`; the version guard there refuses a stale `snap`, and
    `check_head` here one whose head event was altered or damaged, and `read_only` any
    write at all to a run imported from a bundle."""
    if snap.origin is not None:
        raise read_only(snap.packet.id, snap.origin)
    if not snap.head_checked:
        check_head(snap)
    before = packet = snap.packet
    head = snap.head_hash
    events: list[Event] = []
    items: list[OutboxItem] = []
    for data, epoch in steps:
        event = make_event(packet, packet.id, data, actor=actor, at=at, epoch=epoch,
                           prev_hash=head)
        after = apply(packet, event)
        items += outbox.plan(packet, after, event)
        events.append(event)
        packet, head = after, event.hash
    return RunWrite(run_id=before.id, expected_version=before.version, events=tuple(events),
                    packet=packet, outbox=tuple(items), head=snap.head)


def read_only(run_id: str, origin: Origin) -> RuleViolation:
    """The refusal of any write to a run imported from a bundle: its history is the one
    its home store signed, and only that store may add to it."""
    return RuleViolation(
        f"run {run_id} is imported from {origin.said()}: read-only here",
        hint="only the store it came from writes to it",
        steps=[step("read", run_id, why="read it")])


def check_head(snap: Snapshot) -> None:
    """Refuse to chain onto a run whose head event, as stored, does not hash to the head
    the run records (`head_hash`): a new event would seal an edited or damaged history
    under a valid link. Only the head is checked (one event decoded and hashed, the cost
    of a write's own event); `verify` walks the whole chain. IntegrityError names the run
    and the command that shows the damage; nothing is written."""
    packet = snap.packet
    run_id, seq = packet.id, packet.version
    why = _head_fault(snap, run_id, seq)
    if why:
        raise IntegrityError(
            f"run {run_id}: {why}: its history was altered or damaged, so nothing is "
            "written to it", hint=f"see the damage with: waypost verify {run_id}; restore "
            "the store from a backup (waypost doctor checks every run)")
    snap.head_checked = True


def _head_fault(snap: Snapshot, run_id: str, seq: int) -> str:
    """What is wrong with a snapshot's stored head event, or "" when it holds."""
    if snap.head is None:
        return f"its head event (seq {seq}) is missing"
    try:
        event = json_decoder(Event).decode(snap.head)
    except msgspec.MsgspecError as exc:
        return f"its head event (seq {seq}) does not read ({str(exc)[:200]})"
    if event.run_id != run_id or event.seq != seq:
        return f"the event stored as its head (seq {seq}) is {event.run_id} seq {event.seq}"
    digest = event_hash(prev_hash=event.prev_hash, run_id=event.run_id, seq=event.seq,
                        at=event.at, actor=event.actor, epoch=event.epoch, data=event.data)
    if digest != event.hash or digest != snap.head_hash:
        return (f"its head event (seq {seq}) does not hash to the head the run records "
                f"({snap.head_hash[:12]}…)")
    return ""


def _canonical(data: AnyEventData) -> AnyEventData:
    """Round-trip through JSON so the event in memory is exactly what will be read back
    (an int given for a float field becomes a float), validating it on the way; an event
    that already reads back as it is skips the trip (`_READS_BACK_AS_IS`)."""
    reads_back = _READS_BACK_AS_IS.get(type(data))
    if reads_back is not None and reads_back(data):
        return data
    return from_json(to_json(data), type(data))


def _heartbeat_reads_back(data: AnyEventData) -> bool:
    """Whether every field of a heartbeat, the event written most often, holds exactly the
    type and value its JSON decodes to: text as `str`, a finite `float` (not an int, which
    would come back as a float; a NaN is written as null), a moment in UTC (which is
    written with "Z" and read back in UTC). Then its round trip would give back an equal
    heartbeat with the same bytes, so it is not made."""
    assert type(data) is Heartbeat
    note, fraction, until = data.note, data.fraction, data.lease_expires_at
    return ((note is None or type(note) is str)
            and (fraction is None or (type(fraction) is float and isfinite(fraction)))
            and (until is None or (type(until) is datetime and until.tzinfo is UTC)))


def _blocker_reads_back(data: AnyEventData) -> bool:
    """A blocker opened (what a sweep records on a silent run) reads back as it is when its
    texts are `str` and its kind a member of BlockerKind (JSON gives back the same)."""
    assert type(data) is BlockerOpened
    return (type(data.blocker_id) is str and type(data.detail) is str
            and type(data.kind) is BlockerKind)


def _nudge_reads_back(data: AnyEventData) -> bool:
    """A nudge (a sweep's review_overdue or delivery_stalled) likewise: text and a topic."""
    assert type(data) is Nudged
    return type(data.detail) is str and type(data.topic) is NudgeTopic


# the events whose fields can be seen to read back as they are, with the test of each
_READS_BACK_AS_IS: dict[type, Callable[[AnyEventData], bool]] = {
    Heartbeat: _heartbeat_reads_back, BlockerOpened: _blocker_reads_back,
    Nudged: _nudge_reads_back}


def verify_run(run_id: str, events: Sequence[Event], stored: Packet) -> None:
    """Recompute the hash chain and the fold; raise IntegrityError naming run and seq."""
    packet = verify_chain(run_id, events)
    if packet != stored:
        raise IntegrityError(
            f"run {run_id}: the stored packet (version {stored.version}) differs from the "
            f"fold of its {len(events)} events"
        )


def verify_chain(run_id: str, events: Iterable[Event],
                 seen: Callable[[Packet, Event], None] | None = None) -> Packet:
    """Recompute every hash and link of a run's chain and fold it; the fold, or
    IntegrityError naming the run and the first broken seq. `seen(packet, event)` is told
    each event with the packet it leaves (its evidence may be growing: `settled` keeps one,
    see `core/growing`)."""
    prev = GENESIS
    packet: Packet | None = None
    for expected_seq, event in enumerate(events, start=1):
        where = f"run {run_id} seq {event.seq}"
        if event.run_id != run_id:
            raise IntegrityError(f"{where}: the event is of run {event.run_id}")
        if event.seq != expected_seq:
            raise IntegrityError(f"{where}: expected seq {expected_seq} (a gap or reorder)")
        if event.prev_hash != prev:
            raise IntegrityError(f"{where}: prev_hash does not match the previous event")
        digest = event_hash(prev_hash=event.prev_hash, run_id=event.run_id, seq=event.seq,
                            at=event.at, actor=event.actor, epoch=event.epoch, data=event.data)
        if digest != event.hash:
            raise IntegrityError(f"{where}: hash mismatch (the event was altered)")
        try:
            packet = apply(packet, event)
        except WaypostError as exc:
            raise IntegrityError(f"{where}: does not replay: {exc.message}") from exc
        if isinstance(event.data, Started):
            packet = growing(packet)
        if seen is not None:
            seen(packet, event)
        prev = event.hash
    if packet is None:
        raise IntegrityError(f"run {run_id}: no events")
    return settled(packet)
