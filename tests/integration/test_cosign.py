"""`approve --sign`: the owner co-signs the approval with a key of their own. The signed
approval statement names the reviewed result, its artifacts and verdicts; the final
delivery carries its digest (the document's field, a webhook header, a line in the
Markdown that mail and comments send); a bundle exported after holds it, and
verify-bundle checks its signature."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.bundle_support import checked, exported, members, ring
from tests.bundle_support import signer as key_of
from tests.delivery_support import fast
from tests.helpers import Cli, FakeClock
from waypost.config import Config
from waypost.core import cosigned, signing
from waypost.core.reviewed import result_digest
from waypost.delivery import document
from waypost.delivery.base import Outgoing
from waypost.delivery.relay import Relay
from waypost.delivery.webhook import APPROVAL_HEADER, WebhookTarget
from waypost.errors import NotAuthorized
from waypost.model import ArtifactRole, EvidenceKind, State, Verdict, to_json
from waypost.store import Store, open_store
from waypost.usecases import runs, starting
from waypost.usecases.cosign import approve_signed
from waypost.usecases.verifying import Outcome

LONG_AGO = datetime(2020, 1, 1, tzinfo=UTC)  # before the runs' clock: the keys are valid


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Store]:
    with open_store(str(tmp_path / ".waypost" / "w.db")) as store:
        yield store


def _reviewed(store: Store, clock: FakeClock, tmp_path: Path) -> str:
    run, _ = starting.start(store, "Fix the flaky login test", actor="alice", owner="alice",
                            target=f"file:{tmp_path / 'result.json'}", clock=clock)
    worker = runs.Run(store, run.id, actor="w1", clock=clock)
    worker.claim()
    worker.add_artifact_bytes("fix.diff", [b"the fix for the login race\n"],
                              role=ArtifactRole.RESULT, max_bytes=1 << 20)
    worker.report_evidence(EvidenceKind.TEST, Verdict.PASSED, "pytest -q: 42 passed")
    worker.ready("the private account", public_summary="Login race fixed",
                 artifacts=["fix.diff"])
    runs.Run(store, run.id, actor="alice", clock=clock).review(config=Config())
    return run.id


def test_a_signed_approval_is_carried_by_the_delivery_and_checked_in_the_bundle(
        db: Store, tmp_path: Path) -> None:
    clock = FakeClock()
    run_id = _reviewed(db, clock, tmp_path)
    digest = result_digest(db.get(run_id))
    alice = key_of(db, tmp_path, holder="alice", name="alice.pem", since=LONG_AGO)
    packet = approve_signed(runs.Run(db, run_id, actor="alice", clock=clock), alice)
    assert packet.approval is not None
    sha = packet.approval.statement
    assert sha is not None
    assert packet.approval.reviewed == digest

    # the statement, checked with the owner's public key alone
    envelope = signing.read_envelope(db.get_blob(sha))
    [sig] = envelope.signatures
    assert sig.keyid == alice.record.keyid
    assert signing.verifies(envelope, sig, alice.key.public_key())
    said = cosigned.decode(signing.payload_of(envelope))
    assert (said.predicate.run, said.predicate.reviewed, said.predicate.by) == (
        run_id, digest, "alice")
    assert [s.name for s in said.subject] == [f"waypost-result:{run_id}", "fix.diff"]

    # the final delivery carries its digest: the document, a webhook header, the Markdown
    Relay(db, settings=fast(), relay_id="relay:t", clock=clock, rand=lambda: 1.0).drain()
    assert db.get(run_id).state is State.DELIVERED
    sent = json.loads((tmp_path / "result.json").read_text())
    assert sent["data"]["approval_statement"] == f"sha256:{sha}"
    assert f"signed statement `sha256:{sha}`" in document.markdown(sent)
    [final] = [d for d in db.deliveries([run_id]) if d.purpose == "final"]
    headers = WebhookTarget("http://127.0.0.1:9/hook", secret="whsec_" + "QUJD" * 8,
                            timeout=5).headers(
        Outgoing(delivery=final, document=sent), datetime.now(UTC))
    assert headers[APPROVAL_HEADER] == f"sha256:{sha}"

    # a bundle exported after holds the statement and the owner's key, and checks both
    path, _ = exported(db, run_id, tmp_path, key_of(db, tmp_path, name="store.pem"))
    parts = members(path)
    assert f"blobs/{sha}" in dict(parts)
    assert f"keys/{alice.record.keyid}.pem" in dict(parts)
    assert checked(path, ring(db)).outcome is Outcome.VERIFIED


@pytest.mark.parametrize("edit", ["unknown_key", "other_result"])
def test_a_co_signature_that_does_not_hold_is_named_by_verify_bundle(
        db: Store, tmp_path: Path, edit: str) -> None:
    """An approval whose statement blob is signed by a key the bundle cannot carry, or says
    another result than the one approved: the bundle is intact otherwise, and named."""
    clock = FakeClock()
    run_id = _reviewed(db, clock, tmp_path)
    packet = db.get(run_id)
    digest = result_digest(packet)
    assert digest is not None
    stranger = Ed25519PrivateKey.generate()
    alice = key_of(db, tmp_path, holder="alice", name="alice.pem", since=LONG_AGO)
    said = cosigned.approval_statement(
        packet, digest if edit == "unknown_key" else "sha256:" + "0" * 64, (), by="alice",
        at=clock())
    key = stranger if edit == "unknown_key" else alice.key
    sha = db.put_blob(signing.envelope_json(signing.sign(to_json(said), key)))
    runs.Run(db, run_id, actor="alice", clock=clock).approve(statement=sha)
    path, _ = exported(db, run_id, tmp_path, key_of(db, tmp_path, name="store.pem"))
    report = checked(path, ring(db))
    expected = Outcome.SIGNATURE if edit == "unknown_key" else Outcome.STATEMENT
    assert (report.outcome, report.member, report.blob) == (expected, f"blobs/{sha}", sha)


def test_an_approval_is_co_signed_with_the_approver_s_own_key_only(
        db: Store, tmp_path: Path) -> None:
    clock = FakeClock()
    run_id = _reviewed(db, clock, tmp_path)
    bob = key_of(db, tmp_path, holder="bob", name="bob.pem")
    with pytest.raises(NotAuthorized, match="is bob's, not alice's"):
        approve_signed(runs.Run(db, run_id, actor="alice", clock=clock), bob)
    assert db.get(run_id).approval is None


def test_an_unsigned_approval_carries_no_statement(db: Store, tmp_path: Path) -> None:
    clock = FakeClock()
    run_id = _reviewed(db, clock, tmp_path)
    runs.Run(db, run_id, actor="alice", clock=clock).approve()
    Relay(db, settings=fast(), relay_id="relay:t", clock=clock, rand=lambda: 1.0).drain()
    sent = json.loads((tmp_path / "result.json").read_text())
    assert "approval_statement" not in sent["data"]
    assert "statement" not in sent["data"]["approval"]
    [approved] = [e for e in db.events(run_id) if e.type == "approved"]
    assert b'"statement"' not in to_json(approved)  # old histories hash as before


def test_approve_sign_at_the_command_line(cli: Cli, tmp_path: Path) -> None:
    cli.ok("init")
    with open_store(str(cli.store)) as store:
        run_id = _reviewed(store, FakeClock(datetime.now(UTC)), tmp_path)
    cli.ok("keys", "generate", "--holder", "alice", "--out", "alice.pem")
    refused = cli("approve", run_id, "--sign", "--as", "alice")
    assert refused.code == 2  # no key named
    assert "name the signing key once" in refused.err
    cli.ok("approve", run_id, "--sign", "--key-file", "alice.pem", "--as", "alice")
    with open_store(str(cli.store)) as store:
        approval = store.get(run_id).approval
        assert approval is not None
        assert approval.statement is not None
        assert store.get_blob(approval.statement).startswith(b"{")
