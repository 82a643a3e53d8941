"""What each reader sees (README, "What each reader sees"): the read model
(`usecases.reading` over `core.readers`) on a real store. The doors' answers are rows of
the parity suite (`tests/parity/table.py`, `_readers`); here are the table's other
readers (a transferee, another holder's token), liveness for a watcher and not for a
viewer, the board's stream, and that reading changes nothing stored."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import waypost
from tests.board_support import read_messages, serving
from waypost.config import Config
from waypost.core.history import verify_run
from waypost.core.readers import Sight, sight
from waypost.errors import NotAuthorized
from waypost.model import Authority, EvidenceKind, Grant, Verdict, to_json
from waypost.store import Store, open_store
from waypost.usecases import reading, tokens

SECRET = "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e"
PRIVATE = "PrivateSummaryMark7731"
OUTPUT = "CommandOutputMark5523"
PUBLIC = "PublicSummaryMark3380"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with open_store(f"sqlite:///{tmp_path / 'store.db'}", create=True) as opened:
        yield opened


def _private_run(store: Store) -> str:
    """Ready for review; w1 holds the lease; alice named bob with `transfer`."""
    run, _ = waypost.start(store, "Fix the login test", actor="alice", owner="alice",
                           target="none:", kind=waypost.Kind.LONG_RUNNING, max_silence=3600,
                           worker="w1")
    worker = waypost.Run(store, run.id, actor="w1")
    worker.heartbeat(note=f"deploying with api_key={SECRET}", progress=0.5)
    half = len(OUTPUT) // 2
    worker.record_command([sys.executable, "-c", f"print('{OUTPUT[:half]}' '{OUTPUT[half:]}')"],
                          kind=EvidenceKind.TEST, timeout=60)
    worker.report_evidence(EvidenceKind.TEST, Verdict.PASSED, "pytest -q: 42 passed")
    worker.add_artifact_bytes("notes.md", [b"# Notes\n\nThe session comes first.\n"],
                              role=waypost.ArtifactRole.REPORT, max_bytes=1 << 20)
    worker.ready(PRIVATE, public_summary=PUBLIC, artifacts=["notes.md"])
    waypost.Run(store, run.id, actor="alice").transfer(Authority.APPROVE, "bob")
    return run.id


def _grant(store: Store, holder: str, role: str) -> Grant:
    return tokens.issue(store, holder=holder, role=role, run_id=None, ttl=None, by="test")[1]


def _text(store: Store, reader: Grant | None, run: str) -> str:
    packet = reading.run(store, reader, run)
    events = reading.events(store, reader, run)
    return to_json(packet).decode() + to_json(events).decode()


READERS = [  # (holder, role, what the table says it sees)
    ("alice", "owner", Sight.ALL),  # the owner
    ("w1", "worker", Sight.ALL),  # the lease holder
    ("bob", "worker", Sight.ALL),  # whom the owner named with transfer
    ("alice", "worker", Sight.ALL),  # the owner, on a worker token
    ("carol", "owner", Sight.PUBLIC),  # another holder's owner token
    ("carol", "worker", Sight.PUBLIC),  # a worker token that holds no lease here
    ("alice", "watcher", Sight.LIVE),  # a watcher token: liveness too
    ("alice", "viewer", Sight.PUBLIC),  # a viewer token, even the owner's
]


@pytest.mark.parametrize(("holder", "role", "expected"), READERS)
def test_each_reader_sees_what_the_table_says(store: Store, holder: str, role: str,
                                              expected: Sight) -> None:
    run = _private_run(store)
    reader = _grant(store, holder, role)
    assert sight(reader, store.get(run)) is expected
    shown = _text(store, reader, run)
    assert PUBLIC in shown
    private = [mark for mark in (PRIVATE, SECRET, OUTPUT) if mark in shown]
    if expected is Sight.ALL:
        assert private == [PRIVATE, SECRET, OUTPUT]
        assert reading.artifact(store, reader, run, "notes.md")[1].startswith(b"# Notes")
        return
    assert private == []
    assert "api_key=[REDACTED:" in shown  # the note is there, its secret is not
    with pytest.raises(NotAuthorized):
        reading.artifact(store, reader, run, "notes.md")


def test_a_watcher_sees_liveness_and_a_viewer_does_not(store: Store) -> None:
    started, _ = waypost.start(store, "Fix the login test", actor="alice", owner="alice",
                               target="none:", kind=waypost.Kind.LONG_RUNNING,
                               max_silence=3600, worker="w1")
    run = started.id
    waypost.Run(store, run, actor="w1").heartbeat(note=f"api_key={SECRET}")
    watcher = reading.run(store, _grant(store, "alice", "watcher"), run)
    viewer = reading.run(store, _grant(store, "alice", "viewer"), run)
    assert watcher.observed is not None
    assert watcher.observed.liveness is not None
    assert watcher.progress.last_heartbeat is not None
    assert viewer.observed is not None
    assert viewer.observed.liveness is None
    assert viewer.progress.last_heartbeat is None
    assert SECRET not in to_json([watcher, viewer]).decode()
    kinds = {"watcher": [e.type for e in reading.events(store, _grant(store, "a", "watcher"),
                                                        run)],
             "viewer": [e.type for e in reading.events(store, _grant(store, "a", "viewer"),
                                                       run)]}
    assert "heartbeat" in kinds["watcher"]
    assert "heartbeat" not in kinds["viewer"]
    assert [k for k in kinds["watcher"] if k != "heartbeat"] == kinds["viewer"]


def test_a_local_reader_is_self_asserted_and_sees_everything(store: Store) -> None:
    """README: on a local store (CLI, SDK, MCP over stdio) nobody is authenticated."""
    run = _private_run(store)
    shown = _text(store, None, run)
    assert all(mark in shown for mark in (PRIVATE, SECRET, OUTPUT))


def test_reading_changes_nothing_stored_and_the_history_still_verifies(store: Store) -> None:
    run = _private_run(store)
    before = to_json(store.events(run)), to_json(store.get(run))
    for holder, role, _ in READERS:
        _text(store, _grant(store, holder, role), run)
    assert (to_json(store.events(run)), to_json(store.get(run))) == before
    verify_run(run, store.events(run), store.get(run))


def test_a_viewers_stream_names_the_run_and_nothing_private(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with open_store(url, create=True) as store:
        run = _private_run(store)
        viewer = tokens.issue(store, holder="alice", role="viewer", run_id=None, ttl=None,
                              by="test")[0]
    with serving(url) as server, httpx.stream(
            "GET", f"{server.url}/events", params={"after": "0"},
            headers={"Authorization": f"Bearer {viewer}"},
            timeout=httpx.Timeout(20, connect=5)) as response:
        assert response.status_code == 200
        said = []
        for message in read_messages(response.iter_lines(), until=20, within=20):
            said.append(message.data)
            if message.event == "runs":
                break
    runs = json.loads(said[-1])["runs"]
    assert [r["id"] for r in runs] == [run]
    assert not any(mark in text for text in said for mark in (PRIVATE, SECRET, OUTPUT))


def test_a_viewer_sees_the_projects_private_terms_withheld_in_every_read(store: Store) -> None:
    """The public view is sanitized with the project's `[sanitize] deny` terms too, in the
    run, in a listing and in its events alike."""
    codename = "OrionCodename4417"
    config = Config(deny=(codename,))
    started, _ = waypost.start(store, f"Ship {codename} to staging", actor="alice",
                               owner="alice", target="none:", kind=waypost.Kind.LONG_RUNNING,
                               max_silence=3600, worker="w1")
    viewer = _grant(store, "carol", "viewer")
    shown = {
        "run": to_json(reading.run(store, viewer, started.id, config=config)).decode(),
        "listing": to_json(reading.runs(store, viewer, [store.get(started.id)],
                                        config=config)).decode(),
        "events": to_json(reading.events(store, viewer, started.id, config=config)).decode(),
    }
    assert {where: codename in text for where, text in shown.items()} == dict.fromkeys(
        shown, False)
    assert all("[REDACTED:" in text for text in shown.values())
    owner = _text(store, _grant(store, "alice", "owner"), started.id)
    assert codename in owner  # the owner sees the run as stored
