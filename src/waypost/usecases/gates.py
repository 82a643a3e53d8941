"""Gates declared after the start (`Run.add_gate`) and adopted by the owner
(`Run.adopt_gate`): the input decided first, then the event each write records.

Who may: the owner adds and adopts while the run is open (in progress, blocked, or waiting
for review); the lease-holding worker adds before it submits the result, and its gate is
shown as the worker's and not run by the owner's review until the owner adopts it (the
rules are `core.gates`; the moves' authority is `core.authority`).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Final

import msgspec
from msgspec import UNSET

from waypost import inputs
from waypost.core.authority import check_owner
from waypost.core.gates import adopter, declared_by, is_owners
from waypost.core.moves import Move, destination
from waypost.errors import InvalidInput, NotFound, RuleViolation
from waypost.events import GateAdded, GateAdopted
from waypost.model import Gate, Packet

MAX_GATES: Final = 100  # a run's gates at most: a review runs every one of them


def check_name(name: str) -> str:
    """A gate's name: one printable line without surrounding spaces, and without `=` (it
    ends the name in NAME=CHECK and GATE=REASON) or a trailing `?` (it marks optional)."""
    if (not name.strip() or name != name.strip() or not name.isprintable() or "=" in name
            or name.endswith("?")):
        raise InvalidInput(f"bad gate name {name[:80]!r}: one printable line, without "
                           "surrounding spaces, `=` or a trailing `?`",
                           hint="e.g. tests, lint, report")
    return name


def declared(gates: Sequence[Gate], actor: str) -> tuple[Gate, ...]:
    """A new run's gates, each declared by the run's starter (`waypost.toml`'s included:
    they are the owner's only when the owner starts the run), none adopted yet."""
    return tuple(msgspec.structs.replace(g, declared_by=actor, adopted_by=UNSET)
                 for g in gates)


def decide_added(name: str, check: str, *, required: bool = True) -> GateAdded:
    """The gate to add, its name and check decided (the check parsed as review will)."""
    from waypost.usecases.checks import parse_check

    check_name(name)
    inputs.text(f"{name}={check}", "gate")
    parse_check(check)
    return GateAdded(name=name, check=check.strip(), required=required)


def added(packet: Packet, gate: GateAdded) -> GateAdded:
    """`gate`, if the run has room for another (the rules decide the rest on apply)."""
    if len(packet.gates) >= MAX_GATES:
        raise RuleViolation(f"run {packet.id} has {len(packet.gates)} gates, the most a "
                            "run holds", hint=f"see them: waypost show {packet.id}")
    return gate


def adopted(packet: Packet, name: str, actor: str) -> GateAdopted:
    """The owner's adoption of a gate someone else declared. Decided in this order: the
    run's state, the owner, the gate, and whether it is the owner's already (a gate older
    than the record of declarers counts as its starter's: `core.gates.declared_by`)."""
    destination(packet, Move.ADOPT_GATE)
    check_owner(packet, actor, Move.ADOPT_GATE)
    gate = next((g for g in packet.gates if g.name == name), None)
    if gate is None:
        known = ", ".join(g.name for g in packet.gates) or "none"
        raise NotFound(f"run {packet.id} has no gate {name[:80]!r} (gates: {known})",
                       hint=f"see them: waypost show {packet.id}")
    if is_owners(packet, gate):
        how = (f"adopted by {adopter(gate)}" if adopter(gate)
               else f"declared by {declared_by(packet, gate)}")
        raise RuleViolation(f"gate {name!r} of {packet.id} is the owner's already ({how}): "
                            "review runs it",
                            hint=f"waypost review {packet.id} --as {shlex.quote(packet.owner)}")
    return GateAdopted(name=name)
