"""`async with waypost.arun(...) as run:`: the `waypost.run` block for async code. Not a
second implementation: the sync block is entered, left and acted on in a worker thread
(`asyncio.to_thread`), so the event loop never waits on the store or a command."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING

from waypost.config import Config
from waypost.model import ArtifactRole, BlockerKind, Evidence, EvidenceKind, Gate, Kind, Packet
from waypost.sdk.block import RunBlock, Worker, run
from waypost.store import Store

if TYPE_CHECKING:
    from waypost.usecases.handoff import Brief


def arun(title: str, *, owner: str | None = None, target: str | None = None,
         max_silence: float | None = None, idempotency_key: str | None = None,
         store: Store | str | None = None, actor: str | None = None,
         notify: str | None = None, kind: Kind | None = None, expect: float | None = None,
         deadline: datetime | str | None = None, heartbeat_interval: float | None = None,
         gates: Sequence[Gate] = (), config: Config | None = None,
         heartbeat_every: float | None = None) -> AsyncRunBlock:
    """`run()` for `async with waypost.arun(...) as run:`; every verb is awaited (`await
    run.ready(...)`). The same block, entered, left and acted on in a worker thread
    (`asyncio.to_thread`), so the event loop never waits on the store or a command."""
    return AsyncRunBlock(run(
        title, owner=owner, target=target, max_silence=max_silence,
        idempotency_key=idempotency_key, store=store, actor=actor, notify=notify, kind=kind,
        expect=expect, deadline=deadline, heartbeat_interval=heartbeat_interval, gates=gates,
        config=config, heartbeat_every=heartbeat_every))


class AsyncWorker:
    """`Worker` for `async with`: each verb runs in a worker thread and is awaited."""

    def __init__(self, worker: Worker) -> None:
        self.sync = worker

    @property
    def id(self) -> str:
        return self.sync.id

    @property
    def brief(self) -> Brief | None:
        return self.sync.brief

    async def packet(self) -> Packet:
        return await asyncio.to_thread(lambda: self.sync.packet)

    async def note(self, text: str, progress: float | None = None) -> Packet:
        return await asyncio.to_thread(self.sync.note, text, progress)

    async def artifact(self, path: str, role: ArtifactRole | str = ArtifactRole.OTHER,
                       name: str | None = None) -> Packet:
        return await asyncio.to_thread(self.sync.artifact, path, role, name)

    async def artifact_bytes(self, name: str, data: bytes | Iterable[bytes],
                             role: ArtifactRole | str = ArtifactRole.OTHER,
                             media_type: str | None = None) -> Packet:
        return await asyncio.to_thread(self.sync.artifact_bytes, name, data, role, media_type)

    async def evidence(self, command: Sequence[str] | str, kind: EvidenceKind | str = "command",
                       cwd: str | None = None, timeout: float | None = None) -> Evidence:
        return await asyncio.to_thread(self.sync.evidence, command, kind, cwd, timeout)

    async def check(self, spec: str, cwd: str | None = None) -> Evidence:
        return await asyncio.to_thread(self.sync.check, spec, cwd)

    async def skip(self, kind: EvidenceKind | str, reason: str) -> Evidence:
        return await asyncio.to_thread(self.sync.skip, kind, reason)

    async def block(self, kind: BlockerKind | str, detail: str) -> str:
        return await asyncio.to_thread(self.sync.block, kind, detail)

    async def unblock(self, blocker: str, resolution: str) -> Packet:
        return await asyncio.to_thread(self.sync.unblock, blocker, resolution)

    async def ready(self, summary: str, public: str | None = None,
                    artifacts: Sequence[str] = ()) -> Packet:
        return await asyncio.to_thread(self.sync.ready, summary, public, artifacts)


class AsyncRunBlock:
    """The async context manager `arun()` returns: `RunBlock`, entered and left in a
    thread. Leaving is shielded: a second cancellation does not stop the blocker record."""

    def __init__(self, block: RunBlock) -> None:
        self._block = block

    async def __aenter__(self) -> AsyncWorker:
        return AsyncWorker(await asyncio.to_thread(self._block.__enter__))

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await asyncio.shield(asyncio.to_thread(self._block.__exit__, kind, exc, tb))
