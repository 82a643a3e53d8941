"""`waypost import`: a bundle, verified, brought into a store as a read-only run.

The bundle is read twice. The first pass is `verify-bundle`'s (`usecases/verifying`): a
bundle that is not intact is refused whole, and nothing is stored. The second pass checks
again everything it stores as it reads it (the chain, the fold, the statement, each blob's
sha256), so a file changed between the passes is refused too; it stores each blob as it
comes, then the events and the packet with the run's origin in one transaction
(`Store.import_run`). The same chain imported again stores nothing; another chain under
a run id already here is refused. From then on every write to the run is refused
(`core/history.prepare`): only the store it came from adds to its history.
"""

from __future__ import annotations

import hashlib
import os
import tarfile
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import IO

import msgspec

from waypost.core.statement import Statement, Written
from waypost.durations import utcnow
from waypost.errors import IntegrityError, InvalidInput
from waypost.events import Event
from waypost.model import Origin
from waypost.store.base import Store
from waypost.store.keys import PublicKey
from waypost.usecases.bundles import BLOBS
from waypost.usecases.verifying import (
    MAX_BLOB,
    Broken,
    Outcome,
    Report,
    _Check,
    verify,
)


class Imported(msgspec.Struct, frozen=True, kw_only=True):
    run: str
    imported: bool  # False: the same chain was here already, and nothing was stored
    events: int
    blobs: int
    origin: Origin


def import_bundle(store: Store, path: str, pinned: Sequence[PublicKey] = (), *,
                  now: datetime | None = None) -> Imported:
    """Verify the bundle at `path` (against the `pinned` keys, or the keys it carries) and
    store its run, read-only, marked with where it came from."""
    with _open(path) as source:
        report = verify(source, pinned)
    if not report.ok:
        raise _refusal(path, report)
    with _open(path) as source:
        check = _Storing(pinned, store)
        try:
            check.read(source)
        except Broken as broken:
            raise IntegrityError(f"{path} changed while it was imported ({broken.message}): "
                                 "its run was not imported", hint="import it again") from None
    assert check.written is not None
    assert check.folded is not None
    origin = _origin(path, report, check.written, pinned, now or utcnow())
    done = store.import_run(check.kept, check.folded, origin)
    return Imported(run=check.folded.id, imported=done, events=len(check.kept),
                    blobs=check.blobs, origin=origin)


def _open(path: str) -> IO[bytes]:
    try:
        return open(path, "rb")
    except OSError as exc:
        raise InvalidInput(f"cannot open {path}: {exc.strerror}") from None


def _refusal(path: str, report: Report) -> IntegrityError:
    where = ", ".join(part for part in (
        report.member, f"seq {report.seq}" if report.seq else None,
        f"blob {report.blob}" if report.blob else None) if part)
    return IntegrityError(f"{path} is not an intact bundle ({report.outcome}: {where}: "
                          f"{report.message}): nothing was imported",
                          hint=f"see what is broken with: waypost verify-bundle {path}")


def _origin(path: str, report: Report, written: Written, pinned: Sequence[PublicKey],
            now: datetime) -> Origin:
    pins = {k.keyid for k in pinned}
    signer = next((k for k in report.signers if k in pins), report.signers[0])
    return Origin(source=os.path.basename(path)[:200], holder=written.by, signer=signer,
                  pinned=report.outcome is Outcome.VERIFIED, exported_at=written.at,
                  imported_at=now)


class _Storing(_Check):
    """`verify-bundle`'s pass, keeping the events and storing each blob as it is checked."""

    def __init__(self, pinned: Sequence[PublicKey], store: Store) -> None:
        super().__init__(pinned)
        self.store = store
        self.kept: list[Event] = []
        self.written: Written | None = None

    def _events(self, file: IO[bytes]) -> Iterator[Event]:
        for event in super()._events(file):
            self.kept.append(event)
            yield event

    def _agrees(self, given: Statement) -> None:
        super()._agrees(given)
        self.written = given.predicate.bundle

    def _blob(self, name: str, file: IO[bytes], member: tarfile.TarInfo) -> None:
        sha = name.removeprefix(BLOBS)
        if member.size > MAX_BLOB:
            raise Broken(Outcome.MALFORMED, f"{name} is larger than {MAX_BLOB} bytes",
                         member=name, blob=sha)
        data = file.read(member.size)
        if hashlib.sha256(data).hexdigest() != sha:
            raise Broken(Outcome.BLOB, f"blob {sha} does not hash to its name", member=name,
                         blob=sha)
        approval = self.folded.approval if self.folded is not None else None
        if approval is not None and approval.statement == sha:
            self._cosigned(name, sha, data)
        self.store.put_blob(data)
        self.blobs += 1
