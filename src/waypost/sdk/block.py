"""A `with` block around a worker's job: the run is started (or resumed), claimed and
heartbeaten while the block runs, and never left silently `in_progress` when it ends.

    with waypost.run("Import last night's orders", owner="alice", target="file:out.md",
                     max_silence=1800, idempotency_key="orders-2026-01-02") as run:
        run.note("imported 5 of 12 pages", progress=0.4)
        run.evidence(["pytest", "-q"], kind="test")
        run.artifact("orders.md", role="report")
        run.artifact_bytes("counts.json", b'{"orders": 12}', role="result")
        run.ready("all orders imported", artifacts=["counts.json"])

A thin layer over the use cases (`waypost.usecases.runs`): every verb is `Run`'s, with its rules and
refusals. `waypost.arun` (`waypost.sdk.aio`) is the same block for `async with`.
"""

from __future__ import annotations

import os
import shlex
import threading
import traceback
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Final, TypeVar

from waypost import inputs
from waypost.config import Config, load_config
from waypost.errors import InvalidInput, WaypostError
from waypost.model import (
    ArtifactRole,
    BlockerKind,
    Evidence,
    EvidenceKind,
    Gate,
    Kind,
    Packet,
    State,
)
from waypost.store import Store, open_store
from waypost.usecases.beats import Beats, beat_every
from waypost.usecases.runs import Run
from waypost.usecases.starting import start

if TYPE_CHECKING:
    from waypost.usecases.handoff import Brief

MARK: Final = "waypost.run: "  # begins the detail of every blocker this module records
LEFT_WITHOUT_RESULT: Final = (MARK + "the with block was left without a result packet "
                              "(run.ready() was not called); nobody is working on it now")
E = TypeVar("E", ArtifactRole, EvidenceKind, BlockerKind)
JOIN_WITHIN: Final = 30.0  # seconds to wait for a heartbeat in flight when the block ends


@dataclass(frozen=True, kw_only=True)
class Plan:
    """What `run()` was asked for, kept until the block is entered."""

    title: str
    owner: str | None = None
    target: str | None = None
    max_silence: float | None = None
    idempotency_key: str | None = None
    store: Store | str | None = None
    actor: str | None = None
    notify: str | None = None
    kind: Kind | None = None
    expect: float | None = None
    deadline: datetime | str | None = None
    heartbeat_interval: float | None = None
    gates: Sequence[Gate] = ()
    config: Config | None = None
    heartbeat_every: float | None = None


def run(title: str, *, owner: str | None = None, target: str | None = None,
        max_silence: float | None = None, idempotency_key: str | None = None,
        store: Store | str | None = None, actor: str | None = None,
        notify: str | None = None, kind: Kind | None = None, expect: float | None = None,
        deadline: datetime | str | None = None, heartbeat_interval: float | None = None,
        gates: Sequence[Gate] = (), config: Config | None = None,
        heartbeat_every: float | None = None) -> RunBlock:
    """A run for the length of a `with` block: `with waypost.run(...) as run:`.

    Entering starts the run (as `waypost start` does, with the same arguments and rules),
    or, when `idempotency_key` names an earlier run with the same parameters, resumes that
    one (its `worker_silent` blockers, and the blockers an earlier block left, resolved);
    then claims its lease as `actor`. While the block runs, a background thread heartbeats
    it (twice per heartbeat interval; `heartbeat_every` seconds when given).

    Leaving the block:
    - after `run.ready(...)`: nothing more is written;
    - by an exception (KeyboardInterrupt and SystemExit included): a `failed_command`
      blocker with the exception's type, message and the end of its traceback is recorded,
      the run is `blocked`, and the exception goes on;
    - otherwise: a blocker "left without a result packet" is recorded (the run is
      `blocked`, never silently `in_progress`).
    A heartbeat that was refused while the block ran (the lease was taken over, the owner
    cancelled the run) stopped the beats; it is raised when the block ends (or noted on the
    block's own exception).

    `store`: a Store, a URL or path, or None for `WAYPOST_URL` / the `.waypost/` found
    upward (then it is closed when the block ends). `actor`: who works on it, default
    `WAYPOST_ACTOR`, else your user name. `config`: default `waypost.toml` found upward.
    """
    return RunBlock(Plan(
        title=title, owner=owner, target=target, max_silence=max_silence,
        idempotency_key=idempotency_key, store=store, actor=actor, notify=notify, kind=kind,
        expect=expect, deadline=deadline, heartbeat_interval=heartbeat_interval, gates=gates,
        config=config, heartbeat_every=heartbeat_every))


class Heartbeats:
    """A daemon thread that heartbeats the run every `every` seconds until stopped, or
    until a beat is refused (kept in `stopped_by`). A lock keeps a beat from crossing the
    result packet: after `finish()`, no beat is sent."""

    def __init__(self, handle: Run, every: float) -> None:
        self.every = every
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._beats = Beats(handle.heartbeat)
        self.failure: BaseException | None = None
        self._thread = threading.Thread(target=self._loop, daemon=True,
                                        name=f"waypost heartbeats {handle.id}")

    @property
    def stopped_by(self) -> BaseException | None:
        return self._beats.stopped_by or self.failure

    @property
    def sent(self) -> int:
        return self._beats.sent

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            with self.lock:
                if self._stop.is_set():
                    return
                try:
                    self._beats()
                except Exception as exc:  # a bug: kept, and raised when the block ends
                    self.failure = exc
                    return
            if self._beats.stopped_by is not None:
                return

    def finish(self) -> None:
        """No beat after this returns (call it holding `lock`, or from outside a beat)."""
        self._stop.set()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(JOIN_WITHIN)


@dataclass
class RunBlock:
    """The context manager `run()` returns; entering it gives the `Worker`."""

    plan: Plan
    _worker: Worker | None = field(default=None, init=False)
    _owned: Store | None = field(default=None, init=False)

    def __enter__(self) -> Worker:
        plan = self.plan
        if plan.heartbeat_every is not None:  # decided before the run is touched
            inputs.finite(plan.heartbeat_every, "heartbeat_every", low=0.001, high=86400.0)
        store = self._store()
        try:
            config = plan.config or load_config()
            handle, created = _started(store, plan, _actor(plan.actor), config)
            brief = None if created else _resumed(handle)
            if created:
                handle.claim()
            every = plan.heartbeat_every or beat_every(handle.packet.stop_rules)
            beats = Heartbeats(Run(store, handle.id, actor=handle.actor, epoch=handle.epoch),
                               every)
            self._worker = Worker(handle, config, beats, brief)
            beats.start()
        except BaseException:
            self._close()
            raise
        return self._worker

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        worker, self._worker = self._worker, None
        assert worker is not None, "the block was left without being entered"
        try:
            worker.beats.stop()
            if exc is not None:
                _record_failure(worker, exc)
            else:
                _record_leaving(worker)
        finally:
            self._close()

    def _store(self) -> Store:
        if isinstance(self.plan.store, Store):
            return self.plan.store
        self._owned = open_store(self.plan.store)
        return self._owned

    def _close(self) -> None:
        owned, self._owned = self._owned, None
        if owned is not None:
            owned.close()


def _actor(given: str | None) -> str:
    """As the CLI's `--as`: given, else WAYPOST_ACTOR, else the user's name."""
    if given is not None:
        return inputs.name(given, "actor")
    if os.environ.get("WAYPOST_ACTOR") is not None:
        return inputs.name(os.environ["WAYPOST_ACTOR"], "WAYPOST_ACTOR")
    import getpass

    return getpass.getuser()


def _started(store: Store, plan: Plan, actor: str, config: Config) -> tuple[Run, bool]:
    return start(
        store, plan.title, actor=actor, owner=plan.owner, target=plan.target,
        notify=plan.notify, kind=plan.kind, expect=plan.expect, deadline=plan.deadline,
        heartbeat_interval=plan.heartbeat_interval, max_silence=plan.max_silence,
        gates=plan.gates, idempotency_key=plan.idempotency_key, config=config)


def _resumed(handle: Run) -> Brief:
    """Take an earlier run over (its silent blockers resolved in the same write), then
    resolve what an earlier block of this actor left open."""
    brief = handle.resume()
    for blocker in handle.packet.open_blockers:
        if blocker.opened_by == handle.actor and blocker.detail.startswith(MARK):
            handle.unblock(blocker.id, "resumed by a new waypost.run block")
    return brief


def _record_failure(worker: Worker, exc: BaseException) -> None:
    """The block raised: say so as a `failed_command` blocker; the exception goes on, with
    a note when the blocker could not be recorded or the beats had stopped."""
    stopped = worker.beats.stopped_by
    if stopped is not None:
        exc.add_note(f"waypost: the heartbeats of {worker.id} had stopped: {stopped}")
    if worker.finished:
        return
    try:
        worker.block(BlockerKind.FAILED_COMMAND, failure_detail(exc))
    except WaypostError as err:
        exc.add_note(f"waypost could not record this on {worker.id}: {err}")


def _record_leaving(worker: Worker) -> None:
    """The block ended without an exception: without a result packet, that is a blocker;
    refused beats are raised now rather than lost."""
    stopped = worker.beats.stopped_by
    if worker.finished:
        return
    try:
        if worker.packet.state in (State.IN_PROGRESS, State.BLOCKED):
            worker.block(BlockerKind.OTHER, LEFT_WITHOUT_RESULT)
    except WaypostError:
        if stopped is None:
            raise
    if stopped is not None:
        raise stopped


def failure_detail(exc: BaseException, limit: int = inputs.TEXT_LIMITS["detail"]) -> str:
    """The exception's type and message, then as much of the end of its traceback (where
    it was raised) as fits in `limit` characters."""
    name = type(exc).__qualname__
    said = str(exc)
    head = f"{MARK}the with block raised {name}" + (f": {said}" if said else "")
    head = head if len(head) <= limit // 4 else head[:limit // 4 - 1] + "…"
    frames = "".join(traceback.format_tb(exc.__traceback__))
    room = limit - len(head) - len("\ntraceback (most recent call last):\n…")
    if not frames or room <= 0:
        return head
    if len(frames) > room:
        frames = "…" + frames[len(frames) - room + 1:]
    return f"{head}\ntraceback (most recent call last):\n{frames}".rstrip()


class Worker:
    """The worker's side of one run, inside a `waypost.run` block. Every verb is the
    `waypost.Run` verb of the same name and raises what it raises (a `WaypostError` with
    the reason and the next step)."""

    def __init__(self, handle: Run, config: Config, beats: Heartbeats,
                 brief: Brief | None) -> None:
        self._run = handle
        self._config = config
        self.beats = beats
        self.brief = brief  # the handoff brief, when this block resumed an earlier run
        self.finished = False  # a result packet was submitted by this block

    def __repr__(self) -> str:
        return f"<waypost.run {self.id} as {self._run.actor}>"

    @property
    def id(self) -> str:
        """The run's id (`waypost show ID`)."""
        return self._run.id

    @property
    def packet(self) -> Packet:
        """The run's packet as stored now."""
        return self._run.packet

    def note(self, text: str, progress: float | None = None) -> Packet:
        """Say what you are doing now (a heartbeat with a note), and how far along you are
        (`progress` from 0 to 1)."""
        return self._run.heartbeat(note=text, progress=progress)

    def artifact(self, path: str, role: ArtifactRole | str = ArtifactRole.OTHER,
                 name: str | None = None) -> Packet:
        """Record a durable output: a file (copied into the store) or an http(s) URL."""
        return self._run.add_artifact(path, role=_member(ArtifactRole, role, "role"), name=name,
                                      max_bytes=self._config.max_artifact_bytes)

    def artifact_bytes(self, name: str, data: bytes | Iterable[bytes],
                       role: ArtifactRole | str = ArtifactRole.OTHER,
                       media_type: str | None = None) -> Packet:
        """Record bytes this program made (`data`, or chunks of it) as the artifact `name`,
        copied into the store, within [limits] max_artifact_bytes; no file needed."""
        chunks = [data] if isinstance(data, bytes) else data
        return self._run.add_artifact_bytes(
            name, chunks, role=_member(ArtifactRole, role, "role"), media_type=media_type,
            max_bytes=self._config.max_artifact_bytes)

    def evidence(self, command: Sequence[str] | str, kind: EvidenceKind | str = "command",
                 cwd: str | None = None, timeout: float | None = None) -> Evidence:
        """Run `command` (an argument list, or a string split as a shell would, but run
        without one) and record what it did: exit code, time, output tail and full log.
        A failing command is recorded as `failed` evidence, not raised."""
        argv = _split(command) if isinstance(command, str) else list(command)
        packet = self._run.record_command(
            argv, kind=_member(EvidenceKind, kind, "kind"), cwd=cwd,
            timeout=self._config.evidence_timeout if timeout is None else timeout,
            tail_bytes=self._config.output_tail_bytes,
            max_output=self._config.max_output_bytes, heartbeat_every=self.beats.every)
        return packet.evidence[-1]

    def check(self, spec: str, cwd: str | None = None) -> Evidence:
        """Run a built-in check (`artifact:NAME`, `grep:PATTERN:PATH`, `no-private`,
        `http:URL`, `command:CMD`) and record what it found."""
        return self._run.check(spec, config=self._config, cwd=cwd).evidence[-1]

    def skip(self, kind: EvidenceKind | str, reason: str) -> Evidence:
        """A check that could not run, with the named reason (never fake confidence)."""
        return self._run.skip_evidence(_member(EvidenceKind, kind, "kind"), reason).evidence[-1]

    def block(self, kind: BlockerKind | str, detail: str) -> str:
        """Stop on a named obstacle (`missing_input`, `failed_command`, …); returns the
        blocker's id. Nothing proceeds until it is resolved."""
        _, blocker = self._run.block(_member(BlockerKind, kind, "kind"), detail)
        return blocker

    def unblock(self, blocker: str, resolution: str) -> Packet:
        """Resolve a blocker of your own (`failed_command`, `unavailable_resource`,
        `other`), saying how."""
        return self._run.unblock(blocker, resolution)

    def ready(self, summary: str, public: str | None = None,
              artifacts: Sequence[str] = ()) -> Packet:
        """Submit the result packet: the run goes to `ready_for_review`. `public` is the
        summary safe to show anyone; `artifacts` names recorded outputs the result rests
        on (each must hold substantive content)."""
        with self.beats.lock:
            packet = self._run.ready(summary, public_summary=public, artifacts=artifacts,
                                     config=self._config)
            self.finished = True
            self.beats.finish()
        return packet


def _split(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError as exc:  # an unclosed quote
        raise InvalidInput(f"cannot split the command {command!r}: {exc}",
                           hint="pass the arguments as a list instead") from None


def _member(enum: type[E], value: E | str, field: str) -> E:
    """`value` as a member of `enum` (its string value is enough), or InvalidInput."""
    try:
        return enum(value)
    except ValueError:
        allowed = ", ".join(m.value for m in enum)
        raise InvalidInput(f"{field} {value!r} is not one of: {allowed}") from None
