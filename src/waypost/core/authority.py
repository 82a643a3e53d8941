"""Who may make each move: the owner, the lease-holding worker (fenced by its epoch), a
holder of a transferred authority, a watchdog (only for what is due), a relay (only for
the final delivery's outcome); and who resolves which kind of blocker (`RESOLVED_BY`).
Pure: everything is in the packet and the event.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Final

from waypost.core.due import (
    deadline_due,
    delivery_stall_due,
    is_due,
    last_sign_of_life,
    liveness,
    review_due,
    silent_due,
)
from waypost.core.moves import Move, destination
from waypost.errors import NotAuthorized, RuleViolation, StaleLease, Step, step
from waypost.events import BlockerOpened, Event, EventData, Nudged
from waypost.model import (
    Authority,
    Blocker,
    BlockerKind,
    Lease,
    Liveness,
    NudgeTopic,
    Packet,
    State,
)

OWNER_MOVES: Final = frozenset({Move.CHANGES, Move.TRANSFER, Move.CANCEL, Move.RETARGET,
                                Move.ADOPT_GATE})
WATCHDOG_PREFIX: Final = "watchdog:"
RELAY_PREFIX: Final = "relay:"
# what a watchdog may record, each with the moment it falls due (core/due.py)
WATCHED: Final[Mapping[str, Callable[[Packet], datetime | None]]] = {
    BlockerKind.WORKER_SILENT: silent_due,
    BlockerKind.DEADLINE_PASSED: deadline_due,
    NudgeTopic.REVIEW_OVERDUE: review_due,
    NudgeTopic.DELIVERY_STALLED: delivery_stall_due,
}

# DESIGN.md, who resolves which blocker; the owner may resolve any. Every door asks
# `check_may_resolve` through the use case; the hooks and the token roles read the table.
WORKER_RESOLVES: Final = frozenset({  # the worker's own obstacles
    BlockerKind.FAILED_COMMAND, BlockerKind.UNAVAILABLE_RESOURCE, BlockerKind.OTHER})
OWNER_RESOLVES: Final = frozenset({  # only the parent gives the input, the permission, the
    BlockerKind.MISSING_INPUT, BlockerKind.PERMISSION_BOUNDARY,  # time or the send
    BlockerKind.DEADLINE_PASSED, BlockerKind.DELIVERY_FAILED})
# a takeover of the lease resolves these: `resume`, and a `claim` of a run blocked by one
RESUME_RESOLVES: Final = frozenset({BlockerKind.WORKER_SILENT})
# an owner's kind the owner may hand over with `transfer`: resolving a failed delivery
# sends it again, which is the deliver authority's
TRANSFERRED_WITH: Final[Mapping[BlockerKind, Authority]] = {
    BlockerKind.DELIVERY_FAILED: Authority.DELIVER}


def is_watchdog(actor: str) -> bool:
    return actor.startswith(WATCHDOG_PREFIX)


def authorize(packet: Packet, event: Event, move: Move) -> None:
    if is_watchdog(event.actor) or move is Move.NUDGE:
        _check_watchdog(packet, event)
        return
    if move is Move.CLAIM:
        return
    if move in (Move.DELIVER, Move.DELIVERY_FAIL):
        _check_relay(packet, event, move)
        return
    if move in (Move.APPROVE, Move.REVIEW):
        _check_authority(packet, event.actor, Authority.APPROVE, move)
        return
    if move in OWNER_MOVES:
        check_owner(packet, event.actor, move)
        return
    if move is Move.ADD_GATE and packet.state is State.READY_FOR_REVIEW:
        # the result is submitted: a gate the worker added now would only hold up approval
        check_owner(packet, event.actor, move, when=" once the result is submitted")
        return
    _check_worker(packet, event, move)


def check_owner(packet: Packet, actor: str, move: Move, *, when: str = "") -> None:
    """Raise unless `actor` is the run's owner (the moves only the owner makes)."""
    if actor != packet.owner:
        raise NotAuthorized(
            f"{actor} may not {move} run {packet.id}: only its owner {packet.owner} "
            f"may{when}",
            steps=[step(move, packet.id, actor=packet.owner,
                        why=f"ask the owner, {packet.owner}, to run")],
        )


def _watched_condition(data: EventData) -> Callable[[Packet], datetime | None] | None:
    if isinstance(data, BlockerOpened):
        return WATCHED.get(data.kind)
    if isinstance(data, Nudged):
        return WATCHED.get(data.topic)
    return None


def _check_watchdog(packet: Packet, event: Event) -> None:
    """A watchdog records only the conditions it watches for, and only once they hold."""
    condition = _watched_condition(event.data)
    if condition is None or not is_watchdog(event.actor):
        raise NotAuthorized(
            f"{event.actor} may not record {event.type} on {packet.id}: a watchdog "
            f"({WATCHDOG_PREFIX}ID) records only " + ", ".join(WATCHED) + " (and nothing else)",
            steps=[step("read", packet.id, why="see the run with")],
        )
    due = condition(packet)
    if not is_due(due, event.at):
        what = getattr(event.data, "kind", None) or getattr(event.data, "topic", "")
        why = (f"due {due:%Y-%m-%d %H:%M:%S}Z" if due
               else f"already recorded, or nothing to watch for in {packet.state}")
        raise RuleViolation(
            f"{event.actor} may not record {what} on {packet.id} at "
            f"{event.at:%Y-%m-%d %H:%M:%S}Z: it is not due ({why})",
            hint="nothing to do", steps=[step("read", packet.id, why="see the run with")],
        )


def _check_worker(packet: Packet, event: Event, move: Move) -> None:
    lease = packet.worker
    if lease is not None and event.actor == lease.actor:
        if event.epoch is not None and event.epoch != lease.epoch:
            raise _fenced(packet, event.actor, event.epoch)
        return
    if event.actor == packet.owner and (move is not Move.HEARTBEAT or lease is None):
        return  # the owner is never fenced, but only a lease holder's heartbeat counts
    if lease is not None and event.actor == packet.owner:
        # the heartbeat is the worker's proof of life: the owner's would reset the silence
        # clock and hide a silent worker from the watchdog
        raise StaleLease(
            f"{event.actor} (the owner) may not heartbeat {packet.id} while {lease.actor} "
            f"holds the lease (epoch {lease.epoch}): only the lease holder's heartbeat "
            "counts, so a silent worker is still seen as silent",
            steps=[step("read", packet.id, why="see how the worker is doing"),
                   step("claim", packet.id, actor=event.actor,
                        why="to take the work over yourself")],
        )
    if lease is not None:
        raise _not_the_holder(packet, event, lease)
    raise NotAuthorized(
        f"{event.actor} may not {move} run {packet.id}: it is neither the owner "
        f"({packet.owner}) nor the worker (nobody holds the lease)",
        steps=[step("claim", packet.id, actor=event.actor, why="claim it first")],
    )


def _not_the_holder(packet: Packet, event: Event, lease: Lease) -> StaleLease:
    """The refusal of a write by someone who does not hold the run's lease: a process
    fenced by another actor's takeover stops; anyone else is told whose it is."""
    if event.epoch is not None:
        return StaleLease(  # a process fenced by another actor's takeover: it stops too
            f"{event.actor} wrote to {packet.id} with lease epoch {event.epoch}, but "
            f"{lease.actor} took the lease over (epoch {lease.epoch}) at "
            f"{lease.acquired_at:%Y-%m-%d %H:%M:%S}Z: this process is fenced and must stop",
            hint=f"stop here: {lease.actor} carries the work on; ask {lease.actor} or the "
                 f"owner {packet.owner} before doing more",
            steps=[step("read", packet.id, why="see where the run stands")],
        )
    # a claim is named only where it would be taken: a live lease is the owner's, or
    # its nominee's, to take over; anyone else is told to look and ask, and never
    # handed a command to run as someone else
    may_claim = (not lease_is_live(packet, event.at)
                 or holds_authority(packet, event.actor, Authority.TAKEOVER))
    return StaleLease(
        f"{event.actor} does not hold the lease on {packet.id}: {lease.actor} took it "
        f"(epoch {lease.epoch}) at {lease.acquired_at:%Y-%m-%d %H:%M:%S}Z",
        hint=f"ask {lease.actor} or the owner {packet.owner}" + (
            "" if may_claim else " (a live lease: only the owner, or whom the owner "
            "names with transfer --authority takeover, may take it over)"),
        steps=[step("claim", packet.id, actor=event.actor, why="to take it over")]
        if may_claim else
        [step("read", packet.id, why="see who holds the lease")],
    )



def _fenced(packet: Packet, actor: str, epoch: int) -> StaleLease:
    """A write of `actor` with an epoch its lease no longer has. An older epoch is a
    fenced process: a newer process of the same actor claimed since, and carries the work
    on, so this one stops; its next step is to look, never to claim (that would fence the
    newer process in turn) and never to write with the epoch it was not given."""
    lease = packet.worker
    assert lease is not None
    if epoch > lease.epoch:
        return StaleLease(
            f"{actor} wrote to {packet.id} with lease epoch {epoch}, which no claim of "
            f"{packet.id} gave",
            hint="pass the epoch your own claim printed",
            steps=[step("read", packet.id, why="see who holds the lease")])
    return StaleLease(
        f"{actor} wrote to {packet.id} with lease epoch {epoch}, but a newer process of "
        f"{actor} took the lease (epoch {lease.epoch}) at "
        f"{lease.acquired_at:%Y-%m-%d %H:%M:%S}Z: this process is fenced and must stop",
        hint=f"stop here: the newer process carries the work on (last heard "
             f"{last_sign_of_life(packet):%Y-%m-%d %H:%M:%S}Z); claiming again is right only "
             "if that process is gone, and would fence it",
        steps=[step("read", packet.id, why="see what the newer process has done")])


def ended_by_takeover(packet: Packet) -> list[Blocker]:
    """The open blockers a takeover of the lease resolves (`RESUME_RESOLVES`): `resume`
    resolves them, and so does a `claim` of a run blocked by one (a worker that starts
    after the watchdog called the run silent), with the same events; a claim that left the
    run blocked would heartbeat under a silence nobody ends."""
    return [b for b in packet.open_blockers if b.kind in RESUME_RESOLVES]


def lease_is_live(packet: Packet, now: datetime) -> bool:
    """A worker's lease is live while it has not expired and the worker is not silent (nor
    blocked as worker_silent): then only the owner, or whom the owner named, takes it."""
    lease = packet.worker
    if lease is None or (lease.expires_at is not None and lease.expires_at <= now):
        return False
    if liveness(packet, now) is Liveness.SILENT:
        return False
    return not any(b.kind is BlockerKind.WORKER_SILENT for b in packet.open_blockers)


def check_may_take_lease(packet: Packet, actor: str, now: datetime) -> None:
    """The one takeover rule, for `claim` and `resume` alike. The holder may claim its own
    lease again; a run with no live lease may be claimed by anyone; a live lease is taken
    over only by the owner, or by an actor the owner named with `transfer --authority
    takeover`. (Decided by the use case at the moment of the claim, not by `apply`: older
    histories, written before this rule, must still replay.)"""
    lease = packet.worker
    if lease is None or lease.actor == actor or not lease_is_live(packet, now):
        return
    if holds_authority(packet, actor, Authority.TAKEOVER):
        return
    raise NotAuthorized(
        f"{actor} may not take over {packet.id}: {lease.actor} holds a live lease "
        f"(epoch {lease.epoch}, last heard {last_sign_of_life(packet):%Y-%m-%d %H:%M:%S}Z); "
        f"only the owner {packet.owner} or whom the owner names may take it over",
        hint=f"ask {lease.actor} to stop, or wait until it is silent",
        steps=[step("transfer", packet.id, authority=Authority.TAKEOVER, to=actor,
                    actor=packet.owner, why="or ask the owner")],
    )


def holds_authority(packet: Packet, actor: str, authority: Authority) -> bool:
    """The owner holds every authority; others only by an explicit transfer."""
    return actor == packet.owner or any(
        t.authority is authority and t.to == actor for t in packet.transfers)


def check_may_review(packet: Packet, actor: str) -> None:
    """Raise unless `actor` may review `packet` now (asked before any gate is run)."""
    destination(packet, Move.REVIEW)
    _check_authority(packet, actor, Authority.APPROVE, Move.REVIEW)


def _check_authority(packet: Packet, actor: str, authority: Authority,
                     move: Move | None = None) -> None:
    if holds_authority(packet, actor, authority):
        return
    holders = [packet.owner, *(t.to for t in packet.transfers if t.authority is authority)]
    role = " (the run's own worker)" if packet.worker and packet.worker.actor == actor else ""
    raise NotAuthorized(
        f"{actor}{role} may not {move or authority} run {packet.id}: only "
        + ", ".join(dict.fromkeys(holders)) + " may",
        steps=[step("transfer", packet.id, authority=authority, to=actor, actor=packet.owner,
                    why="the owner can hand it over")],
    )


def _check_relay(packet: Packet, event: Event, move: Move) -> None:
    """Only a delivery relay records the final delivery's outcome; its further authority is
    its lease on the outbox row, which the store checks in the same transaction."""
    if not event.actor.startswith(RELAY_PREFIX):
        raise NotAuthorized(
            f"{event.actor} may not record {move} on {packet.id}: only a delivery relay "
            f"({RELAY_PREFIX}ID) records the final delivery",
            steps=[step("deliver", why="run the relay")],
        )


# --- who resolves which blocker ---------------------------------------------------------


def may_resolve(packet: Packet, actor: str, kind: BlockerKind) -> bool:
    """Whether the table lets `actor` resolve a blocker of `kind` with `unblock`: the owner
    any; the worker its own kinds (which actor is the worker, fenced by its epoch, `apply`
    decides); an owner's kind also whom the owner transferred its authority to."""
    if actor == packet.owner or kind in WORKER_RESOLVES:
        return True
    authority = TRANSFERRED_WITH.get(kind)
    return authority is not None and holds_authority(packet, actor, authority)


def check_may_resolve(packet: Packet, actor: str, blocker: Blocker) -> None:
    """Raise unless `actor` may resolve `blocker` now. A run that cannot be unblocked, or a
    blocker already resolved, is left for `apply` to name. (Decided by the use case at the
    request, not by `apply`: histories written before the rule held at every door have
    workers resolving the owner's kinds, and must still replay.)"""
    destination(packet, Move.UNBLOCK)
    if not blocker.is_open or may_resolve(packet, actor, blocker.kind):
        return
    role = " (the run's worker)" if packet.worker and packet.worker.actor == actor else ""
    raise NotAuthorized(
        f"{actor}{role} may not resolve {blocker.id} ({blocker.kind}) of run {packet.id}: "
        + resolver_of(packet, blocker.kind), steps=resolve_steps(packet, blocker, actor))


def resolver_of(packet: Packet, kind: BlockerKind) -> str:
    """Who resolves `kind`, in words."""
    if kind in RESUME_RESOLVES:
        return (f"{kind} is resolved by resume or claim (a takeover of the lease), or by the "
                f"owner {packet.owner}")
    if kind in OWNER_RESOLVES:
        authority = TRANSFERRED_WITH.get(kind)
        return f"only the owner resolves {kind} (here {packet.owner})" + (
            f", or whom the owner transfers the {authority} authority to" if authority else "")
    return f"the worker resolves {kind}, or the owner {packet.owner}"


def resolve_steps(packet: Packet, blocker: Blocker, actor: str) -> list[Step]:
    """The next step for `actor`, who may not resolve `blocker`: the one that does."""
    if blocker.kind in RESUME_RESOLVES:
        return [step("resume", packet.id, actor=actor, why="take the run over")]
    return [step("unblock", packet.id, blocker=blocker.id, actor=packet.owner,
                 why=f"ask the owner {packet.owner}")]
