"""What a bearer token's role lets its holder ask for over HTTP, before the rules of the
run (`core.authority`) decide as they do for any actor: the holder is the actor.

    viewer   reads: runs, packets, events, verify, artifacts, the A2A task
    watcher  reads as a viewer does; the role of a monitor or notifier that follows the
             board's event stream. The watchdog itself runs beside the store (`waypost
             watch`), never over HTTP: a remote caller records no silence.
    worker   reads; claim and resume (the one takeover rule), heartbeat, block, resolve the
             blockers a worker resolves (failed_command, unavailable_resource, other),
             artifacts, evidence, ready, add a gate (the worker's: it runs at review once
             the owner adopts it)
    owner    everything, on the runs its holder owns (and it starts runs owned by its
             holder); on other runs it reads

A token for one run (`--run`) reaches that run alone; it starts nothing. What a remote
caller may make the server run, read or reach is the other policy of the authenticated
doors: `waypost.core.exposure`.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Final, Protocol

from waypost.core.authority import WORKER_RESOLVES, resolve_steps, resolver_of
from waypost.errors import NotAuthorized, NotFound
from waypost.model import Packet


class Operation(enum.StrEnum):
    LIST = "list"  # the runs
    READ = "read"  # a packet, its events, its verification, its artifacts, the A2A task
    START = "start"  # a new run
    CLAIM = "claim"  # take the lease
    RESUME = "resume"  # take a silent run over, with its handoff brief
    HEARTBEAT = "heartbeat"
    BLOCK = "block"
    UNBLOCK = "unblock"
    ARTIFACT = "artifact"  # record an artifact
    EVIDENCE = "evidence"  # record evidence (reported, skipped, a check, a command)
    READY = "ready"
    REVIEW = "review"
    APPROVE = "approve"
    CHANGES = "changes"
    TRANSFER = "transfer"
    CANCEL = "cancel"
    RETARGET = "retarget"
    ADD_GATE = "add_gate"  # declare another gate (the worker's waits for the owner's adoption)
    ADOPT_GATE = "adopt_gate"  # the owner makes another's gate its own


READS: Final = frozenset({Operation.LIST, Operation.READ})
WORKER_OPERATIONS: Final = READS | {
    Operation.CLAIM, Operation.RESUME, Operation.HEARTBEAT, Operation.BLOCK,
    Operation.UNBLOCK, Operation.ARTIFACT, Operation.EVIDENCE, Operation.READY,
    Operation.ADD_GATE}
ROLE_OPERATIONS: Final[dict[str, frozenset[Operation]]] = {
    "viewer": READS,
    "watcher": READS,
    "worker": WORKER_OPERATIONS,
    "owner": frozenset(Operation),
}


class Caller(Protocol):
    """Who a token says is calling (a `waypost.model.Grant`)."""

    @property
    def holder(self) -> str: ...
    @property
    def role(self) -> str: ...
    @property
    def run_id(self) -> str | None: ...


def check_operation(caller: Caller, operation: Operation, packet: Packet | None = None, *,
                    owner: str | None = None, blocker: str | None = None) -> None:
    """Refuse (NotAuthorized: HTTP 403) unless `caller`'s role allows `operation` on
    `packet` (None: a listing or a start, which names its `owner`)."""
    allowed = ROLE_OPERATIONS.get(caller.role, frozenset())
    if operation not in allowed:
        raise NotAuthorized(
            f"{caller.holder}'s {caller.role} token may not {operation}"
            + (f" run {packet.id}" if packet is not None else ""),
            hint=_role_hint(operation))
    if packet is not None:
        _check_scope(caller, packet)
        if caller.role == "owner" and operation not in READS and packet.owner != caller.holder:
            raise NotAuthorized(
                f"{caller.holder}'s owner token may not {operation} run {packet.id}: it "
                f"acts as owner only on runs {caller.holder} owns (the owner is {packet.owner})",
                hint=f"ask {packet.owner} for a token, or the owner to transfer the work")
    if operation is Operation.START:
        _check_start(caller, owner)
    if operation is Operation.UNBLOCK and caller.role == "worker" and packet is not None:
        _check_worker_resolves(caller, packet, blocker)


def visible(caller: Caller, packets: Iterable[Packet]) -> list[Packet]:
    """The packets `caller` may read (a run's token reads that run alone)."""
    return [p for p in packets if in_scope(caller, p.id)]


def in_scope(caller: Caller, run_id: str) -> bool:
    """Whether the run is within the token's reach (a run's token reaches that run alone)."""
    return caller.run_id is None or run_id == caller.run_id


def _check_scope(caller: Caller, packet: Packet) -> None:
    if caller.run_id is not None and caller.run_id != packet.id:
        raise NotAuthorized(
            f"{caller.holder}'s token is for run {caller.run_id}, not {packet.id}",
            hint="use a token issued for this run, or one issued with --all")


def _check_start(caller: Caller, owner: str | None) -> None:
    if caller.run_id is not None:
        raise NotAuthorized(f"{caller.holder}'s token is for run {caller.run_id}: it starts "
                            "no run", hint="start runs with an owner token issued with --all")
    if owner is not None and owner != caller.holder:
        raise NotAuthorized(
            f"{caller.holder}'s owner token may start runs owned by {caller.holder}, not by "
            f"{owner}", hint=f"leave the owner out, or ask {owner} to start it")


def _check_worker_resolves(caller: Caller, packet: Packet, blocker: str | None) -> None:
    found = next((b for b in packet.blockers if b.id == blocker), None)
    if found is None:
        known = ", ".join(b.id for b in packet.open_blockers) or "none"
        raise NotFound(f"run {packet.id} has no blocker {blocker} (open: {known})")
    if found.kind in WORKER_RESOLVES:  # a worker token resolves a worker's kinds alone
        return
    raise NotAuthorized(
        f"{caller.holder}'s worker token may not resolve {found.id} ({found.kind}): "
        + resolver_of(packet, found.kind), steps=resolve_steps(packet, found, caller.holder))


def _role_hint(operation: Operation) -> str:
    if operation in WORKER_OPERATIONS:
        return "use a worker token for this run (waypost token issue --role worker --run RUN)"
    return "use the run owner's token (waypost token issue --role owner --holder OWNER)"
