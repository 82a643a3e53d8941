"""A fold appends evidence in constant time (`core/growing`), and builds exactly the packet
the one-event-at-a-time `apply` builds: the same value, the same bytes, plain tuples."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec

from waypost.core.growing import Growing, appended, growing, settled
from waypost.core.history import GENESIS, make_event, verify_chain
from waypost.core.machine import apply, fold
from waypost.core.statement import Marks
from waypost.events import AnyEventData, Approved, Claimed, Event, EvidenceRecorded, Started
from waypost.model import Assurance, Evidence, EvidenceKind, Kind, Packet, Verdict, to_json

AT = datetime(2026, 1, 2, tzinfo=UTC)


def _events(count: int) -> list[Event]:
    out: list[Event] = []
    packet: Packet | None = None

    def add(data: AnyEventData, actor: str, epoch: int | None = None) -> None:
        nonlocal packet
        event = make_event(packet, "wp_g", data, actor=actor, at=AT,
                           epoch=epoch, prev_hash=out[-1].hash if out else GENESIS)
        packet = apply(packet, event)
        out.append(event)

    add(Started(title="t", kind=Kind.BOUNDED, owner="o", target="none:"), "o")
    add(Claimed(epoch=1), "w")
    for i in range(count):
        add(EvidenceRecorded(evidence=Evidence(
            id=f"e{i + 1}", kind=EvidenceKind.TEST, verdict=Verdict.PASSED,
            assurance=Assurance.REPORTED, summary=f"check {i}", recorded_at=AT,
            recorded_by="w")), "w", 1)
    return out


def _one_by_one(events: list[Event]) -> Packet:
    packet: Packet | None = None
    for event in events:
        packet = apply(packet, event)
    assert packet is not None
    return packet


def test_a_fold_builds_the_packet_apply_builds_with_plain_tuples() -> None:
    events = _events(300)
    expected = _one_by_one(events)
    for folded in (fold(events), verify_chain("wp_g", events)):
        assert folded == expected
        assert type(folded.evidence) is tuple
        assert to_json(folded) == to_json(expected)


def test_an_older_view_never_sees_what_was_appended_after_it() -> None:
    base: Growing[int] = Growing([1, 2], 2)
    newer = appended(base, 3)
    older_grown = appended(base, 9)  # base is older than newer: it copies first
    assert list(newer) == [1, 2, 3]
    assert list(older_grown) == [1, 2, 9]
    assert list(base) == [1, 2]
    assert appended((1, 2), 3) == (1, 2, 3)
    assert newer[-1] == 3
    assert newer[0:2] == (1, 2)


def test_a_packet_kept_during_a_fold_keeps_its_evidence() -> None:
    events = _events(5)
    kept: list[Packet] = []
    verify_chain("wp_g", events, lambda packet, event: kept.append(settled(packet)))
    assert [len(p.evidence) for p in kept] == [0, 0, 1, 2, 3, 4, 5]
    assert all(type(p.evidence) is tuple for p in kept)
    marks = Marks()
    marks.seen(growing(kept[-1]), events[-1])
    marks.seen(growing(kept[-1]), msgspec.structs.replace(events[-1], data=Approved(waivers=())))
    assert marks.approved is not None
    assert type(marks.approved.evidence) is tuple
