"""Shared test helpers: an injectable clock, an in-process CLI runner and real `waypost`
processes."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from waypost.cli import main
from waypost.model import to_json
from waypost.store import Store


class FakeClock:
    """A clock tests move by hand (no sleeping)."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now


@dataclass
class Outcome:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)

    def error(self) -> dict[str, Any]:
        document: dict[str, dict[str, Any]] = json.loads(self.err)
        return document["error"]


class Cli:
    """Runs `waypost …` in-process against one store, as a given actor."""

    def __init__(self, store: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.store = store
        self.capsys = capsys

    def __call__(self, *args: str, actor: str = "alice", epoch: int | None = None) -> Outcome:
        saved = {k: os.environ.get(k) for k in ("WAYPOST_URL", "WAYPOST_ACTOR", "WAYPOST_EPOCH")}
        os.environ["WAYPOST_URL"] = str(self.store)
        os.environ["WAYPOST_ACTOR"] = actor
        os.environ.pop("WAYPOST_EPOCH", None)
        if epoch is not None:
            os.environ["WAYPOST_EPOCH"] = str(epoch)
        self.capsys.readouterr()
        try:
            code = main(list(args))
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
        captured = self.capsys.readouterr()
        return Outcome(code, captured.out, captured.err)

    def ok(self, *args: str, actor: str = "alice", epoch: int | None = None) -> str:
        outcome = self(*args, actor=actor, epoch=epoch)
        assert outcome.code == 0, f"waypost {' '.join(args)} → {outcome.code}: {outcome.err}"
        return outcome.out.strip()


Spawn = Callable[..., subprocess.Popen[str]]


@contextmanager
def waypost_processes(store: str) -> Iterator[Spawn]:
    """`spawn(VERB, …, env=None)` starts `waypost VERB … --store STORE` as a real process;
    whatever is still running at the end is killed."""
    started: list[subprocess.Popen[str]] = []

    def spawn(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        proc = subprocess.Popen([sys.executable, "-m", "waypost", *args, "--store", store],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env)
        started.append(proc)
        return proc

    try:
        yield spawn
    finally:
        for proc in started:
            if proc.poll() is None:
                proc.kill()
            proc.communicate(timeout=10)


StoreDump = dict[str, list[tuple[object, ...]]]


def dump_store(path: Path) -> StoreDump:
    """Every row of every table of a SQLite store (blobs included), to show that a refusal
    left it exactly as it was."""
    db = sqlite3.connect(path)
    try:
        tables = [r[0] for r in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return {t: sorted(db.execute(f'SELECT * FROM "{t}"').fetchall(), key=repr)
                for t in tables}
    finally:
        db.close()


def recorded(store: Store, run_id: str) -> tuple[bytes, bytes]:
    """The run's packet and events as stored: a refusal must leave both as they were."""
    return to_json(store.get(run_id)), to_json(store.events(run_id))


def claimed_run(store: Store) -> tuple[str, int]:
    """A long-running run alice owns, claimed by w1: its id and w1's lease epoch."""
    from waypost.model import Kind
    from waypost.usecases import runs, starting

    run, _ = starting.start(store, "t", actor="alice", owner="alice", target="none:",
                            kind=Kind.LONG_RUNNING, max_silence=3600.0)
    worker = runs.Run(store, run.id, actor="w1")
    worker.claim()
    assert worker.epoch is not None
    return run.id, worker.epoch
