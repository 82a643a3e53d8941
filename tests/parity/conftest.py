"""One world (a store) and one driver per door and backend, made when a scenario first
needs them: its servers and MCP processes start once, and every scenario builds a fresh
run of its own in that store. The scenarios run grouped by backend and door, so the driver
of the group before is closed (its store dropped) when the next group begins."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import pg

from .doors import DRIVERS
from .driver import Driver
from .terms import Door
from .world import World

BACKENDS = ("sqlite", "postgres")


class Doors:
    """The driver in use, by door and backend."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.made: dict[tuple[Door, str], tuple[Driver, contextlib.ExitStack]] = {}

    def get(self, door: Door, backend: str) -> Driver:
        if (door, backend) not in self.made:
            self.close()
            self.made[door, backend] = self._make(door, backend)
        return self.made[door, backend][0]

    def close(self) -> None:
        while self.made:
            _, (_, stack) = self.made.popitem()
            stack.close()

    def _make(self, door: Door, backend: str) -> tuple[Driver, contextlib.ExitStack]:
        folder = self.folder / f"{door}-{backend}"
        (folder / "store").mkdir(parents=True, exist_ok=True)
        stack = contextlib.ExitStack()
        try:
            url = (stack.enter_context(pg.fresh_schema()) if backend == "postgres"
                   else str(folder / "store" / "waypost.db"))
            world = World(url, folder)
            stack.callback(world.close)
            driver = DRIVERS[door](world)
            stack.callback(driver.close)
        except BaseException:
            stack.close()
            raise
        return driver, stack


@pytest.fixture(scope="session")
def doors(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Doors]:
    made = Doors(tmp_path_factory.mktemp("parity"))
    try:
        yield made
    finally:
        made.close()
