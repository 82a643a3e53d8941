from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import pg
from tests.helpers import Cli, FakeClock
from waypost.store import Store, open_store


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """Every backend the conformance suite covers (each test gets a fresh store; on
    PostgreSQL a schema of its own, dropped afterwards)."""
    with contextlib.ExitStack() as stack:
        if request.param == "postgres":
            url = stack.enter_context(pg.fresh_schema())
        else:
            url = str(tmp_path / "store.db")
        yield stack.enter_context(open_store(url))


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A PostgreSQL store URL with a fresh schema (skipped, or failed in CI, without one)."""
    with pg.fresh_schema() as url:
        yield url


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> Cli:
    monkeypatch.chdir(tmp_path)
    return Cli(tmp_path / ".waypost" / "waypost.db", capsys)
