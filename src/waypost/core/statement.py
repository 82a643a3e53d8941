"""A run's signed statement: an in-toto Statement v1 whose predicate is the run's checkpoint.

The statement is built from the run's events alone (and the document its final delivery
sent), so a verifier with the bundle and no store builds it again and compares: a
predicate that says anything the events do not is caught. Its subjects are what can be
matched by digest: the run's history (named by the hash of its head event), the document
the final delivery sent, and every artifact whose bytes the store kept. URL artifacts have
no digest; the predicate names them.

`PREDICATE_TYPE` is versioned; a change to the predicate's meaning is a new version, and
`statement_schema` publishes the JSON Schema of the current one (`waypost schema
--statement`). `RULES` is the version of the rules the fold follows: a bundle records it,
and a verifier refuses one written under rules newer than its own.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

import msgspec

from waypost.core.gates import current_review, verdicts
from waypost.core.growing import settled
from waypost.core.reviewed import result_digest
from waypost.events import Approved, Delivered, Event
from waypost.model import Packet, Receipt, to_json

STATEMENT_TYPE: Final = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE: Final = "https://waypost.dev/checkpoint/v1"
# the public statement's predicate: what a reader of the run's public view may see of it
PUBLIC_PREDICATE_TYPE: Final = "https://waypost.dev/checkpoint-public/v1"
FORMAT: Final = "waypost.bundle/v1"  # the container: its members and manifest
RULES: Final = 1  # the fold's rules (waypost.core.machine) a bundle was written under
RESULT_DOCUMENT: Final = "result.json"  # the member holding the final delivery's document


class Subject(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    digest: dict[str, str]  # {"sha256": hex}


class EvidenceItem(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    kind: str
    verdict: str
    assurance: str  # reported, recorded or rechecked
    gate: str | None = None
    review: str | None = None
    log_sha256: str | None = None


class GateItem(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    check: str
    required: bool
    verdict: str | None  # in the current review; None: it did not run there
    evidence: tuple[str, ...] = ()
    waived: str | None = None


class ReviewItem(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    by: str
    at: datetime
    evidence: tuple[str, ...] = ()


class WaiverItem(msgspec.Struct, frozen=True, kw_only=True):
    gate: str
    reason: str
    by: str
    at: datetime


class ApprovalItem(msgspec.Struct, frozen=True, kw_only=True):
    by: str
    at: datetime
    # the reviewed-result digest approved (waypost.core.reviewed): as the approval recorded
    # it, or, for an approval recorded before approvals named one, of the result it approved
    reviewed: str | None
    waivers: tuple[WaiverItem, ...] = ()
    # the sha256 of the approver's signed approval statement (`core.cosigned`), a blob of
    # the bundle whose signature the verifier checks; None: the approval was not co-signed
    statement: str | None = None


class UrlArtifact(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    role: str
    url: str


class History(msgspec.Struct, frozen=True, kw_only=True):
    events: int
    head: str  # the hash of the last event: it seals every event before it


class Written(msgspec.Struct, frozen=True, kw_only=True):
    format: str
    rules: int
    at: datetime  # when the bundle was written and signed
    by: str  # the signing key's holder


class Checkpoint(msgspec.Struct, frozen=True, kw_only=True):
    """The predicate: the run as its events leave it."""

    run: str
    title: str
    state: str
    owner: str
    worker: str | None
    target: str
    gates: tuple[GateItem, ...]
    evidence: tuple[EvidenceItem, ...]
    reviews: tuple[ReviewItem, ...]
    approval: ApprovalItem | None
    receipt: Receipt | None
    url_artifacts: tuple[UrlArtifact, ...]
    history: History
    bundle: Written


class Statement(msgspec.Struct, frozen=True, kw_only=True):
    type: str = msgspec.field(name="_type", default=STATEMENT_TYPE)
    subject: tuple[Subject, ...]
    predicateType: str = PREDICATE_TYPE  # in-toto's field names
    predicate: Checkpoint


class Marks:
    """What a fold passes on the way that the statement needs: the packet as it was
    approved, and as it stood when its final delivery was sent (before `delivered`)."""

    def __init__(self) -> None:
        self.approved: Packet | None = None
        self.sent: Packet | None = None
        self._last: Packet | None = None

    def seen(self, after: Packet, event: Event) -> None:
        if isinstance(event.data, Approved):
            self.approved = settled(after)
        elif isinstance(event.data, Delivered) and self._last is not None:
            self.sent = settled(self._last)
        self._last = after


def run_subject(run_id: str, head: str) -> Subject:
    return Subject(name=f"waypost-run:{run_id}", digest={"sha256": head})


def subjects(packet: Packet, head: str, document_sha256: str | None) -> tuple[Subject, ...]:
    """The run's history, the final delivery's document (once delivered) and every
    artifact whose bytes are stored, each with its sha256."""
    out = [run_subject(packet.id, head)]
    if document_sha256 is not None:
        out.append(Subject(name=RESULT_DOCUMENT, digest={"sha256": document_sha256}))
    out += [Subject(name=a.name, digest={"sha256": a.sha256})
            for a in packet.artifacts if a.stored and a.sha256]
    return tuple(out)


def checkpoint(packet: Packet, marks: Marks, history: History, written: Written) -> Checkpoint:
    """The predicate of `packet`, folded from `history.events` events (`marks` taken on
    the way)."""
    review = current_review(packet)
    approval = packet.approval
    return Checkpoint(
        run=packet.id, title=packet.title, state=str(packet.state), owner=packet.owner,
        worker=packet.worker.actor if packet.worker else None, target=packet.target,
        gates=tuple(GateItem(name=v.gate, check=v.check, required=v.required,
                             verdict=str(v.verdict) if v.verdict else None,
                             evidence=v.evidence, waived=v.waived)
                    for v in verdicts(packet, review, approval.waivers if approval else ())),
        evidence=tuple(EvidenceItem(id=e.id, kind=str(e.kind), verdict=str(e.verdict),
                                    assurance=str(e.assurance), gate=e.gate, review=e.review,
                                    log_sha256=e.log_sha256) for e in packet.evidence),
        reviews=tuple(ReviewItem(id=r.id, by=r.by, at=r.at, evidence=r.evidence)
                      for r in packet.reviews),
        approval=None if approval is None else ApprovalItem(
            by=approval.by, at=approval.at,
            reviewed=approval.reviewed or (result_digest(marks.approved)
                                           if marks.approved else None),
            waivers=tuple(WaiverItem(gate=w.gate, reason=w.reason, by=w.by, at=w.at)
                          for w in approval.waivers), statement=approval.statement),
        receipt=packet.receipt,
        url_artifacts=tuple(UrlArtifact(name=a.name, role=str(a.role), url=a.url)
                            for a in packet.artifacts if a.url and not a.stored),
        history=history, bundle=written)


def statement(packet: Packet, marks: Marks, history: History, written: Written,
              document_sha256: str | None) -> Statement:
    return Statement(subject=subjects(packet, history.head, document_sha256),
                     predicate=checkpoint(packet, marks, history, written))


class PublicGate(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    required: bool
    verdict: str | None  # in the current review; None: it did not run there
    waived: bool = False


class PublicEvidence(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    kind: str
    verdict: str
    assurance: str
    gate: str | None = None


class PublicApproval(msgspec.Struct, frozen=True, kw_only=True):
    by: str
    at: datetime
    reviewed: str | None


class PublicCheckpoint(msgspec.Struct, frozen=True, kw_only=True):
    """The public statement's predicate: the run's public summary and verdicts, with no
    private text (no private summary, no gate's check, no waiver's reason, no output)."""

    run: str
    title: str
    state: str
    owner: str
    public_summary: str | None
    gates: tuple[PublicGate, ...]
    evidence: tuple[PublicEvidence, ...]
    approval: PublicApproval | None
    history: History
    signed: Written  # when it was signed, and by whose key


class PublicStatement(msgspec.Struct, frozen=True, kw_only=True):
    type: str = msgspec.field(name="_type", default=STATEMENT_TYPE)
    subject: tuple[Subject, ...]
    predicateType: str = PUBLIC_PREDICATE_TYPE
    predicate: PublicCheckpoint


def public_statement(packet: Packet, shown: Packet, marks: Marks, history: History,
                     written: Written, document_sha256: str | None) -> PublicStatement:
    """The statement a reader of the run's public view is given. Its text comes from
    `shown`, that view of `packet` (`core.readers.packet_seen`: the private summary
    withheld, every string sanitized); its verdicts and digests, which hold no text, from
    `packet` as folded (with `marks`)."""
    full = checkpoint(packet, marks, history, written)
    approval = full.approval
    return PublicStatement(
        subject=subjects(shown, history.head, document_sha256),
        predicate=PublicCheckpoint(
            run=shown.id, title=shown.title, state=full.state, owner=shown.owner,
            public_summary=shown.result.public_summary if shown.result else None,
            gates=tuple(PublicGate(name=g.name, required=g.required, verdict=g.verdict,
                                   waived=g.waived is not None) for g in full.gates),
            evidence=tuple(PublicEvidence(id=e.id, kind=e.kind, verdict=e.verdict,
                                          assurance=e.assurance, gate=e.gate)
                           for e in full.evidence),
            approval=None if approval is None else PublicApproval(
                by=approval.by, at=approval.at, reviewed=approval.reviewed),
            history=history, signed=written))


def encode(value: Statement | PublicStatement) -> bytes:
    return to_json(value)


def decode(payload: bytes) -> Statement:
    """The statement in a payload; msgspec.ValidationError or DecodeError when it is not
    one (the caller names the member)."""
    return msgspec.json.decode(payload, type=Statement)


def first_difference(given: Any, expected: Any, path: str = "") -> str | None:
    """The first place (a dotted path) where two JSON-shaped values differ; None if equal."""
    if isinstance(given, dict) and isinstance(expected, dict):
        for key in sorted(set(given) | set(expected)):
            found = first_difference(given.get(key), expected.get(key), f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(given, list) and isinstance(expected, list):
        for i, (a, b) in enumerate(zip(given, expected, strict=False)):
            found = first_difference(a, b, f"{path}[{i}]")
            if found:
                return found
        return None if len(given) == len(expected) else f"{path} (length)"
    return None if given == expected else (path or "the whole value")


def agreement(given: Statement, expected: Statement) -> str | None:
    """Where `given` says something `expected` (built from the events) does not."""
    return first_difference(msgspec.to_builtins(given), msgspec.to_builtins(expected))


def statement_schema() -> dict[str, Any]:
    """The JSON Schema of the statement (its predicate: `PREDICATE_TYPE`)."""
    schema: dict[str, Any] = msgspec.json.schema(Statement)
    schema["$id"] = PREDICATE_TYPE
    return schema


def blobs_named(packet: Packet) -> list[str]:
    """Every blob the run names, once each, in order: stored artifacts, evidence logs, the
    approver's signed approval statement."""
    named = [a.sha256 for a in packet.artifacts if a.stored and a.sha256]
    named += [e.log_sha256 for e in packet.evidence if e.log_sha256]
    if packet.approval is not None and packet.approval.statement:
        named.append(packet.approval.statement)
    return list(dict.fromkeys(named))

