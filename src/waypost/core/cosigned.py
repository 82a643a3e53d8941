"""The owner's signed approval statement (`waypost approve --sign`): what the owner approved,
signed with the owner's own key, so that a result says who approved it with a signature,
not only a name.

It is an in-toto Statement v1 of predicate type `APPROVAL_TYPE`: its subjects are the
reviewed result (named by its reviewed-result digest, `core.reviewed`) and every artifact
whose bytes the store kept; its predicate names the run, the digest, who approved and
when, and the verdicts (each gate's and each evidence item's, with no text). The DSSE
envelope holding it is stored as a blob; the `approved` event names its sha256, which
every final delivery then carries and a bundle exported later holds and checks.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

import msgspec

from waypost.core.gates import current_review, verdicts
from waypost.core.statement import STATEMENT_TYPE, PublicEvidence, PublicGate, Subject
from waypost.model import Packet, Waiver

APPROVAL_TYPE: Final = "https://waypost.dev/approval/v1"


class ApprovalPredicate(msgspec.Struct, frozen=True, kw_only=True):
    run: str
    reviewed: str  # the reviewed-result digest approved: sha256:<hex>
    by: str  # who approved, and holds the key that signed
    at: datetime  # when it was signed, just before the approval was recorded
    gates: tuple[PublicGate, ...]
    evidence: tuple[PublicEvidence, ...]


class ApprovalStatement(msgspec.Struct, frozen=True, kw_only=True):
    type: str = msgspec.field(name="_type", default=STATEMENT_TYPE)
    subject: tuple[Subject, ...]
    predicateType: str = APPROVAL_TYPE
    predicate: ApprovalPredicate


def approval_statement(packet: Packet, reviewed: str, waivers: tuple[Waiver, ...], *,
                       by: str, at: datetime) -> ApprovalStatement:
    """The statement `by` signs to approve `packet`'s result, whose digest is `reviewed`,
    with `waivers`."""
    gates = verdicts(packet, current_review(packet), waivers)
    return ApprovalStatement(
        subject=(Subject(name=f"waypost-result:{packet.id}",
                         digest={"sha256": reviewed.removeprefix("sha256:")}),
                 *(Subject(name=a.name, digest={"sha256": a.sha256})
                   for a in packet.artifacts if a.stored and a.sha256)),
        predicate=ApprovalPredicate(
            run=packet.id, reviewed=reviewed, by=by, at=at,
            gates=tuple(PublicGate(name=g.gate, required=g.required,
                                   verdict=str(g.verdict) if g.verdict else None,
                                   waived=g.waived is not None) for g in gates),
            evidence=tuple(PublicEvidence(id=e.id, kind=str(e.kind), verdict=str(e.verdict),
                                          assurance=str(e.assurance), gate=e.gate)
                           for e in packet.evidence)))


def decode(payload: bytes) -> ApprovalStatement:
    """The approval statement in a payload; msgspec's errors when it is not one."""
    return msgspec.json.decode(payload, type=ApprovalStatement)
