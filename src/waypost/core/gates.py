"""The gate rules, pure: whose gate is whose and which ones a review runs, what a review
must record, what the latest review says of each gate, and whether the run may be
approved. The state machine calls these; so do the review and the views.

Gates are the owner's. A review runs a gate in the reviewer's environment, so it runs one
that could run, read or reach anything there (`is_active`: `command:`, `http:`, and
`grep:`/`grep!:` over a path on disk) only if it is the owner's: declared by the owner (at
the start, or added since) or adopted by the owner (`waypost gate adopt`). Anyone else's is
recorded at review as not run, which blocks approval as an unmet gate does, until the
owner adopts or waives it. A gate that reads only the store's own copies (`artifact:`,
`no-private`, a grep over a stored artifact) runs whoever declared it: it can only make
approval harder, never run anything.

A gate recorded before gates said who declared them counts as declared by whoever started
the run (its `created_by`): the owner's when the owner started it. This is read here, at
review and in the views, never in `apply`, so every old history replays as it did.
"""

from __future__ import annotations

import shlex
from collections.abc import Collection, Sequence
from typing import Final

import msgspec

from waypost.errors import InvalidInput, NotAuthorized, RuleViolation
from waypost.model import Assurance, Evidence, Gate, Packet, Review, Verdict, Waiver

HASHES_GATE: Final = "artifact-hashes"  # built in: every stored artifact re-verified at review
# check kinds that read only the store's own copies (a grep does too, over a stored artifact)
PASSIVE_CHECKS: Final = frozenset({"artifact", "no-private"})
GREP_CHECKS: Final = frozenset({"grep", "grep!"})


class GateVerdict(msgspec.Struct, frozen=True, kw_only=True):
    gate: str
    check: str
    required: bool
    verdict: Verdict | None  # None: the review did not run it
    summary: str
    evidence: tuple[str, ...] = ()
    waived: str | None = None  # the owner's reason, when waived
    declared_by: str | None = None  # None: the built-in hash check
    adopted_by: str | None = None  # the owner, once adopted
    awaits_adoption: bool = False  # not the owner's and active: review does not run it


def declared_by(packet: Packet, gate: Gate) -> str:
    """Who declared `gate`: as recorded, else (a gate older than the record) the run's
    starter."""
    return gate.declared_by if isinstance(gate.declared_by, str) else packet.created_by


def adopter(gate: Gate) -> str | None:
    return gate.adopted_by if isinstance(gate.adopted_by, str) else None


def is_owners(packet: Packet, gate: Gate) -> bool:
    """Whether `gate` is the owner's: declared or adopted by the owner."""
    return packet.owner in (declared_by(packet, gate), gate.adopted_by)


def is_active(packet: Packet, gate: Gate) -> bool:
    """Whether running `gate` could run, read or reach anything outside the store's own
    copies: a command, a URL, a grep over a path on disk (an unknown kind counts too)."""
    kind, _, arg = gate.check.strip().partition(":")
    if kind in GREP_CHECKS:
        artifact = packet.artifact(arg.rpartition(":")[2].strip())
        return artifact is None or not artifact.stored  # as the grep check reads it
    return kind not in PASSIVE_CHECKS


def runs_at_review(packet: Packet, gate: Gate) -> bool:
    return is_owners(packet, gate) or not is_active(packet, gate)


def not_adopted(packet: Packet, gate: Gate) -> str:
    """Why review did not run `gate`, and the command that would make it run."""
    return (f"not run: declared by {declared_by(packet, gate)}, not by the owner "
            f"{packet.owner}; the owner makes it their own with: waypost gate adopt "
            f"{packet.id} {shlex.quote(gate.name)} --as {shlex.quote(packet.owner)}")


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
    reasons = {w.gate: w.reason for w in waived}
    out = [_verdict(packet, gate, [e for e in rows if e.gate == gate.name],
                    reasons.get(gate.name)) for gate in packet.gates]
    hashes = [e for e in rows if e.gate == HASHES_GATE]
    if hashes and HASHES_GATE not in {g.name for g in packet.gates}:
        out.append(GateVerdict(gate=HASHES_GATE, check="artifact hashes", required=True,
                               verdict=_combined(hashes), summary=_summary(hashes),
                               evidence=tuple(e.id for e in hashes),
                               waived=reasons.get(HASHES_GATE)))
    return out


def _summary(rows: Sequence[Evidence]) -> str:
    failing = [e for e in rows if e.verdict is not Verdict.PASSED]
    return "; ".join(e.summary for e in (failing or rows))


def _verdict(packet: Packet, gate: Gate, mine: Sequence[Evidence],
             waived: str | None) -> GateVerdict:
    waits = not runs_at_review(packet, gate)
    summary = _summary(mine) or (not_adopted(packet, gate) if waits
                                 else "not run in this review")
    return GateVerdict(gate=gate.name, check=gate.check, required=gate.required,
                       verdict=_combined(mine), summary=summary,
                       evidence=tuple(e.id for e in mine), waived=waived,
                       declared_by=declared_by(packet, gate),
                       adopted_by=adopter(gate), awaits_adoption=waits)


def unmet(found: Sequence[GateVerdict]) -> list[GateVerdict]:
    """Required gates that neither passed nor were waived."""
    return [v for v in found if v.required and v.verdict is not Verdict.PASSED and not v.waived]


def check_approval(packet: Packet, actor: str, waivers: Sequence[Waiver]) -> None:
    """Raise unless every required gate passed in the current review or was waived."""
    _check_waivers(packet, actor, waivers)
    review = current_review(packet)
    if review is None:
        raise RuleViolation(_unreviewed_message(packet),
                            hint=f"the owner {packet.owner} (or a holder of the approve "
                            f"authority) runs the gates: waypost review {packet.id} "
                            f"--as {shlex.quote(packet.owner)}")
    missing = unmet(verdicts(packet, review, waivers))
    if missing:
        listed = "; ".join(f"{v.gate} {v.verdict or 'not run'} ({v.summary})" for v in missing)
        raise RuleViolation(
            f"run {packet.id} cannot be approved: required gate(s) did not pass in review "
            f"{review.id}: {listed}",
            hint=_adopt_first(packet, missing)
            + f"send it back: waypost changes {packet.id} --reason TEXT "
            f"--as {shlex.quote(packet.owner)}; "
            f"or only the owner {packet.owner} may waive, with a reason: waypost approve "
            f"{packet.id} --waive {shlex.quote(missing[0].gate + '=REASON')} "
            f"--as {shlex.quote(packet.owner)}")


def _adopt_first(packet: Packet, missing: Sequence[GateVerdict]) -> str:
    """When an unmet gate was not run for want of the owner's adoption: how to adopt it."""
    waiting = [v for v in missing if v.awaits_adoption]
    if not waiting:
        return ""
    return (f"if its check is one you would run, adopt it, then review again: waypost gate "
            f"adopt {packet.id} {shlex.quote(waiting[0].gate)} "
            f"--as {shlex.quote(packet.owner)}; or ")


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
            hint=f"ask {packet.owner} to run: waypost approve {packet.id} --waive GATE=REASON "
            f"--as {shlex.quote(packet.owner)}")
    known = [g.name for g in packet.gates] + [HASHES_GATE]
    for waiver in waivers:
        if waiver.gate not in known:
            raise InvalidInput(f"run {packet.id} has no gate {waiver.gate!r} to waive "
                               f"(gates: {', '.join(known)})")
        if not waiver.reason.strip():
            raise InvalidInput(f"the waiver of gate {waiver.gate} needs a reason",
                               hint=f"--waive {waiver.gate}='why it does not apply'")
