"""`GET /api/runs/{id}/bundle` on a real server: the whole bundle (streamed, verifying
against the store's keyring) to the run's owner; the signed public statement alone to a
viewer, with the public summary, the subjects and the verdicts and no private text; a
refusal from a server that holds no signing key; the route in the OpenAPI document."""

from __future__ import annotations

import io
import json
from pathlib import Path

import msgspec

from tests.bundle_support import ring, signer
from tests.helpers import FakeClock
from tests.http_support import Api, issue, serving
from waypost.core import signing
from waypost.core.statement import PUBLIC_PREDICATE_TYPE, PublicStatement
from waypost.model import EvidenceKind, Verdict
from waypost.store import open_store
from waypost.usecases import runs, starting
from waypost.usecases.verifying import Outcome, verify

PRIVATE = "the private account: staging key sk_live_0123456789abcdef was used"
PUBLIC = "Login race fixed"


def _ready_run(url: str, tmp_path: Path) -> tuple[str, str]:
    """A run ready for review, with a private and a public summary; and a key file."""
    with open_store(url) as store:
        run, _ = starting.start(store, "Fix the flaky login test", actor="alice",
                                owner="alice", target="none:", clock=FakeClock())
        worker = runs.Run(store, run.id, actor="w1")
        worker.claim()
        worker.report_evidence(EvidenceKind.TEST, Verdict.PASSED, "pytest -q: 42 passed")
        worker.ready(PRIVATE, public_summary=PUBLIC)
        signer(store, tmp_path, holder="server")
    return run.id, str(tmp_path / "k.pem")


def test_the_owner_gets_the_bundle_and_a_viewer_the_public_statement(tmp_path: Path) -> None:
    url = str(tmp_path / ".waypost" / "w.db")
    run_id, key = _ready_run(url, tmp_path)
    owner, viewer = issue(url, "alice", "owner"), issue(url, "bob", "viewer")
    with serving(url, signing_key_file=key) as base:
        whole = Api(base, owner).get(f"/api/runs/{run_id}/bundle")
        public = Api(base, viewer).get(f"/api/runs/{run_id}/bundle")
        schema = Api(base, owner).get("/schema/openapi.json").json()
    assert whole.status_code == 200, whole.text
    assert whole.headers["content-type"] == "application/x-tar"
    with open_store(url) as store:
        report = verify(io.BytesIO(whole.content), ring(store))
        keyring = ring(store)
    assert (report.outcome, report.run) == (Outcome.VERIFIED, run_id)

    assert public.status_code == 200, public.text
    assert public.headers["content-type"].startswith("application/vnd.dsse.envelope.v1+json")
    envelope = signing.read_envelope(public.content)
    [sig] = envelope.signatures
    [key_record] = [k for k in keyring if k.keyid == sig.keyid]
    assert signing.verifies(envelope, sig, signing.read_public(key_record.public_key, "key"))
    payload = signing.payload_of(envelope)
    assert b"sk_live" not in payload
    assert b"private account" not in payload
    said = msgspec.json.decode(payload, type=PublicStatement)
    assert said.predicateType == PUBLIC_PREDICATE_TYPE
    assert said.predicate.public_summary == PUBLIC
    assert [e.verdict for e in said.predicate.evidence] == ["passed"]
    assert said.subject[0].name == f"waypost-run:{run_id}"
    assert "/api/runs/{run_id}/bundle" in schema["paths"]


def test_a_server_with_no_key_refuses_and_a_stranger_reads_nothing(tmp_path: Path) -> None:
    url = str(tmp_path / ".waypost" / "w.db")
    run_id, _ = _ready_run(url, tmp_path)
    owner = issue(url, "alice", "owner")
    with open_store(url) as store:
        decoy, _ = starting.start(store, "Another run", actor="carol", owner="carol",
                                  target="none:")
    other = issue(url, "carol", "owner", run_id=decoy.id)
    with serving(url) as base:
        refused = Api(base, owner).get(f"/api/runs/{run_id}/bundle")
        stranger = Api(base, other).get(f"/api/runs/{run_id}/bundle")
    assert refused.status_code == 403
    assert "holds no signing key" in json.dumps(refused.json())
    assert stranger.status_code in (403, 404)
