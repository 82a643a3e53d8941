"""`waypost export`: one run as a bundle anyone can verify without the store; and what a
reader is given of it over HTTP (`for_reader`): the bundle to a reader of the run's
private view, its signed public statement alone to anyone else.

A bundle is one tar file, written as a stream (`w|`), its members in this order:

    manifest.json         the format and rules version, the run, every member's name
    packet.json           the packet, as the fold of the events leaves it
    events.jsonl          every event of the run's chain, one JSON document a line
    result.json           the document the final delivery sent (once delivered)
    keys/KEYID.pem        the public half of each key that signed the statement
    statement.dsse.json   the signed in-toto statement (a DSSE envelope)
    blobs/SHA256          every blob the run names: stored artifacts, evidence logs

Blobs are read from the store one at a time and written out before the next is read, so
what an export holds at once is the history and one blob, whatever the bundle's size. The
file appears under its name only once it is whole (written beside it, then renamed).
"""

from __future__ import annotations

import io
import os
import tarfile
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Final

import msgspec

from waypost.core import signing
from waypost.core.access import Caller
from waypost.core.history import verify_chain
from waypost.core.statement import (
    FORMAT,
    RESULT_DOCUMENT,
    RULES,
    History,
    Marks,
    Written,
    blobs_named,
    encode,
    public_statement,
    statement,
)
from waypost.durations import utcnow
from waypost.errors import IntegrityError, InvalidInput
from waypost.events import Event
from waypost.model import Packet, Purpose, to_json
from waypost.store.base import Store
from waypost.store.keys import PublicKey
from waypost.usecases.keys import Signer

MANIFEST: Final = "manifest.json"
PACKET: Final = "packet.json"
EVENTS: Final = "events.jsonl"
STATEMENT: Final = "statement.dsse.json"
KEYS: Final = "keys/"
BLOBS: Final = "blobs/"
READS: Final = 3  # reads of the run when a write lands between its events and its packet


class Manifest(msgspec.Struct, frozen=True, kw_only=True):
    format: str
    rules: int
    run: str
    members: tuple[str, ...]  # every member after the manifest, in order


class Exported(msgspec.Struct, frozen=True, kw_only=True):
    run: str
    file: str
    events: int
    blobs: int
    head: str
    keyid: str
    holder: str


def export(store: Store, run_id: str, out: str, signer: Signer, *,
           deny: Sequence[str] = (), allow: Sequence[str] = (),
           now: datetime | None = None) -> Exported:
    """Write run `run_id` as a bundle at `out`, its statement signed by `signer`."""
    packet, events, marks = _read(store, run_id)
    document = _document(store, marks, packet, deny, allow)
    blobs = blobs_named(packet)
    record = signer.record
    written = Written(format=FORMAT, rules=RULES, at=now or utcnow(), by=record.holder)
    history = History(events=len(events), head=events[-1].hash)
    payload = encode(statement(packet, marks, history, written,
                               _sha256(document) if document is not None else None))
    envelope = signing.sign(payload, signer.key)
    keys = {record.keyid: record, **_approver_keys(store, packet)}
    head = [PACKET, EVENTS, *([RESULT_DOCUMENT] if document is not None else []),
            *(f"{KEYS}{keyid}.pem" for keyid in keys), STATEMENT]
    members = (*head, *(f"{BLOBS}{b}" for b in blobs))
    manifest = Manifest(format=FORMAT, rules=RULES, run=run_id, members=members)
    partial = f"{out}.partial"
    try:
        with open(partial, "xb") as file, tarfile.open(fileobj=file, mode="w|",
                                                        format=tarfile.PAX_FORMAT) as tar:
            when = written.at.timestamp()
            _add(tar, MANIFEST, to_json(manifest), when)
            _add(tar, PACKET, to_json(packet), when)
            _add(tar, EVENTS, b"".join(to_json(e) + b"\n" for e in events), when)
            if document is not None:
                _add(tar, RESULT_DOCUMENT, document, when)
            for keyid, key in keys.items():
                _add(tar, f"{KEYS}{keyid}.pem", key.public_key.encode(), when)
            _add(tar, STATEMENT, signing.envelope_json(envelope), when)
            for sha in blobs:
                _add(tar, f"{BLOBS}{sha}", store.get_blob(sha), when)
        os.replace(partial, out)
    except FileExistsError:
        raise InvalidInput(f"{partial} exists: another export to {out} is under way, or "
                           "one stopped half way", hint=f"remove {partial}") from None
    except BaseException:
        if os.path.exists(partial):
            os.unlink(partial)
        raise
    return Exported(run=run_id, file=out, events=len(events), blobs=len(blobs),
                    head=history.head, keyid=record.keyid, holder=record.holder)


class Served(msgspec.Struct, frozen=True, kw_only=True):
    """What a reader is given of a run (`GET /api/runs/{id}/bundle`): the whole bundle,
    written at `file` for the caller to stream and remove, to a reader of the private
    view; the signed public statement (a DSSE envelope, `envelope`) to anyone else."""

    run: str
    file: str | None = None
    envelope: bytes | None = None


def for_reader(store: Store, caller: Caller | None, run_id: str, sign: Callable[[], Signer],
               folder: str, *, deny: Sequence[str] = (), allow: Sequence[str] = ()) -> Served:
    """The bundle of `run_id` as `caller` may have it (the read model: `usecases.reading`),
    signed by the key `sign` loads (once the caller may read the run at all)."""
    from waypost.usecases import reading

    packet = reading.readable(store, caller, run_id)  # NotFound, NotAuthorized
    signer = sign()
    if reading.sees_all(caller, packet):
        out = os.path.join(folder, f"{run_id}.tar")
        export(store, run_id, out, signer, deny=deny, allow=allow)
        return Served(run=run_id, file=out)
    return Served(run=run_id, envelope=public_envelope(store, run_id, signer, deny=deny,
                                                       allow=allow))


def public_envelope(store: Store, run_id: str, signer: Signer, *, deny: Sequence[str] = (),
                    allow: Sequence[str] = (), now: datetime | None = None) -> bytes:
    """The run's public statement (`core.statement.public_statement`) in a DSSE envelope
    signed by `signer`: its public summary, subjects and verdicts, no private text."""
    from waypost.core.readers import Sight, packet_seen

    packet, events, marks = _read(store, run_id)
    document = _document(store, marks, packet, deny, allow)
    shown = packet_seen(packet, Sight.PUBLIC, deny=deny, allow=allow)
    written = Written(format=FORMAT, rules=RULES, at=now or utcnow(), by=signer.record.holder)
    history = History(events=len(events), head=events[-1].hash)
    payload = encode(public_statement(packet, shown, marks, history, written,
                                      _sha256(document) if document is not None else None))
    return signing.envelope_json(signing.sign(payload, signer.key))


def _approver_keys(store: Store, packet: Packet) -> dict[str, PublicKey]:
    """The public key of each signature over the run's signed approval statement (none
    when the approval was not co-signed), so that the bundle alone checks it."""
    sha = packet.approval.statement if packet.approval else None
    if not sha:
        return {}
    envelope = signing.read_envelope(store.get_blob(sha))
    ring = {k.keyid: k for k in store.signing_keys()}
    return {s.keyid: ring[s.keyid] for s in envelope.signatures if s.keyid in ring}


def _read(store: Store, run_id: str) -> tuple[Packet, list[Event], Marks]:
    """The run's events, their fold (which must be the stored packet) and its marks."""
    for _ in range(READS):
        events = store.events(run_id)
        marks = Marks()
        folded = verify_chain(run_id, events, marks.seen)
        stored = store.get(run_id)
        if stored.version == folded.version:
            if stored != folded:
                raise IntegrityError(f"run {run_id}: the stored packet differs from the "
                                     "fold of its events: a bundle of it would not verify",
                                     hint=f"see the damage with: waypost verify {run_id}")
            return folded, events, marks
    raise IntegrityError(f"run {run_id} changed on each of {READS} reads",
                         hint="export it again once it is quieter")


def _document(store: Store, marks: Marks, packet: Packet, deny: Sequence[str],
              allow: Sequence[str]) -> bytes | None:
    """The document the final delivery sent, built as the relay built it (from the packet
    as it stood before `delivered`); None before a delivery."""
    from waypost.delivery import document

    if marks.sent is None or packet.receipt is None:
        return None
    key = packet.receipt.key
    row = next((d for d in store.deliveries([packet.id])
                if d.purpose is Purpose.FINAL and d.key == key), None)
    if row is None:
        return None
    return document.body(document.build(marks.sent, row, deny=deny, allow=allow))


def _add(tar: tarfile.TarFile, name: str, data: bytes, when: float) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = int(when)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def _sha256(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()

