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

A token for one run (`--run`) reaches that run alone; it starts nothing.

Also here: what a remote caller may make the server do. Nothing runs on the server because
a remote caller asked (commands, http: checks, checks that read the server's files, exec:
targets) unless the server was started with --allow-exec, and URLs it registers reach only
the hosts the server's outbound allow-list names. Pure: the packet and the strings decide.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Final, Protocol

from waypost.core.gates import runs_at_review
from waypost.errors import NotAuthorized, NotFound, Refused
from waypost.model import BlockerKind, Packet


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
# DESIGN.md's table: the worker resolves its own obstacles (a silent worker's blocker is
# resolved by `resume`); the owner resolves any.
WORKER_RESOLVES: Final = frozenset({BlockerKind.FAILED_COMMAND,
                                    BlockerKind.UNAVAILABLE_RESOURCE, BlockerKind.OTHER})


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
    return [p for p in packets if caller.run_id is None or p.id == caller.run_id]


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
    if found.kind in WORKER_RESOLVES:
        return
    how = ("resume the run" if found.kind is BlockerKind.WORKER_SILENT
           else f"ask the owner {packet.owner}")
    raise NotAuthorized(
        f"{caller.holder}'s worker token may not resolve {found.id} ({found.kind}): only the "
        f"owner resolves {found.kind}", hint=how)


def _role_hint(operation: Operation) -> str:
    if operation in WORKER_OPERATIONS:
        return "use a worker token for this run (waypost token issue --role worker --run RUN)"
    return "use the run owner's token (waypost token issue --role owner --holder OWNER)"


# --- what a remote caller may make the server do ------------------------------------------

RUNS_HERE: Final = ("command", "http")  # check kinds that run or reach out from the server


def exec_refusal(what: str) -> Refused:
    return Refused(
        f"{what}: nothing runs on this server because a remote caller asked",
        hint="run it where it may run (waypost review / waypost evidence run on your own "
        "machine), or start the server with --allow-exec")


def check_remote_check(spec: str, packet: Packet, *, allow_exec: bool,
                       outbound: Iterable[str] = ()) -> None:
    """Refuse a check (evidence or a gate at review) that would run a command, reach out
    from the server or read the server's files, unless `allow_exec`. Artifact, no-private
    and grep checks over stored artifacts always work."""
    kind, _, arg = spec.strip().partition(":")
    if allow_exec:
        if kind == "http":
            check_outbound(arg.strip().partition(" ")[0], f"check {spec[:80]!r}", outbound)
        return
    if kind in RUNS_HERE:
        raise exec_refusal(f"the {kind}: check {spec[:80]!r} would run on this server")
    if kind in ("grep", "grep!"):
        where = arg.rpartition(":")[2].strip()
        artifact = packet.artifact(where)
        if artifact is None or not artifact.stored:
            raise exec_refusal(f"the check {spec[:80]!r} would read {where!r} from this "
                               "server's files (no stored artifact has that name)")


def check_remote_review(packet: Packet, *, allow_exec: bool,
                        outbound: Iterable[str] = ()) -> None:
    """A review runs every gate that is the owner's (or reads only the store): refused when
    any of those would (`check_remote_check`). A gate awaiting the owner's adoption runs
    nothing at review (`core.gates.runs_at_review`)."""
    for gate in packet.gates:
        if runs_at_review(packet, gate):
            check_remote_check(gate.check, packet, allow_exec=allow_exec, outbound=outbound)


def check_remote_uri(uri: str | None, field: str, *, outbound: Iterable[str],
                     allow_exec: bool) -> None:
    """A target, notify or check URL registered over HTTP: an http(s) URL reaches only a
    host the outbound allow-list names; an exec: target runs only with `allow_exec`."""
    if uri is None:
        return
    if uri.startswith("exec:") and not allow_exec:
        raise exec_refusal(f"the {field} {uri[:80]!r} would run a command on the relay")
    if uri.startswith(("http://", "https://")):
        check_outbound(uri, field, outbound)


def check_remote_gates(gates: Iterable[str], *, outbound: Iterable[str]) -> None:
    """Gates registered over HTTP: an http: check reaches only a listed host (a command:
    gate is recorded; it runs where the owner reviews)."""
    for check in gates:
        kind, _, arg = check.strip().partition(":")
        if kind == "http":
            check_outbound(arg.strip().partition(" ")[0], f"gate {check[:80]!r}", outbound)


def url_host(url: str) -> str:
    """The host of an http(s) URL, lower-cased, without port or IPv6 brackets; "" (no host
    that can be allowed) when the authority holds a user part or a character that parsers
    read differently (`@`, a backslash, a percent escape, a space or a control)."""
    authority = url.partition("://")[2]
    for end in "/?#":
        authority = authority.partition(end)[0]
    if any(c in authority for c in "@\\%") or not authority.isprintable() or " " in authority:
        return ""
    if authority.startswith("["):  # an IPv6 literal, closed, then at most a port
        inside, closed, rest = authority[1:].partition("]")
        if not closed or (rest and not rest.startswith(":")) or not inside or \
                any(c not in "0123456789abcdefABCDEF:." for c in inside):
            return ""
        return inside.lower()
    host = authority.partition(":")[0].lower()
    return "" if "[" in host or "]" in host else host


def check_outbound(url: str, field: str, outbound: Iterable[str]) -> None:
    host = url_host(url)
    allowed = {h.strip().lower().strip("[]") for h in outbound}
    if not host or host not in allowed:
        raise NotAuthorized(
            f"the {field} {url[:80]!r} reaches {host or 'no host'!r}, which this server's "
            "outbound allow-list does not name",
            hint="use a listed host, or start the server with --allow-host HOST")
