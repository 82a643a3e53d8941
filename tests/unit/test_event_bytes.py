"""An event is built once, and its bytes are what a JSON round trip of its body would give:
a heartbeat whose fields already read back as they are skips the trip (`make_event`), and
must come out equal, field for field of the same type, and byte for byte."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone, tzinfo

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from waypost.core.history import make_event
from waypost.errors import InvalidInput
from waypost.events import Heartbeat
from waypost.model import from_json, to_json


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
