"""For the bundle tests: a delivered run with stored and URL artifacts and a command's log,
a key to sign with, and bundles taken apart and put back together as someone who edits one
would."""

from __future__ import annotations

import io
import tarfile
from datetime import datetime, timedelta
from pathlib import Path

from tests.delivery_support import fast
from tests.helpers import FakeClock
from waypost.config import Config
from waypost.core import signing
from waypost.delivery.relay import Relay
from waypost.model import ArtifactRole, EvidenceKind, State
from waypost.store import Store
from waypost.store.keys import PublicKey
from waypost.usecases import keys, runs, starting
from waypost.usecases.bundles import Exported, export
from waypost.usecases.verifying import Report, verify

Members = list[tuple[str, bytes]]


def delivered_run(store: Store, clock: FakeClock, tmp_path: Path, *, artifacts: int = 2,
                  beats: int = 0) -> str:
    """A run taken from start to `delivered` (a file: target), with `artifacts` stored
    artifacts, a URL artifact, a recorded command (its log a blob) and `beats` heartbeats."""
    run, _ = starting.start(store, "Fix the flaky login test", actor="alice", owner="alice",
                            target=f"file:{tmp_path / 'result.json'}", max_silence=3600,
                            clock=clock)
    worker = runs.Run(store, run.id, actor="w1", clock=clock)
    worker.claim()
    for i in range(beats):
        worker.heartbeat(note=f"step {i}")
    names = []
    for i in range(artifacts):
        names.append(f"part-{i}.txt")
        worker.add_artifact_bytes(names[-1], [f"part {i} of the fix\n".encode()],
                                  role=ArtifactRole.RESULT, max_bytes=1 << 20)
    worker.add_artifact("https://example.org/build/42", role=ArtifactRole.REPORT,
                        max_bytes=1 << 20)
    worker.record_command(["python3", "-c", "print('42 passed')"], kind=EvidenceKind.TEST)
    worker.ready("the private account of it", public_summary="Login race fixed",
                 artifacts=names)
    owner = runs.Run(store, run.id, actor="alice", clock=clock)
    owner.review(config=Config())
    owner.approve()
    Relay(store, settings=fast(), relay_id="relay:t", clock=clock,
          rand=lambda: 1.0).drain()
    assert store.get(run.id).state is State.DELIVERED
    return run.id


def signer(store: Store, tmp_path: Path, *, holder: str = "store", name: str = "k.pem",
           since: datetime | None = None) -> keys.Signer:
    """A new key of the store's, written to an owner-only file, loaded to sign."""
    path = str(tmp_path / name)
    at = since or datetime.now().astimezone() - timedelta(minutes=1)
    keys.generate(store, holder=holder, out=path, now=at)
    return keys.load_signer(store, path=path, env=None)


def exported(store: Store, run_id: str, tmp_path: Path, sign: keys.Signer,
             name: str = "b.tar") -> tuple[Path, Exported]:
    out = tmp_path / name
    return out, export(store, run_id, str(out), sign)


def checked(path: Path, pinned: list[PublicKey] | tuple[PublicKey, ...] = ()) -> Report:
    with path.open("rb") as file:
        return verify(file, pinned)


def members(path: Path) -> Members:
    with tarfile.open(path) as tar:
        return [(m.name, tar.extractfile(m).read())  # type: ignore[union-attr]
                for m in tar.getmembers()]


def rewrite(path: Path, parts: Members) -> Path:
    """Write `parts` as the bundle at `path` (as an editor of the file would)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in parts:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    path.write_bytes(buffer.getvalue())
    return path


def member(parts: Members, name: str) -> bytes:
    return next(data for n, data in parts if n == name)


def replaced(parts: Members, name: str, data: bytes, new_name: str | None = None) -> Members:
    return [((new_name or n), data) if n == name else (n, d) for n, d in parts]


def flip(data: bytes, at: int) -> bytes:
    """`data` with the byte at `at` changed to another printable one."""
    changed = b"x" if data[at:at + 1] != b"x" else b"y"
    return data[:at] + changed + data[at + 1:]


def ring(store: Store) -> tuple[PublicKey, ...]:
    return keys.keyring(store).keys


def public(sign: keys.Signer) -> PublicKey:
    return sign.record


def pem_of(sign: keys.Signer) -> bytes:
    return signing.public_pem(sign.key.public_key()).encode()
