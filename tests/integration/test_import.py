"""A bundle imported into another store becomes a read-only run there: it shows as imported
with its origin, no write, watchdog sweep or prune touches it, the same bundle imported
again stores nothing, and another history under the same id is refused. A bundle exported
on SQLite imports into PostgreSQL and one exported there imports back."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path

import pytest

from tests import pg
from tests.bundle_support import (
    delivered_run,
    exported,
    flip,
    member,
    members,
    replaced,
    rewrite,
    ring,
    signer,
)
from tests.helpers import FakeClock
from waypost.config import Config
from waypost.errors import Conflict, IntegrityError, RuleViolation
from waypost.hooks.answer import Terms, answer
from waypost.model import Kind, State
from waypost.store import Store, open_store
from waypost.usecases import runs, starting
from waypost.usecases.imports import import_bundle
from waypost.usecases.views import observe_run
from waypost.usecases.watchdog import sweep


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Store]:
    with open_store(str(tmp_path / ".waypost" / "home.db")) as store:
        yield store


@pytest.fixture
def away(tmp_path: Path) -> Iterator[Store]:
    with open_store(str(tmp_path / "away.db")) as store:
        yield store


def _stalled_run(store: Store, clock: FakeClock, tmp_path: Path) -> str:
    """A long-running run in progress whose worker went silent an hour ago."""
    run, _ = starting.start(store, "Port the parser", actor="alice", owner="alice",
                            target="none:", max_silence=60, kind=Kind.LONG_RUNNING,
                            clock=clock)
    runs.Run(store, run.id, actor="w1", clock=clock).claim()
    clock.advance(3600)
    return run.id


def test_an_imported_run_is_read_only_and_shows_its_origin(
        home: Store, away: Store, tmp_path: Path) -> None:
    clock = FakeClock()
    run_id = _stalled_run(home, clock, tmp_path)
    sign = signer(home, tmp_path, holder="team-a")
    path, _ = exported(home, run_id, tmp_path, sign)

    done = import_bundle(away, str(path), ring(home))
    assert (done.run, done.imported, done.origin.holder) == (run_id, True, "team-a")
    assert (done.origin.signer, done.origin.pinned, done.origin.source) == (
        sign.record.keyid, True, "b.tar")
    assert away.get(run_id) == home.get(run_id)
    assert away.events(run_id) == home.events(run_id)
    shown = observe_run(away, away.get(run_id), clock())
    assert shown.observed is not None
    assert shown.observed.imported == done.origin
    assert shown.observed.watch.startswith("imported, read-only here: from team-a")

    # no verb writes to it: the refusal names where it came from
    refusal = rf"run {run_id} is imported from team-a \(key [0-9a-f]{{16}}; b.tar\): read-only"
    with pytest.raises(RuleViolation, match=refusal):
        runs.Run(away, run_id, actor="w1", clock=clock).heartbeat(note="still here")
    with pytest.raises(RuleViolation, match=refusal):
        runs.Run(away, run_id, actor="alice", clock=clock).cancel("stop")
    # the watchdog finds it stalled at home, and leaves it alone here
    assert sweep(away, watcher_id="w", now=clock()).examined == 0
    assert sweep(home, watcher_id="w", now=clock()).examined == 1
    # prune leaves it alone, finished or not, however old
    runs.Run(home, run_id, actor="alice", clock=clock).cancel("not needed")
    later, _ = exported(home, run_id, tmp_path, sign, name="later.tar")
    with open_store(str(tmp_path / "third.db")) as third:
        import_bundle(third, str(later))
        assert third.prune(before=clock() + timedelta(days=999), states=[State.CANCELLED],
                           blobs_before=clock()).runs == 0
        assert third.get(run_id).state is State.CANCELLED


def test_the_same_chain_twice_stores_nothing_and_another_is_refused(
        home: Store, away: Store, tmp_path: Path) -> None:
    clock = FakeClock()
    run_id = delivered_run(home, clock, tmp_path)
    sign = signer(home, tmp_path)
    path, _ = exported(home, run_id, tmp_path, sign)
    first = import_bundle(away, str(path))
    assert (first.imported, first.events, first.blobs) == (True, len(home.events(run_id)), 3)
    assert first.origin.pinned is False
    again = import_bundle(away, str(path))
    assert (again.imported, away.events(run_id)) == (False, home.events(run_id))
    # a store's own run, exported and imported back into it: the same chain, nothing to do
    assert import_bundle(home, str(path)).imported is False


def test_another_history_under_an_id_already_here_is_refused(
        home: Store, away: Store, tmp_path: Path) -> None:
    clock = FakeClock()
    run_id = _stalled_run(home, clock, tmp_path)
    sign = signer(home, tmp_path)
    path, _ = exported(home, run_id, tmp_path, sign)
    import_bundle(away, str(path))
    before = away.events(run_id)
    runs.Run(home, run_id, actor="alice", clock=clock).cancel("not needed")
    later, _ = exported(home, run_id, tmp_path, sign, name="later.tar")
    with pytest.raises(Conflict, match=f"run {run_id} is already in this store with another"
                                       r" history \(2 events"):
        import_bundle(away, str(later))
    assert away.events(run_id) == before


def test_a_bundle_that_is_not_intact_is_refused_and_nothing_is_stored(
        home: Store, away: Store, tmp_path: Path) -> None:
    run_id = delivered_run(home, FakeClock(), tmp_path)
    path, _ = exported(home, run_id, tmp_path, signer(home, tmp_path))
    parts = members(path)
    events = member(parts, "events.jsonl")
    rewrite(path, replaced(parts, "events.jsonl", flip(events, len(events) // 2)))
    with pytest.raises(IntegrityError, match="is not an intact bundle \\(chain"):
        import_bundle(away, str(path))
    assert away.run_ids() == []


@pytest.mark.parametrize("direction", ["sqlite-to-postgres", "postgres-to-sqlite"])
def test_a_bundle_moves_between_the_backends(tmp_path: Path, direction: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    pg.require_postgres()
    monkeypatch.chdir(tmp_path)  # the delivery root of a store with no folder of its own
    with ExitStack() as stack:
        lite = stack.enter_context(open_store(str(tmp_path / ".waypost" / "w.db")))
        post = stack.enter_context(open_store(stack.enter_context(pg.fresh_schema())))
        source, target = (lite, post) if direction == "sqlite-to-postgres" else (post, lite)
        clock = FakeClock()
        run_id = delivered_run(source, clock, tmp_path)
        path, _ = exported(source, run_id, tmp_path, signer(source, tmp_path))
        done = import_bundle(target, str(path), ring(source))
        assert (done.imported, done.origin.pinned) == (True, True)
        assert target.get(run_id) == source.get(run_id)
        assert import_bundle(target, str(path)).imported is False
        shown = observe_run(target, target.get(run_id), clock())
        assert shown.observed is not None
        assert shown.observed.imported == done.origin
        with pytest.raises(RuleViolation, match="read-only here"):
            runs.Run(target, run_id, actor="alice", clock=clock).review(config=Config())


def test_the_hooks_hold_no_session_to_an_imported_run(
        home: Store, away: Store, tmp_path: Path) -> None:
    """A parent that names an imported run (WAYPOST_RUN) attaches no session to it, and its
    stops are refused as read-only without a count or blocker written on the run."""
    clock = FakeClock()
    run_id = _stalled_run(home, clock, tmp_path)
    path, _ = exported(home, run_id, tmp_path, signer(home, tmp_path))
    import_bundle(away, str(path))
    before = away.load(run_id).packet, away.events(run_id)
    terms = Terms(named_run=run_id)
    for event, name in (("session-start", "SessionStart"), ("stop", "Stop")):
        body = json.dumps({"session_id": "s1", "hook_event_name": name,
                           "stop_hook_active": False, "transcript_path": "/tmp/t.jsonl",
                           "cwd": "/tmp"}).encode()
        said = answer(lambda: away, "claude", event, functools.partial(bytes, body),
                      caller=None, terms=terms, now=clock())
        assert "read-only here" in said.out + said.log, said
    assert away.session_run("s1") is None
    assert (away.load(run_id).packet, away.events(run_id)) == before


def test_an_imported_run_shows_on_the_board_as_imported_and_read_only(
        home: Store, tmp_path: Path) -> None:
    """The other team's board lists it, says where it came from, offers its owner no
    action, and refuses one posted anyway with the same words as every door."""
    import re

    import httpx

    from tests.http_support import serving
    from waypost.usecases import tokens

    clock = FakeClock()
    run_id = _stalled_run(home, clock, tmp_path)
    path, _ = exported(home, run_id, tmp_path, signer(home, tmp_path, holder="team-a"))
    url = str(tmp_path / "board.db")
    with open_store(url) as board_store:
        import_bundle(board_store, str(path), ring(home))
        secret, _ = tokens.issue(board_store, holder="alice", role="owner", run_id=None,
                                 ttl=None, by="test")
    with serving(url) as base, httpx.Client(base_url=base, timeout=20) as browser:
        assert browser.post("/login", data={"token": secret},
                            headers={"Origin": base}).status_code in (200, 303)
        listed = browser.get("/").text
        assert run_id in listed
        assert "imported" in listed
        page = browser.get(f"/runs/{run_id}").text
        assert "imported, read-only here: from team-a" in page
        assert f'action="/runs/{run_id}/' not in page  # no button for the owner either
        csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', listed)
        assert csrf is not None
        posted = browser.post(f"/runs/{run_id}/cancel", data={"csrf": csrf.group(1),
                                                              "reason": "stop"},
                              headers={"Origin": base})
        assert posted.status_code >= 400
        assert "read-only" in posted.text
    with open_store(url) as board_store:
        assert board_store.get(run_id) == home.get(run_id)
