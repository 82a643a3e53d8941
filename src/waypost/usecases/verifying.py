"""`waypost verify-bundle`: a bundle checked where it lands, with no store and no network.

It reads the bundle once, as a stream, and checks each member as it comes: the manifest
(the format and rules it was written under, and every member's name in order), the chain
(every event's hash and link, `core/history`), that the packet is the fold of the events,
the signature over the statement (by a key the caller pinned, valid when it signed; or by
the key the bundle carries, which proves integrity only), that the statement says what the
events say (`core/statement`), and every blob's sha256. It stops at the first broken thing
and names it: the member, the event's seq, the blob.

Every input is hostile: only regular files under the names a bundle has are read, never
written anywhere; each member's size, each line and the number of members are bounded.
"""

from __future__ import annotations

import hashlib
import re
import tarfile
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from typing import IO, Final

import msgspec

from waypost.core import cosigned, signing
from waypost.core.history import verify_chain
from waypost.core.statement import (
    FORMAT,
    RESULT_DOCUMENT,
    RULES,
    History,
    Marks,
    Statement,
    agreement,
    blobs_named,
    decode,
    first_difference,
    statement,
)
from waypost.errors import IntegrityError, InvalidInput
from waypost.events import Event
from waypost.model import Packet, json_decoder, to_builtins
from waypost.store.keys import PublicKey
from waypost.usecases.bundles import BLOBS, EVENTS, KEYS, MANIFEST, PACKET, STATEMENT, Manifest

CHUNK: Final = 1024 * 1024
MAX_SMALL: Final = 1024 * 1024  # manifest, a key
MAX_DOCUMENT: Final = 256 * 1024 * 1024  # packet, statement, result document
MAX_LINE: Final = 16 * 1024 * 1024  # one event
MAX_BLOB: Final = 4 * 1024 * 1024 * 1024
MAX_MEMBERS: Final = 1_000_000
MAX_KEYS: Final = 16
_HEX64: Final = "[0-9a-f]{64}"
_NAMES: Final = re.compile(rf"{MANIFEST}|{PACKET}|{EVENTS}|{RESULT_DOCUMENT}|{STATEMENT}"
                           rf"|{KEYS}{_HEX64}\.pem|{BLOBS}{_HEX64}")
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


class Outcome(StrEnum):
    VERIFIED = "verified"  # intact, and signed by a pinned key valid when it signed
    UNPINNED = "intact, signer not pinned"  # intact; signed by the key the bundle carries
    MALFORMED = "malformed"  # not a bundle: its container, a member's name, kind or size
    SIGNATURE = "signature"  # no valid signature, or by an unknown or retired key
    CHAIN = "chain"  # an event altered, missing or out of order
    PACKET = "packet"  # the packet is not the fold of the events
    BLOB = "blob"  # a blob (or the result document) missing, extra or not its sha256
    STATEMENT = "statement"  # the statement says what the events do not


EXIT_CODES: Final = {Outcome.VERIFIED: 0, Outcome.UNPINNED: 10, Outcome.MALFORMED: 11,
                     Outcome.SIGNATURE: 12, Outcome.CHAIN: 13, Outcome.PACKET: 14,
                     Outcome.BLOB: 15, Outcome.STATEMENT: 16}


class Report(msgspec.Struct, frozen=True, kw_only=True):
    outcome: Outcome
    ok: bool  # VERIFIED or UNPINNED: nothing is broken
    message: str
    member: str | None = None
    seq: int | None = None
    blob: str | None = None
    run: str | None = None
    events: int = 0
    blobs: int = 0
    signers: tuple[str, ...] = ()  # keyids whose signatures verified


class Broken(Exception):
    def __init__(self, outcome: Outcome, message: str, *, member: str | None = None,
                 seq: int | None = None, blob: str | None = None) -> None:
        super().__init__(message)
        self.outcome, self.message = outcome, message
        self.member, self.seq, self.blob = member, seq, blob


def pinned_key(pem: bytes, where: str) -> PublicKey:
    """A key given on its own (`--key`): pinned with no validity window."""
    key = signing.read_public(pem, where)
    return PublicKey(keyid=signing.keyid(key), holder="", public_key=signing.public_pem(key),
                     valid_from=_EPOCH)


def verify(source: IO[bytes], pinned: Sequence[PublicKey] = ()) -> Report:
    """Check the bundle read from `source` against the `pinned` keys (none: the keys it
    carries, which prove integrity only)."""
    check = _Check(pinned)
    try:
        check.read(source)
    except Broken as broken:
        return Report(outcome=broken.outcome, ok=False, message=broken.message,
                      member=broken.member, seq=broken.seq, blob=broken.blob,
                      run=check.run, events=check.events, blobs=check.blobs)
    outcome = Outcome.VERIFIED if pinned else Outcome.UNPINNED
    said = ("verified" if pinned else "intact, signer not pinned (the bundle's own key "
            "proves integrity, not who signed: pin one with --key or --keyring)")
    return Report(outcome=outcome, ok=True, message=f"{said}: run {check.run}, "
                  f"{check.events} events, {check.blobs} blobs", run=check.run,
                  events=check.events, blobs=check.blobs, signers=check.signers)


class _Check:
    """One pass over a bundle's members, in the order the manifest names them."""

    def __init__(self, pinned: Sequence[PublicKey]) -> None:
        self.pinned = {k.keyid: k for k in pinned}
        self.run: str | None = None
        self.events = self.blobs = 0
        self.signers: tuple[str, ...] = ()
        self.manifest: Manifest | None = None
        self.packet: Packet | None = None
        self.folded: Packet | None = None
        self.marks = Marks()
        self.head = ""
        self.document: str | None = None
        self.embedded: dict[str, PublicKey] = {}
        self.named: list[str] = []

    def read(self, source: IO[bytes]) -> None:
        expected: list[str] = [MANIFEST]
        seen = 0
        try:
            with tarfile.open(fileobj=source, mode="r|") as tar:
                for count, member in enumerate(tar, start=1):
                    if count > MAX_MEMBERS or count > len(expected):
                        raise Broken(Outcome.MALFORMED, f"a member the manifest does not "
                                     f"name: {member.name[:200]!r}", member=member.name[:200])
                    self._member(tar, member, expected[count - 1])
                    if count == 1:
                        assert self.manifest is not None
                        expected += self.manifest.members
                    seen = count
        except (tarfile.TarError, EOFError, OSError) as exc:
            raise Broken(Outcome.MALFORMED, f"not a whole tar file ({str(exc)[:200]})") from None
        if self.manifest is None:
            raise Broken(Outcome.MALFORMED, "an empty bundle: no manifest", member=MANIFEST)
        if seen < len(expected):
            missing = expected[seen]
            outcome = Outcome.BLOB if missing.startswith(BLOBS) else Outcome.MALFORMED
            raise Broken(outcome, f"{missing} is named by the manifest but not in the bundle",
                         member=missing, blob=_blob(missing))

    def _member(self, tar: tarfile.TarFile, member: tarfile.TarInfo, expected: str) -> None:
        name = member.name
        if not _NAMES.fullmatch(name) or not member.isreg():
            raise Broken(Outcome.MALFORMED, f"a member that is no bundle's: {name[:200]!r} "
                         f"({'a regular file' if member.isreg() else 'not a regular file'})",
                         member=name[:200])
        if name != expected:
            raise Broken(Outcome.MALFORMED, f"{name} where the manifest names {expected}",
                         member=name)
        file = tar.extractfile(member)
        assert file is not None  # a regular file
        if name == MANIFEST:
            self._manifest(_whole(file, member, MAX_SMALL))
        elif name == PACKET:
            self._packet(_whole(file, member, MAX_DOCUMENT))
        elif name == EVENTS:
            self._chain(file)
        elif name == RESULT_DOCUMENT:
            self._document(_whole(file, member, MAX_DOCUMENT))
        elif name.startswith(KEYS):
            self._key(name, _whole(file, member, MAX_SMALL))
        elif name == STATEMENT:
            self._statement(_whole(file, member, MAX_DOCUMENT))
        else:
            self._blob(name, file, member)

    def _manifest(self, data: bytes) -> None:
        try:
            manifest = msgspec.json.decode(data, type=Manifest)
        except msgspec.MsgspecError as exc:
            raise Broken(Outcome.MALFORMED, f"the manifest does not read ({str(exc)[:200]})",
                         member=MANIFEST) from None
        if manifest.format != FORMAT or not 1 <= manifest.rules <= RULES:
            raise Broken(Outcome.MALFORMED, f"a {manifest.format[:40]!r} bundle under rules "
                         f"{manifest.rules}: this waypost reads {FORMAT} under rules 1 to "
                         f"{RULES}", member=MANIFEST)
        if len(manifest.members) > MAX_MEMBERS or not _in_order(manifest.members):
            raise Broken(Outcome.MALFORMED, "the manifest's members are not a bundle's: "
                         f"{PACKET}, {EVENTS}, [{RESULT_DOCUMENT}], keys, {STATEMENT}, "
                         "blobs, each once, in that order", member=MANIFEST)
        self.manifest, self.run = manifest, manifest.run
        self.named = [m.removeprefix(BLOBS) for m in manifest.members if m.startswith(BLOBS)]

    def _packet(self, data: bytes) -> None:
        try:
            self.packet = json_decoder(Packet).decode(data)
        except msgspec.MsgspecError as exc:
            raise Broken(Outcome.PACKET, f"the packet does not read ({str(exc)[:200]})",
                         member=PACKET) from None

    def _chain(self, file: IO[bytes]) -> None:
        run = self.run or ""
        try:
            self.folded = verify_chain(run, self._events(file), self.marks.seen)
        except IntegrityError as exc:  # raised at the event read last
            raise Broken(Outcome.CHAIN, exc.message, member=EVENTS,
                         seq=self.events or None) from None
        if self.packet is None or self.folded != self.packet:
            where = first_difference(to_builtins(self.packet), to_builtins(self.folded))
            raise Broken(Outcome.PACKET, f"the packet is not the fold of the {self.events} "
                         f"events (first difference: packet{where})", member=PACKET)
        named = blobs_named(self.folded)
        if self.named != named:
            extra = next((b for b in self.named if b not in named), None)
            lost = next((b for b in named if b not in self.named), None)
            blob = extra or lost
            raise Broken(Outcome.BLOB, f"blob {blob} " + (
                "is not one the run names" if extra else "the run names is not in the bundle"),
                member=MANIFEST, blob=blob)

    def _events(self, file: IO[bytes]) -> Iterator[Event]:
        decoder = json_decoder(Event)
        while True:
            line = file.readline(MAX_LINE + 1)
            if not line:
                return
            self.events += 1
            if len(line) > MAX_LINE:
                raise Broken(Outcome.CHAIN, f"event {self.events} is longer than {MAX_LINE} "
                             "bytes", member=EVENTS, seq=self.events)
            try:
                event = decoder.decode(line)
            except msgspec.MsgspecError as exc:
                raise Broken(Outcome.CHAIN, f"event {self.events} does not read "
                             f"({str(exc)[:200]})", member=EVENTS, seq=self.events) from None
            self.head = event.hash
            yield event

    def _document(self, data: bytes) -> None:
        self.document = hashlib.sha256(data).hexdigest()

    def _key(self, name: str, data: bytes) -> None:
        try:
            key = pinned_key(data, name)
        except InvalidInput as exc:
            raise Broken(Outcome.MALFORMED, exc.message, member=name) from None
        if f"{KEYS}{key.keyid}.pem" != name or len(self.embedded) >= MAX_KEYS:
            raise Broken(Outcome.MALFORMED, f"{name} holds key {key.keyid[:16]}, not the "
                         "key its name says", member=name)
        self.embedded[key.keyid] = key

    def _statement(self, data: bytes) -> None:
        try:
            envelope = signing.read_envelope(data)
            payload = signing.payload_of(envelope)
        except InvalidInput as exc:
            raise Broken(Outcome.SIGNATURE, exc.message, member=STATEMENT) from None
        signers = self._signatures(envelope)
        try:
            given = decode(payload)
        except msgspec.MsgspecError as exc:
            raise Broken(Outcome.STATEMENT, f"the statement does not read "
                         f"({str(exc)[:200]})", member=STATEMENT) from None
        self._validity(signers, given)
        self.signers = tuple(k.keyid for k in signers)
        self._agrees(given)

    def _signatures(self, envelope: signing.Envelope, member: str = STATEMENT,
                    blob: str | None = None) -> list[PublicKey]:
        if envelope.payloadType != signing.PAYLOAD_TYPE:
            raise Broken(Outcome.SIGNATURE, f"the envelope's payload type is "
                         f"{envelope.payloadType[:80]!r}, not {signing.PAYLOAD_TYPE}",
                         member=member, blob=blob)
        if not envelope.signatures:
            raise Broken(Outcome.SIGNATURE, "the statement is not signed", member=member,
                         blob=blob)
        good: list[PublicKey] = []
        for sig in envelope.signatures[:MAX_KEYS]:
            key = self.pinned.get(sig.keyid) or self.embedded.get(sig.keyid)
            if key is None:
                raise Broken(Outcome.SIGNATURE, f"signed by key {sig.keyid[:16]}, which is "
                             "neither pinned nor in the bundle", member=member, blob=blob)
            if not signing.verifies(envelope, sig, signing.read_public(key.public_key, "key")):
                raise Broken(Outcome.SIGNATURE, f"the signature by key {sig.keyid[:16]} does "
                             "not verify: the statement or its signature was altered",
                             member=member, blob=blob)
            good.append(key)
        if member != STATEMENT:  # a co-signature: the run's statement names its sha256
            return good
        if self.pinned and not any(k.keyid in self.pinned for k in good):
            signers = ", ".join(k.keyid[:16] for k in good)
            raise Broken(Outcome.SIGNATURE, f"signed by key {signers}, which is not pinned "
                         "(an unknown key): no signature is by a key given with --key or "
                         "--keyring", member=STATEMENT)
        return good

    def _validity(self, signers: list[PublicKey], given: Statement) -> None:
        at = given.predicate.bundle.at
        for key in signers:
            if key.keyid in self.pinned and not key.valid_at(at):
                why = (f"retired at {key.retired_at}" if key.retired_at and at >= key.retired_at
                       else f"valid only from {key.valid_from}")
                raise Broken(Outcome.SIGNATURE, f"signed at {at} by key {key.keyid[:16]} "
                             f"({key.holder or 'pinned'}), {why}", member=STATEMENT)

    def _agrees(self, given: Statement) -> None:
        manifest, folded = self.manifest, self.folded
        assert manifest is not None
        assert folded is not None
        written = given.predicate.bundle
        if (written.format, written.rules) != (manifest.format, manifest.rules):
            raise Broken(Outcome.STATEMENT, "the statement's format and rules are not the "
                         "manifest's", member=STATEMENT)
        expected = statement(folded, self.marks, History(events=self.events, head=self.head),
                             written, self.document)
        where = agreement(given, expected)
        if where is not None:
            raise Broken(Outcome.STATEMENT, f"the statement's {where.lstrip('.')} is not "
                         "what the events say", member=STATEMENT)

    def _blob(self, name: str, file: IO[bytes], member: tarfile.TarInfo) -> None:
        sha = name.removeprefix(BLOBS)
        if member.size > MAX_BLOB:
            raise Broken(Outcome.MALFORMED, f"{name} is larger than {MAX_BLOB} bytes",
                         member=name, blob=sha)
        digest = hashlib.sha256()
        approval = self.folded.approval if self.folded is not None else None
        signed = approval is not None and approval.statement == sha
        kept = bytearray()
        while part := file.read(CHUNK):
            digest.update(part)
            if signed and len(kept) <= MAX_SMALL:
                kept += part
        if digest.hexdigest() != sha:
            raise Broken(Outcome.BLOB, f"blob {sha} does not hash to its name (it hashes to "
                         f"{digest.hexdigest()})", member=name, blob=sha)
        if signed:
            self._cosigned(name, sha, bytes(kept))
        self.blobs += 1

    def _cosigned(self, name: str, sha: str, data: bytes) -> None:
        """The approver's signed approval statement (`approve --sign`): signed by a key the
        bundle carries or the caller pinned (valid when it signed, if pinned), and saying
        what the approval says: the run, the reviewed result, the approver."""
        folded = self.folded
        assert folded is not None
        approval = folded.approval
        assert approval is not None
        try:
            envelope = signing.read_envelope(data)
            said = cosigned.decode(signing.payload_of(envelope))
        except (InvalidInput, msgspec.MsgspecError) as exc:
            raise Broken(Outcome.SIGNATURE, f"the signed approval statement does not read "
                         f"({str(exc)[:200]})", member=name, blob=sha) from None
        signers = self._signatures(envelope, name, sha)
        late = [k for k in signers if k.keyid in self.pinned and not k.valid_at(said.predicate.at)]
        if late:
            raise Broken(Outcome.SIGNATURE, f"the approval was co-signed at "
                         f"{said.predicate.at} by key {late[0].keyid[:16]}, not valid then",
                         member=name, blob=sha)
        given = said.predicate
        if (given.run, given.reviewed, given.by) != (folded.id, approval.reviewed, approval.by):
            raise Broken(Outcome.STATEMENT, "the signed approval statement does not say what "
                         "the approval says (its run, reviewed result or approver)",
                         member=name, blob=sha)


def _whole(file: IO[bytes], member: tarfile.TarInfo, limit: int) -> bytes:
    if member.size > limit:
        raise Broken(Outcome.MALFORMED, f"{member.name} is larger than {limit} bytes",
                     member=member.name)
    return file.read(member.size)  # no more: a read preallocates what it is asked for


def _in_order(members: Sequence[str]) -> bool:
    """Whether `members` are a bundle's, each once, in the order the checks need."""
    kinds = "".join("K" if m.startswith(KEYS) else "B" if m.startswith(BLOBS)
                    else {PACKET: "P", EVENTS: "E", RESULT_DOCUMENT: "R",
                          STATEMENT: "S"}.get(m, "?") for m in members)
    return (re.fullmatch(f"PER?K{{1,{MAX_KEYS}}}SB*", kinds) is not None
            and len(set(members)) == len(members))


def _blob(name: str) -> str | None:
    return name.removeprefix(BLOBS) if name.startswith(BLOBS) else None

