"""`waypost gate add|adopt`: gates declared after the start, and the owner's adoption of
a gate someone else declared (the rules: `waypost.core.gates`, `waypost.usecases.gates`)."""

from __future__ import annotations

import click

from waypost.cli.context import Ctx, epoch_option, verb
from waypost.cli.render import gate_line
from waypost.core.gates import runs_at_review
from waypost.model import Packet


def _emit(ctx: Ctx, packet: Packet, name: str) -> None:
    gate = next(g for g in packet.gates if g.name == name)
    ctx.emit({"run": packet.id, "state": packet.state, "gate": gate,
              "runs_at_review": runs_at_review(packet, gate)},
             f"{packet.id} gate {gate_line(packet, gate)}")


@click.group(name="gate")
def gate_group() -> None:
    """Declare gates after the start, and adopt another's gate as the owner's.

    \b
    A review runs the owner's gates in the owner's environment. A gate someone else
    declared (a worker, or whoever started the run for the owner, waypost.toml's gates
    included) is shown as theirs; if it runs a command, reaches a URL or reads a path,
    review records it as not run, which blocks approval, until the owner adopts it.
    """


@gate_group.command(name="add")
@click.argument("run_id", metavar="RUN")
@click.argument("spec", metavar="NAME=KIND:ARG")
@click.option("--optional", is_flag=True, help="Approval does not need it to pass "
              "(as a trailing ? on NAME).")
@epoch_option
@verb
def gate_add(ctx: Ctx, run_id: str, spec: str, optional: bool, epoch: int | None) -> None:
    """Declare another gate: the owner's runs at review; the worker's (before ready) is
    shown as the worker's and runs once the owner adopts it."""
    from waypost.usecases.starting import parse_gate

    gate = parse_gate(spec)
    packet = ctx.run(run_id, epoch).add_gate(gate.name, gate.check,
                                             required=gate.required and not optional)
    _emit(ctx, packet, gate.name)


@gate_group.command(name="adopt")
@click.argument("run_id", metavar="RUN")
@click.argument("name")
@verb
def gate_adopt(ctx: Ctx, run_id: str, name: str) -> None:
    """Owner: make a gate someone else declared your own, so review runs it here (read
    its check first: a command runs as you)."""
    packet = ctx.run(run_id).adopt_gate(name)
    _emit(ctx, packet, name)
