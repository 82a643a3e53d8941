"""An event is built once, and its bytes are what a JSON round trip of its body would give:
a heartbeat, a blocker opened or a nudge whose fields already read back as they are skips
the trip (`make_event`), and must come out equal, field for field of the same type, and
byte for byte."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone, tzinfo

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from waypost.core.history import make_event
from waypost.errors import InvalidInput
from waypost.events import AnyEventData, BlockerOpened, Heartbeat, Nudged
from waypost.model import BlockerKind, NudgeTopic, from_json, to_json


class _Zone(tzinfo):
    """A zone of the caller's own (as zoneinfo's are): JSON reads it back as a fixed offset."""

    def utcoffset(self, dt: datetime | None) -> timedelta:
        return timedelta(hours=2)

    def dst(self, dt: datetime | None) -> timedelta:
        return timedelta(0)

    def tzname(self, dt: datetime | None) -> str:
        return "CEST"


AT = datetime(2026, 1, 1, tzinfo=UTC)
ZONES = st.sampled_from([UTC, timezone(timedelta(hours=2)), timezone(timedelta(0)),
                         _Zone(), None])
MOMENTS = st.builds(lambda moment, zone: moment.replace(tzinfo=zone),
                    st.datetimes(min_value=datetime(2000, 1, 1),
                                 max_value=datetime(2100, 1, 1)), ZONES)
FRACTIONS = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True),
                      st.integers(min_value=0, max_value=1), st.booleans())
NOTES = st.one_of(st.none(), st.text(st.characters(exclude_categories=()), max_size=50))


def _types(data: Heartbeat) -> tuple[type, ...]:
    return (type(data.note), type(data.fraction), type(data.lease_expires_at),
            type(data.lease_expires_at.tzinfo) if data.lease_expires_at else type(None))


@given(note=NOTES, fraction=FRACTIONS, until=st.one_of(st.none(), MOMENTS))
@example(note="\ud800", fraction=None, until=None)  # not UTF-8: no JSON at all
@example(note="n", fraction=1, until=AT)  # an int for a float: written 1.0, not 1
@example(note=None, fraction=float("nan"), until=None)  # NaN is written null
@example(note=None, fraction=None, until=AT.astimezone(_Zone()))  # read back as +02:00
def test_a_heartbeat_is_built_as_its_json_reads_back(note: str | None,
                                                     fraction: float | None,
                                                     until: datetime | None) -> None:
    data = Heartbeat(note=note, fraction=fraction, lease_expires_at=until)
    try:
        read_back = from_json(to_json(data), Heartbeat)
    except (InvalidInput, UnicodeEncodeError) as refused:  # a bool for a float, a lone
        with pytest.raises(type(refused)):  # surrogate: refused, as the round trip is
            make_event(None, "wp_x", data, actor="w", at=AT, epoch=1, prev_hash="0" * 64)
        return
    built = make_event(None, "wp_x", data, actor="w", at=AT, epoch=1, prev_hash="0" * 64)
    through_json = make_event(None, "wp_x", read_back, actor="w", at=AT, epoch=1,
                              prev_hash="0" * 64)
    assert isinstance(built.data, Heartbeat)
    assert built.data == read_back
    assert _types(built.data) == _types(read_back)
    assert to_json(built) == to_json(through_json)
    assert built.hash == through_json.hash


TEXTS = st.text(st.characters(exclude_categories=()), max_size=50)


class _Text(str):
    """Text of a subclass of str, which JSON refuses to write."""


def _kinds(enum_type: type[BlockerKind] | type[NudgeTopic]) -> st.SearchStrategy[object]:
    """Members, their plain-text values, and text that is no member at all."""
    return st.one_of(st.sampled_from(list(enum_type)),
                     st.sampled_from([m.value for m in enum_type]), TEXTS)


def _field_types(data: AnyEventData) -> tuple[type, ...]:
    return tuple(type(getattr(data, name)) for name in data.__struct_fields__)


def _built_as_read_back(data: AnyEventData) -> None:
    """`make_event` gives the event a JSON round trip of `data` would give, or refuses it
    as the round trip does."""
    try:
        read_back = from_json(to_json(data), type(data))
    except (InvalidInput, UnicodeEncodeError, TypeError) as refused:
        with pytest.raises(type(refused)):
            make_event(None, "wp_x", data, actor="watchdog:w", at=AT, prev_hash="0" * 64)
        return
    built = make_event(None, "wp_x", data, actor="watchdog:w", at=AT, prev_hash="0" * 64)
    through_json = make_event(None, "wp_x", read_back, actor="watchdog:w", at=AT,
                              prev_hash="0" * 64)
    assert built.data == read_back
    assert _field_types(built.data) == _field_types(read_back)
    assert to_json(built) == to_json(through_json)
    assert built.hash == through_json.hash


@given(blocker_id=st.one_of(TEXTS, TEXTS.map(_Text)), kind=_kinds(BlockerKind),
       detail=st.one_of(TEXTS, TEXTS.map(_Text)))
@example(blocker_id="b1", kind=BlockerKind.WORKER_SILENT, detail="\udc80")  # not UTF-8
@example(blocker_id="b1", kind="worker_silent", detail="d")  # text for a kind: made a member
@example(blocker_id=_Text("b1"), kind=BlockerKind.WORKER_SILENT, detail="d")  # refused
@example(blocker_id="b1", kind="no_such_kind", detail="d")  # refused
def test_a_blocker_opened_is_built_as_its_json_reads_back(blocker_id: str, kind: BlockerKind,
                                                          detail: str) -> None:
    _built_as_read_back(BlockerOpened(blocker_id=blocker_id, kind=kind, detail=detail))


@given(topic=_kinds(NudgeTopic), detail=st.one_of(TEXTS, TEXTS.map(_Text)))
@example(topic=NudgeTopic.REVIEW_OVERDUE, detail="\ud800")  # not UTF-8
@example(topic="review_overdue", detail="d")  # text for a topic: made a member
@example(topic=NudgeTopic.DELIVERY_STALLED, detail=_Text("d"))  # refused
def test_a_nudge_is_built_as_its_json_reads_back(topic: NudgeTopic, detail: str) -> None:
    _built_as_read_back(Nudged(topic=topic, detail=detail))
