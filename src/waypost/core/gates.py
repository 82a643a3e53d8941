"""The gate rules, pure: what a review must record, what the latest review says of each
gate, and whether the run may be approved. The state machine calls these; so do the views.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Final

import msgspec

from waypost.errors import InvalidInput, NotAuthorized, RuleViolation, step
from waypost.model import Assurance, Evidence, Packet, Review, Verdict, Waiver

HASHES_GATE: Final = "artifact-hashes"  # built in: every stored artifact re-verified at review


class GateVerdict(msgspec.Struct, frozen=True, kw_only=True):
    gate: str
    check: str
    required: bool
    verdict: Verdict | None  # None: the review did not run it
    summary: str
    evidence: tuple[str, ...] = ()
    waived: str | None = None  # the owner's reason, when waived


def next_review_id(packet: Packet) -> str:
    return f"r{len(packet.reviews) + 1}"


def check_review_evidence(packet: Packet, review_id: str, evidence: Sequence[Evidence]) -> None:
    """A review appends rechecked evidence, numbered on from the packet's, one per gate run."""
    if review_id != next_review_id(packet):
        raise InvalidInput(f"review id {review_id} is not {next_review_id(packet)}")
    for offset, item in enumerate(evidence, start=1):
        expected = f"e{len(packet.evidence) + offset}"
        if item.id != expected:
            raise InvalidInput(f"evidence id {item.id} is not {expected}")
        if item.assurance is not Assurance.RECHECKED or not item.gate or item.review != review_id:
            raise InvalidInput(f"evidence {item.id} of review {review_id} must be rechecked "
                               f"evidence naming its gate and the review")


def current_review(packet: Packet) -> Review | None:
    """The latest review, if it reviewed the result as it stands now."""
    if not packet.reviews or packet.result is None:
        return None
    latest = packet.reviews[-1]
    return latest if latest.submitted_at == packet.result.submitted_at else None


def _combined(rows: Sequence[Evidence]) -> Verdict | None:
    if not rows:
        return None
    verdicts = {e.verdict for e in rows}
    for worst in (Verdict.FAILED, Verdict.SKIPPED):
        if worst in verdicts:
            return worst
    return Verdict.PASSED


def verdicts(packet: Packet, review: Review | None,
             waived: Collection[Waiver] = ()) -> list[GateVerdict]:
    """Each declared gate (and the built-in hash check, when it ran) as `review` found it."""
    rows = [e for e in packet.evidence if review is not None and e.review == review.id]
    gates = [(g.name, g.check, g.required) for g in packet.gates]
    if any(e.gate == HASHES_GATE for e in rows) and HASHES_GATE not in {g[0] for g in gates}:
        gates.append((HASHES_GATE, "artifact hashes", True))
    reasons = {w.gate: w.reason for w in waived}
    out = []
    for name, check, required in gates:
        mine = [e for e in rows if e.gate == name]
        verdict = _combined(mine)
        failing = [e for e in mine if e.verdict is not Verdict.PASSED]
        summary = "; ".join(e.summary for e in (failing or mine)) or "not run in this review"
        out.append(GateVerdict(gate=name, check=check, required=required, verdict=verdict,
                               summary=summary, evidence=tuple(e.id for e in mine),
                               waived=reasons.get(name)))
    return out


def unmet(found: Sequence[GateVerdict]) -> list[GateVerdict]:
    """Required gates that neither passed nor were waived."""
    return [v for v in found if v.required and v.verdict is not Verdict.PASSED and not v.waived]


def check_approval(packet: Packet, actor: str, waivers: Sequence[Waiver]) -> None:
    """Raise unless every required gate passed in the current review or was waived."""
    _check_waivers(packet, actor, waivers)
    review = current_review(packet)
    if review is None:
        raise RuleViolation(_unreviewed_message(packet), steps=[step(
            "review", packet.id, actor=packet.owner, why=f"the owner {packet.owner} (or a "
            "holder of the approve authority) runs the gates")])
    missing = unmet(verdicts(packet, review, waivers))
    if missing:
        listed = "; ".join(f"{v.gate} {v.verdict or 'not run'} ({v.summary})" for v in missing)
        raise RuleViolation(
            f"run {packet.id} cannot be approved: required gate(s) did not pass in review "
            f"{review.id}: {listed}",
            steps=[step("changes", packet.id, actor=packet.owner, why="send it back"),
                   step("approve", packet.id, actor=packet.owner, gate=missing[0].gate,
                        fill=("reason",), why=f"or only the owner {packet.owner} may "
                        "waive, with a reason")])


def _unreviewed_message(packet: Packet) -> str:
    if not packet.reviews:
        return (f"run {packet.id} cannot be approved before a review: approval needs every "
                f"required gate to pass when the reviewer re-runs it")
    return (f"run {packet.id} cannot be approved: its latest review {packet.reviews[-1].id} "
            f"was of an earlier submission; review the current result first")


def _check_waivers(packet: Packet, actor: str, waivers: Sequence[Waiver]) -> None:
    if waivers and actor != packet.owner:
        raise NotAuthorized(
            f"{actor} may not waive gates of run {packet.id}: only its owner {packet.owner} may",
            steps=[step("approve", packet.id, actor=packet.owner, fill=("gate", "reason"),
                        why=f"ask {packet.owner} to run")])
    known = [g.name for g in packet.gates] + [HASHES_GATE]
    for waiver in waivers:
        if waiver.gate not in known:
            raise InvalidInput(f"run {packet.id} has no gate {waiver.gate!r} to waive "
                               f"(gates: {', '.join(known)})")
        if not waiver.reason.strip():
            raise InvalidInput(f"the waiver of gate {waiver.gate} needs a reason",
                               hint=f"--waive {waiver.gate}='why it does not apply'")
