"""One world (a store) and one driver per door and backend, made when a scenario first
needs them and kept for the session: servers and MCP processes start once, and every
scenario builds a fresh run of its own in that store."""

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
    """The drivers made so far, by door and backend, closed when the session ends."""

    def __init__(self, folder: Path, stack: contextlib.ExitStack) -> None:
        self.folder = folder
        self.stack = stack
        self.made: dict[tuple[Door, str], Driver] = {}

    def get(self, door: Door, backend: str) -> Driver:
        if (door, backend) not in self.made:
            self.made[door, backend] = self._make(door, backend)
        return self.made[door, backend]

    def _make(self, door: Door, backend: str) -> Driver:
        folder = self.folder / f"{door}-{backend}"
        (folder / "store").mkdir(parents=True)
        url = (self.stack.enter_context(pg.fresh_schema()) if backend == "postgres"
               else str(folder / "store" / "waypost.db"))
        world = World(url, folder)
        self.stack.callback(world.close)
        driver = DRIVERS[door](world)
        self.stack.callback(driver.close)
        return driver


@pytest.fixture(scope="session")
def doors(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Doors]:
    with contextlib.ExitStack() as stack:
        yield Doors(tmp_path_factory.mktemp("parity"), stack)
