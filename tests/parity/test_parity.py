"""One table of scenarios through every door: each door answers the same class, and a door
that refuses leaves the store exactly as it was (every row of every table, every file) and
runs nothing."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .conftest import BACKENDS, Doors
from .doors import DRIVERS
from .table import SCENARIOS, Scenario
from .terms import Call, Cls, Door


def cases() -> Iterator[object]:
    """(backend, door, scenario) for every scenario at every door it applies to on SQLite,
    grouped by backend and door (each group shares its store, servers and processes).

    On PostgreSQL the doors run the same code over another store, which the conformance
    suite covers for every operation: there each scenario meets one door it applies to,
    turn by turn, so every scenario and every door still meet that store (`on_postgres`)."""
    for backend in BACKENDS:
        for door in Door:
            if door not in DRIVERS:
                continue
            for index, scenario in enumerate(SCENARIOS):
                if not scenario.applies(door):
                    continue
                if backend == "postgres" and door not in on_postgres(index, scenario):
                    continue
                reason = scenario.xfail.get(door)
                marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
                yield pytest.param(backend, door, scenario, marks=marks,
                                   id=f"{backend}-{door}-{scenario.name}")


def on_postgres(index: int, scenario: Scenario) -> list[Door]:
    """The doors the scenario at `index` in the table meets on PostgreSQL: one of the doors
    it applies to, the next one from each scenario to the next (so every door meets its
    share of the scenarios there)."""
    doors = [d for d in Door if d in DRIVERS and scenario.applies(d)]
    return doors[index % len(doors):][:1]


@pytest.mark.parametrize(("backend", "door", "scenario"), list(cases()))
def test_every_door_answers_alike(backend: str, door: Door, scenario: Scenario,
                                  doors: Doors) -> None:
    driver = doors.get(door, backend)
    ctx = driver.world.build(scenario.setup, driver)
    keeps = scenario.keeps_store(door)
    before = driver.world.dump() if keeps else None
    outcome = driver.call(scenario.op, Call(scenario.actor, ctx, scenario.args))
    assert outcome is scenario.expected(door), (
        f"{door} answered {outcome} to {scenario.actor} {scenario.op} on a {scenario.setup} "
        f"run, where every door answers {scenario.expected(door)}")
    if before is not None:
        assert driver.world.dump() == before, f"{door}'s {outcome} left a trace in the store"
    if outcome is not Cls.OK or scenario.runs_nothing:
        assert not ctx.side.exists(), f"{door} ran the command it answered {outcome} to"
