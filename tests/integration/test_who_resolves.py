"""Who resolves which blocker (DESIGN §1) holds at every door, for every actor: the worker
resolves failed_command, unavailable_resource and other; only the owner resolves
missing_input, permission_boundary, deadline_passed and delivery_failed; worker_silent is
resolved by `resume`. A refusal is exit 3 (NotAuthorized) and leaves the store as it was.
Histories written before the rule held at every door still verify."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

import waypost
from tests.helpers import Cli, FakeClock, dump_store
from tests.integration.test_mcp import call, drive, refused, server
from waypost.core.history import prepare, verify_run
from waypost.durations import utcnow
from waypost.errors import NotAuthorized
from waypost.events import BlockerOpened, BlockerResolved, Heartbeat
from waypost.model import BlockerKind, State
from waypost.store import Store
from waypost.usecases import runs, starting
from waypost.usecases.commands import command

OWNERS = ["missing_input", "permission_boundary", "deadline_passed", "delivery_failed"]
WORKERS = ["failed_command", "unavailable_resource", "other"]
KINDS = [*OWNERS, *WORKERS, "worker_silent"]  # b1 … b8, in this order


def blocker_of(kind: str) -> str:
    return f"b{KINDS.index(kind) + 1}"


@pytest.fixture
def world(cli: Cli) -> str:
    """alice's run, worker-1 holding the lease (epoch 1), one open blocker of each kind."""
    with waypost.open_store(str(cli.store)) as store:
        run, _ = waypost.start(store, "Fix the flaky test", actor="alice", owner="alice",
                               target="none:", worker="worker-1")
        work = waypost.Run(store, run.id, actor="worker-1", epoch=1)
        for kind in KINDS:
            work.block(BlockerKind(kind), f"a real {kind} obstacle")
    return run.id


def by_cli(cli: Cli, run: str, blocker: str, actor: str) -> str | None:
    """The refusal's message (None: resolved), through `waypost unblock`."""
    outcome = cli("unblock", run, blocker, "--resolution", "done", "--json", actor=actor)
    if outcome.code == 0:
        return None
    assert outcome.code == 3, outcome.err
    error = outcome.error()
    assert error["code"] == "not_authorized"
    return f"{error['message']}\n{error['hint']}"


def by_sdk(cli: Cli, run: str, blocker: str, actor: str) -> str | None:
    """The refusal's message (None: resolved), through `waypost.Run(...).unblock`."""
    with waypost.open_store(str(cli.store)) as store:
        handle = waypost.Run(store, run, actor=actor, epoch=1 if actor == "worker-1" else None)
        try:
            handle.unblock(blocker, "done")
        except NotAuthorized as exc:
            return f"{exc.message}\n{exc.hint_with(command)}"  # its steps, as the CLI's
    return None


DOORS = {"cli": by_cli, "sdk": by_sdk}


@pytest.mark.parametrize("door", list(DOORS))
@pytest.mark.parametrize("kind", [*OWNERS, "worker_silent"])
def test_the_worker_may_not_resolve_what_is_not_its_own(cli: Cli, world: str, door: str,
                                                        kind: str) -> None:
    before = dump_store(cli.store)
    said = DOORS[door](cli, world, blocker_of(kind), "worker-1")
    assert said is not None, f"worker-1 resolved {kind} through the {door}"
    assert f"worker-1 (the run's worker) may not resolve {blocker_of(kind)} ({kind})" in said
    if kind == "worker_silent":
        assert f"waypost resume {world} --as worker-1" in said
    else:
        assert f"only the owner resolves {kind}" in said
        assert (f"ask the owner alice: waypost unblock {world} {blocker_of(kind)} "
                "--resolution TEXT --as alice") in said
    assert dump_store(cli.store) == before


@pytest.mark.parametrize("door", list(DOORS))
@pytest.mark.parametrize("kind", WORKERS)
def test_the_worker_resolves_its_own_obstacles(cli: Cli, world: str, door: str,
                                               kind: str) -> None:
    assert DOORS[door](cli, world, blocker_of(kind), "worker-1") is None
    with waypost.open_store(str(cli.store)) as store:
        [resolved] = [b for b in store.get(world).blockers if b.id == blocker_of(kind)]
    assert (resolved.resolved_by, resolved.resolution) == ("worker-1", "done")


@pytest.mark.parametrize("door", list(DOORS))
def test_the_owner_resolves_any_and_the_run_goes_back(cli: Cli, world: str,
                                                      door: str) -> None:
    for kind in KINDS:
        assert DOORS[door](cli, world, blocker_of(kind), "alice") is None, kind
    with waypost.open_store(str(cli.store)) as store:
        packet = store.get(world)
    assert packet.state is State.IN_PROGRESS
    assert {b.resolved_by for b in packet.blockers} == {"alice"}


def test_a_stranger_is_refused_either_kind(cli: Cli, world: str) -> None:
    before = dump_store(cli.store)
    assert "only the owner resolves missing_input" in (
        by_cli(cli, world, blocker_of("missing_input"), "mallory") or "")
    other = cli("unblock", world, blocker_of("other"), "--resolution", "x", actor="mallory")
    assert other.code == 3
    assert "does not hold the lease" in other.err  # the lease rule, as for any write
    assert dump_store(cli.store) == before


def test_over_mcp_stdio_the_worker_resolves_its_own_kinds_alone(cli: Cli, world: str) -> None:
    async def scenario() -> None:
        async with server(cli.store, "worker-1") as worker:
            for kind in [*OWNERS, "worker_silent"]:
                before = dump_store(cli.store)
                text = await refused(worker, "unblock", run=world, blocker=blocker_of(kind),
                                     resolution="done")
                assert f"may not resolve {blocker_of(kind)} ({kind})" in text
                assert dump_store(cli.store) == before, kind
            for kind in WORKERS:
                answer: dict[str, Any] = await call(
                    worker, "unblock", run=world, blocker=blocker_of(kind), resolution="done")
                assert blocker_of(kind) not in answer["open_blockers"]
        async with server(cli.store, "alice") as alice:
            answer = await call(alice, "unblock", run=world, blocker=blocker_of("missing_input"),
                                resolution="the key is in the vault")
            assert blocker_of("missing_input") not in answer["open_blockers"]

    drive(scenario)


def test_a_holder_of_the_deliver_authority_resolves_a_failed_delivery(cli: Cli,
                                                                       world: str) -> None:
    """Resolving delivery_failed sends the result again: the owner's, or whom the owner
    handed the deliver authority; no other transfer gives it."""
    cli.ok("transfer", world, "--authority", "approve", "--to", "worker-1")
    failed = blocker_of("delivery_failed")
    assert by_cli(cli, world, failed, "worker-1") is not None
    assert by_cli(cli, world, blocker_of("missing_input"), "worker-1") is not None
    cli.ok("transfer", world, "--authority", "deliver", "--to", "worker-1")
    assert by_cli(cli, world, failed, "worker-1") is None
    assert by_cli(cli, world, blocker_of("missing_input"), "worker-1") is not None


def test_resume_still_resolves_the_silent_workers_blocker(cli: Cli, world: str) -> None:
    brief = cli("resume", world, "--json", actor="worker-2")
    assert brief.code == 0, brief.err
    with waypost.open_store(str(cli.store)) as store:
        packet = store.get(world)
    [silent] = [b for b in packet.blockers if b.kind is BlockerKind.WORKER_SILENT]
    assert silent.resolved_by == "worker-2"
    assert packet.worker is not None
    assert packet.worker.actor == "worker-2"


def test_an_old_history_with_a_worker_resolving_the_owners_kind_still_verifies(
        store: Store) -> None:
    """Written as releases before this rule wrote it: the worker's resolution of a
    missing_input went through `prepare` and the store's one write primitive."""
    clock = FakeClock()
    run, _ = starting.start(store, "old", actor="alice", owner="alice", target="none:",
                            worker="worker-1", clock=clock)
    for data in (BlockerOpened(blocker_id="b1", kind=BlockerKind.MISSING_INPUT,
                               detail="the staging API key"),
                 BlockerResolved(blocker_id="b1", resolution="found it in an old mail"),
                 Heartbeat(note="going on")):
        clock.advance(60)
        store.commit_write(prepare(store.load(run.id), [(data, 1)], actor="worker-1",
                                   at=clock()))
    packet = store.get(run.id)
    assert packet.blockers[0].resolved_by == "worker-1"
    assert packet.state is State.IN_PROGRESS
    verify_run(run.id, store.events(run.id), packet)
    assert waypost.fold(store.events(run.id)) == packet
    later = runs.Run(store, run.id, actor="worker-1", epoch=1, clock=clock)
    clock.advance(timedelta(minutes=1).total_seconds())
    later.heartbeat(note="the history goes on")  # and the run goes on under the new rule
    verify_run(run.id, store.events(run.id), store.get(run.id))


def test_verify_at_the_door_passes_an_old_history(cli: Cli, world: str) -> None:
    with waypost.open_store(str(cli.store)) as store:
        store.commit_write(prepare(
            store.load(world), [(BlockerResolved(blocker_id="b1", resolution="old rule"), 1)],
            actor="worker-1", at=utcnow()))
    assert cli("verify", world).code == 0
    assert cli("verify").code == 0
