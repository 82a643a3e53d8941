"""The parent's review (`Run.review`): re-run every gate in the reviewer's own environment,
re-verify every stored artifact, and record each result as `rechecked` evidence in one
`reviewed` event. A gate that is not the owner's and would run, read or reach anything
here is recorded as not run (skipped, naming `waypost gate adopt`) instead (`core.gates`).

Approval (the state machine's rule) then looks only at the latest review of the current
result: each required gate passed there, or the owner waived it with a reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

import msgspec

from waypost.config import Config
from waypost.core.gates import (
    HASHES_GATE,
    GateVerdict,
    next_review_id,
    not_adopted,
    runs_at_review,
    unmet,
    verdicts,
)
from waypost.core.history import read_only
from waypost.core.reviewed import result_digest
from waypost.errors import InvalidInput
from waypost.events import Reviewed
from waypost.model import Assurance, EvidenceKind, Gate, Packet, Verdict
from waypost.store.base import Store
from waypost.usecases.checks import (
    EVIDENCE_KIND,
    Check,
    CheckKind,
    Context,
    check_result,
    hashes_result,
    parse_check,
    run_check,
)
from waypost.usecases.evidence import CheckResult, to_evidence


class ReviewReport(msgspec.Struct, frozen=True, kw_only=True):
    run: str
    review: str
    by: str
    approvable: bool  # every required gate passed (waivers come with `approve`)
    gates: tuple[GateVerdict, ...]
    reviewed: str | None = None  # the reviewed-result digest an answer names (`core.reviewed`)


def run_gate(gate: Gate, ctx: Context) -> CheckResult:
    """One gate's check; a check that cannot even be parsed is a failed gate, not a crash.
    A gate someone other than the owner declared, that would run, read or reach anything
    here, is not run until the owner adopts it: it is recorded as skipped, with the reason
    and the command that adopts it (`core.gates`)."""
    if not runs_at_review(ctx.packet, gate):
        why = not_adopted(ctx.packet, gate)
        return CheckResult(kind=_evidence_kind(gate.check), verdict=Verdict.SKIPPED,
                           summary=why, command=gate.check, reason=why)
    try:
        return run_check(parse_check(gate.check), ctx)
    except InvalidInput as exc:
        return check_result(Check(spec=gate.check, kind=CheckKind.COMMAND), False, exc.message)


def _evidence_kind(spec: str) -> EvidenceKind:
    try:
        return EVIDENCE_KIND[CheckKind(spec.strip().partition(":")[0])]
    except ValueError:
        return EvidenceKind.COMMAND


Measured = Sequence[tuple[str, CheckResult]]  # (gate name, what its check found)


def writable(store: Store, run_id: str) -> Packet:
    """The run as it stands, refused first if it is imported from a bundle (read-only
    here): a review of it would run its gates for a write that cannot land."""
    snap = store.load(run_id)
    if snap.origin is not None:
        raise read_only(run_id, snap.origin)
    return snap.packet


def measure(store: Store, packet: Packet, config: Config, cwd: str | None,
            files: bool = True) -> Measured:
    """Every declared gate run now, and the built-in re-verification of stored artifacts
    (`files`: whether they may look at this machine's files, `checks.Context`)."""
    ctx = Context(store=store, packet=packet, config=config, cwd=cwd, files=files)
    measured = [(g.name, run_gate(g, ctx)) for g in packet.gates]
    hashes = hashes_result(ctx)
    if hashes is not None:
        measured.append((HASHES_GATE, hashes))
    return measured


def reviewed(packet: Packet, measured: Measured, *, at: datetime, by: str) -> Reviewed:
    """The `reviewed` event recording `measured` as rechecked evidence, numbered on."""
    rid = next_review_id(packet)
    return Reviewed(review_id=rid, evidence=tuple(
        to_evidence(found, id=f"e{len(packet.evidence) + i}", assurance=Assurance.RECHECKED,
                    at=at, by=by, gate=name, review=rid)
        for i, (name, found) in enumerate(measured, start=1)))


def report(packet: Packet) -> ReviewReport:
    """What the packet's latest review found of each gate."""
    latest = packet.reviews[-1]
    found = verdicts(packet, latest)
    return ReviewReport(run=packet.id, review=latest.id, by=latest.by,
                        approvable=not unmet(found), gates=tuple(found),
                        reviewed=result_digest(packet))


def parse_waivers(specs: list[str] | tuple[str, ...]) -> Mapping[str, str]:
    """`GATE=REASON` pairs; each needs a gate name and a reason."""
    waivers: dict[str, str] = {}
    for spec in specs:
        gate, sep, reason = spec.partition("=")
        if not sep or not gate.strip() or not reason.strip():
            raise InvalidInput(f"bad waiver {spec!r}: write GATE=REASON",
                               hint="e.g. --waive live='no staging site exists yet'")
        waivers[gate.strip()] = reason.strip()
    return waivers
