from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import Cli, FakeClock
from waypost.store import Store, open_store


@pytest.fixture(params=["sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """Every backend the conformance suite covers (each test gets a fresh store)."""
    opened = open_store(str(tmp_path / "store.db"))
    yield opened
    opened.close()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> Cli:
    monkeypatch.chdir(tmp_path)
    return Cli(tmp_path / ".waypost" / "waypost.db", capsys)
