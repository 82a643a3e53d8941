"""The whole handoff at every door that offers it, with the same answers and the same store:
the owner starts a run with a worker named, another actor may not take that worker's live
lease, the worker claims it and works, the owner transfers its approval to another owner,
the run goes silent and its worker resumes it. Each door leaves the same events, by the
same actors, and the same packet."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import waypost
from waypost.model import BlockerKind
from waypost.store import Store

from .conftest import BACKENDS, Doors
from .table import OFFERS
from .terms import OWNER, STRANGER, WORKER, Actor, Call, Cls, Ctx, Door, Op
from .world import SILENCE

HANDING_DOORS = (Door.SDK, Door.CLI, Door.MCP_STDIO, Door.MCP_HTTP, Door.HTTP)
SILENT = "watchdog:parity"  # who calls the run silent


@dataclass(frozen=True)
class Move:
    what: str
    op: Op
    actor: Actor
    expect: Cls
    args: Mapping[str, object] = field(default_factory=dict)


HANDOFF = (
    Move("the owner starts the run with w1 as its worker", Op.START, Actor.OWNER, Cls.OK,
         {"worker": WORKER}),
    Move("mallory may not take w1's live lease", Op.CLAIM, Actor.STRANGER, Cls.REFUSED),
    Move("w1 claims it", Op.CLAIM, Actor.WORKER, Cls.OK),
    Move("w1 works under the lease it claimed", Op.HEARTBEAT, Actor.WORKER, Cls.OK),
    Move("the owner transfers its approval to another owner, bob", Op.TRANSFER, Actor.OWNER,
         Cls.OK, {"authority": "approve", "to": "bob"}),
    Move("w1's session ended: once the run is silent, w1 resumes it", Op.RESUME,
         Actor.WORKER, Cls.OK),
)
# what every door leaves: (event, actor), from the start on
EVENTS = [("started", OWNER), ("claimed", WORKER), ("heartbeat", WORKER),
          ("authority_transferred", OWNER), ("blocker_opened", SILENT), ("claimed", WORKER),
          ("blocker_resolved", WORKER)]


def _cases() -> list[object]:
    return [pytest.param(backend, id=backend) for backend in BACKENDS]


def test_every_door_offers_the_whole_handoff() -> None:
    for door in HANDING_DOORS:
        missing = {m.op for m in HANDOFF} - OFFERS[door]
        assert not missing, f"{door} offers no {sorted(missing)}"


def _silent(store: Store, run: str) -> None:
    later = datetime.now(UTC) + timedelta(seconds=SILENCE + 60)
    waypost.Run(store, run, actor=SILENT, clock=lambda: later).block(
        BlockerKind.WORKER_SILENT, "no word from w1 for 1h")


def _hand_off(doors: Doors, backend: str, door: Door) -> tuple[list[Cls], dict[str, Any]]:
    driver = doors.get(door, backend)
    world = driver.world
    answers: list[Cls] = []
    ctx = Ctx()
    for move in HANDOFF:
        if move.op is Op.START:
            before = {p.id for p in world.store.list_runs()}
            answers.append(driver.call(move.op, Call(move.actor, ctx, move.args)))
            [run] = {p.id for p in world.store.list_runs()} - before
            ctx = Ctx(run=run)
            continue
        if move.op is Op.RESUME:  # the watchdog finds w1 silent, past its max_silence
            _silent(world.store, ctx.run)
        answers.append(driver.call(move.op, Call(move.actor, ctx, move.args)))
        lease = world.store.get(ctx.run).worker
        ctx = Ctx(run=ctx.run, epoch=lease.epoch if lease else None)
    packet = world.store.get(ctx.run)
    events = [(e.type, e.actor) for e in world.store.events(ctx.run)]
    assert packet.worker is not None
    left = {"events": events, "state": packet.state.value, "owner": packet.owner,
            "worker": (packet.worker.actor, packet.worker.epoch),
            "transfers": [(t.authority.value, t.to) for t in packet.transfers],
            "blockers": [(b.kind.value, b.opened_by, b.resolved_by) for b in packet.blockers]}
    return answers, left


@pytest.mark.parametrize("backend", _cases())
def test_the_handoff_leaves_the_same_answers_and_store_at_every_door(
        backend: str, doors: Doors) -> None:
    expected = [m.expect for m in HANDOFF]
    left: dict[Door, dict[str, Any]] = {}
    for door in HANDING_DOORS:
        answers, left[door] = _hand_off(doors, backend, door)
        assert answers == expected, (
            f"{door}: " + "; ".join(f"{m.what}: {got}" for m, got in zip(HANDOFF, answers,
                                                                         strict=True)
                                    if got is not m.expect))
    assert left[Door.SDK] == {
        "events": EVENTS, "state": "in_progress", "owner": OWNER, "worker": (WORKER, 3),
        "transfers": [("approve", "bob")],
        "blockers": [("worker_silent", SILENT, WORKER)]}
    for door in HANDING_DOORS:
        assert left[door] == left[Door.SDK], f"{door} left another store than the SDK"
    assert STRANGER not in {actor for _, actor in left[Door.SDK]["events"]}
