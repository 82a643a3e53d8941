"""A run exported as one signed bundle verifies where it lands, with no store: checked by
waypost's own verifier and by independent ones (securesystemslib's DSSE, in-toto's
Statement), and every kind of tampering is named by what it broke."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import jsonschema
import msgspec
import pytest
from google.protobuf import json_format
from in_toto_attestation.v1 import statement_pb2
from in_toto_attestation.v1.statement import Statement as InTotoStatement
from securesystemslib.dsse import Envelope as SslibEnvelope
from securesystemslib.exceptions import VerificationError
from securesystemslib.signer import SSlibKey  # type: ignore[attr-defined]  # public, re-exported without __all__

from tests.bundle_support import (
    Members,
    checked,
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
from waypost.core import signing
from waypost.core.reviewed import result_digest
from waypost.core.statement import PREDICATE_TYPE, decode, encode, statement_schema
from waypost.model import to_json
from waypost.store import Store, open_store
from waypost.usecases import keys
from waypost.usecases.bundles import export
from waypost.usecases.verifying import Outcome

STATEMENT = "statement.dsse.json"
EVENTS = "events.jsonl"


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Store]:
    with open_store(str(tmp_path / ".waypost" / "w.db")) as store:
        yield store


@pytest.fixture
def bundle(db: Store, tmp_path: Path) -> tuple[Path, str]:
    run_id = delivered_run(db, FakeClock(), tmp_path)
    path, _ = exported(db, run_id, tmp_path, signer(db, tmp_path))
    return path, run_id


def test_a_delivered_run_s_bundle_verifies_against_the_store_s_keyring(
        db: Store, bundle: tuple[Path, str], tmp_path: Path) -> None:
    path, run_id = bundle
    report = checked(path, ring(db))
    assert (report.outcome, report.ok, report.run) == (Outcome.VERIFIED, True, run_id)
    assert (report.events, report.blobs) == (len(db.events(run_id)), 3)
    # the document the final delivery sent is a subject, and is what the file target got
    parts = members(path)
    sent = json.loads((tmp_path / "result.json").read_text())
    assert json.loads(member(parts, "result.json")) == sent
    payload = signing.payload_of(signing.read_envelope(member(parts, STATEMENT)))
    names = [s.name for s in decode(payload).subject]
    assert names == [f"waypost-run:{run_id}", "result.json", "part-0.txt", "part-1.txt"]


def test_the_bundle_s_own_key_proves_integrity_only(bundle: tuple[Path, str]) -> None:
    report = checked(bundle[0])
    assert (report.outcome, report.ok) == (Outcome.UNPINNED, True)
    assert "intact, signer not pinned" in report.message


def test_an_independent_dsse_verifier_and_in_toto_s_statement_accept_it(
        db: Store, bundle: tuple[Path, str]) -> None:
    path, run_id = bundle
    envelope = json.loads(member(members(path), STATEMENT))
    [record] = keys.listed(db)
    key = SSlibKey.from_crypto(signing.read_public(record.public_key, "store"),
                               keyid=record.keyid)
    accepted = SslibEnvelope.from_dict(dict(envelope)).verify([key], 1)
    assert list(accepted) == [record.keyid]
    parsed = json_format.Parse(base64.b64decode(envelope["payload"]), statement_pb2.Statement())
    statement = InTotoStatement.copy_from_pb(parsed)
    statement.validate()
    assert statement.pb.predicate_type == PREDICATE_TYPE
    assert statement.pb.predicate["run"] == run_id
    approval = statement.pb.predicate["approval"]
    approved = db.get(run_id).approval
    assert approved is not None
    assert approval["reviewed"] == approved.reviewed == result_digest(db.get(run_id))
    [url] = statement.pb.predicate["url_artifacts"]
    assert url["url"] == "https://example.org/build/42"
    assert {e["assurance"] for e in statement.pb.predicate["evidence"]} == {"recorded",
                                                                          "rechecked"}
    # another key's signature is refused by the same independent verifier
    other = SSlibKey.from_crypto(signing.new_private_key().public_key(), keyid=record.keyid)
    again = json.loads(member(members(path), STATEMENT))
    with pytest.raises(VerificationError):
        SslibEnvelope.from_dict(again).verify([other], 1)


def test_the_statement_follows_its_published_schema(bundle: tuple[Path, str]) -> None:
    envelope = signing.read_envelope(member(members(bundle[0]), STATEMENT))
    document = json.loads(signing.payload_of(envelope))
    jsonschema.validate(document, statement_schema())
    document["predicate"]["history"]["events"] = "many"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(document, statement_schema())


def _event_line(parts: Members, seq: int) -> tuple[list[bytes], int]:
    lines = member(parts, EVENTS).splitlines(keepends=True)
    return lines, seq - 1


@pytest.mark.parametrize(("edit", "outcome", "seq"), [
    ("event_byte", Outcome.CHAIN, 3),
    ("event_removed", Outcome.CHAIN, 3),
    ("events_reordered", Outcome.CHAIN, 3),
    ("last_event_removed", Outcome.PACKET, None),
    ("packet_byte", Outcome.PACKET, None),
    ("statement_byte", Outcome.SIGNATURE, None),
    ("signature_byte", Outcome.SIGNATURE, None),
])
def test_each_kind_of_tampering_is_named(bundle: tuple[Path, str], db: Store, edit: str,
                                         outcome: Outcome, seq: int | None) -> None:
    path = bundle[0]
    parts = members(path)
    lines = member(parts, EVENTS).splitlines(keepends=True)
    if edit == "event_byte":  # the time of event 3, one byte: it still replays
        assert b"03:04:05" in lines[2]
        lines[2] = lines[2].replace(b"03:04:05", b"03:04:06", 1)
    elif edit == "event_removed":
        del lines[2]
    elif edit == "events_reordered":
        lines[2], lines[3] = lines[3], lines[2]
    elif edit == "last_event_removed":
        del lines[-1]
    parts = replaced(parts, EVENTS, b"".join(lines))
    if edit == "packet_byte":
        packet = member(parts, "packet.json")
        parts = replaced(parts, "packet.json", packet.replace(b"Fix the", b"Fix thx"))
    envelope = json.loads(member(parts, STATEMENT))
    if edit == "statement_byte":
        envelope["payload"] = flip(envelope["payload"].encode(), 40).decode()
    elif edit == "signature_byte":
        envelope["signatures"][0]["sig"] = flip(envelope["signatures"][0]["sig"].encode(),
                                                5).decode()
    parts = replaced(parts, STATEMENT, json.dumps(envelope).encode())
    report = checked(rewrite(path, parts), ring(db))
    assert (report.outcome, report.seq, report.ok) == (outcome, seq, False), report.message
    if edit == "event_byte":
        assert "hash mismatch" in report.message
    assert report.member == {Outcome.CHAIN: EVENTS, Outcome.PACKET: "packet.json",
                             Outcome.SIGNATURE: STATEMENT}[outcome]


def test_a_blob_changed_by_one_byte_is_named(bundle: tuple[Path, str], db: Store) -> None:
    path = bundle[0]
    parts = members(path)
    name, data = next((n, d) for n, d in parts if n.startswith("blobs/") and d)
    report = checked(rewrite(path, replaced(parts, name, flip(data, 0))), ring(db))
    assert (report.outcome, report.blob) == (Outcome.BLOB, name.removeprefix("blobs/"))


def test_a_blob_swapped_for_another_with_a_valid_hash_of_its_own_is_named(
        bundle: tuple[Path, str], db: Store) -> None:
    import hashlib

    path = bundle[0]
    parts = members(path)
    name = next(n for n, _ in parts if n.startswith("blobs/"))
    other = b"another file entirely\n"
    swapped = "blobs/" + hashlib.sha256(other).hexdigest()
    manifest = member(parts, "manifest.json").replace(name.encode(), swapped.encode())
    parts = replaced(replaced(parts, name, other, swapped), "manifest.json", manifest)
    report = checked(rewrite(path, parts), ring(db))
    assert (report.outcome, report.blob) == (Outcome.BLOB, swapped.removeprefix("blobs/"))
    assert "not one the run names" in report.message


def test_a_statement_re_signed_by_another_key_to_say_more_is_named(
        bundle: tuple[Path, str], db: Store) -> None:
    """Someone who re-signs an edited statement with a key of their own (and puts that key
    in the bundle) passes the signature check unpinned, and fails the statement's."""
    path = bundle[0]
    parts = members(path)
    payload = signing.payload_of(signing.read_envelope(member(parts, STATEMENT)))
    given = decode(payload)

    lie = msgspec.structs.replace(given, predicate=msgspec.structs.replace(
        given.predicate, owner="mallory"))
    theirs = signing.new_private_key()
    envelope = signing.sign(encode(lie), theirs)
    keyid = signing.keyid(theirs.public_key())
    old_key = next(n for n, _ in parts if n.startswith("keys/"))
    parts = replaced(parts, old_key, signing.public_pem(theirs.public_key()).encode(),
                     f"keys/{keyid}.pem")
    parts = replaced(parts, "manifest.json", member(parts, "manifest.json").replace(
        old_key.encode(), f"keys/{keyid}.pem".encode()))
    parts = replaced(parts, STATEMENT, signing.envelope_json(envelope))
    report = checked(rewrite(path, parts))
    assert (report.outcome, report.member) == (Outcome.STATEMENT, STATEMENT)
    assert "predicate.owner" in report.message
    pinned = checked(path, ring(db))  # against the store's keyring: an unknown key
    assert pinned.outcome is Outcome.SIGNATURE
    assert "not pinned" in pinned.message


def test_a_retired_key_verifies_what_it_signed_before_and_signs_nothing_after(
        db: Store, tmp_path: Path) -> None:
    run_id = delivered_run(db, FakeClock(), tmp_path)
    sign = signer(db, tmp_path)
    before, _ = exported(db, run_id, tmp_path, sign, "before.tar")
    keys.retire(db, sign.record.keyid)
    assert checked(before, ring(db)).outcome is Outcome.VERIFIED
    with pytest.raises(Exception, match="retired"):
        keys.load_signer(db, path=str(tmp_path / "k.pem"), env=None)
    # a signature made after the key's retirement (by its stolen private half) is refused
    late = tmp_path / "late.tar"
    retired_at = keys.find(db, sign.record.keyid).retired_at
    assert retired_at is not None
    export(db, run_id, str(late), sign, now=retired_at + timedelta(seconds=1))
    report = checked(late, ring(db))
    assert (report.outcome, report.member) == (Outcome.SIGNATURE, STATEMENT)
    assert "retired" in report.message
    assert checked(late).outcome is Outcome.UNPINNED  # the key itself still verifies


def test_a_key_file_others_may_read_is_refused_and_an_environment_key_signs(
        db: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sign = signer(db, tmp_path)
    path = tmp_path / "k.pem"
    assert path.stat().st_mode & 0o777 == 0o600
    path.chmod(0o640)
    with pytest.raises(Exception, match="read or written by others"):
        keys.load_signer(db, path=str(path), env=None)
    path.chmod(0o600)
    monkeypatch.setenv("SIGNING_KEY", path.read_text())
    assert keys.load_signer(db, path=None, env="SIGNING_KEY").record == sign.record
    stranger = tmp_path / "stranger.pem"
    stranger.write_bytes(signing.private_pem(signing.new_private_key()))
    stranger.chmod(0o600)
    with pytest.raises(Exception, match="not one of this store's signing keys"):
        keys.load_signer(db, path=str(stranger), env=None)


def test_the_keys_never_hold_a_private_half(db: Store, tmp_path: Path) -> None:
    signer(db, tmp_path)
    assert b"PRIVATE" not in to_json(keys.keyring(db))
    assert b"PRIVATE" not in (tmp_path / ".waypost" / "w.db").read_bytes()


def test_pae_is_the_dsse_specification_s() -> None:
    """The specification's own test vector (protocol.md)."""
    assert signing.pae("http://example.com/HelloWorld", b"hello world") == (
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world")
    assert signing.pae("é", b"") == b"DSSEv1 2 \xc3\xa9 0 "  # lengths count bytes


def test_a_signature_by_the_right_key_over_another_payload_type_is_refused(
        db: Store, tmp_path: Path) -> None:
    run_id = delivered_run(db, FakeClock(), tmp_path)
    sign = signer(db, tmp_path)
    path, _ = exported(db, run_id, tmp_path, sign)
    parts = members(path)
    payload = signing.payload_of(signing.read_envelope(member(parts, STATEMENT)))
    other = signing.sign(payload, sign.key, payload_type="application/json")
    report = checked(rewrite(path, replaced(parts, STATEMENT, signing.envelope_json(other))),
                     ring(db))
    assert (report.outcome, report.member) == (Outcome.SIGNATURE, STATEMENT)
    assert "payload type" in report.message


def test_a_run_not_yet_delivered_exports_without_a_result_document(
        db: Store, tmp_path: Path) -> None:
    from waypost.model import EvidenceKind
    from waypost.usecases import runs, starting

    run, _ = starting.start(db, "Halfway", actor="alice", owner="alice", target="none:",
                            clock=FakeClock())
    worker = runs.Run(db, run.id, actor="w1", clock=FakeClock())
    worker.claim()
    worker.record_command(["python3", "-c", "print('log line')"], kind=EvidenceKind.TEST)
    path, done = exported(db, run.id, tmp_path, signer(db, tmp_path))
    names = [n for n, _ in members(path)]
    assert "result.json" not in names
    assert done.blobs == 1  # the command's log
    report = checked(path, ring(db))
    assert (report.outcome, report.blobs) == (Outcome.VERIFIED, 1)


def test_a_second_signature_by_a_key_the_bundle_carries_leaves_it_verified(
        db: Store, bundle: tuple[Path, str]) -> None:
    """Room for co-signers: the store's pinned signature verifies the bundle, and another
    key's signature (carried in the bundle) must verify too; one by a key that is neither
    pinned nor carried is refused."""
    path = bundle[0]
    parts = members(path)
    envelope = signing.read_envelope(member(parts, STATEMENT))
    payload = signing.payload_of(envelope)
    cosigner = signing.new_private_key()
    both = msgspec.structs.replace(envelope, signatures=(
        *envelope.signatures, *signing.sign(payload, cosigner).signatures))
    keyid = signing.keyid(cosigner.public_key())
    manifest = member(parts, "manifest.json").replace(
        b'"statement.dsse.json"', f'"keys/{keyid}.pem","statement.dsse.json"'.encode())
    carried = [*[(n, d) for n, d in parts if n != STATEMENT],
               (f"keys/{keyid}.pem", signing.public_pem(cosigner.public_key()).encode()),
               (STATEMENT, signing.envelope_json(both))]
    order = ["manifest.json", *json.loads(manifest)["members"]]
    carried = sorted(replaced(carried, "manifest.json", manifest),
                     key=lambda part: order.index(part[0]))
    report = checked(rewrite(path, carried), ring(db))
    assert (report.outcome, len(report.signers)) == (Outcome.VERIFIED, 2)
    uncarried = [p for p in carried if p[0] != f"keys/{keyid}.pem"]
    uncarried = replaced(uncarried, "manifest.json", member(parts, "manifest.json"))
    refused = checked(rewrite(path, uncarried), ring(db))
    assert (refused.outcome, refused.member) == (Outcome.SIGNATURE, STATEMENT)
    assert "neither pinned nor in the bundle" in refused.message
