"""One store per door and backend, shared by every scenario of that door, and the runs the
scenarios act on, built cheaply through the SDK (a fresh run for each scenario, never a
fresh store: the dump before and after the call covers the whole store all the same)."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Protocol

import waypost
from tests.delivery_support import fast
from waypost.core import links as signed_links
from waypost.core.reviewed import result_digest
from waypost.delivery.base import RecordingTarget
from waypost.delivery.policy import give_up
from waypost.delivery.relay import Relay
from waypost.model import ArtifactRole, BlockerKind, EvidenceKind, Gate, Kind, Verdict
from waypost.store import open_store
from waypost.usecases import links, tokens

from .dump import Dumper
from .terms import OWNER, STRANGER, WORKER, Actor, Ctx, Setup

SILENCE = 3600.0  # seconds: nobody goes silent while the suite runs
PAST = "2020-01-02T03:04:05Z"  # a deadline long passed (the watchdog may record it at once)
WORKERS_GATE = "w1-tests"  # the gate the worker declares


class Holder(Protocol):
    """A door that must take the lease itself for its writes to carry an epoch (MCP: the
    server holds the epoch of the runs it resumed); others do nothing."""

    def hold(self, ctx: Ctx) -> None: ...


LINK_SECRET = "parity link secret, long enough to sign"


class World:
    """A store, the runs built in it, and a token for every token actor."""

    def __init__(self, url: str, folder: Path) -> None:
        self.url = url
        self.folder = folder
        self.store = open_store(url, create=True)
        self.dump = Dumper(url)  # the whole store, as it stands
        # where each run started here is followed (its notify), by a door that answers there
        self.thread: Callable[[], str | None] = lambda: None
        self.decoy = self.start().id  # the run another run's token is for
        self.tokens: Mapping[Actor, str] = self._issue()

    def close(self) -> None:
        self.dump.close()
        self.store.close()

    def _issue(self) -> dict[Actor, str]:
        """Each token actor's secret, issued once per store (no live one for NO_TOKEN)."""
        def issue(holder: str, role: str, run: str | None = None, *,
                  now: datetime | None = None, ttl: timedelta | None = None) -> str:
            return tokens.issue(self.store, holder=holder, role=role, run_id=run, ttl=ttl,
                                by="parity", now=now)[0]

        revoked = issue(OWNER, "owner")
        tokens.revoke(self.store, tokens.authenticate(self.store, revoked).id)
        owner = issue(OWNER, "owner")
        return {
            Actor.OWNER: owner, Actor.OWNER_BY_COOKIE: owner,
            Actor.WORKER: issue(WORKER, "worker"),
            Actor.STRANGER: issue(STRANGER, "owner"),
            Actor.OWNER_AS_WORKER: issue(OWNER, "worker"),
            Actor.OWNER_AS_VIEWER: issue(OWNER, "viewer"),
            Actor.OWNER_AS_WATCHER: issue(OWNER, "watcher"),
            Actor.OWNER_OTHER_RUN: issue(OWNER, "owner", self.decoy),
            Actor.OWNER_BY_LINK: self._link_session(),
            Actor.UNKNOWN_TOKEN: "wpt_000000000000_" + "x" * 43,
            Actor.REVOKED_TOKEN: revoked,
            Actor.EXPIRED_TOKEN: issue(OWNER, "owner", now=datetime(2020, 1, 1, tzinfo=UTC),
                                       ttl=timedelta(hours=1)),
        }

    def _link_session(self) -> str:
        """The session an emailed link to the decoy run signs its owner in to."""
        made = signed_links.make(signed_links.link_for(
            run=self.decoy, owner=OWNER, delivery_key=f"{self.decoy}.1.ready_for_review",
            expires_at=datetime.now(UTC) + timedelta(days=1)), LINK_SECRET)
        return links.use(self.store, made, secret=LINK_SECRET)[0]

    # --- runs -------------------------------------------------------------------------

    def start(self, *, key: str | None = None, session: str | None = None,
              deadline: str | None = None, gates: tuple[Gate, ...] = (),
              worker: str | None = None) -> waypost.Run:
        run, _ = waypost.start(self.store, "Fix the flaky login test", actor=OWNER,
                               owner=OWNER, target="none:", notify=self.thread(),
                               kind=Kind.LONG_RUNNING,
                               max_silence=SILENCE, idempotency_key=key, session=session,
                               deadline=deadline, gates=gates, worker=worker)
        return run

    def build(self, setup: Setup, door: Holder) -> Ctx:
        """The run `setup` names, made now (a new one for every scenario)."""
        side = self.folder / "sides" / uuid.uuid4().hex
        side.parent.mkdir(exist_ok=True)
        if setup is Setup.NONE:  # a session with no run: a hook finds nothing
            return Ctx(session=uuid.uuid4().hex, side=side)
        if setup is Setup.MISSING:
            return Ctx(run="wp_01nosuchrunanywhere000000", side=side)
        if setup is Setup.KEYED:
            key = f"parity-{uuid.uuid4().hex}"
            return Ctx(run=self.start(key=key).id, key=key, side=side)
        return BUILDERS[setup](self, Ctx(session=uuid.uuid4().hex, side=side), door)

    def working(self, ctx: Ctx, *, deadline: str | None = None,
                gates: tuple[Gate, ...] = ()) -> Ctx:
        """In progress: started with w1 as its worker (w1 holds the lease), with evidence."""
        run = self.start(session=ctx.session, deadline=deadline, gates=gates, worker=WORKER)
        lease = self.as_worker(run.id).report_evidence(
            EvidenceKind.TEST, Verdict.PASSED, "pytest -q: 42 passed").worker
        assert lease is not None
        return Ctx(run=run.id, session=ctx.session, epoch=lease.epoch, side=ctx.side)

    def as_worker(self, run: str, epoch: int | None = None) -> waypost.Run:
        return waypost.Run(self.store, run, actor=WORKER, epoch=epoch)

    def as_owner(self, run: str) -> waypost.Run:
        return waypost.Run(self.store, run, actor=OWNER)


def _ready(world: World, ctx: Ctx, door: Holder, *, gates: tuple[Gate, ...] = ()) -> Ctx:
    ctx = world.working(ctx, gates=gates)
    world.as_worker(ctx.run, ctx.epoch).ready("fixed: the session is created first")
    return ctx


def _reviewed(world: World, ctx: Ctx, door: Holder) -> Ctx:
    """Ready, then reviewed: its digest before the review is what a message written at
    ready named (`Ctx.stale`)."""
    ctx = _ready(world, ctx, door)
    stale = result_digest(world.store.get(ctx.run))
    world.as_owner(ctx.run).review()
    assert stale is not None
    return dataclasses.replace(ctx, stale=stale)


def _gated(world: World, ctx: Ctx, door: Holder) -> Ctx:
    gate = Gate(name="tests", check=f"command:touch {ctx.side}")
    return _ready(world, ctx, door, gates=(gate,))


def _workers_gate(world: World, ctx: Ctx, door: Holder) -> Ctx:
    """w1 declared a gate that would run a command: the worker's until the owner adopts it."""
    ctx = world.working(ctx)
    world.as_worker(ctx.run, ctx.epoch).add_gate(WORKERS_GATE, f"command:touch {ctx.side}")
    return dataclasses.replace(ctx, gate=WORKERS_GATE)


def _workers_gate_ready(world: World, ctx: Ctx, door: Holder) -> Ctx:
    ctx = _workers_gate(world, ctx, door)
    world.as_worker(ctx.run, ctx.epoch).ready("fixed: the session comes first")
    return ctx


def _workers_gate_reviewed(world: World, ctx: Ctx, door: Holder) -> Ctx:
    ctx = _workers_gate_ready(world, ctx, door)
    world.as_owner(ctx.run).review()
    assert not ctx.side.exists(), "the owner's review ran the worker's gate"
    return ctx


def _cancelled(world: World, ctx: Ctx, door: Holder) -> Ctx:
    ctx = world.working(ctx)
    world.as_owner(ctx.run).cancel("the flaky test was deleted upstream")
    return ctx


def _restarted(world: World, ctx: Ctx, door: Holder) -> Ctx:
    """w1 holds the lease at the door, then claims it again elsewhere (its other process):
    the epoch the door holds, and `ctx.epoch`, are old."""
    ctx = world.working(ctx)
    door.hold(ctx)
    world.as_worker(ctx.run).claim()
    return ctx


def _taken_over(world: World, ctx: Ctx, door: Holder) -> Ctx:
    ctx = world.working(ctx)
    world.as_owner(ctx.run).claim()  # the owner may take a live lease over
    return ctx


def _blocked_by(kind: BlockerKind) -> Callable[[World, Ctx, Holder], Ctx]:
    def build(world: World, ctx: Ctx, door: Holder) -> Ctx:
        ctx = world.working(ctx)
        _, blocker = world.as_worker(ctx.run, ctx.epoch).block(kind, f"the {kind} at hand")
        return dataclasses.replace(ctx, blocker=blocker)

    return build


def _deadline_passed(world: World, ctx: Ctx, door: Holder) -> Ctx:
    ctx = world.working(ctx, deadline=PAST)
    watchdog = waypost.Run(world.store, ctx.run, actor="watchdog:parity")
    _, blocker = watchdog.block(BlockerKind.DEADLINE_PASSED, f"the deadline {PAST} passed")
    return dataclasses.replace(ctx, blocker=blocker)


def _delivery_failed(world: World, ctx: Ctx, door: Holder) -> Ctx:
    """Approved, then the relay gave up on the final delivery: blocked by delivery_failed
    (the worker still holds its lease)."""
    ctx = _reviewed(world, ctx, door)
    world.as_owner(ctx.run).approve()
    refusing = RecordingTarget([give_up("HTTP 410 Gone") for _ in range(1000)])
    Relay(world.store, settings=fast(), relay_id="relay:parity",
          targets=refusing.resolver()).drain()
    [blocker] = world.store.get(ctx.run).open_blockers
    assert blocker.kind is BlockerKind.DELIVERY_FAILED, blocker
    return dataclasses.replace(ctx, blocker=blocker.id)


def _private(world: World, ctx: Ctx, door: Holder) -> Ctx:
    """Ready for review, holding what only the owner and the lease holder may see: a secret
    in w1's heartbeat note, the private summary, a command's output, an artifact's bytes."""
    import sys

    from .driver import BYTES, OUTPUT, PRIVATE_SUMMARY, PUBLIC_SUMMARY, SECRET

    ctx = world.working(ctx)
    worker = world.as_worker(ctx.run, ctx.epoch)
    worker.heartbeat(note=f"deploying with api_key={SECRET}")
    half = len(OUTPUT) // 2  # the command's text must not hold what it prints
    worker.record_command([sys.executable, "-c", f"print('{OUTPUT[:half]}' '{OUTPUT[half:]}')"],
                          timeout=60)
    notes = f"# Notes\n\n{BYTES}: the login race is fixed, the session comes first.\n"
    worker.add_artifact_bytes("notes.md", [notes.encode()], role=ArtifactRole.REPORT,
                              max_bytes=1 << 20)
    worker.ready(PRIVATE_SUMMARY, public_summary=PUBLIC_SUMMARY, artifacts=["notes.md"])
    return ctx


def _silent(world: World, ctx: Ctx, door: Holder) -> Ctx:
    """Started with no worker longer than max_silence ago: the watchdog blocked it as
    worker_silent before any worker's process started (the late worker's run)."""
    began = datetime.now(UTC) - timedelta(seconds=SILENCE + 60)
    run, _ = waypost.start(world.store, "Fix the flaky login test", actor=OWNER, owner=OWNER,
                           target="none:", kind=Kind.LONG_RUNNING, max_silence=SILENCE,
                           session=ctx.session, clock=lambda: began)
    watchdog = waypost.Run(world.store, run.id, actor="watchdog:parity")
    _, blocker = watchdog.block(BlockerKind.WORKER_SILENT, "no worker was heard from for 1h")
    return dataclasses.replace(ctx, run=run.id, blocker=blocker)


def _imported(world: World, ctx: Ctx, door: Holder) -> Ctx:
    """Reviewed in a store of its own (followed where this store's runs are), exported as
    a signed bundle and imported here: every write to it is refused, whoever asks."""
    from waypost.usecases import keys
    from waypost.usecases.bundles import export
    from waypost.usecases.imports import import_bundle

    with open_store(f"{ctx.side}.db", create=True) as home:
        run, _ = waypost.start(home, "Fix the flaky login test", actor=OWNER, owner=OWNER,
                               target="none:", notify=world.thread(), kind=Kind.LONG_RUNNING,
                               max_silence=SILENCE, worker=WORKER)
        worker = waypost.Run(home, run.id, actor=WORKER)
        worker.report_evidence(EvidenceKind.TEST, Verdict.PASSED, "pytest -q: 42 passed")
        worker.ready("fixed: the session is created first")
        waypost.Run(home, run.id, actor=OWNER).review()
        keys.generate(home, holder="home", out=f"{ctx.side}.pem")
        export(home, run.id, f"{ctx.side}.tar",
               keys.load_signer(home, path=f"{ctx.side}.pem", env=None))
    assert import_bundle(world.store, f"{ctx.side}.tar").imported
    return dataclasses.replace(ctx, run=run.id)


BUILDERS: dict[Setup, Callable[[World, Ctx, Holder], Ctx]] = {
    Setup.WORKING: lambda world, ctx, door: world.working(ctx),
    Setup.READY: _ready,
    Setup.REVIEWED: _reviewed,
    Setup.GATED: _gated,
    Setup.WORKERS_GATE: _workers_gate,
    Setup.WORKERS_GATE_READY: _workers_gate_ready,
    Setup.WORKERS_GATE_REVIEWED: _workers_gate_reviewed,
    Setup.CANCELLED: _cancelled,
    Setup.RESTARTED: _restarted,
    Setup.TAKEN_OVER: _taken_over,
    Setup.FAILED_COMMAND: _blocked_by(BlockerKind.FAILED_COMMAND),
    Setup.MISSING_INPUT: _blocked_by(BlockerKind.MISSING_INPUT),
    Setup.PERMISSION_BOUNDARY: _blocked_by(BlockerKind.PERMISSION_BOUNDARY),
    Setup.DEADLINE_PASSED: _deadline_passed,
    Setup.DELIVERY_FAILED: _delivery_failed,
    Setup.PRIVATE: _private,
    Setup.SILENT: _silent,
    Setup.IMPORTED: _imported,
}
