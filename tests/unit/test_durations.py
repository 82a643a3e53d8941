from __future__ import annotations

from datetime import UTC, datetime

import pytest

from waypost.durations import new_run_id, parse_deadline, parse_duration
from waypost.errors import InvalidInput


@pytest.mark.parametrize(("text", "seconds"), [
    ("90", 90.0), ("90s", 90.0), ("5m", 300.0), ("2h", 7200.0), ("1h30m", 5400.0),
    ("7d", 604800.0), ("250ms", 0.25), ("0.5h", 1800.0),
])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "5x", "h", "5m trailing", "-5"])
def test_bad_durations_are_refused(text: str) -> None:
    with pytest.raises(InvalidInput):
        parse_duration(text)


def test_deadlines() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert parse_deadline("+4h", now) == datetime(2026, 1, 1, 4, tzinfo=UTC)
    assert parse_deadline("2026-02-01T10:00", now) == datetime(2026, 2, 1, 10, tzinfo=UTC)
    assert parse_deadline("2026-02-01T10:00+02:00", now) == datetime(2026, 2, 1, 8, tzinfo=UTC)
    with pytest.raises(InvalidInput, match="deadline"):
        parse_deadline("tomorrow", now)


def test_run_ids_sort_by_time() -> None:
    early = new_run_id(datetime(2026, 1, 1, tzinfo=UTC), lambda n: b"\xff" * n)
    late = new_run_id(datetime(2026, 1, 2, tzinfo=UTC), lambda n: b"\x00" * n)
    assert early < late
    assert early.startswith("wp_")
    assert len(early) == 29
