"""The start parameters' one decision (`start_spec`) and what `start` does with it, on a
real store with an injected clock: a relative deadline counts from the moment the run
starts, an absolute one is held within ten years of the clock, and an idempotency key
still finds a run started by an earlier release (the fingerprint is unchanged)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.helpers import FakeClock, dump_store
from waypost.errors import InvalidInput
from waypost.model import Kind
from waypost.store import Store, open_store
from waypost.usecases.starting import start, start_spec


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with open_store(str(tmp_path / "w.db")) as opened:
        yield opened


def test_a_relative_deadline_counts_from_the_start_not_the_decision(store: Store) -> None:
    clock = FakeClock()
    spec = start_spec("t", kind="long_running", target="none:", deadline="+4h", clock=clock)
    clock.advance(3600)  # the door decided; the store was slow to answer
    run, _ = start(store, spec, actor="alice", clock=clock)
    assert run.packet.stop_rules.deadline == clock.now + timedelta(hours=4)
    assert run.packet.created_at == clock.now


def test_an_absolute_deadline_is_held_within_ten_years_of_the_clock() -> None:
    clock = FakeClock(datetime(2026, 1, 2, tzinfo=UTC))
    near = start_spec("t", deadline="2035-12-31T00:00", clock=clock)
    assert near.deadline == datetime(2035, 12, 31, tzinfo=UTC)
    with pytest.raises(InvalidInput, match="more than ten years away"):
        start_spec("t", deadline="2036-01-04T00:00", clock=clock)
    with pytest.raises(InvalidInput, match="more than ten years away"):
        start_spec("t", deadline=datetime(2036, 1, 4, tzinfo=UTC), clock=clock)


def test_expect_classifies_against_the_configured_threshold() -> None:
    from waypost.config import Config

    assert start_spec("t", expect="2h").kind is Kind.LONG_RUNNING
    assert start_spec("t", expect="2h", config=Config(long_running_after=3 * 3600)).kind \
        is Kind.BOUNDED
    assert start_spec("t", expect=7200, kind="bounded").kind is Kind.BOUNDED


def test_a_refused_spec_writes_nothing_and_start_takes_one_form(store: Store,
                                                                tmp_path: Path) -> None:
    before = dump_store(tmp_path / "w.db")
    with pytest.raises(InvalidInput, match="bad check 'nope:x'"):
        start(store, "t", actor="alice", gates=["g=nope:x"])
    spec = start_spec("t")
    with pytest.raises(TypeError, match="not both"):
        start(store, spec, actor="alice", owner="bob")  # type: ignore[call-overload]
    assert dump_store(tmp_path / "w.db") == before


# fingerprints an earlier release stored: a retry with the same key must still match them
EARLIER = {
    "595d2bb75d0fed5348461a39290062e9b943a7f3dc2b5bf67c8b469bd4bfa3f6": start_spec(
        "Nightly import", target="none:", kind="long_running", expect="2h", deadline="+4h",
        heartbeat_interval="5m", max_silence="1h", worker="bob",
        gates=["tests=command:pytest -q", "d?=no-private"]),
    "1cf09432f3c3bacbca69438177aa012a6c94aa4bfe3a2abc6ed632d9cb56ba8d": start_spec(
        "SDK", owner="alice", target="none:", heartbeat_interval=60, max_silence=1800),
}


@pytest.mark.parametrize("fingerprint", EARLIER)
def test_the_idempotency_fingerprint_is_the_one_earlier_releases_stored(
        fingerprint: str) -> None:
    assert EARLIER[fingerprint].fingerprint == fingerprint
